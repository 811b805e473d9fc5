"""OCR of pages without a text layer: a rendered page → text lines → the same typed blocks a text
page gives (``operators.parsing.parse.Block``), so a scanned book takes the block → section →
tree path of every other book.

The engine is RapidOCR (``rapidocr-onnxruntime``): PP-OCR's detection, angle and recognition
models as ONNX files inside the wheel, run by onnxruntime (its CUDA provider where the GPU build
is installed), nothing downloaded. ``OcrEngine`` loads it once; a Ray stage owns one per worker
(pipelines/ocr_stage.py).

What OCR gives is a line of text and its box. The rest is estimated:

* the font size from the line's ink: the band of rows where most ink lies is the x-height of
  a line with lower-case letters and the cap height of one without, whatever its ascenders and
  descenders (the box height is not: it varies by a fifth between lines of one font);
  ``SIZE_PER_X_HEIGHT`` is calibrated on text pages rendered and read back (PyMuPDF's span
  size over the band), ``SIZE_PER_CAP_HEIGHT`` is the typographic 1 / 0.7;
* bold from the stroke width: ink pixels over ink-edge pixels of the line's crop, against the
  page's median (heavier by ``BOLD_STROKE_RATIO`` → bold);
* lines of one size become paragraphs by the rules text pages use (``parse.blocks_from_lines``).

A size estimate wobbles by a few percent between lines of one font, so the sizes of a whole
document are snapped to clusters (``snap_font_sizes``) before the document-level decisions (body
font, heading candidates) see them.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from dataclasses import dataclass

import numpy as np
import pymupdf

from bookindex.operators.parsing.parse import Block, blocks_from_lines, parse_pages

OCR_FONT = "OCR"  # the ``font`` of every block read by OCR
DEFAULT_DPI = 200
# PyMuPDF span size / ink band height, median over lines of rendered text pages
# (benchmarks/ocr_quality.py --calibrate).
SIZE_PER_X_HEIGHT = 2.08
SIZE_PER_CAP_HEIGHT = 1.43
_BAND_INK_SHARE = 0.6  # rows with this share of the upper-quartile row's ink make the band
# A run of ink-free columns this share of the x-height wide is a word space: letter gaps on
# rendered text pages reach about 0.3 of it, word spaces start above 0.4.
WORD_GAP = 0.38
BOLD_STROKE_RATIO = 1.25  # stroke width against the page median that reads as bold
MIN_SCORE = 0.5  # recognition confidence below which a line is dropped
SIZE_CLUSTER_TOLERANCE = 0.07  # sizes within 7 % of a cluster's first are one size
_PAGE_IMAGE_SHARE = 0.3  # an image covering this share of a text-less page makes it a scan


@dataclass
class OcrLine:
    """One recognised line: its text, box in page points, confidence and stroke width."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    score: float
    stroke: float  # ink pixels per ink-edge pixel of the crop: thicker strokes, larger
    size: float  # estimated font size, points


def image_only_pages(doc: pymupdf.Document) -> list[int]:
    """1-based numbers of the pages that need OCR: no extractable text, and an image covering
    at least ``_PAGE_IMAGE_SHARE`` of the page (blank pages are not read). Cheap on text
    books: a page's text is only extracted when its resources hold an image."""
    pages = []
    for index in range(doc.page_count):
        page = doc[index]
        if not page.get_images() or page.get_text("text").strip():
            continue
        area = abs(page.rect) or 1.0
        covered = max(
            (abs(pymupdf.Rect(i["bbox"]) & page.rect) for i in page.get_image_info()), default=0.0
        )
        if covered / area >= _PAGE_IMAGE_SHARE:
            pages.append(index + 1)
    return pages


def render_page(page: pymupdf.Page, dpi: int = DEFAULT_DPI) -> np.ndarray:
    """The page as an RGB array (height × width × 3, uint8) at ``dpi``."""
    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csRGB, alpha=False)
    return np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.width, 3)


class OcrEngine:
    """RapidOCR loaded once. ``gpu``: run detection and recognition through onnxruntime's CUDA
    provider (used only where onnxruntime offers it; otherwise the CPU)."""

    def __init__(self, gpu: bool = False, threads: int = 0) -> None:
        import onnxruntime
        from rapidocr_onnxruntime import RapidOCR

        cuda = gpu and "CUDAExecutionProvider" in onnxruntime.get_available_providers()
        options: dict = {"det_use_cuda": cuda, "rec_use_cuda": cuda, "cls_use_cuda": cuda}
        if threads > 0:
            options["intra_op_num_threads"] = threads
        self.engine = RapidOCR(**options)
        self.device = "gpu" if cuda else "cpu"

    def read_lines(self, image: np.ndarray, scale: float) -> list[OcrLine]:
        """Lines of a rendered page; ``scale`` converts pixels to points (72 / dpi)."""
        # No angle classifier: pages are rendered upright, and on book pages it turned whole
        # lines upside down (then read as nothing) a few times a page.
        result, _ = self.engine(image, use_cls=False, return_word_box=True)
        return lines_from_result(result or [], image, scale)

    def read_page(self, page: pymupdf.Page, page_no: int, dpi: int = DEFAULT_DPI) -> list[Block]:
        """The typed text blocks of one page read by OCR (``page_no``: 1-based)."""
        lines = self.read_lines(render_page(page, dpi), 72.0 / dpi)
        return lines_to_blocks(lines, page_no, page.rect.width, page.rect.height)


