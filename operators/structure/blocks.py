"""Document-level block typing: running headers and footers, captions, list items, title
candidates. Needs every block of the document, so it runs after the page ranges are joined.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from bookindex.operators.kinds import CAPTION, LIST, TEXT, TITLE
from bookindex.operators.parsing.parse import Block, font_family
from bookindex.operators.structure.furniture import (
    PAGE_NUMBER,
    STARTS_WITH_PAGE,
    BodyStyle,
    blocks_by_page,
    body_style,
    contents_pages,
    ends_with_page,
    front_matter_pages,
    mark_contents_entries,
    mark_headers_footers,
    recurring_labels,
    space_below_furniture,
)

# Key of ``Block.extra`` for a title candidate that counts in its style's statistics but is
# never a heading, whatever the section filter decides; the value says why.
NEVER_HEADING = "never_heading"

_CAPTION = re.compile(
    r"^(fig(ure)?|table|tab|chart|exhibit|plate|map|box|graph|diagram|scheme)\.?\s*"
    r"([0-9]+|[ivxlc]+|[a-z])([.:\-–—)]|\s|$)",
    re.IGNORECASE,
)
_CAPTION_LABEL = re.compile(
    r"^(fig(ure)?|table|tab|chart|exhibit|plate|map|box)\.?\s*([0-9]+(\.[0-9]+)*|[ivxlc]+|[a-z])"
    r"[.:]?$",
    re.IGNORECASE,
)  # a caption's label alone: "Table 2.1", "Figure 3:"
_ENUM = r"\(?[a-z0-9]{1,2}\)"  # a list item's letter or number label: "a)", "(1)"
_BULLET = re.compile(rf"^([•◦▪‣●○■□►✓➢–—\-*·]|{_ENUM})\s+\S")
_ENUM_LABEL = re.compile(rf"^{_ENUM}\s+\S")  # "a) …", "(1) …"
_SECTION_LABEL = re.compile(r"^([0-9]{1,2}(\.[0-9]{1,2})*\.?|[A-Z]\.?|[IVX]{1,4}\.?)$")
# A front-matter running head with its folio, printed once: "xii  Acknowledgments".
_SECTION_NUMBER = re.compile(r"^\d{1,2}(\.\d{1,2})+\.?\s+[A-Z]")  # "2.3 Title"
_NUMBERED_HEAD = re.compile(r"^\d{1,2}(\.\d{1,2})*\.\s*[A-Z][a-z]")  # "3.Title", "3. Title"
_HANGING_NUMBER = re.compile(r"^\d{1,2}(\.\d{1,2})*\.?\s+\S")  # "1.4  Title", "3. Title"
_ADDRESS = re.compile(r"@|https?://|www\.|arxiv:\d", re.IGNORECASE)
_LETTERS = re.compile(r"[A-Za-z\u00c0-\u024f]")
_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]{2}")
_RELATION = frozenset("=<>≤≥≈±×÷")
_CONNECTIVES = frozenset(
    [
        "and",
        "or",
        "of",
        "in",
        "the",
        "for",
        "to",
        "with",
        "on",
        "at",
        "by",
        "from",
        "a",
        "an",
        "as",
        "into",
        "over",
        "under",
        "between",
        "against",
        "versus",
        "vs",
        "&",
        "–",
        "—",
        "-",
    ]
)
# Apparatus headings that books often set at note size, just above the notes they head.
_APPARATUS = re.compile(
    r"^(notes|endnotes|footnotes|references|bibliography|further reading|sources)$", re.I
)


def is_title_shaped(text: str) -> bool:
    """Short, has letters, does not read like a sentence fragment or a page number."""
    words = text.split()
    if not (1 <= len(words) <= 30) or len(text) > 220 or not _LETTERS.search(text):
        return False
    if _ADDRESS.search(text):  # e-mail addresses, links, arXiv stamps
        return False
    if not _WORD.search(text) and any(c in _RELATION for c in text):
        return False  # a formula's line ("C 591,2 ="), not a title ("v2.18.0 (27/10/2021)")
    if text.rstrip().endswith((",", ";", ":")) and len(words) > 3:
        return False
    return not PAGE_NUMBER.match(text.strip())


def _unfinished(first: Block, second: Block) -> bool:
    """Two single lines that read as one title broken in two: the first ends on a connective
    ("… Laws and" / "Policies …") or both are set in capitals."""
    if first.n_lines != 1 or second.n_lines != 1 or len(first.text) + len(second.text) > 160:
        return False
    last_word = first.text.rstrip().rsplit(None, 1)[-1].lower()
    both_caps = first.text.isupper() and second.text.isupper()
    return last_word in _CONNECTIVES or first.text.rstrip().endswith(":") or both_caps


def _hanging(first: Block, second: Block) -> bool:
    """A numbered heading's second line, indented to where the title starts after the
    number ("1.4  Challenges and opportunities facing" / "    G-SIBs – differences …")."""
    return (
        first.n_lines == 1
        and second.n_lines == 1
        and _HANGING_NUMBER.match(first.text) is not None
        and not second.text[:1].isdigit()
        and sum(c.isalpha() for c in second.text) >= 4  # not a table's "X" or "-50 BPS"
        and 5 <= second.x0 - first.x0 <= 60
    )


def _next_line_below(first: Block, second: Block) -> bool:
    """``second`` starts right under ``first``: less than 0.6 em of white space between,
    or line boxes that overlap by up to half a line when one sits above the other (their
    x ranges overlap); side by side (cells of one table row), they are not one title."""
    gap = second.y0 - first.y1
    if gap >= 0:
        return gap < 0.6 * second.font_size
    stacked = min(first.x1, second.x1) - max(first.x0, second.x0) > 0
    return stacked and gap >= -0.5 * second.font_size


def _centred_pair(first: Block, second: Block) -> bool:
    """Two lines of one centred title: single lines of different widths on one centre
    ("Chapter 5: Negotiating the Balance of Religious Freedom" / "and Equal Rights"). The
    lines of justified text share a centre too, but also their width."""
    return (
        first.n_lines == 1
        and second.n_lines == 1
        and abs((first.x0 + first.x1) - (second.x0 + second.x1)) < 4
        and abs((first.x1 - first.x0) - (second.x1 - second.x0)) > 2 * second.font_size
    )


def _absorb(upper: Block, lower: Block) -> None:
    """``lower``'s lines become the last lines of ``upper``."""
    upper.text = f"{upper.text} {lower.text}"
    upper.x0, upper.x1 = min(upper.x0, lower.x0), max(upper.x1, lower.x1)
    upper.y1 = lower.y1
    upper.n_lines += lower.n_lines


