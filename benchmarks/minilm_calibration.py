"""Writes the calibration texts of the int8 embedder (``operators/models/minilm_calibration.txt``).

    python -m benchmarks.minilm_calibration [--passages 60] [--titles 300]

``onnx-int8`` smooths the activations of MiniLM's LayerNorm outputs into the next MatMuls'
weights before it quantizes them (operators/models/onnx_embedder.py); the per-channel ranges
come from running the float model over these texts once, at export. They are HotpotQA
(../shared/data/multihop/hotpotqa, Wikipedia text, CC BY-SA 4.0) — every length the enrich
stage embeds: the first ``--passages`` passages as "title text", their sentences, and the titles
(entity names) of the next ``--titles`` passages. HotpotQA, so that MuSiQue and MMLongBench,
on which the vectors are checked (docs/results.md, enrich throughput), stay out of the calibration.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bookindex.operators.graph.entity_linking import sentences
from bookindex.operators.models.onnx_embedder import CALIBRATION
from bookindex.operators.structure.passages import read_passages

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def calibration_texts(passages: int, titles: int) -> list[str]:
    """One text a line: passages, their sentences, then names (no text holds a newline)."""
    rows = [p for p in read_passages(str(SHARED / "multihop" / "hotpotqa" / "corpus.jsonl"))]
    rows = [p for p in rows if not p.error]
    out: list[str] = []
    for p in rows[:passages]:
        out.append(f"{p.title} {p.text}")
        out += sentences(p.text)
    out += [p.title for p in rows[passages : passages + titles] if p.title]
    return list(dict.fromkeys(" ".join(t.split()) for t in out if t.strip()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=60)
    parser.add_argument("--titles", type=int, default=300)
    args = parser.parse_args(argv)
    texts = calibration_texts(args.passages, args.titles)
    CALIBRATION.write_text("\n".join(texts) + "\n", encoding="utf-8")
    print(f"{len(texts)} texts -> {CALIBRATION}")


if __name__ == "__main__":
    main()
