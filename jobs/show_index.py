"""``bookindex show``: what an index holds, without loading a model.

    bookindex show INDEX [--doc NAME [--section SEC_ID [--para PARA_IDX]]] [--toc-depth N]
        [--config FILE] [--set SECTION.FIELD=VALUE ...] [--json] [--quiet] [--verbose]

Without ``--doc``: every document (title, status, pages, sections, nodes, pages read by OCR),
the builds that made them (and how many this code and configuration would build otherwise:
stale, re-indexed by the next ``bookindex index``), whether its documents were made by
different runs of a stage (``provenance.mixed_runtime``: the section filter that decided, the
embedder runtime, the int8 instructions), the failure rows and the TOC of the first
documents. With ``--doc`` (a file name, a title or a doc_id): that document's whole table of
contents; with ``--section`` too, the nodes at those DeepRead coordinates. Reads only: a path
without an index is an error (exit 2), and nothing is created there.

Examples: ``bookindex show my_index``, ``bookindex show my_index --doc paper.pdf``,
``bookindex show my_index --doc paper.pdf --section 3``
"""

from __future__ import annotations

import argparse
import sys

from bookindex.jobs.console import Console, job_parser, one_line, run_job
from bookindex.operators.config import ConfigError, add_config_arguments, config_from_args
from bookindex.pipelines import provenance
from bookindex.pipelines.store import catalog

FIRST_DOCS = 2  # documents whose TOC the overview prints


COMMAND = "show"  # bookindex show


def build_parser() -> argparse.ArgumentParser:
    return job_parser(sys.modules[__name__])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("index_dir", metavar="INDEX", help="the index directory")
    parser.add_argument("--doc", default=None, help="one document: file name, title or doc_id")
    parser.add_argument("--section", type=int, default=None, help="with --doc: a sec_id")
    parser.add_argument("--para", type=int, default=None, help="with --section: a para_idx")
    parser.add_argument(
        "--toc-depth",
        type=int,
        default=None,
        help="heading levels shown (default: 2, all with --doc)",
    )
    add_config_arguments(parser)  # the configuration a build is compared with


def main(argv: list[str] | None = None) -> int:
    return run_job(sys.modules[__name__], argv)


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        config = config_from_args(args)
        catalog.check_index(args.index_dir)
        if args.doc is not None:
            return _document(args, console)
        if args.section is not None or args.para is not None:
            console.error("--section needs --doc")
            return 2
        return _overview(args, console, config)
    except (FileNotFoundError, KeyError, ConfigError, ValueError) as exc:
        console.error(str(exc.args[0]) if isinstance(exc, KeyError) else str(exc))
        return 2


def toc_lines(entries: list[dict], depth: int | None) -> list[str]:
    return [
        f"{'  ' * e['level']}[{e['sec_id']}] {one_line(e['title'][:70])} "
        f"(p{e['page']}, {e['n_paragraphs']} paragraphs)"
        for e in entries
        if depth is None or e["level"] <= depth
    ]


def _document(args: argparse.Namespace, console: Console) -> int:
    row = catalog.find_document(args.index_dir, args.doc)
    if args.section is not None:
        nodes = catalog.section(args.index_dir, args.doc, args.section, args.para)
        lines = [
            f"{n['kind']:<8} p{n['page_start']} ¶{n['para_idx']}: "
            + one_line(" ".join((n["title"] or n["text"] or "").split())[:200])
            for n in nodes
        ]
        console.result("\n".join(lines), {"document": row["name"], "nodes": nodes})
        return 0
    if args.para is not None:
        console.error("--para needs --section")
        return 2
    entries = catalog.toc(args.index_dir, args.doc)
    head = (
        f"TOC of {row['title']!r} ({one_line(row['name'])}, {row['n_pages']} pages; "
        "sec_id, page, paragraphs):"
    )
    text = "\n".join([head, *toc_lines(entries, args.toc_depth)])
    console.result(text, {"document": row, "toc": entries})
    return 0


def _overview(args: argparse.Namespace, console: Console, config) -> int:
    docs = catalog.documents(args.index_dir)
    builds = provenance.stored_builds(args.index_dir)
    stale = provenance.stale_documents(builds, config)
    mixed = provenance.mixed_runtime(builds)
    by_build: dict[str | None, list[str]] = {}
    for row in builds:
        by_build.setdefault(row["build"], []).append(row["doc_id"])
    failures = catalog.failures(args.index_dir)
    ok = [d for d in docs if d["status"] == "ok"]
    tocs = {d["doc_id"]: catalog.toc(args.index_dir, d["doc_id"]) for d in ok[:FIRST_DOCS]}
    if console.json_out:
        data = {
            "documents": docs,
            "builds": [
                {
                    "build": provenance.describe(b),
                    "documents": len(ids),
                    "stale": sum(d in stale for d in ids),
                }
                for b, ids in by_build.items()
            ],
            "mixed_runtime": mixed,
            "failures": failures,
        }
        console.result(data=data)
        return 0
    lines = [f"{len(docs)} documents in {args.index_dir}"]
    lines.append(
        f"  {'status':<9} {'pages':>5} {'sections':>8} {'nodes':>6} {'ocr':>4}  title (file)"
    )
    for d in docs:
        lines.append(
            f"  {d['status']:<9} {d['n_pages'] or 0:>5} {d['n_sections'] or 0:>8} "
            f"{d['n_nodes'] or 0:>6} {d['ocr_pages'] or 0:>4}  "
            f"{one_line((d['title'] or '')[:60])} ({one_line(d['name'])})"
        )
    lines.append("\nBuilds (stale: this code and configuration would build them otherwise,")
    lines.append("so the next bookindex index re-indexes them):")
    for build, doc_ids in by_build.items():
        n_stale = sum(d in stale for d in doc_ids)
        lines.append(f"  {len(doc_ids)} document(s), {n_stale} stale: {provenance.describe(build)}")
        if n_stale:
            lines.append(f"    why: {stale[next(d for d in doc_ids if d in stale)]}")
    if mixed:
        lines.append("\nMixed index: its documents differ in what ran when they were indexed")
        lines.append("(bookindex eval refuses it without --allow-mixed):")
        lines += [f"  {line}" for line in provenance.mixed_lines(mixed)]
    depth = 2 if args.toc_depth is None else args.toc_depth
    for d in ok[:FIRST_DOCS]:
        lines.append(f"\nTOC of {d['title']!r} (sec_id, page, paragraphs):")
        lines += toc_lines(tocs[d["doc_id"]], depth)
    if len(ok) > FIRST_DOCS:
        lines.append(f"\n(bookindex show {args.index_dir} --doc NAME: the TOC of any document)")
    lines.append(f"\n{len(failures)} failure rows")
    for f in failures[:20]:
        lines.append(f"  {f['stage']:>8}  {one_line(f['uri'])}: {one_line(f['error'])}")
    console.result("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