def lines_from_result(result: list, image: np.ndarray, scale: float) -> list[OcrLine]:
    """RapidOCR's answer for ``image`` (per line: box corners, text, score and, asked with
    ``return_word_box``, the character boxes and characters; pixels) → lines in points
    (``scale``: 72 / dpi), with size, stroke and the spaces recognition dropped read from
    the image."""
    gray = image.mean(axis=2) if image.ndim == 3 else image
    lines = []
    for box, text, score, *chars in result:
        text = str(text)
        if not text.strip() or float(score) < MIN_SCORE:
            continue
        xs = [p[0] for p in box]
        ys = [p[1] for p in box]
        x0, y0, x1, y1 = min(xs), min(ys), max(xs), max(ys)
        crop = gray[int(y0) : int(y1) + 1, int(x0) : int(x1) + 1]
        if len(chars) >= 2:
            text = restore_spaces(text, chars[0], crop, int(x0))
        text = clean_text(text)
        size = font_size_estimate(crop, text) * scale
        box = (x0 * scale, y0 * scale, x1 * scale, y1 * scale)
        lines.append(OcrLine(text, *box, float(score), stroke_width(crop), round(size, 1)))
    return lines


_NUMBER_WITH_O = re.compile(r"(?<![^\s(\[])[\do]*\d[\do]*(?=[\s)\].,;:]|$)")


def clean_text(text: str) -> str:
    """A recognised line made plain: NFKC (the recogniser answers some punctuation in its
    full-width form, "）" for ")"), and the letter o read inside a number made a zero (books
    set in old-style figures: "2o1o" is 2010)."""
    text = unicodedata.normalize("NFKC", text).strip()
    return _NUMBER_WITH_O.sub(lambda m: m.group(0).replace("o", "0"), text)


def _ink(crop: np.ndarray) -> np.ndarray:
    return crop < (float(crop.min()) + float(crop.max())) / 2


def _x_band(ink: np.ndarray) -> int:
    """Rows holding most of a line's ink: the x-height of lower-case text, the cap height of
    capitals. A row counts with ``_BAND_INK_SHARE`` of the ink of the upper quartile of inked
    rows (not of the busiest row: a row of leader dots or an underline outweighs the
    letters)."""
    rows = ink.sum(axis=1)
    inked = rows[rows > 0]
    if inked.size == 0:
        return 0
    return int((rows >= _BAND_INK_SHARE * np.percentile(inked, 75)).sum())


def restore_spaces(text: str, char_boxes: list, crop: np.ndarray, crop_x0: int) -> str:
    """Word spaces the recogniser left out ("andextractionof") put back where the line's
    image has a word gap: a run of ink-free columns at least ``WORD_GAP`` of the x-height
    wide, between two recognised characters (their boxes in image pixels, one per character
    with or without the spaces) not already separated by a space. A line whose character boxes
    do not pair with its characters is left as it is."""
    glyphs = [i for i, c in enumerate(text) if not c.isspace()]
    if len(char_boxes) == len(text):  # a box for every character, spaces included
        char_boxes = [char_boxes[i] for i in glyphs]
    if crop.size == 0 or len(char_boxes) != len(glyphs) or len(glyphs) < 2:
        return text
    ink = _ink(crop)
    band = _x_band(ink)
    if band == 0:
        return text
    columns = ink.any(axis=0)
    centres = [(b[0][0] + b[1][0]) / 2 - crop_x0 for b in char_boxes]
    cut_after: set[int] = set()  # index into glyphs: a space goes after this glyph
    inked = np.flatnonzero(columns)
    if inked.size < 2:
        return text
    start = None
    for x in range(int(inked[0]), int(inked[-1]) + 1):
        if not columns[x]:
            start = x if start is None else start
            continue
        if start is not None and x - start >= WORD_GAP * band:
            gap_centre = (start + x) / 2
            k = int(np.searchsorted(centres, gap_centre)) - 1
            if 0 <= k < len(glyphs) - 1:
                cut_after.add(k)
        start = None
    if not cut_after:
        return text
    out = []
    for k, i in enumerate(glyphs):
        out.append(text[(glyphs[k - 1] + 1 if k else 0) : i + 1])
        pair = text[i] + text[glyphs[k + 1]] if k + 1 < len(glyphs) else ""
        in_number = len(pair) == 2 and all(c.isdigit() or c == "." for c in pair)
        # adjacent (no space between them yet), and not inside a number ("3.6.1", "157":
        # figures are set apart wider than letters)
        if k in cut_after and glyphs[k + 1] == i + 1 and not in_number:
            out.append(" ")
    out.append(text[glyphs[-1] + 1 :])
    return "".join(out)


