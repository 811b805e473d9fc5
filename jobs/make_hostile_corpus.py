"""Write the hostile-input corpus (operators/eval/hostile_corpus.py) beside good inputs.

Usage: ``python -m bookindex.jobs.make_hostile_corpus --out DIR [--reduced] [--shared-data DIR]``

The good inputs come from the shared data (never copied into the repository): the PDFs of
``GOOD_PDFS`` (all of them; ``--reduced``: the first two) and the first HotpotQA passages. Then
index it, e.g. ``bookindex index DIR/pdfs DIR/passages.jsonl --out INDEX``: every
good input indexed, every bad one a failed row or failure row with its reason (docs/indexing.md).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from bookindex.operators.eval.hostile_corpus import build_hostile_corpus

GOOD_PDFS = (
    "pdf_fixtures/pypdf/pdflatex-outline.pdf",
    "mmlongbench/documents/2303.05039v2.pdf",
    "pdf_fixtures/pikepdf/outlines.pdf",
    "pdf_fixtures/pypdf/GeoBase_NHNC1_Data_Model_UML_EN.pdf",
    "mmlongbench/documents/a4f3ced0696009fec3179f493e4f28c4.pdf",
)
PASSAGES = "multihop/hotpotqa/corpus.jsonl"
DEFAULT_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def good_inputs(shared: Path, reduced: bool) -> tuple[list[Path], list[dict]]:
    """The good PDFs and passages from the shared data."""
    pdfs = [shared / p for p in GOOD_PDFS[: 2 if reduced else None]]
    lines = (shared / PASSAGES).read_text(encoding="utf-8").splitlines()
    return pdfs, [json.loads(line) for line in lines[: 8 if reduced else 40]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory (emptied first)")
    parser.add_argument("--reduced", action="store_true", help="the smaller CI version")
    parser.add_argument("--shared-data", type=Path, default=DEFAULT_SHARED)
    args = parser.parse_args(argv)
    pdfs, passages = good_inputs(args.shared_data, args.reduced)
    manifest = build_hostile_corpus(args.out, pdfs, passages, reduced=args.reduced)
    print(f"{len(manifest['inputs'])} files and {len(manifest['passages'])} passage lines")
    print(f"manifest: {Path(args.out) / 'manifest.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
