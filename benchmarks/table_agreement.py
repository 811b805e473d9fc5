"""Ruled-table agreement: ``operators.parsing.tables`` (our own detector, used by the parser) against
PyMuPDF's ``page.find_tables`` line strategy (what the parser used before), page by page.

Run from the repo root::

    python -m benchmarks.table_agreement [--corpus hips,mmlongbench,docugami] [--limit N]
        [--render DIR]

Only pages whose rulings pass ``Rulings.is_grid`` are compared (on the others the parser looks
for no table at all). Both sides get the same clip (the rulings' area), the same words and the
same acceptance (>= 2 rows, >= 2 columns, >= half the cells filled), so a difference is a
difference of detection. Per page: the number of accepted tables; per table matched in order:
bbox IoU >= 0.9, equal rows and columns, equal cell text. Disagreeing pages are listed and,
with ``--render``, their table areas saved as PNGs for inspection. Timings of both detectors
(the whole ``_table_blocks`` step: drawings, words, detection, cell text) are printed too.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pymupdf

from benchmarks.index_throughput import CORPUS_GLOBS, data_dir
from bookindex.operators.parsing.ruled_tables import cell_texts, find_ruled_tables, page_rulings


def _iou(a: tuple, b: tuple) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def find_tables_reference(page: pymupdf.Page) -> list[dict]:
    """The parser's previous table step: find_tables(clip=rulings area, use_layout=False)."""
    rulings = page_rulings(page)
    if not rulings.is_grid:
        return []
    words = page.get_text("words", sort=True)
    clip = (pymupdf.Rect(rulings.area) + (-4, -4, 4, 4)) & page.rect
    out = []
    for table in page.find_tables(clip=clip, use_layout=False).tables:
        grid = [(row.bbox, row.cells) for row in table.rows]
        rows = cell_texts(grid, table.bbox, words)
        cells = [c for r in rows for c in r]
        filled = sum(bool(c) for c in cells)
        if table.row_count < 2 or table.col_count < 2 or filled < 0.5 * len(cells):
            continue
        out.append(
            {
                "bbox": tuple(table.bbox),
                "rows": table.row_count,
                "cols": table.col_count,
                "cells": rows,
            }
        )
    return out


def ours(page: pymupdf.Page) -> list[dict]:
    return [
        {"bbox": bbox, "rows": n_rows, "cols": n_cols, "cells": rows}
        for bbox, rows, n_rows, n_cols in find_ruled_tables(page)
    ]


def compare(ref: list[dict], new: list[dict]) -> list[str]:
    """What differs between two pages' tables; empty when they agree."""
    if len(ref) != len(new):
        return [f"tables {len(ref)} (find_tables) vs {len(new)} (ours)"]
    problems = []
    for i, (a, b) in enumerate(zip(ref, new, strict=True)):
        iou = _iou(a["bbox"], b["bbox"])
        if iou < 0.9:
            problems.append(f"t{i} bbox IoU {iou:.2f}")
        if (a["rows"], a["cols"]) != (b["rows"], b["cols"]):
            problems.append(f"t{i} shape {a['rows']}x{a['cols']} vs {b['rows']}x{b['cols']}")
        elif a["cells"] != b["cells"]:
            pairs = zip(a["cells"], b["cells"], strict=True)  # equal shapes
            diff = sum(x != y for ra, rb in pairs for x, y in zip(ra, rb, strict=True))
            problems.append(f"t{i} cell text differs in {diff} cells")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.table_agreement", description=__doc__)
    ap.add_argument("--corpus", default="hips,mmlongbench,docugami")
    ap.add_argument("--limit", type=int, default=None, help="at most N PDFs per set")
    ap.add_argument("--render", type=Path, default=None, help="save disagreeing pages here")
    args = ap.parse_args(argv)
    pymupdf.set_messages(stream=sys.stderr)
    corpora = [c.strip() for c in args.corpus.split(",") if c.strip()]
    pdfs = [p for c in corpora for p in sorted(data_dir().glob(CORPUS_GLOBS[c]))[: args.limit]]
    if args.render:
        args.render.mkdir(parents=True, exist_ok=True)

    grid_pages = agree = tables_ref = tables_new = 0
    t_ref = t_new = 0.0
    disagreements = []
    for pdf in pdfs:
        with pymupdf.open(pdf) as doc:
            for page in doc:
                if not page_rulings(page).is_grid:
                    continue
                grid_pages += 1
                t0 = time.perf_counter()
                ref = find_tables_reference(page)
                t1 = time.perf_counter()
                new = ours(page)
                t2 = time.perf_counter()
                t_ref += t1 - t0
                t_new += t2 - t1
                tables_ref += len(ref)
                tables_new += len(new)
                problems = compare(ref, new)
                if not problems:
                    agree += 1
                    continue
                where = f"{pdf.relative_to(data_dir())} p{page.number + 1}"
                disagreements.append((where, problems, ref, new))
                if args.render:
                    boxes = [t["bbox"] for t in ref + new]
                    clip = pymupdf.Rect(boxes[0]) if boxes else page.rect
                    for b in boxes[1:]:
                        clip |= b
                    name = f"{pdf.stem[:40]}_p{page.number + 1}.png"
                    page.get_pixmap(dpi=100, clip=clip + (-10, -10, 10, 10)).save(
                        args.render / name
                    )

    print(f"PDFs: {len(pdfs)} ({','.join(corpora)}); pages with a grid of rulings: {grid_pages}")
    print(f"pages in agreement: {agree}/{grid_pages}")
    print(f"tables: find_tables {tables_ref}, ours {tables_new}")
    print(
        f"time on those pages: find_tables {t_ref:.2f}s, ours {t_new:.2f}s "
        f"(ours / find_tables {t_new / max(t_ref, 1e-9):.3f})"
    )
    for where, problems, ref, new in disagreements:
        print(f"- {where}: {'; '.join(problems)}")
        for label, tables in (("ref", ref), ("new", new)):
            for t in tables:
                box = ", ".join(f"{v:.0f}" for v in t["bbox"])
                print(f"    {label} ({box}) {t['rows']}x{t['cols']} header={t['cells'][0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
