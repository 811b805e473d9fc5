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
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from bookindex._version import __version__
from bookindex.jobs.console import Console, add_output_arguments

# the subcommands in the order of ``bookindex --help``: the job module behind each, one line of
# help (each module's ``COMMAND`` names its subcommand). A job module is imported only when its
# subcommand runs or prints its help: the index job alone loads Ray Data, Lance and PyMuPDF's
# layout model, seconds that ``bookindex show`` or ``bookindex config`` should not pay.
COMMANDS: dict[str, tuple[str, str]] = {
    "index": ("bookindex.jobs.index_corpus", "index PDFs and passage corpora into Lance tables"),
    "ask": ("bookindex.jobs.query", "ask an index questions: answers with evidence"),
    "serve": ("bookindex.jobs.serve", "serve an index over HTTP (Ray Serve; token required)"),
    "show": ("bookindex.jobs.show_index", "what an index holds: documents, builds, failures, TOCs"),
    "eval": (
        "bookindex.jobs.evaluate",
        "evaluate retrieval on a QA set (recall, page recall, ...)",
    ),
    "config": (
        "bookindex.jobs.show_config",
        "the configuration: every field, its value and meaning",
    ),
    "migrate": (
        "bookindex.jobs.migrate_index",
        "bring an index made by an older version up to date",
    ),
    "sample": ("bookindex.jobs.make_sample_corpus", "write the sample PDF corpus"),
    "schema": ("bookindex.jobs.show_schema", "the tables of an index and what each column means"),
}


def job_module(name: str) -> ModuleType:
    """The job module behind subcommand ``name``."""
    return importlib.import_module(COMMANDS[name][0])


def build_parser(full: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command's parser. The subcommands in ``full`` (None: every one) get their job's
    arguments, description and example, which imports the job; the others only their name
    and line of help (what ``bookindex --help`` lists)."""
    parser = argparse.ArgumentParser(
        prog="bookindex",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"bookindex {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, summary) in COMMANDS.items():
        if full is not None and name not in full:
            commands.add_parser(name, help=summary)
            continue
        module = job_module(name)
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
    argv = list(sys.argv[1:] if argv is None else argv)
    # the subcommand is the first word that is not an option (the command's only option,
    # --version, takes no value); only its job is imported
    named = next((word for word in argv if not word.startswith("-")), None)
    parser = build_parser([named] if named in COMMANDS else [])
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