def font_size_estimate(crop: np.ndarray, text: str) -> float:
    """The font size of a line, in pixels: from the band of rows that hold most of its ink
    (the x-height) when the text has lower-case letters, else from the height of its ink
    (the cap height)."""
    if crop.size == 0:
        return 0.0
    ink = _ink(crop)
    if any(c.islower() for c in text):
        return _x_band(ink) * SIZE_PER_X_HEIGHT
    # Capitals and figures fill their height unevenly ("E", "U", "3.3"), but have no
    # descenders to speak of: their height is the extent of the rows with real ink.
    rows = ink.sum(axis=1)
    inked = np.flatnonzero(rows >= 0.15 * np.percentile(rows[rows > 0], 75)) if rows.any() else []
    return (int(inked[-1]) - int(inked[0]) + 1) * SIZE_PER_CAP_HEIGHT if len(inked) else 0.0


def stroke_width(crop: np.ndarray) -> float:
    """Ink pixels per ink-edge pixel of a grey crop (dark ink on light paper): about half the
    stroke width in pixels, whatever the number of letters."""
    if crop.size == 0:
        return 0.0
    ink = _ink(crop)
    n_ink = int(ink.sum())
    if n_ink == 0:
        return 0.0
    inner = ink.copy()
    inner[1:, :] &= ink[:-1, :]
    inner[:-1, :] &= ink[1:, :]
    inner[:, 1:] &= ink[:, :-1]
    inner[:, :-1] &= ink[:, 1:]
    edge = n_ink - int(inner.sum())
    return n_ink / max(edge, 1)


_SECTION_NUMBER_ONLY = re.compile(r"^\d{1,2}(\.\d{1,2})*\.?$")  # "7", "7.5.2.4", "3."
_NUMBERED_LINE = re.compile(r"^\d{1,2}(\.\d{1,2})*\.?\s+\S")  # "7.6 Institutional ..."


def _merge_same_line(lines: list[OcrLine]) -> list[OcrLine]:
    """Boxes the detector cut apart on one text line joined again: they overlap vertically by
    most of their height, and the gap between them is under the line's height (words across
    a wide gap; a column gap is wider) or, after a section number set apart on the left
    ("7.5.2.4" and its title), under four times it."""
    rows: list[list[OcrLine]] = []  # boxes on one text row (they overlap vertically)
    for line in sorted(lines, key=lambda ln: (ln.y0 + ln.y1) / 2):
        for row in reversed(rows[-3:]):
            last = row[-1]
            height = min(last.y1 - last.y0, line.y1 - line.y0)
            if min(last.y1, line.y1) - max(last.y0, line.y0) > 0.6 * height:
                row.append(line)
                break
        else:
            rows.append([line])
    merged: list[OcrLine] = []
    for row in rows:
        row.sort(key=lambda ln: ln.x0)
        current = row[0]
        for line in row[1:]:
            height = min(current.y1 - current.y0, line.y1 - line.y0)
            gap = line.x0 - current.x1
            number = _SECTION_NUMBER_ONLY.match(current.text) is not None
            # boxes of one row may overlap a little: the detector pads each box
            if -0.5 * height <= gap < (4.0 if number else 1.2) * height:
                if number:  # the number takes the style of its title
                    current.size, current.stroke = line.size, line.stroke
                current.text = f"{current.text} {line.text}"
                current.x1 = line.x1
                current.y0, current.y1 = min(current.y0, line.y0), max(current.y1, line.y1)
                current.stroke = (current.stroke + line.stroke) / 2
                current.size = max(current.size, line.size)
                current.score = min(current.score, line.score)
            else:
                merged.append(current)
                current = line
        merged.append(current)
    return merged


