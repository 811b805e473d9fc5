"""OCR quality and speed on real pages: scans made from shared text PDFs, read back by OCR.

    python -m benchmarks.ocr_quality [--dpi 200] [--window 12] [--threads 1]

* Character error rate (operators.eval.ocr_quality: line-aligned, against the text layer) of
  pages of a HiPS book, an MMLongBench paper and a docugami report (``CER_PAGES``), each page
  rendered at ``--dpi`` and read by OCR. Text inside the original's raster figures is not in
  its text layer: OCR lines over those images are left out of the comparison.
* Heading F1 of a scanned book against the same book's text-layer tree: ``--window``
  consecutive pages (the window with the most gold headings), once as a text PDF and once as
  an image-only PDF made from it (operators.eval.ocr_quality), both through the learned
  section filter without an outline (operators.structure.assemble.structure_blocks); scored
  with operators.eval.heading_gold.score, and both trees against the gold of those pages. Two
  books: ``HELD_OUT`` first, a docugami agency report (gold: its own outline) that is in
  neither the section model's training set (the 24 ``hips`` / ``hips_extra`` books; the
  script checks the model file's record) nor the pages the OCR constants were set on; then
  ``HEADING_BOOK``, a HiPS book the numbered-heading rules were written while looking at and
  the section model was trained on (in-sample: a development figure).
* OCR pages/s of one worker (one engine, ``--threads`` onnxruntime threads): wall clock and
  CPU time of the process, over every page read. On a shared machine the wall figure moves
  with the load; the CPU figure less.

The OCR constants (operators.parsing.ocr: size per x-height, word gap, bold stroke) were set on
pages 20-21 of "a-kind-of-mending-restorative-justice-in-the-pacific-islands"; the numbered-
heading rules (a hanging section number joined to its title, a numbered line a block of its
own) while looking at the window of ``HEADING_BOOK`` below. ``HELD_OUT`` was not looked at
before it was measured: its figures are the ones that say how OCR'd documents fare.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pymupdf

from bookindex.operators.eval.heading_gold import hips_dir, load_hips_gold, score, shared_data_dir
from bookindex.operators.eval.ocr_quality import (
    PageCer,
    corpus_cer,
    image_only_pdf,
    page_cer,
    page_subset_pdf,
    text_layer_words,
)
from bookindex.operators.parsing.ocr import OcrEngine, document_blocks, render_page
from bookindex.operators.structure.assemble import section_filter_for, structure_blocks

HEADING_BOOK = "climate-change-and-international-shipping-the-regulatory-framework-for-the-reduction-of-greenhouse-gas-emissions"
# Held out: not in the section model's training set, and nothing in operators/parsing/ocr.py
# was adjusted while looking at it; its gold is its own outline.
HELD_OUT = "docugami/us-fed-agency-reports/data/v1/docs/2019-annual-performance-report.pdf"
# (path under the shared data directory, 1-based pages)
CER_PAGES = [
    (f"hips/PDFs/{HEADING_BOOK}.pdf", [30, 31]),
    ("mmlongbench/documents/2312.10997v5.pdf", [3, 4]),
    ("docugami/us-fed-agency-reports/data/v1/docs/2016-annual-performance-report.pdf", [4, 5]),
]


class TimedEngine:
    """An ``OcrEngine`` that counts the pages it reads and their wall and CPU seconds."""

    def __init__(self, threads: int) -> None:
        self.engine = OcrEngine(threads=threads)
        self.pages, self.wall, self.cpu = 0, 0.0, 0.0

    def read_lines(self, image, scale):
        wall, cpu = time.perf_counter(), time.process_time()
        lines = self.engine.read_lines(image, scale)
        self.wall += time.perf_counter() - wall
        self.cpu += time.process_time() - cpu
        self.pages += 1
        return lines

    def read_page(self, page, page_no, dpi):
        from bookindex.operators.parsing.ocr import lines_to_blocks

        lines = self.read_lines(render_page(page, dpi), 72.0 / dpi)
        return lines_to_blocks(lines, page_no, page.rect.width, page.rect.height)


def _figure_boxes(page: pymupdf.Page) -> list[tuple]:
    return [tuple(i["bbox"]) for i in page.get_image_info()]


def _outside(line: tuple, boxes: list[tuple]) -> bool:
    cx, cy = (line[0] + line[2]) / 2, (line[1] + line[3]) / 2
    return not any(b[0] <= cx <= b[2] and b[1] <= cy <= b[3] for b in boxes)


def measure_cer(engine: TimedEngine, dpi: int) -> list[tuple[str, int, PageCer]]:
    """CER of each page of ``CER_PAGES``: the original page rendered and read back."""
    out = []
    for rel, pages in CER_PAGES:
        with pymupdf.open(shared_data_dir() / rel) as doc:
            for number in pages:
                page = doc[number - 1]
                with pymupdf.open() as scan:  # the page as a scan: rendered, nothing else
                    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
                    target = scan.new_page(width=page.rect.width, height=page.rect.height)
                    target.insert_image(target.rect, pixmap=pix)
                    lines = engine.read_lines(render_page(target, dpi), 72.0 / dpi)
                figures = _figure_boxes(page)
                boxes = [(ln.x0, ln.y0, ln.x1, ln.y1, ln.text) for ln in lines]
                boxes = [b for b in boxes if _outside(b, figures)]
                out.append((Path(rel).name, number, page_cer(text_layer_words(page), boxes)))
    return out


def _window(pdf: Path, gold: list, size: int) -> list[int]:
    """The ``size`` consecutive pages holding the most gold headings (the first such)."""
    gold_pages = [p for _, _, p in gold]
    with pymupdf.open(str(pdf)) as doc:
        n = doc.page_count
    best = max(
        range(1, max(2, n - size + 2)),
        key=lambda a: (sum(a <= p < a + size for p in gold_pages), -a),
    )
    return list(range(best, min(best + size, n + 1)))


def heading_books() -> list[tuple[str, Path, list, bool]]:
    """(name, PDF, gold, in the section model's training set) of the held-out report and of
    ``HEADING_BOOK``; whether a book was trained on is read from the model file's record
    (the sha256 of every training PDF)."""
    import hashlib
    import json

    from bookindex.operators.eval.heading_gold import outline_gold
    from bookindex.operators.structure.learned_filter import MODEL_PATH

    trained = {b["pdf_sha256"] for b in json.loads(MODEL_PATH.read_text())["training"]["books"]}
    held_out = shared_data_dir() / HELD_OUT
    books = [
        (held_out.stem, held_out, outline_gold(held_out) or []),
        (HEADING_BOOK, hips_dir() / "PDFs" / f"{HEADING_BOOK}.pdf", load_hips_gold(HEADING_BOOK)),
    ]
    return [
        (name, pdf, gold, hashlib.sha256(pdf.read_bytes()).hexdigest() in trained)
        for name, pdf, gold in books
    ]


def _headings(blocks, n_pages: int) -> list[tuple[int, str, int]]:
    # the learned filter, as measured (the layout rules alone score 0.55-0.67 on OCR'd text)
    _, headings = structure_blocks(
        blocks, n_pages, [], False, section_filter_for([], False, kind="learned")
    )
    return [(h.level, h.title, h.page) for h in headings]


def measure_headings(engine: TimedEngine, dpi: int, size: int, pdf: Path, gold: list) -> dict:
    """Heading trees of a window of a book: text layer vs OCR of its scan."""
    pages = _window(pdf, gold, size)
    src = str(pdf)
    gold = [(lv, t, p - pages[0] + 1) for lv, t, p in gold if p in pages]
    with tempfile.TemporaryDirectory() as tmp:
        text_pdf, scan_pdf = f"{tmp}/text.pdf", f"{tmp}/scan.pdf"
        page_subset_pdf(src, text_pdf, pages)
        image_only_pdf(text_pdf, scan_pdf, dpi)
        with pymupdf.open(text_pdf) as doc:
            from bookindex.operators.parsing.parse import parse_pages

            text_tree = _headings(parse_pages(doc, 0, doc.page_count).blocks, doc.page_count)
        with pymupdf.open(scan_pdf) as doc:
            blocks, scanned = document_blocks(doc, engine, dpi)
            ocr_tree = _headings(blocks, doc.page_count)
    return {
        "pages": pages,
        "scanned": len(scanned),
        "text_tree": text_tree,
        "ocr_tree": ocr_tree,
        "ocr_vs_text": score(ocr_tree, text_tree),
        "text_vs_gold": score(text_tree, gold),
        "ocr_vs_gold": score(ocr_tree, gold),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--window", type=int, default=12, help="pages of the heading sample")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime threads")
    parser.add_argument("--skip-cer", action="store_true")
    parser.add_argument("--skip-headings", action="store_true")
    args = parser.parse_args(argv)
    engine = TimedEngine(args.threads)
    if not args.skip_cer:
        results = measure_cer(engine, args.dpi)
        for name, number, pc in results:
            print(f"CER {name[:48]:48s} p{number:<4d} {pc.cer:.4f}  ({pc.errors}/{pc.ref_chars})")
        print(
            f"CER all {len(results)} pages: {corpus_cer([r[2] for r in results]):.4f}", flush=True
        )
    for name, pdf, gold, trained in [] if args.skip_headings else heading_books():
        h = measure_headings(engine, args.dpi, args.window, pdf, gold)
        where = "in-sample: in" if trained else "held out: not in"
        print(
            f"headings: {name[:60]} pages {h['pages'][0]}-{h['pages'][-1]} "
            f"({where} the section model's training set)",
            flush=True,
        )
        for name in ("ocr_vs_text", "text_vs_gold", "ocr_vs_gold"):
            s = h[name]
            print(
                f"  {name:12s} F1 {s['f1']:.3f}  P {s['precision']:.3f}  R {s['recall']:.3f}"
                f"  (pred {s['n_pred']}, ref {s['n_gold']}, tp {s['tp']})"
                f"  level acc (mapped) {s['level_acc_map'] or 0:.3f}"
            )
        print("  text tree:", h["text_tree"])
        print("  ocr tree: ", h["ocr_tree"], flush=True)
    if engine.pages:
        print(
            f"OCR one worker ({args.threads} thread(s), {args.dpi} dpi): {engine.pages} pages, "
            f"{engine.pages / engine.wall:.3f} pages/s wall, "
            f"{engine.pages / engine.cpu:.3f} pages per CPU-second"
        )


if __name__ == "__main__":
    main()