# A heading's number set apart on its left, as a block of its own on the same line ("a)" beside
# "Coming from a practical observation: …"): a letter, roman or arabic label, or a dotted number.
HANGING_LABEL = re.compile(
    r"^(\(?[a-zA-Z]{1,3}\)|[A-Z]\.|[IVXLC]{1,6}\.?|\d{1,2}(\.\d{1,2})*\.?|\d{1,2}\)|§\s*\d+)$"
)
HANGING_LABEL_GAP = 60.0  # points between the label's right edge and the title's left edge
_LABELLED_MAX_LINES = 3  # a heading's lines at most: a numbered paragraph keeps its label apart


def join_hanging_labels(blocks: list[Block]) -> list[Block]:
    """A bare number that PyMuPDF set as a block of its own on a heading's first line, just
    left of it ("1.2" | "Contribution of International Shipping …", "3." | "Uncertainty about
    …": typesetters hang a heading's number in the margin), joined to the heading as the
    start of its text, so that the heading reads as numbered. Both plain text on one page,
    the label one line, in the heading's type size (within a point), its top within
    0.4 em of the heading's, its right edge at most ``HANGING_LABEL_GAP`` left of the
    heading; the heading at most ``_LABELLED_MAX_LINES`` lines."""
    by_page: dict[int, list[int]] = defaultdict(list)
    for i, b in enumerate(blocks):
        if b.kind == TEXT:
            by_page[b.page].append(i)
    absorbed: set[int] = set()
    for rows in by_page.values():
        for i in rows:
            label = blocks[i]
            text = label.text.strip()
            if label.n_lines != 1 or len(text) > 8 or not HANGING_LABEL.match(text):
                continue
            near = max(2.0, 0.4 * label.font_size)
            beside = [
                j
                for j in rows
                if j != i
                and j not in absorbed
                and blocks[j].n_lines <= _LABELLED_MAX_LINES
                and abs(blocks[j].y0 - label.y0) < near
                and 0 <= blocks[j].x0 - label.x1 < HANGING_LABEL_GAP
                and abs(blocks[j].font_size - label.font_size) <= 1.0
                and not HANGING_LABEL.match(blocks[j].text.strip())
            ]
            if len(beside) != 1:
                continue
            heading = blocks[beside[0]]
            heading.text = f"{text} {heading.text}"
            heading.x0 = min(heading.x0, label.x0)
            heading.y0 = min(heading.y0, label.y0)
            absorbed.add(i)
    return [b for i, b in enumerate(blocks) if i not in absorbed]


