"""Layout parsing with PyMuPDF: a page range of a PDF → typed blocks.

A *block* here is a run of consecutive lines of one PyMuPDF text block that share one style
(font size, boldness), further split into paragraphs at first-line indents and vertical gaps.
That granularity matters: a bold heading line and the body paragraph under it often share one
PyMuPDF block, and the section filter needs to see the heading alone.

This stage only uses evidence local to a page. Decisions that need the whole document (running
headers and footers, the body font, which candidates are sections) are made later in
``operators.structure.blocks`` and ``operators.structure.sections``.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import re
from dataclasses import dataclass, field

import pymupdf

from bookindex.operators.kinds import FORMULA, IMAGE, TABLE, TEXT
from bookindex.operators.parsing.ruled_tables import find_ruled_tables

# Block kinds produced here. ``operators.structure.blocks`` refines "text" into title candidates,
# headers/footers, captions and lists once it has seen the whole document.

_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_ITALIC_NAME = re.compile(r"italic|oblique|[-_,](it|ital|obl)$", re.IGNORECASE)
_MATH_FONT = re.compile(r"^(cmmi|cmsy|cmex|msbm|msam)|math", re.IGNORECASE)
# Fixed-pitch typefaces (code listings, commands), for PDFs whose fonts do not set the
# monospaced flag: Courier, Consolas, Menlo, *Mono, TeX's typewriter faces (cmtt, t1xtt).
_MONO_FONT = re.compile(
    r"mono|nimbusmon|courier|consol|menlo|monaco|sourcecode|typewriter|(^|[+\-_ ])(cm|lm|t1x|ec|sf|pcr)?tt\d*($|[\-_ ,])",
    re.IGNORECASE,
)
ROW_EXTRAS = ("lead",)  # Block.extra keys that cross between stages (Block.as_row)
_MIN_IMAGE_SIDE = 40.0  # points; smaller images are bullets, rules and logos in margins


@dataclass
class Block:
    """One typed block of a page, with the style evidence the later stages need."""

    page: int  # 1-based physical page number
    order: int  # reading order within the page
    kind: str
    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    font_size: float  # size of the block's dominant font, points
    bold: bool  # every non-blank span is bold
    italic: bool
    font: str
    n_lines: int
    page_width: float
    page_height: float
    space_above: float = 0.0  # gap to the nearest text above in the same column, points
    mono: bool = False  # set in a fixed-pitch typeface throughout: code, commands
    table_rows: int = 0
    table_cols: int = 0
    extra: dict = field(default_factory=dict)

    def as_row(self) -> dict:
        """The fields as a flat dict (no deep copy: every field is a plain value); of ``extra``
        only what the parse records for later stages (``ROW_EXTRAS``: the heading features read
        ``lead``), and the key only when there is some, so that ``Block(**row)`` rebuilds a
        block whose features are the parsed block's."""
        row = dict(vars(self))
        extra = row.pop("extra")
        kept = {k: extra[k] for k in ROW_EXTRAS if k in extra}
        if kept:
            row["extra"] = kept
        return row


@dataclass
class PageRange:
    """What parsing a page range yields: blocks plus the problems met on its pages."""

    blocks: list[Block]
    errors: list[str]


@functools.lru_cache(maxsize=4096)
def _font_is_bold(font: str) -> bool:
    return bool(_BOLD_NAME.search(font))


@functools.lru_cache(maxsize=4096)
def _font_is_italic(font: str) -> bool:
    return bool(_ITALIC_NAME.search(font))


def _span_bold(span: dict) -> bool:
    return bool(span["flags"] & 16 or _font_is_bold(span["font"]))


def _span_italic(span: dict) -> bool:
    return bool(span["flags"] & 2 or _font_is_italic(span["font"]))


def _line_style(line: dict) -> tuple[float, bool, bool, str] | None:
    """(size, bold, italic, font) of a line, from the spans that carry characters.
    Computed once per line and kept in the line dict."""
    if "_style" in line:
        return line["_style"]
    spans = [s for s in line["spans"] if s["text"].strip()]
    style = None
    if spans:
        weights = [len(s["text"].strip()) for s in spans]
        dominant = spans[max(range(len(spans)), key=weights.__getitem__)]
        bold = all(_span_bold(s) for s in spans)
        italic = all(_span_italic(s) for s in spans)
        style = (round(dominant["size"], 1), bold, italic, dominant["font"])
    line["_style"] = style
    return style


