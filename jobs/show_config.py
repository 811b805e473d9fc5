"""``bookindex config``: the configuration a command would run with: every field, its value and
what it means.

    bookindex config [--config FILE] [--set SECTION.FIELD=VALUE ...] [--json] [--markdown]

Values come from the defaults, the file, ``BOOKINDEX_<SECTION>__<FIELD>`` variables and
``--set``, in that order (``operators/config.py``). ``--markdown`` prints the reference of every
field with its default instead (docs/configuration.md is that output). The API key is never
printed.

Example: ``bookindex config --set walk.alpha=0.7``
"""

from __future__ import annotations

import argparse
import json
import sys

from bookindex.jobs.console import Console, job_parser, run_job
from bookindex.operators.config import (
    ConfigError,
    add_config_arguments,
    config_from_args,
    describe,
    markdown_reference,
)

COMMAND = "config"  # bookindex config


def build_parser() -> argparse.ArgumentParser:
    return job_parser(sys.modules[__name__])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="the reference of every field and its default, as Markdown",
    )


def main(argv: list[str] | None = None) -> int:
    return run_job(sys.modules[__name__], argv)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.markdown:
        console.out.write(markdown_reference())
        return 0
    try:
        config = config_from_args(args)
    except (ConfigError, OSError, ValueError) as exc:
        console.error(str(exc))
        return 2
    values = config.model_dump(mode="json")
    values["models"]["api_key"] = ""
    values["judge"]["api_key"] = ""
    if console.json_out:
        print(json.dumps(values, indent=2), file=console.out)
    else:
        console.result(describe(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