def join_split_headings(blocks: list[Block], body: BodyStyle) -> list[Block]:
    """Lines of one heading that PyMuPDF put in separate blocks, joined: display-size lines,
    and body-size single lines of one style where the first is visibly unfinished."""
    joined: list[Block] = []
    for b in blocks:
        prev = joined[-1] if joined else None
        centred = prev is not None and _centred_pair(prev, b)
        if (
            prev is not None
            and prev.kind == TEXT == b.kind
            and prev.page == b.page
            and (prev.font_size, prev.bold, prev.italic) == (b.font_size, b.bold, b.italic)
            and font_family(prev.font) == font_family(b.font)
            and (
                b.font_size >= body.font_size + 2
                or _unfinished(prev, b)
                or _hanging(prev, b)
                or centred
            )
            and prev.n_lines + b.n_lines <= 4
            and _next_line_below(prev, b)
            and not prev.text.rstrip().endswith((".", "!", "?"))
        ):
            if centred:
                prev.extra["centred"] = True  # its lines share a centre: see _centred
            _absorb(prev, b)
        else:
            joined.append(b)
    return joined


def classify_blocks(blocks: list[Block], n_pages: int) -> BodyStyle:
    """Refine "text" blocks in place: header/footer, caption, list, title (candidate)."""
    mark_headers_footers(blocks, n_pages)
    body = body_style(blocks)
    blocks[:] = join_split_headings(join_hanging_labels(blocks), body)
    space_below_furniture(blocks)
    page_columns = body_columns(blocks, body)
    columns = _column_edges(page_columns)
    toc_pages = contents_pages(blocks)
    labels = recurring_labels(blocks)
    cells = _table_cells(blocks, page_columns)
    front = front_matter_pages(blocks, body, toc_pages)
    small_print = _small_print_pages(blocks, body)
    small_columns = _small_print_columns(blocks, small_print)
    for b in blocks:
        if b.kind != TEXT:
            continue
        text = b.text.strip()
        if _CAPTION.match(text) and len(text) < 500:
            b.kind = CAPTION
        elif (
            _BULLET.match(text)
            and not (b.bold or b.font_size > body.font_size + 0.5)
            and not _labelled_heading(b, text, body, columns, labels)
        ):
            b.kind = LIST
        elif b.page in small_print and _small_print_heading(b, small_print[b.page], small_columns):
            b.kind = TITLE
        elif (
            b.n_lines <= 4
            and is_title_shaped(text)
            and _stands_out(b, body, columns, labels)
            and not (b.page in toc_pages and (ends_with_page(text) or STARTS_WITH_PAGE.match(text)))
        ):
            b.kind = TITLE
            if id(b) in cells:  # a candidate still (its style's statistics count it), never
                b.extra[NEVER_HEADING] = "table cell"  # a heading: see resolve_headings
            if b.page in front:
                b.extra["front_matter"] = True  # see sections.LayoutSectionFilter
    mark_contents_entries(blocks, toc_pages)
    _mark_run_in_terms(blocks)
    blocks[:] = _join_caption_titles(blocks)
    return body