def lines_to_blocks(lines: list[OcrLine], page_no: int, width: float, height: float) -> list[Block]:
    """OCR lines of one page → typed blocks in reading order (the text-page rules: same-style
    runs of lines split into paragraphs at indents and gaps; ``parse.blocks_from_lines``)."""
    lines = _merge_same_line(lines)
    if not lines:
        return []
    strokes = [ln.stroke / max(ln.size, 1e-6) for ln in lines]
    typical = statistics.median(strokes) if len(lines) >= 5 else None
    raw_blocks: list[list[dict]] = []
    for line, stroke in zip(lines, strokes, strict=True):
        size = line.size
        bold = typical is not None and stroke > BOLD_STROKE_RATIO * typical
        span = {"text": line.text, "size": size, "flags": 16 if bold else 0, "font": OCR_FONT}
        as_line = {"bbox": (line.x0, line.y0, line.x1, line.y1), "spans": [span]}
        _add_to_layout_block(raw_blocks, as_line, lines)
    return blocks_from_lines(raw_blocks, page_no, width, height)


def _add_to_layout_block(raw_blocks: list[list[dict]], line: dict, page: list[OcrLine]) -> None:
    """Put ``line`` into the layout block it continues (the latest one ending just above it in
    the same column: overlapping horizontally, at most a line's height of gap), else a new one.
    PyMuPDF's own blocks play this part on text pages; like them, a numbered heading set in
    the text face ("7.6 Institutional Fragmentation ...") is a block of its own: a line that
    opens with a section number starts a block, and a block that opened so ends after a line
    that stops short of its column's right edge (its title's last line)."""
    x0, y0, x1, y1 = line["bbox"]
    height = y1 - y0
    numbered = _NUMBERED_LINE.match(line["spans"][0]["text"]) is not None
    for block in reversed(raw_blocks[-6:]):
        bx0, _, bx1, by1 = block[-1]["bbox"]
        if min(bx1, x1) - max(bx0, x0) > 0 and -0.3 * height <= y0 - by1 < 1.0 * height:
            if not numbered and not _heading_ended(block, page, x0):
                block.append(line)
                return
            break
    raw_blocks.append([line])


def _heading_ended(block: list[dict], page: list[OcrLine], next_x0: float) -> bool:
    """A block opened by a numbered line, of at most two lines, whose last line stops short of
    the right edge of the lines that start where it starts (its column) by more than its
    height: justified text reaches that edge, a title's last line does not. A second line
    indented past the number (``next_x0``) continues the title."""
    if len(block) > 2 or not _NUMBERED_LINE.match(block[0]["spans"][0]["text"]):
        return False
    x0, y0, _, y1 = block[0]["bbox"]
    if len(block) == 1 and next_x0 > x0 + 0.5 * (y1 - y0):
        return False
    right = max((ln.x1 for ln in page if abs(ln.x0 - x0) < 15), default=block[-1]["bbox"][2])
    last = block[-1]["bbox"]
    return last[2] < right - (last[3] - last[1])  # short by more than a line's height


def snap_font_sizes(blocks: list[Block]) -> None:
    """Snap the estimated sizes of a document's OCR blocks to clusters (in place): sizes within
    ``SIZE_CLUSTER_TOLERANCE`` of a cluster's smallest become the cluster's line-weighted
    median, so that one font reads as one size across the document."""
    ocr = [b for b in blocks if b.font == OCR_FONT and b.font_size > 0]
    if not ocr:
        return
    ocr.sort(key=lambda b: b.font_size)
    clusters: list[list[Block]] = [[ocr[0]]]
    for b in ocr[1:]:
        if b.font_size <= clusters[-1][0].font_size * (1 + SIZE_CLUSTER_TOLERANCE):
            clusters[-1].append(b)
        else:
            clusters.append([b])
    for cluster in clusters:
        weighted = [b.font_size for b in cluster for _ in range(max(1, b.n_lines))]
        size = round(statistics.median(weighted), 1)
        for b in cluster:
            b.font_size = size


def merge_ocr_blocks(parsed: list[Block], ocr: list[Block]) -> list[Block]:
    """A document's parsed blocks with its OCR blocks: on each page OCR read text from, the
    page-sized scan image gives way to the text; sizes snapped over the document."""
    ocr_pages = {b.page for b in ocr}
    kept = [b for b in parsed if b.page not in ocr_pages or not _is_scan_image(b)]
    snap_font_sizes(ocr)
    return kept + ocr


def _is_scan_image(block: Block) -> bool:
    area = (block.x1 - block.x0) * (block.y1 - block.y0)
    return (
        block.kind == "image" and area >= _PAGE_IMAGE_SHARE * block.page_width * block.page_height
    )


def document_blocks(
    doc: pymupdf.Document, engine: OcrEngine, dpi: int = DEFAULT_DPI
) -> tuple[list[Block], list[int]]:
    """Every block of an open document, its image-only pages read by ``engine``, as the index
    job assembles them (one process, no Ray: benchmarks and tests); and those pages."""
    parsed = parse_pages(doc, 0, doc.page_count)
    scans = image_only_pages(doc)
    read = [b for p in scans for b in engine.read_page(doc[p - 1], p, dpi)]
    return merge_ocr_blocks(parsed.blocks, read), scans
