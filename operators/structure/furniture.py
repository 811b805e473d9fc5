"""Page furniture and front matter: the body text style, running headers and footers (folios,
running titles), contents pages and their entries, the sparse pages before the contents.
What ``operators.structure.blocks`` must set aside before it types the rest of the blocks.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from bookindex.operators.kinds import FOOTER, HEADER, TEXT, TITLE
from bookindex.operators.parsing.parse import Block, font_family, measure_space_above

_MARGIN = 0.085  # share of the page height that running headers and footers live in
# Running heads set lower than the margin (a deep top margin): the topmost line of a page
# within this share of its height, repeating as the topmost line on this many pages.
_DEEP_MARGIN = 0.15
_DEEP_REPEATS = 4
# A running head's band: the height and type of the running heads marked so far. A page's
# topmost line set there in the same type is the running head too, whatever its wording
# (a section's title on the odd pages of its two or three pages does not repeat enough).
_BAND_REPEATS = 4
_BAND_TOLERANCE = 1.5  # points between the tops of two lines in one band
# A caption's start ("Table A5.4 …", "Figure 3"): tables set one to a page repeat the wording.
_CAPTION_START = re.compile(
    r"^(fig(ure)?|table|tab|chart|exhibit|plate|map|box|graph|diagram|scheme)\.?\s*[a-z]?[0-9ivxlc]",
    re.IGNORECASE,
)
_MAX_CONTENTS_BLOCKS = 400  # more text blocks than a contents page has
_FRONT_BLOCKS = 10  # a title, series or dedication page holds few blocks
PAGE_NUMBER = re.compile(r"^(page\s*)?([0-9]{1,4}|[ivxlc]{1,7})(\s*(of|/)\s*[0-9]+)?$", re.I)
_ROMAN_FOLIO = re.compile(r"^[ivxl]{1,6}\s{2,}\S.{0,80}$|^.{1,80}\S\s{2,}[ivxl]{1,6}$")
_ENDS_WITH_PAGE = re.compile(r"[A-Za-z][^0-9]{0,80}\s([0-9]{1,4}|[ivxlc]{1,6})$")
_PAGE_TAIL = frozenset("0123456789ivxlc")
STARTS_WITH_PAGE = re.compile(r"^([0-9]{1,4}|[ivxlc]{1,6})\s+[A-Za-z]")


@dataclass(frozen=True)
class BodyStyle:
    """The document's body text style: the size carrying the most characters."""

    font_size: float
    bold: bool
    family: str
    paragraph_gap: float = 0.0  # typical white space above a body paragraph, points