def _mark_run_in_terms(blocks: list[Block]) -> None:
    """A title candidate whose line goes on in another block ("MP3" + "(MPEG-1 Audio Layer
    3) is a digital audio encoding …" in a glossary, a bold lead-in before its sentence) is a
    run-in term: still a candidate (its style's statistics count it), never a heading (see
    sections.resolve_headings). A heading's line holds nothing else."""
    for page_blocks in blocks_by_page(blocks, (TEXT, TITLE)).values():
        texts = [t for t in page_blocks if t.kind == TEXT]
        for b in page_blocks:
            if b.kind != TITLE or b.n_lines != 1:
                continue
            if any(
                abs(t.y0 - b.y0) < 0.5 * b.font_size
                and t.x1 > b.x1 + 2 * b.font_size
                and t.x0 < b.x1 + 3 * b.font_size
                and _LETTERS.search(t.text)
                for t in texts
            ):
                b.extra[NEVER_HEADING] = "run-in term"


def _join_caption_titles(blocks: list[Block]) -> list[Block]:
    """A caption label on a line of its own ("Table 2.1") takes the title candidate set right
    under it ("INDEX OF DEMOCRACY"): the table's title, not a section."""
    joined: list[Block] = []
    for b in blocks:
        prev = joined[-1] if joined else None
        if (
            prev is not None
            and prev.kind == CAPTION
            and b.kind == TITLE
            and prev.page == b.page
            and _CAPTION_LABEL.match(prev.text.strip())
            and 0 <= b.y0 - prev.y1 < prev.font_size
        ):
            _absorb(prev, b)
        else:
            joined.append(b)
    return joined


def _small_print_pages(blocks: list[Block], body: BodyStyle) -> dict[int, BodyStyle]:
    """Pages of running text set smaller than the body (an appendix or the notes in small
    type): at least 800 characters in blocks of 3 or more lines at one smaller size, and no
    such block at body size. Returns each page's own body style (its text size)."""
    sizes: dict[int, Counter] = defaultdict(Counter)
    at_body: set[int] = set()
    for b in blocks:
        if b.kind == TEXT and b.n_lines >= 3 and not b.mono:
            if abs(b.font_size - body.font_size) < 0.6:
                at_body.add(b.page)
            sizes[b.page][round(b.font_size * 2) / 2] += len(b.text)
    small: dict[int, BodyStyle] = {}
    for page, by_size in sizes.items():
        size, chars = by_size.most_common(1)[0]
        if page not in at_body and size <= body.font_size - 0.5 and chars >= 800:
            small[page] = BodyStyle(size, body.bold, body.family, body.paragraph_gap)
    return small


def _small_print_columns(
    blocks: list[Block], small_print: dict[int, BodyStyle]
) -> dict[int, tuple[float, float]]:
    """The text's left and right edges on small-print pages, from their own text size."""
    if not small_print:
        return {}
    by_page = blocks_by_page(blocks, (TEXT,))
    edges: dict[int, tuple[float, float]] = {}
    for page, local in small_print.items():
        edges |= _text_columns(by_page[page], local)
    return edges


def _small_print_heading(b: Block, local: BodyStyle, columns: dict) -> bool:
    """On a small-print page, a heading is one line set apart from the text above it, in
    capitals or centred, at most a point smaller than that text: "1. THE URGENCY OF
    ADVANCING EQUALITY" over the notes of chapter 1."""
    text = b.text.strip()
    return (
        b.n_lines == 1
        and is_title_shaped(text)
        and not text.endswith((".", ",", ";", ":"))
        and b.font_size >= local.font_size - 1.1
        and b.space_above >= max(local.paragraph_gap, 0.5 * b.font_size) + 0.5 * b.font_size
        and ((text.isupper() and sum(c.isalpha() for c in text) >= 6) or _centred(b, columns))
    )


