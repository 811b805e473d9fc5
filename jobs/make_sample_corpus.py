"""Write the sample PDF corpus and its ground-truth manifest.

Usage: ``python -m jobs.make_sample_corpus --out DIR [--n-docs N] [--seed S]``

Idempotent: files whose bytes would not change are not rewritten, so their mtimes stay.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from operators.eval.sample_corpus import build_sample_corpus


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory (created if missing)")
    parser.add_argument("--n-docs", type=int, default=4, help="number of PDFs (default: 4)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    args = parser.parse_args(argv)
    if args.n_docs < 1:
        parser.error("--n-docs must be >= 1")
    for path in build_sample_corpus(args.out, n_docs=args.n_docs, seed=args.seed):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