def body_style(blocks: list[Block]) -> BodyStyle:
    sizes: Counter = Counter()
    families: Counter = Counter()
    bold_chars = 0
    total = 0
    for b in blocks:
        if b.kind == TEXT:
            sizes[round(b.font_size * 2) / 2] += len(b.text)
            families[font_family(b.font)] += len(b.text)
            total += len(b.text)
            bold_chars += len(b.text) if b.bold else 0
    if not sizes:
        return BodyStyle(font_size=10.0, bold=False, family="")
    font_size = sizes.most_common(1)[0][0]

    def body_text(b: Block) -> bool:
        return b.kind == TEXT and round(b.font_size * 2) / 2 == font_size

    # The gap between two body paragraphs in a row: not a note's, a caption's or the first
    # paragraph's under a running header, which are wider and would hide a heading's space.
    between = sorted(
        b.space_above
        for a, b in zip(blocks, blocks[1:], strict=False)
        if a.page == b.page and body_text(a) and body_text(b)
    )
    at_body = sorted(b.space_above for b in blocks if body_text(b))
    return BodyStyle(
        font_size=font_size,
        bold=bold_chars > total / 2,
        family=families.most_common(1)[0][0],
        paragraph_gap=min(g[len(g) // 2] for g in (between, at_body) if g),
    )


_EDGE_NUMBER = re.compile(r"^([0-9]+|[ivxlc]+)\b|\b([0-9]+|[ivxlc]+)$")  # a folio at either end


def _shape(text: str) -> str:
    """Text with page numbers dropped and other digits folded, so that 'Page 12' and
    'Page 13', 'xiv Preface' and 'Preface xv' (left and right pages) look alike."""
    text = _EDGE_NUMBER.sub("", text.lower().strip())
    return re.sub(r"\d+", "#", text).strip()


def mark_headers_footers(blocks: list[Block], n_pages: int) -> None:
    """Blocks in the top or bottom margin that repeat across pages, or are page numbers."""
    in_margin: list[tuple[Block, str]] = []
    for b in blocks:
        if b.kind != TEXT or b.n_lines > 3:
            continue
        if b.y1 <= b.page_height * _MARGIN:
            in_margin.append((b, HEADER))
        elif b.y0 >= b.page_height * (1 - _MARGIN):
            in_margin.append((b, FOOTER))
    pages_by_shape: dict[str, set[int]] = defaultdict(set)
    for b, _ in in_margin:
        pages_by_shape[_shape(b.text)].add(b.page)
    repeat_floor = 2 if n_pages < 10 else 3
    marked: dict[int, list[Block]] = defaultdict(list)
    for b, kind in in_margin:
        if (
            PAGE_NUMBER.match(b.text.strip())
            or _ROMAN_FOLIO.match(b.text.strip())
            or len(pages_by_shape[_shape(b.text)]) >= repeat_floor
        ):
            b.kind = kind
            marked[b.page].append(b)
    _mark_deep_running_heads(blocks, marked)
    _mark_running_head_bands(blocks, marked)
    # A line beside running furniture on the same baseline ("4 | Chapter 2. Installation",
    # the section name a footer carries on one or two pages only) is furniture too.
    for b, kind in in_margin:
        if b.kind == TEXT and any(
            abs(m.y1 - b.y1) < 2 and (m.x1 <= b.x0 or b.x1 <= m.x0) for m in marked[b.page]
        ):
            b.kind = kind


def _mark_deep_running_heads(blocks: list[Block], marked: dict[int, list[Block]]) -> None:
    """Running heads that a deep top margin sets below ``_MARGIN``: a page's topmost short
    text block within ``_DEEP_MARGIN`` of the page's top, whose wording (its page number
    dropped, other digits kept: the first lines of one paragraph running over many pages do
    not look alike; three letters or more, not a caption's) recurs as the topmost block at
    the same height and size on ``_DEEP_REPEATS`` pages or more, most of them two pages or
    less apart: a running title, not a chapter label or a "Notes" heading that opens a page
    now and then."""
    groups: dict[tuple[str, float], list[Block]] = defaultdict(list)
    for page_blocks in blocks_by_page(blocks, (TEXT,)).values():
        written = [b for b in page_blocks if b.text.strip()]
        if not written:
            continue
        top = min(written, key=lambda b: b.y0)
        shape = _EDGE_NUMBER.sub("", top.text.lower().strip()).strip()  # other digits kept
        wording = sum(c.isalpha() for c in shape) >= 3 and not _CAPTION_START.match(shape)
        if top.n_lines <= 2 and top.y1 <= top.page_height * _DEEP_MARGIN and wording:
            groups[(shape, round(top.font_size))].append(top)
    for members in groups.values():
        heights = sorted(b.y0 for b in members)
        middle = heights[len(heights) // 2]
        level = sorted((b for b in members if abs(b.y0 - middle) <= 3), key=lambda b: b.page)
        gaps = sorted(b.page - a.page for a, b in zip(level, level[1:], strict=False))
        if len(level) >= _DEEP_REPEATS and gaps[len(gaps) // 2] <= 2:
            for b in level:
                b.kind = HEADER
                marked[b.page].append(b)


def _type_of(b: Block) -> tuple:
    return (round(b.font_size * 4) / 4, b.bold, b.italic, font_family(b.font))


def _mark_running_head_bands(blocks: list[Block], marked: dict[int, list[Block]]) -> None:
    """A page's topmost line (two lines at most, within ``_DEEP_MARGIN`` of the top) set at
    the height and in the type (size, weight, slant, family) of running heads marked on
    ``_BAND_REPEATS`` pages or more is a running head too, whatever its wording: the section
    title that the odd pages of a two-page section carry repeats too seldom to be found by its
    wording. It must sit above where the text under those heads starts, the page's own text
    must start there, and no running head may be above it: a heading that opens a page
    without a running head starts the text area itself, and one under a running head is in
    the text."""
    text_by_page = blocks_by_page(blocks, (TEXT,))
    bands: dict[tuple, list[float]] = defaultdict(list)
    starts: dict[tuple, list[float]] = defaultdict(list)
    for page, page_marked in marked.items():
        for b in page_marked:
            if b.kind == HEADER and sum(c.isalpha() for c in b.text) >= 3:
                below = [t.y0 for t in text_by_page.get(page, ()) if t.y0 > b.y1 and t.text.strip()]
                bands[_type_of(b)].append(b.y0)
                if below:
                    starts[_type_of(b)].append(min(below))
    written_by_page = {
        page: sorted((b for b in page_blocks if b.text.strip()), key=lambda b: b.y0)
        for page, page_blocks in text_by_page.items()
    }
    for style, tops in bands.items():
        if len(tops) < _BAND_REPEATS or not starts[style]:
            continue
        text_top = sorted(starts[style])[len(starts[style]) // 2]
        for page, written in written_by_page.items():
            if not written or _type_of(written[0]) != style:
                continue
            top = written[0]
            after = [b.y0 for b in written[1:] if b.y0 > top.y1]
            headed = any(h.y0 < top.y0 - _BAND_TOLERANCE for h in marked.get(page, ()))
            if (
                not headed
                and top.n_lines <= 2
                and top.y1 <= top.page_height * _DEEP_MARGIN
                and top.y1 < text_top - _BAND_TOLERANCE
                and (not after or min(after) >= text_top - 2 * _BAND_TOLERANCE)
                and sum(abs(y - top.y0) <= _BAND_TOLERANCE for y in tops) >= _BAND_REPEATS
            ):
                top.kind = HEADER
                marked[page].append(top)


def blocks_by_page(blocks: list[Block], kinds: tuple[str, ...]) -> dict[int, list[Block]]:
    """The blocks of the given kinds, page by page, in document order."""
    by_page: dict[int, list[Block]] = defaultdict(list)
    for b in blocks:
        if b.kind in kinds:
            by_page[b.page].append(b)
    return by_page


def mark_contents_entries(blocks: list[Block], toc_pages: set[int], within: int = 3) -> None:
    """On the book's contents (the first run of contents pages in its first 30 pages, and
    runs that start within ``within`` pages of it: a list of figures), the title candidates
    set smaller than the contents' own heading are its entries ("Preface", "Part I:"), not
    sections; they are flagged like front matter. The heading ("Contents", "List of Maps")
    and any as large stay."""
    pages = sorted(p for p in toc_pages if p <= 30)
    if not pages:
        return
    runs: list[list[int]] = [[pages[0]]]
    for page in pages[1:]:
        if page == runs[-1][-1] + 1:
            runs[-1].append(page)
        elif page - runs[-1][-1] <= within:
            runs.append([page])
        else:
            break
    titles = [b for b in blocks if b.kind == TITLE]
    for run in runs:
        on_run = [b for b in titles if run[0] <= b.page <= run[-1]]
        heads = [b for b in on_run if b.page == run[0]]
        if not heads:
            continue
        size = heads[0].font_size
        for b in on_run:
            if b.font_size < size - 0.25:
                b.extra["front_matter"] = True  # see sections.LayoutSectionFilter


def front_matter_pages(blocks: list[Block], body: BodyStyle, toc_pages: set[int]) -> set[int]:
    """Sparse pages before the table of contents that carry no running text (no body-size
    block of 3 or more lines, at most ``_FRONT_BLOCKS`` blocks): half title, series page,
    title page, dedication. Their large lines are the book's title, authors and publisher,
    not sections. (A manual's dense instruction pages before its contents are not.)"""
    if not toc_pages or min(toc_pages) > 20:
        return set()
    first_toc = min(toc_pages)
    prose = {
        b.page
        for b in blocks
        if b.kind == TEXT and b.n_lines >= 3 and abs(b.font_size - body.font_size) < 0.6
    }
    count = Counter(b.page for b in blocks if b.kind not in (HEADER, FOOTER))
    return {
        page
        for page, n in count.items()
        if page < first_toc and page not in prose and n <= _FRONT_BLOCKS
    }


def space_below_furniture(blocks: list[Block]) -> None:
    """White space above each block measured again without the running headers and footers:
    the first line under a running header starts the text area, and the header's distance
    is no evidence that it sits in the flow of the text (an italic "B. The Patent" at the top
    of a page was taken for emphasis). Pages without a header or footer keep their values."""
    by_page: dict[int, list[Block]] = defaultdict(list)
    furnished: set[int] = set()
    for b in blocks:
        if b.kind in (HEADER, FOOTER):
            furnished.add(b.page)
        else:
            by_page[b.page].append(b)
    for page in furnished:
        measure_space_above(by_page[page])


def ends_with_page(text: str) -> bool:
    """A line ending in a page number ("Introduction .... 12"), in the last 100 characters.
    The last character is checked first: the pattern's backtracking is the costly part."""
    tail = text[-100:]
    return tail.rstrip("\n")[-1:] in _PAGE_TAIL and _ENDS_WITH_PAGE.search(tail) is not None


def recurring_labels(blocks: list[Block], times: int = 8) -> set[str]:
    """Short texts printed again and again ("KEY INDICATORS" in every country profile):
    box labels, not section titles."""
    counts = Counter(b.text for b in blocks if b.kind == TEXT and len(b.text) < 60)
    return {text for text, n in counts.items() if n >= times}


def contents_pages(blocks: list[Block]) -> set[int]:
    """Pages of a table of contents (or an index): many lines end with a page number, or,
    in the front matter, start with one, or have one set apart at the right, level with the
    entry's last line."""
    last_page = max((b.page for b in blocks), default=0)
    per_page: Counter = Counter(
        b.page
        for b in blocks
        if b.kind == TEXT
        and (
            ends_with_page(b.text)
            or (b.page <= max(20, last_page // 10) and STARTS_WITH_PAGE.match(b.text))
        )
    )
    # Page numbers set apart at the right, on the line of the entry they belong to.
    for page, page_blocks in blocks_by_page(blocks, (TEXT,)).items():
        if len(page_blocks) > _MAX_CONTENTS_BLOCKS:
            continue  # a page of table cells, not a contents page (and quadratic below)
        numbers = [b for b in page_blocks if b.n_lines == 1 and PAGE_NUMBER.match(b.text.strip())]
        beside = sorted(
            (n for n in numbers if _number_beside_entry(n, page_blocks)), key=lambda n: n.y0
        )
        arabic = [int(n.text.strip()) for n in beside if n.text.strip().isdigit()]
        if arabic == sorted(arabic):  # a contents' page numbers only grow down the page
            per_page[page] += len(beside)
    found = {page for page, n in per_page.items() if n >= 4}
    # The book's contents (in its first 30 pages) may end on a page of a few entries.
    return found | {
        page + 1
        for page in found
        if page <= 30 and page + 1 not in found and per_page[page + 1] >= 2
    }


def _number_beside_entry(number: Block, page_blocks: list[Block]) -> bool:
    """A page number at the right end of its line, whose neighbour on the left is words (an
    entry's last line), not another figure (a table's row)."""
    line = [e for e in page_blocks if e is not number and -2 <= number.y1 - e.y1 <= 1]
    if any(e.x0 > number.x1 for e in line):
        return False
    left = [e for e in line if e.x1 < number.x0]
    if not left:
        return False
    nearest = max(left, key=lambda e: e.x1)
    return sum(c.isalpha() for c in nearest.text) >= 3