def _labelled_heading(
    b: Block, text: str, body: BodyStyle, columns: dict[int, tuple[float, float]], labels: set
) -> bool:
    """A line that starts like a list item, "a) Push Factors" or "(1) Patent Cooperation
    Treaty", but is set apart as a heading: one line, a letter or number label (not a bullet
    symbol), no closing punctuation, standing out from the text around it (list items sit
    in the flow, one under the other)."""
    return (
        b.n_lines == 1
        and _ENUM_LABEL.match(text) is not None
        and not text.rstrip().endswith((".", ",", ";", ":"))
        and is_title_shaped(text)
        and _stands_out(b, body, columns, labels)
    )


def _table_cells(
    blocks: list[Block], columns: dict[int, list[tuple[float, float]]], min_rows: int = 2
) -> set[int]:
    """Ids of the one-line text blocks that sit side by side with another one-line block on
    the same line, on pages with at least ``min_rows`` such lines: the cells of a table
    drawn without vertical rules ("Berlin Mandate | 28 Mar–7 Apr 1995"), which the ruled-table
    step does not see. A heading has no text beside it. On a page of two or more body columns
    (``columns``: ``body_columns``' result), a line that fills its column is prose, not a cell:
    a parser that keeps each line of two-column prose as a block of its own sets a left-column
    line level with the right column's heading ("2 RELATED WORK"), and that pair is no row."""
    by_page: dict[int, list[Block]] = defaultdict(list)
    for b in blocks:
        if b.kind == TEXT and b.n_lines == 1:
            by_page[b.page].append(b)
    cells: set[int] = set()
    for page, line_blocks in by_page.items():
        line_blocks.sort(key=lambda b: b.y0)
        page_columns = columns.get(page)
        paired: set[int] = set()
        rows = 0
        for i, b in enumerate(line_blocks):
            beside = False
            for o in line_blocks[i + 1 :]:
                if o.y0 > b.y0 + 2:
                    break
                left, right = (b, o) if b.x0 < o.x0 else (o, b)
                if abs(o.y1 - b.y1) > 2 or right.x0 < left.x1:
                    continue
                if _SECTION_LABEL.match(left.text.strip()) and right.x0 - left.x1 < 40:
                    continue  # a heading's number set apart from its title: "2   Methods"
                if _fills_a_column(b, page_columns) or _fills_a_column(o, page_columns):
                    continue  # a line of two-column prose beside the other column's line
                paired.update((id(b), id(o)))
                beside = True
            rows += beside
        if rows >= min_rows:
            cells |= paired
    return cells


def _fills_a_column(b: Block, columns: list[tuple[float, float]] | None) -> bool:
    """``b`` lies in one of two or more body columns (``columns``: a page's, left to right)
    and spans at least 80 % of that column's width: a line of prose."""
    if not columns or len(columns) < 2:
        return False
    return any(
        left - 2 <= b.x0 and b.x1 <= right + 2 and b.x1 - b.x0 >= 0.8 * (right - left)
        for left, right in columns
    )


def body_columns(blocks: list[Block], body: BodyStyle) -> dict[int, list[tuple[float, float]]]:
    """Per page, the body text's columns, left to right: the horizontal extents of the
    multi-line blocks at the body size, merged where they overlap (an indented quotation
    stays in its column; two columns of prose do not overlap)."""
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for b in blocks:
        if b.kind == TEXT and b.n_lines >= 2 and abs(b.font_size - body.font_size) < 0.6:
            spans[b.page].append((b.x0, b.x1))
    columns: dict[int, list[tuple[float, float]]] = {}
    for page, page_spans in spans.items():
        page_spans.sort()
        merged = [page_spans[0]]
        for x0, x1 in page_spans[1:]:
            left, right = merged[-1]
            if x0 < right:
                merged[-1] = (left, max(right, x1))
            else:
                merged.append((x0, x1))
        columns[page] = merged
    return columns