def lead_runs(line: dict) -> tuple[float, float]:
    """(bold, italic): the share of a line's characters in its opening run of bold (italic)
    spans. "Commissioner v. Glenshaw Glass Co." in bold followed by ", 348 U.S. 426 (1955)" in
    roman gives a bold share of about 0.6: a heading the line's style (bold only when every span
    is) does not show. A wholly bold line gives 1.0; blank spans are left out."""
    spans = [s for s in line["spans"] if s["text"].strip()]
    total = sum(len(s["text"].strip()) for s in spans)
    if not total:
        return (0.0, 0.0)
    shares = []
    for is_set in (_span_bold, _span_italic):
        run = 0
        for s in spans:
            if not is_set(s):
                break
            run += len(s["text"].strip())
        shares.append(round(run / total, 3))
    return (shares[0], shares[1])


def _line_mono(line: dict) -> bool:
    """Every span with characters is set in a fixed-pitch face (flag bit 3, or the name)."""
    return all(
        s["flags"] & 8 or _MONO_FONT.search(s["font"]) for s in line["spans"] if s["text"].strip()
    )


def _same_style(a: tuple, b: tuple) -> bool:
    """Lines of one run share size, weight and font family (sub-family suffixes ignored)."""
    return a[:2] == b[:2] and font_family(a[3]) == font_family(b[3])


@functools.lru_cache(maxsize=4096)
def font_family(font: str) -> str:
    """'ABCDEF+Times-Bold' → 'Times': the typeface without subset tag or style suffix."""
    return re.split(r"[-,+]", font.split("+")[-1])[0]


def _inside(bbox: tuple, regions: list[tuple], slack: float = 2.0) -> bool:
    x0, y0, x1, y1 = bbox
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    return any(
        r[0] - slack <= cx <= r[2] + slack and r[1] - slack <= cy <= r[3] + slack for r in regions
    )


