"""``bookindex schema``: the tables of an index and what each column means.

    bookindex schema [--markdown] [--json]

``--markdown`` prints docs/tables.md (``make docs`` writes it).

Example: ``bookindex schema``
"""

from __future__ import annotations

import argparse
import sys

from bookindex.jobs.console import Console, job_parser, run_job
from bookindex.pipelines.store.schemas import TABLES, schema_for
from bookindex.pipelines.store.table_docs import COLUMNS_DOC, TABLES_DOC, markdown_reference

COMMAND = "schema"  # bookindex schema


def build_parser() -> argparse.ArgumentParser:
    return job_parser(sys.modules[__name__])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", action="store_true", help="as Markdown (docs/tables.md)")


def main(argv: list[str] | None = None) -> int:
    return run_job(sys.modules[__name__], argv)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.markdown:
        console.out.write(markdown_reference())
        return 0
    data, lines = {}, []
    for table in TABLES:
        columns = {f.name: str(f.type) for f in schema_for(table, 384)}
        data[table] = {"meaning": TABLES_DOC[table], "columns": columns}
        lines.append(f"{table}: {TABLES_DOC[table]}")
        lines += [f"  {n:<16} {COLUMNS_DOC[table][n]}" for n in columns]
    console.result("\n".join(lines), data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