def _text_columns(blocks: list[Block], body: BodyStyle) -> dict[int, tuple[float, float]]:
    """Per page, the left and right edges of the body text (multi-line body blocks)."""
    return _column_edges(body_columns(blocks, body))


def _column_edges(
    columns: dict[int, list[tuple[float, float]]],
) -> dict[int, tuple[float, float]]:
    """Per page, the left edge of the first of ``body_columns``' columns and the right edge
    of the last."""
    return {page: (cols[0][0], cols[-1][1]) for page, cols in columns.items()}


def _centred(b: Block, columns: dict[int, tuple[float, float]]) -> bool:
    """Centred in the text column, and narrower than it. A title joined from lines of
    different widths on one centre (``_centred_pair``) shows it is centred however wide."""
    if b.page not in columns:
        return False
    left, right = columns[b.page]
    width = right - left
    joined = bool(b.extra.get("centred"))
    return (
        b.x1 - b.x0 < (0.95 if joined else 0.8) * width
        and abs((b.x0 + b.x1) / 2 - (left + right) / 2) < 0.04 * width
        and (joined or b.x0 > left + 0.08 * width)
    )


def _stands_out(
    b: Block, body: BodyStyle, columns: dict[int, tuple[float, float]], labels: set[str]
) -> bool:
    """Typographic evidence that a block is set apart from body text."""
    if b.font_size >= body.font_size + 0.9:
        return True
    if b.font_size < body.font_size - 1.6 or b.mono:
        return False  # notes; code and commands in a fixed-pitch face
    numbered = _SECTION_NUMBER.match(b.text) is not None
    numbered_head = numbered or _NUMBERED_HEAD.match(b.text) is not None
    # Set in the flow of the text, with no more space than a paragraph gets: emphasis, unless
    # it is a bold numbered line ("3. Study Design").
    in_flow = b.space_above < max(0.5 * b.font_size, body.paragraph_gap + 0.25 * b.font_size)
    # A one-line italic or bold label ending in a colon heads the list below it ("Europe:").
    label = (b.italic or b.bold) and b.n_lines == 1 and b.text.endswith(":") and len(b.text) < 60
    if in_flow and not (b.bold and numbered_head and b.n_lines <= 2) and not label:
        return False
    if b.bold and not body.bold:
        return True
    words = b.text.split()
    # Italic, capitals or another typeface at body size count only when short and not
    # sentence-like: such lines are often emphasis inside the text.
    centred = _centred(b, columns)
    # A centred title may run longer: running text is not centred.
    short = (len(words) <= 12 or (centred and len(words) <= 25)) and not b.text.rstrip().endswith(
        "."
    )
    other_face = font_family(b.font) != body.family
    if b.font_size < body.font_size - 0.4 and not (b.text.isupper() and b.text not in labels):
        # Smaller than the text: notes, labels, table cells (small capitals aside), except an
        # apparatus heading ("Notes") set apart in its own face above the notes it heads.
        return bool(_APPARATUS.match(b.text.strip())) and (b.bold or b.italic or other_face)
    # Capitals ending in a colon are a run-in label ("SETTINGS:"), not a heading.
    caps = b.text.isupper() and sum(c.isalpha() for c in b.text) >= 4 and not b.text.endswith(":")
    # A numbered line in the text face, one line, set apart above: "1. The Patent
    # Reexamination Board" (list items sit in the flow, or run on, or end in a stop).
    plain_numbered = (
        numbered_head
        and b.n_lines == 1
        and len(words) <= 10
        and not b.text.rstrip().endswith((":", ",", ";"))
        and b.page in columns
        and b.x1 < columns[b.page][1] - 0.1 * (columns[b.page][1] - columns[b.page][0])
    )  # and it stops well short of the right margin: not a wrapped item's first line
    cue = b.italic or caps or other_face or numbered or centred or plain_numbered
    return short and b.n_lines <= 2 and cue
