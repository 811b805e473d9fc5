"""``bookindex sample``: write the sample PDF corpus (four small handbooks with chapters,
sections, tables and a figure, made by a seeded generator) and its ground-truth manifest.

    bookindex sample DIR [--n-docs N] [--seed S]

Idempotent: files whose bytes would not change are not rewritten, so their mtimes stay.

Example: ``bookindex sample sample_pdfs && bookindex index sample_pdfs --out sample_index``
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from bookindex.jobs.console import Console, console_of, job_parser
from bookindex.operators.eval.sample_corpus import build_sample_corpus

COMMAND = "sample"  # bookindex sample


def build_parser() -> argparse.ArgumentParser:
    parser = job_parser(sys.modules[__name__])
    parser.add_argument("--out", dest="out_flag", default=None, help=argparse.SUPPRESS)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", nargs="?", metavar="DIR", help="output directory (created)")
    parser.add_argument("--n-docs", type=int, default=4, help="number of PDFs (default: 4)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.out = args.out or args.out_flag  # the older --out DIR spelling
    return run(args, console_of(args))


def run(args: argparse.Namespace, console: Console) -> int:
    if not args.out:
        console.error("name the output directory: bookindex sample DIR")
        return 2
    if args.n_docs < 1:
        console.error("--n-docs must be >= 1")
        return 2
    paths = [str(p) for p in build_sample_corpus(args.out, n_docs=args.n_docs, seed=args.seed)]
    console.result("\n".join(paths), {"files": paths})
    return 0


if __name__ == "__main__":
    sys.exit(main())