def _split_paragraphs(lines: list[dict]) -> list[list[dict]]:
    """Split a same-style run of lines at first-line indents, at larger vertical gaps, and
    around a lead-in line: a wholly italic line that opens a paragraph of upright text."""
    if len(lines) < 2:
        return [lines]
    left = min(ln["bbox"][0] for ln in lines)
    heights = sorted(ln["bbox"][3] - ln["bbox"][1] for ln in lines)
    line_height = heights[len(heights) // 2] or 1.0
    italic = [bool((style := _line_style(ln)) and style[2]) for ln in lines]
    texts = ["".join(s["text"] for s in ln["spans"]).strip() for ln in lines]
    lead_in = [
        italic[i]
        and (i == 0 or (not italic[i - 1] and texts[i - 1].endswith((".", "!", "?", ":"))))
        and i + 1 < len(lines)
        and not italic[i + 1]
        for i in range(len(lines))
    ]
    groups: list[list[dict]] = [[lines[0]]]
    for i in range(1, len(lines)):
        prev, line = lines[i - 1], lines[i]
        gap = line["bbox"][1] - prev["bbox"][3]
        indented = line["bbox"][0] - left > 6 and prev["bbox"][0] - left <= 6
        new_column = line["bbox"][1] < prev["bbox"][1] - line_height
        if indented or gap > 0.8 * line_height or new_column or lead_in[i] or lead_in[i - 1]:
            groups.append([line])
        else:
            groups[-1].append(line)
    return groups


def _join_lines(lines: list[dict]) -> str:
    parts: list[str] = []
    for line in lines:
        text = "".join(s["text"] for s in line["spans"]).strip()
        if not text:
            continue
        if parts and parts[-1].endswith("-") and text[:1].islower():
            parts[-1] = parts[-1][:-1] + text  # undo end-of-line hyphenation
        else:
            parts.append(text)
    return " ".join(p for p in parts if p).strip()


def _text_blocks(page: pymupdf.Page, page_no: int, exclude: list[tuple]) -> list[Block]:
    flags = pymupdf.TEXTFLAGS_TEXT & ~pymupdf.TEXT_PRESERVE_LIGATURES
    raw_blocks = [
        raw.get("lines", []) for raw in page.get_text("dict", flags=flags, sort=True)["blocks"]
    ]
    return _blocks_of_lines(raw_blocks, page_no, page.rect.width, page.rect.height, exclude)


def _blocks_of_lines(
    raw_blocks: list[list[dict]], page_no: int, width: float, height: float, exclude: list[tuple]
) -> list[Block]:
    """Layout blocks of lines (PyMuPDF's "dict" lines: bbox and spans with text, size, flags,
    font) → same-style runs → paragraphs → blocks."""
    blocks: list[Block] = []
    for raw_lines in raw_blocks:
        runs: list[tuple[tuple, list[dict]]] = []
        for line in raw_lines:
            style = _line_style(line)
            if style is None or (exclude and _inside(line["bbox"], exclude)):
                continue
            if runs and _same_style(runs[-1][0], style):
                runs[-1][1].append(line)
            else:
                runs.append((style, [line]))
        for (size, bold, _, font), run in runs:
            for para in _split_paragraphs(run):
                text = _join_lines(para)
                if not text:
                    continue
                xs0 = [ln["bbox"][0] for ln in para]
                italic = all((style := _line_style(ln)) and style[2] for ln in para)
                kind = FORMULA if _MATH_FONT.search(font) else TEXT
                blocks.append(
                    Block(
                        page=page_no,
                        order=0,
                        kind=kind,
                        text=text,
                        x0=min(xs0),
                        y0=min(ln["bbox"][1] for ln in para),
                        x1=max(ln["bbox"][2] for ln in para),
                        y1=max(ln["bbox"][3] for ln in para),
                        font_size=size,
                        bold=bold,
                        italic=italic,
                        font=font,
                        n_lines=len(para),
                        mono=all(_line_mono(ln) for ln in para),
                        page_width=width,
                        page_height=height,
                        extra={
                            "first_line": (_join_lines(para[:1]), para[0]["bbox"]),
                            "lead": lead_runs(para[0]),
                        },
                    )
                )
    return blocks


_DOTTED_NUMBER = re.compile(r"^\d{1,2}(\.\d{1,2})+\.?$")
_SECTION_NUMBER_ONLY = re.compile(r"^\d{1,2}(\.\d{1,2})*\.?$")  # "2", "2.1", "3.2.1."


# A heading's own line at the head of the paragraph it opens, set in the paragraph's face
# ("1.2.1.1 Banks' role in the extension of credit" / "Banks serve as engines …"): a section
# number (dotted, roman, a letter or an arabic number with a stop) followed by a capital, or a
# line in capitals.
_HEADING_NUMBER = re.compile(
    r"^(\d{1,2}(\.\d{1,2})+\.?|[IVXL]{1,6}\.|[A-Za-z]\.|\([a-z]\)|\d{1,2}\.)\s+(?=\S)"
)
_CLOSERS = "\u201d\u2019\"')]*\u2014 "


def _split_numbered_first_lines(blocks: list[Block]) -> list[Block]:
    """Cut a paragraph's first line off as a block of its own when it is a heading's line:

    * a section number set apart on the left ("1.1.1.1") whose title is the first line of
      the paragraph beside it (joined to the number later by ``_join_same_line``);
    * a first line that reads as a heading by itself (``heading_line``): a section number
      and a capital ("1.2.1.1 Banks' role in the extension of credit", "I. Background",
      "a. The controller") or a line in capitals ("DISCUSSION"), the paragraph going on in
      the same face on the next line.

    Only when the line stops short of the paragraph's right edge (a justified text line
    reaches it): the line was broken on purpose. A cut can leave the next heading's number
    as the rest of the block ("Post-Kyoto Efforts and Outcomes" / "3.2.2.2.1"), so this
    runs again until nothing changes."""
    for _ in range(4):
        split = _split_once(blocks)
        if len(split) == len(blocks):
            return split
        blocks = split
    return blocks


def heading_line(text: str) -> bool:
    """A paragraph's first line that reads as a heading of its own: a section number and a
    capital, or capitals; at most 20 words; not ending like a sentence, a list entry or a
    contents line (a stop, comma, semicolon, colon or page number, quotes aside)."""
    text = text.strip()
    core = text.rstrip(_CLOSERS)
    if not core or not 1 <= len(text.split()) <= 20:
        return False
    if core.endswith((".", ",", ";", ":")) or core[-1].isdigit():
        return False
    m = _HEADING_NUMBER.match(text)
    if m:
        return text[m.end() :][:1].isupper()
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 4 and all(c.isupper() for c in letters)


def _split_once(blocks: list[Block]) -> list[Block]:
    numbers = [b for b in blocks if b.n_lines == 1 and _DOTTED_NUMBER.match(b.text)]
    out: list[Block] = []
    for b in blocks:
        first = b.extra.get("first_line")
        if not (first and b.n_lines > 1 and b.kind == TEXT):
            out.append(b)
            continue
        text, (fx0, _, fx1, fy1) = first
        if fx1 > b.x1 - 1.5 * b.font_size or not b.text.startswith(text):
            out.append(b)
            continue
        near = max(2.0, 0.4 * b.font_size)
        beside_number = any(abs(n.y0 - b.y0) < near and 0 <= fx0 - n.x1 < 80 for n in numbers)
        if not (beside_number or (not b.mono and heading_line(text))):
            out.append(b)
            continue
        title = dataclasses.replace(b, text=text, x0=fx0, x1=fx1, y1=fy1, n_lines=1, extra={})
        if "lead" in b.extra:  # the cut line is the paragraph's first
            title.extra["lead"] = b.extra["lead"]
        rest_text = b.text[len(text) :].strip()
        rest = dataclasses.replace(b, text=rest_text, y0=fy1, n_lines=b.n_lines - 1, extra={})
        if rest.n_lines == 1:  # its only line: the first line of what is left
            rest.extra["first_line"] = (rest_text, (b.x0, fy1, b.x1, b.y1))
        out += [title, rest]
    return out


def _join_same_line(blocks: list[Block]) -> list[Block]:
    """Join one-line blocks that sit on the same line in the same style ("1.1.1" + tab +
    "Title" often come out as two blocks)."""
    joined: list[Block] = []
    for b in sorted(blocks, key=lambda b: (round(b.y0), b.x0)):
        prev = joined[-1] if joined else None
        if (
            prev is not None
            and prev.n_lines == 1
            and b.n_lines == 1
            and abs(prev.y0 - b.y0) < 1.5
            and abs(prev.y1 - b.y1) < 1.5
            and 0 <= b.x0 - prev.x1 < 6 * b.font_size
            and (
                (prev.font_size, prev.bold) == (b.font_size, b.bold)
                or (_SECTION_NUMBER_ONLY.match(prev.text) and b.x0 - prev.x1 < 3 * b.font_size)
            )
        ):
            if (prev.font_size, prev.bold) != (b.font_size, b.bold):
                # "2" beside "RELATED WORK" in small capitals, whose letters PyMuPDF sizes
                # by the smaller capitals: the title in its own face, at the number's size.
                prev.font_size = max(prev.font_size, b.font_size)
                prev.bold, prev.italic, prev.font, prev.mono = b.bold, b.italic, b.font, b.mono
            prev.text = f"{prev.text} {b.text}"
            prev.x1 = b.x1
        else:
            joined.append(b)
    return joined


def _table_blocks(page: pymupdf.Page, page_no: int) -> list[Block]:
    """Ruled tables as blocks; see ``find_ruled_tables``."""
    return [
        Block(
            page=page_no,
            order=0,
            kind=TABLE,
            text="\n".join(" | ".join(r) for r in rows),
            x0=x0,
            y0=y0,
            x1=x1,
            y1=y1,
            font_size=0.0,
            bold=False,
            italic=False,
            font="",
            n_lines=len(rows),
            page_width=page.rect.width,
            page_height=page.rect.height,
            table_rows=n_rows,
            table_cols=n_cols,
            extra={"header": rows[0]},
        )
        for (x0, y0, x1, y1), rows, n_rows, n_cols in find_ruled_tables(page)
    ]


def _image_blocks(page: pymupdf.Page, page_no: int) -> list[Block]:
    blocks = []
    seen: set[tuple] = set()
    if not page.get_images():  # cheap: the page's resources; get_image_info lays out text
        return []
    for info in page.get_image_info():
        x0, y0, x1, y1 = info["bbox"]
        key = (round(x0), round(y0), round(x1), round(y1))
        if x1 - x0 < _MIN_IMAGE_SIDE or y1 - y0 < _MIN_IMAGE_SIDE or key in seen:
            continue
        seen.add(key)
        blocks.append(
            Block(
                page=page_no,
                order=0,
                kind=IMAGE,
                text="",
                x0=max(x0, 0.0),
                y0=max(y0, 0.0),
                x1=min(x1, page.rect.width),
                y1=min(y1, page.rect.height),
                font_size=0.0,
                bold=False,
                italic=False,
                font="",
                n_lines=0,
                page_width=page.rect.width,
                page_height=page.rect.height,
            )
        )
    return blocks


def parse_page(page: pymupdf.Page, page_no: int) -> list[Block]:
    """All blocks of one page in reading order (top to bottom, left to right by column)."""
    tables = _table_blocks(page, page_no)
    images = _image_blocks(page, page_no)
    # Text inside tables belongs to the table; text inside a figure (axis labels, large
    # lettering) is part of the figure and must never become a section title.
    # A scan's OCR text sits under a page-sized image: only figure-sized images exclude text.
    page_area = page.rect.width * page.rect.height
    figures = [b for b in images if (b.x1 - b.x0) * (b.y1 - b.y0) < 0.5 * page_area]
    exclude = [(b.x0, b.y0, b.x1, b.y1) for b in tables + figures]
    text_blocks = _split_numbered_first_lines(_text_blocks(page, page_no, exclude))
    blocks = _join_same_line(text_blocks) + tables + images
    order_blocks(blocks, page.rect.width)
    return blocks


def blocks_from_lines(
    raw_blocks: list[list[dict]], page_no: int, width: float, height: float
) -> list[Block]:
    """Text lines from elsewhere than a text layer (OCR), grouped in layout blocks and shaped
    as PyMuPDF's "dict" lines, → a page's typed blocks in reading order, by the rules of
    ``parse_page``."""
    text_blocks = _split_numbered_first_lines(
        _blocks_of_lines(raw_blocks, page_no, width, height, [])
    )
    blocks = _join_same_line(text_blocks)
    order_blocks(blocks, width)
    return blocks


def order_blocks(blocks: list[Block], page_width: float) -> None:
    """Sort one page's blocks into reading order (top to bottom; left column first on a
    two-column page), number them and measure the space above each (in place)."""
    mid = page_width / 2
    two_columns = sum(b.x1 < mid for b in blocks) >= 3 and sum(b.x0 > mid for b in blocks) >= 3

    def reading_key(b: Block) -> tuple:
        column = (1 if b.x0 >= mid - 5 else 0) if two_columns and b.x1 - b.x0 < mid else -1
        return (column if column >= 0 else 0, round(b.y0, 0), b.x0)

    blocks.sort(key=reading_key)
    for i, block in enumerate(blocks):
        block.order = i
    measure_space_above(blocks)


def measure_space_above(blocks: list[Block]) -> None:
    """Vertical white space above each text block of one page: headings sit apart, emphasis
    does not. The gap to the lowest-ending block that ends above (y1 <= y0 + 1) and overlaps
    it horizontally; the block's own y0 where there is none. Line boxes of tightly set text
    overlap by a point or two, so a block ending up to a quarter of a line below the top
    still counts as the one above (a negative gap)."""
    texts = [b for b in blocks if b.kind != IMAGE]
    by_bottom = sorted(texts, key=lambda o: o.y1)
    bottoms = [o.y1 for o in by_bottom]
    for b in texts:
        gap = b.y0
        reach = b.y0 + max(1.0, 0.25 * b.font_size)
        for i in range(bisect.bisect_right(bottoms, reach) - 1, -1, -1):
            o = by_bottom[i]
            if o is not b and min(o.x1, b.x1) - max(o.x0, b.x0) > 0:
                gap = b.y0 - o.y1
                break
        b.space_above = round(gap, 2)


def parse_pages(doc: pymupdf.Document, start: int, stop: int) -> PageRange:
    """Parse pages [start, stop) (0-based) of an open document; a broken page is recorded."""
    blocks: list[Block] = []
    errors: list[str] = []
    for index in range(start, min(stop, doc.page_count)):
        try:
            page_blocks = parse_page(doc[index], index + 1)
        except Exception as exc:  # one unreadable page must not lose the document
            errors.append(f"page {index + 1}: {type(exc).__name__}: {exc}")
            continue
        blocks.extend(page_blocks)
    return PageRange(blocks=blocks, errors=errors)


def document_metadata(doc: pymupdf.Document) -> dict:
    """Outline (bookmarks), page labels and title of an open document. A malformed outline or
    page-label table is left out, not fatal, and ``problems`` says which and why (the probe
    makes it the document's warning: a failure row of stage ``open``)."""
    problems: list[str] = []
    try:
        outline = [(int(lvl), str(title), int(page)) for lvl, title, page in doc.get_toc()]
    except Exception as exc:
        outline = []
        problems.append(f"outline unreadable, indexed without it: {type(exc).__name__}: {exc}")
    labels: list[str] = []
    try:
        if doc.get_page_labels():
            labels = _page_labels(doc)
    except Exception as exc:
        labels = []
        problems.append(f"page labels unreadable, left out: {type(exc).__name__}: {exc}")
    return {
        "title": (doc.metadata or {}).get("title") or "",
        "outline": outline,
        "page_labels": labels,
        "n_pages": doc.page_count,
        "problems": [p[:300] for p in problems],
    }


def _page_labels(doc: pymupdf.Document) -> list[str]:
    """Every page's label. ``Page.get_label`` reads the document's label rules again for each
    page (quadratic in pages: ~1 s for a 600-page book); here they are read once and applied
    with PyMuPDF's own ``get_label_pno``. Falls back to ``get_label`` if that API moves."""
    try:
        from pymupdf.utils import get_label_pno

        rules = sorted(doc._get_page_labels())
    except (ImportError, AttributeError):
        return [doc[i].get_label() for i in range(doc.page_count)]
    if not rules:
        return [""] * doc.page_count
    return [get_label_pno(i, rules) for i in range(doc.page_count)]
