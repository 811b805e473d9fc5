"""The ``bookindex`` command: one entry point, a subcommand per job.

    bookindex index INPUT... --out DIR      index PDFs and passage corpora (Ray Data, Lance)
    bookindex ask QUESTION... --index DIR   answer questions, with evidence (one process)
    bookindex serve --index DIR             serve the index over HTTP (Ray Serve)
    bookindex show INDEX [--doc NAME]       documents, builds, failures, a document's TOC
    bookindex eval --docs DIR|--corpus F --questions Q --out DIR   retrieval metrics
    bookindex config [--markdown]           the configuration, every field and its value
    bookindex migrate INDEX                 bring an older index up to today's tables
    bookindex sample DIR                    write the sample PDF corpus
    bookindex schema [--markdown]           the index's tables and their columns

Every subcommand takes ``--json`` (its result as JSON on stdout), ``--quiet`` (no progress
lines) and ``--verbose`` (Ray's, Lance's and the models' own output as it comes; without it
that output goes to a log file, named when the command fails), and ``--help``. The jobs behind
them are ``bookindex.jobs.*``; ``python -m bookindex.jobs.index_corpus ...`` and the others
remain as aliases.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from bookindex._version import __version__
from bookindex.jobs import (
    evaluate,
    index_corpus,
    make_sample_corpus,
    migrate_index,
    query,
    serve,
    show_config,
    show_index,
    show_schema,
)
from bookindex.jobs.console import Console, add_output_arguments

# the subcommands in the order of ``bookindex --help``: job module, one line of help (each
# module's ``COMMAND`` names its subcommand)
JOBS: list[tuple[ModuleType, str]] = [
    (index_corpus, "index PDFs and passage corpora into Lance tables"),
    (query, "ask an index questions: answers with evidence"),
    (serve, "serve an index over HTTP (Ray Serve; token required)"),
    (show_index, "what an index holds: documents, builds, failures, TOCs"),
    (evaluate, "evaluate retrieval on a QA set (recall, page recall, ...)"),
    (show_config, "the configuration: every field, its value and meaning"),
    (migrate_index, "bring an index made by an older version up to date"),
    (make_sample_corpus, "write the sample PDF corpus"),
    (show_schema, "the tables of an index and what each column means"),
]
COMMANDS = {job.COMMAND: (job, summary) for job, summary in JOBS}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bookindex",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"bookindex {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, summary) in COMMANDS.items():
        sub = commands.add_parser(
            name,
            help=summary,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(sub)
        add_output_arguments(sub)
        sub.set_defaults(job=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    console = Console(
        json_out=args.json,
        quiet=args.quiet,
        verbose=args.verbose,
        # the libraries' own output to a log file: only where this process owns the terminal's
        # standard error (not under a test's capture)
        capture=sys.stderr is sys.__stderr__,
    )
    if args.command == "sample" and not args.out:
        parser.error("bookindex sample: name the output directory")
    try:
        return args.job.run(args, console)
    except KeyboardInterrupt:
        console.error("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
