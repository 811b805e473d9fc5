"""Assembly time of documents with long run-on paragraphs: the tree's paragraph merging before
and after it became linear (issue 19 §5), side by side in one run, on the same parsed blocks.

    python -m benchmarks.paragraph_merge --baseline-tree OLD_TREE.py [PDF ...] [--run-on N ...]

``--baseline-tree``: the previous ``operators/structure/tree.py`` (``git show
9f2f0e3:operators/structure/tree.py > /tmp/old_tree.py``), whose merge grew the paragraph's
string and recounted its tokens per merged block. Each PDF is parsed once; then
``assemble_document`` runs with the baseline's ``build_tree`` and with the current one,
alternately, ``--repeats`` times; the minimum of each is printed with their ratio and with
whether both built the same nodes. ``--run-on N`` adds a generated PDF whose body is one
paragraph of N blocks (``operators.eval.hostile_corpus.run_on_paragraph``).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import pymupdf

from bookindex.operators.eval.hostile_corpus import run_on_paragraph
from bookindex.operators.parsing.parse import parse_pages
from bookindex.operators.parsing.probe import probe_pdf
from bookindex.operators.structure import assemble, tree


def _load(path: str):
    spec = importlib.util.spec_from_file_location("baseline_tree", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def _time(build_tree, meta, blocks, repeats: int) -> tuple[float, list[dict]]:
    assemble.build_tree = build_tree
    best, nodes = float("inf"), []
    for _ in range(repeats):
        started = time.perf_counter()
        nodes, _, _ = assemble.assemble_document("d" * 64, meta, blocks, True, None)
        best = min(best, time.perf_counter() - started)
    return best, [asdict(n) for n in nodes]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdfs", nargs="*")
    parser.add_argument("--baseline-tree", required=True)
    parser.add_argument("--run-on", type=int, action="append", default=[])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    baseline, current = _load(args.baseline_tree).build_tree, tree.build_tree
    work = Path(tempfile.mkdtemp())
    pdfs = [Path(p) for p in args.pdfs]
    for n in args.run_on:
        path = work / f"run_on_{n}.pdf"
        path.write_bytes(run_on_paragraph(n))
        pdfs.append(path)
    print("pdf | MB | blocks | nodes | before s | after s | ratio | same nodes")
    for pdf in pdfs:
        with pymupdf.open(pdf) as doc:
            blocks = parse_pages(doc, 0, doc.page_count).blocks
        meta = probe_pdf(str(pdf)).meta
        before, old_nodes = _time(baseline, meta, blocks, args.repeats)
        after, new_nodes = _time(current, meta, blocks, args.repeats)
        size = pdf.stat().st_size / 1e6
        print(
            f"{pdf.name} | {size:.2f} | {len(blocks)} | {len(new_nodes)} | {before:.3f} | {after:.3f} "
            f"| {before / after:.1f}x | {old_nodes == new_nodes}"
        )
    assemble.build_tree = current


if __name__ == "__main__":
    main()
