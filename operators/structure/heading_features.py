"""Features of title candidates for the learned section filter
(``operators.structure.learned_filter``).

One row per candidate (``sections.candidates_of``), computed from what the rules already
know: the body style, the candidate's style against it (size, weight, italics, capitals,
typeface and its rarity), its style cluster (how often, how many per page, how sentence-like,
how numbered, its prominence rank), numbering (depth and kind), white space above and below,
indentation and centring (against the body text's column, not the page: ``ColumnFinder``),
line length, position on the page and in the book, what follows, contents-page evidence, and
the rule deciders' own verdicts (the layout filter's level and reason, the outline filter's
when an outline is used). The rules stay as features. Two
columns see inside a line: the share of its first line in an opening bold or italic run (the
parse's ``extra["lead"]``: a case name in bold before its citation in roman), and a bare
label ("a)", "II.") set apart on the same line to its left.

Plain Python and numpy only: the product computes these at index time.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from bookindex.operators.kinds import HEADER, LIST, TEXT, TITLE
from bookindex.operators.parsing.parse import Block, font_family
from bookindex.operators.structure.blocks import (
    HANGING_LABEL,
    HANGING_LABEL_GAP,
    NEVER_HEADING,
    body_columns,
    is_title_shaped,
)
from bookindex.operators.structure.furniture import BodyStyle, contents_pages
from bookindex.operators.structure.sections import (
    _BARE_LABEL,
    _LABEL_ONLY,
    _ROMAN,
    _WORD_NUMBERED,
    CONTINUES,
    Candidate,
    Decision,
    SectionContext,
    candidate_of,
    normalise_title,
    numbering_depth,
    prominence,
)

NOT_A_CANDIDATE = "not a title candidate"
POOL_MAX_LINES = 3

_DOTTED = re.compile(r"^\d{1,2}(\.\d{1,2})+")
_LETTER_LABEL = re.compile(r"^(\(?[A-Za-z]\)|[A-Z]\.)\s+\S")
_TAIL_NUMBER = re.compile(r"\s+([0-9]{1,4}|[ivxlc]{1,6})\s*$", re.I)
_PART = re.compile(
    r"^part\s+([0-9]{1,2}|[ivxlc]{1,6}|[a-z]|one|two|three|four|five|six|seven|eight|nine|ten)\b",
    re.I,
)
# Front and back matter by name: the gold tables of contents set them at the top level.
_MATTER = re.compile(
    r"^(contents|table of contents|preface|foreword|acknowledge?ments?|introduction|abstract|"
    r"summary|executive summary|abbreviations|list of (abbreviations|figures|tables|"
    r"contributors|cases|authors)|notes on contributors|contributors|about the authors?|"
    r"bibliography|references|index|glossary|appendix|appendices|annex(es)?|epilogue|"
    r"prologue|conclusions?|afterword|dedication|notes)$"
)
_SHAPE_EDGE_NUMBER = re.compile(r"^([0-9]{1,4}|[ivxlc]{1,6})\b|\b([0-9]{1,4}|[ivxlc]{1,6})$")
REPEAT_Y_TOL = 0.02  # share of the page height within which a repeat counts as the same place
REPEAT_NEAR_PAGES = 3
# Reasons the rule deciders give, one indicator feature each (others count as "other").
RULE_REASONS = (
    "style",  # layout: kept in a style cluster
    "style used for prose or emphasis",
    "byline under a heading",
    "document title",
    "title page",
    "front matter before the contents",
    CONTINUES,
)
OUTLINE_REASONS = (
    "outline entry",
    "numbered below the outline",
    "below the outline",
    "front or back matter in an outline style",
    "outline-level style the outline does not list",
    "byline or subtitle under an outline heading",
)

FEATURE_NAMES: tuple[str, ...] = (
    "size_ratio",
    "size_diff",
    "bold",
    "italic",
    "caps",
    "body_bold",
    "other_face",
    "face_share",
    "n_lines",
    "n_words",
    "n_chars",
    "ends_stop",
    "ends_colon",
    "ends_comma",
    "starts_lower",
    "title_case",
    "upper_share",
    "digit_share",
    "numbering_depth",
    "dotted",
    "word_numbered",
    "roman",
    "letter_label",
    "label_only",
    "space_above_em",
    "space_above_gap",
    "space_below_em",
    "x0_rel",
    "centre_off",
    "width_rel",
    "y0_rel",
    "page_rel",
    "first_on_page",
    "order_on_page",
    "next_is_para",
    "next_size_ratio",
    "prev_is_title",
    "style_count",
    "style_pages_rel",
    "style_per_page",
    "style_words",
    "style_sentences",
    "style_numbered",
    "style_rank",
    "style_rank_rel",
    "style_size_rank",
    "in_contents",
    "on_contents_page",
    "front_matter",
    "never_heading",
    "same_text_count",
    "repeat_same_y",
    "repeat_near",
    "is_part",
    "doc_parts",
    "matter_name",
    "is_candidate",
    "kind_list",
    "rule_level",
    *(f"rule_{r}" for r in RULE_REASONS),
    "has_outline",
    "outline_level",
    *(f"outline_{r}" for r in OUTLINE_REASONS),
    "outline_prev_level",
    "outline_per_page",
    "style_entry_share",
    "short_run",
    "lead_bold",
    "lead_italic",
    "label_beside",
)
N_FEATURES = len(FEATURE_NAMES)
_COL = {name: i for i, name in enumerate(FEATURE_NAMES)}


@dataclass
class HeadingPool:
    """What the learned filter scores: the rules' title candidates and the short text and
    list blocks they passed over (headings set in the text face, set apart only by space or
    numbering), in document order."""

    members: list[Candidate]
    candidate_pos: list[int | None]  # position in the rules' candidate list, None: added


def heading_pool(candidates: list[Candidate], blocks: list[Block]) -> HeadingPool:
    """The rules' candidates plus every text or list block of at most ``POOL_MAX_LINES``
    lines that is title-shaped (``blocks.is_title_shaped``)."""
    by_index = {c.index: pos for pos, c in enumerate(candidates)}
    members: list[Candidate] = []
    positions: list[int | None] = []
    for i, b in enumerate(blocks):
        pos = by_index.get(i)
        if pos is not None:
            members.append(candidates[pos])
            positions.append(pos)
        elif (
            b.kind in (TEXT, LIST)
            and b.n_lines <= POOL_MAX_LINES
            and is_title_shaped(b.text.strip())
        ):
            members.append(candidate_of(i, b))
            positions.append(None)
    return HeadingPool(members, positions)


def pool_decisions(
    pool: HeadingPool, decisions: list[Decision], promoted: dict[int, Decision] | None = None
) -> list[Decision]:
    """A rule decider's decisions spread over the pool: added blocks are not candidates,
    unless the decider promoted them (an outline entry found in a text block)."""
    promoted = promoted or {}
    return [
        decisions[pos]
        if pos is not None
        else promoted.get(c.index, Decision(None, NOT_A_CANDIDATE))
        for c, pos in zip(pool.members, pool.candidate_pos, strict=True)
    ]


@dataclass
class CandidateFeatures:
    """The feature matrix of a document's candidates, with the rule decisions it came from."""

    x: np.ndarray  # (n_candidates, N_FEATURES) float64
    layout: list[Decision]
    outline: list[Decision] | None  # None when the outline filter was not used


def _reason_key(reason: str) -> str:
    return "style" if reason.startswith("style (") else reason


def _contents_text(blocks: list[Block]) -> str:
    """The normalised text of the contents pages in the first 30 pages, trailing page
    numbers dropped: the evidence a printed table of contents gives."""
    pages = {p for p in contents_pages(blocks) if p <= 30}
    if not pages:
        return ""
    parts = [
        normalise_title(_TAIL_NUMBER.sub("", b.text))
        for b in blocks
        if b.page in pages and b.kind in (TEXT, TITLE)
    ]
    return " | ".join(p for p in parts if p)


def running_shape(text: str) -> str:
    """Text as running heads repeat it: lower case, a page number at either end dropped,
    other digits folded ("A. Project Summary 8" and "A. Project Summary 10" look alike)."""
    text = _SHAPE_EDGE_NUMBER.sub("", normalise_title(text)).strip()
    return re.sub(r"\d+", "#", text)


def _shape_places(blocks: list[Block]) -> dict[str, list[tuple[int, float]]]:
    """(page, top as a share of the page height) of every short block, by running shape."""
    places: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for b in blocks:
        if b.n_lines <= POOL_MAX_LINES and len(b.text) <= 200:
            shape = running_shape(b.text)
            if shape:
                places[shape].append((b.page, b.y0 / max(b.page_height, 1.0)))
    return places


SHORT_RUN_LINES = 2  # a block of at most this many lines can be part of a run of short lines
SHORT_RUN_CAP = 10


def short_runs(blocks: list[Block]) -> dict[int, int]:
    """Block index → how many short blocks (at most ``SHORT_RUN_LINES`` lines) set in its type
    (size to half a point, weight, italics, typeface, a bold or italic lead-in) stand in a row
    with it, in reading order over the text, title and list blocks, furniture skipped (capped
    at ``SHORT_RUN_CAP``). A heading stands alone in its type, or beside a byline or a second
    title line; twenty one-line entries in the body face in a row are a list, whatever each
    line looks like."""

    def key(b: Block) -> tuple | None:
        if b.kind not in (TEXT, TITLE, LIST) or b.n_lines > SHORT_RUN_LINES:
            return None
        lead_bold, lead_italic = b.extra.get("lead") or (0.0, 0.0)
        return (
            round(b.font_size * 2) / 2,
            b.bold,
            b.italic,
            font_family(b.font),
            not b.bold and lead_bold > 0,  # a bold case name before its roman citation
            not b.italic and lead_italic > 0,
        )

    content = [i for i, b in enumerate(blocks) if b.kind in (TEXT, TITLE, LIST)]
    keys = [key(blocks[i]) for i in content]
    runs: dict[int, int] = {}
    start = 0
    while start < len(content):
        end = start + 1
        while keys[start] is not None and end < len(content) and keys[end] == keys[start]:
            end += 1
        for i in content[start:end]:
            runs[i] = min(end - start, SHORT_RUN_CAP)
        start = end
    return runs


def _hanging_labels(blocks: list[Block]) -> dict[int, list[Block]]:
    """Per page, the one-line text blocks that are a bare heading label (``blocks.HANGING_LABEL``)."""
    labels: dict[int, list[Block]] = defaultdict(list)
    for b in blocks:
        short = b.kind in (TEXT, TITLE, LIST) and b.n_lines == 1 and len(b.text) <= 8
        if short and HANGING_LABEL.match(b.text.strip()):
            labels[b.page].append(b)
    return labels


def label_beside(b: Block, labels: list[Block]) -> bool:
    """A bare label sits on the block's first line, just left of it."""
    near = max(2.0, 0.4 * b.font_size)
    return any(
        lab is not b and abs(lab.y0 - b.y0) < near and 0 <= b.x0 - lab.x1 < HANGING_LABEL_GAP
        for lab in labels
    )


class ColumnFinder:
    """The body-text column a block is set in (``blocks.body_columns``), against which its
    indentation and centring are measured: a heading flush with a column that starts at 0.3 of
    the page width is as far left as one in a book with a narrow margin, and the left edge of
    the right-hand column is a heading's margin there. A page with no multi-line body text
    (a chapter opening, a figure) takes the columns of the nearest page that has some, of the
    same parity first (books mirror their margins); with none in the document, the page."""

    def __init__(self, blocks: list[Block], body: BodyStyle) -> None:
        self.columns = body_columns(blocks, body)
        self.pages = sorted(self.columns)
        self._nearest: dict[int, list[tuple[float, float]]] = {}

    def _page_columns(self, page: int) -> list[tuple[float, float]]:
        cols = self.columns.get(page)
        if cols is not None:
            return cols
        if page not in self._nearest:
            same = [p for p in self.pages if (p - page) % 2 == 0] or self.pages
            near = min(same, key=lambda p: (abs(p - page), p), default=None)
            self._nearest[page] = self.columns[near] if near is not None else []
        return self._nearest[page]

    def place(self, b: Block) -> tuple[float, float]:
        """(x0 from the left edge of the block's column, the distance of its centre from the
        column's centre or from the text area's, the smaller: a title centred over two
        columns is centred), both as shares of the page width."""
        width = max(b.page_width, 1.0)
        cols = self._page_columns(b.page) or [(0.0, width)]
        column = min(cols, key=lambda c: max(c[0] - b.x0, b.x0 - c[1], 0.0))
        left, right = column
        centre = (b.x0 + b.x1) / 2
        off = min(abs(centre - (left + right) / 2), abs(centre - (cols[0][0] + cols[-1][1]) / 2))
        return (b.x0 - left) / width, off / width


def _repeats(places: list[tuple[int, float]], page: int, y: float) -> tuple[int, int]:
    """Other pages carrying the same shape at the same height, and within a few pages."""
    same_y = {p for p, py in places if p != page and abs(py - y) <= REPEAT_Y_TOL}
    near = {p for p, _ in places if p != page and abs(p - page) <= REPEAT_NEAR_PAGES}
    return len(same_y), len(near)


def candidate_features(
    candidates: list[Candidate],
    context: SectionContext,
    layout: list[Decision],
    outline: list[Decision] | None = None,
) -> CandidateFeatures:
    """Feature rows for ``candidates`` (in document order) given the rule decisions."""
    blocks = context.blocks
    body = context.body
    n = len(candidates)
    x = np.zeros((n, N_FEATURES), dtype=np.float64)
    if n == 0:
        return CandidateFeatures(x, layout, outline)
    body_size = max(body.font_size, 1.0)
    gap = max(body.paragraph_gap, 0.5)
    n_pages = max(context.n_pages, 1)

    face_chars: Counter = Counter()
    total_chars = 0
    page_blocks: dict[int, list[int]] = defaultdict(list)
    head_bottoms: dict[int, list[float]] = defaultdict(list)  # running heads, by page
    for i, b in enumerate(blocks):
        if b.kind == HEADER:
            head_bottoms[b.page].append(b.y1)
        if b.kind in (TEXT, TITLE):
            face_chars[font_family(b.font)] += len(b.text)
            total_chars += len(b.text)
            page_blocks[b.page].append(i)
    total_chars = max(total_chars, 1)

    by_style: dict[tuple, list[int]] = defaultdict(list)
    for pos, c in enumerate(candidates):
        by_style[c.style].append(pos)
    styles = sorted(by_style, key=prominence, reverse=True)
    rank = {s: r for r, s in enumerate(styles)}
    recurring = [s for s in styles if len(by_style[s]) >= 3]
    recurring_rank = {s: r for r, s in enumerate(recurring)}
    sizes = sorted({s[0] for s in styles}, reverse=True)
    size_rank = {sz: r for r, sz in enumerate(sizes)}
    style_stats: dict[tuple, tuple[float, ...]] = {}
    for s, members in by_style.items():
        texts = [candidates[p].text for p in members]
        pages = {candidates[p].page for p in members}
        style_stats[s] = (
            float(len(members)),
            len(pages) / n_pages,
            len(members) / max(len(pages), 1),
            sum(len(t.split()) for t in texts) / len(texts),
            sum(t.rstrip().endswith((".", ",", ";")) for t in texts) / len(texts),
            sum(numbering_depth(t) is not None for t in texts) / len(texts),
        )
    text_count = Counter(normalise_title(c.text) for c in candidates)
    contents = _contents_text(blocks)
    toc_pages = contents_pages(blocks) if contents else set()
    places = _shape_places(blocks)
    part_pages = {c.page for c in candidates if _PART.match(c.text.strip())}
    hanging = _hanging_labels(blocks)
    columns = ColumnFinder(blocks, body)
    runs = short_runs(blocks)

    outline_prev = 0
    # How much of the book's structure the outline gives: its located entries per page, and per
    # style the share of the style's rows that are entries (a style the outline lists but for
    # this row, or one it never lists, whose headings the model has to find on its own).
    entry_rows = [o.reason == "outline entry" for o in outline] if outline is not None else []
    outline_per_page = sum(entry_rows) / n_pages
    style_entries: dict[tuple, list[bool]] = defaultdict(list)
    for c, is_entry in zip(candidates, entry_rows, strict=False):
        style_entries[c.style].append(is_entry)
    for pos, c in enumerate(candidates):
        b = blocks[c.index]
        row = x[pos]
        text = c.text.strip()
        words = text.split()
        letters = [ch for ch in text if ch.isalpha()]
        row[_COL["size_ratio"]] = c.font_size / body_size
        row[_COL["size_diff"]] = c.font_size - body.font_size
        row[_COL["bold"]] = c.bold
        row[_COL["italic"]] = c.italic
        row[_COL["caps"]] = c.caps
        row[_COL["body_bold"]] = body.bold
        row[_COL["other_face"]] = c.family != body.family
        row[_COL["face_share"]] = face_chars[c.family] / total_chars
        row[_COL["n_lines"]] = c.n_lines
        row[_COL["n_words"]] = len(words)
        row[_COL["n_chars"]] = len(text)
        row[_COL["ends_stop"]] = text.endswith((".", "!", "?"))
        row[_COL["ends_colon"]] = text.endswith(":")
        row[_COL["ends_comma"]] = text.endswith((",", ";"))
        row[_COL["starts_lower"]] = text[:1].islower()
        long_words = [w for w in words if len(w) > 3]
        row[_COL["title_case"]] = (
            sum(w[:1].isupper() for w in long_words) / len(long_words) if long_words else 0.0
        )
        row[_COL["upper_share"]] = (
            sum(ch.isupper() for ch in letters) / len(letters) if letters else 0.0
        )
        row[_COL["digit_share"]] = sum(ch.isdigit() for ch in text) / max(len(text), 1)
        depth = numbering_depth(text)
        row[_COL["numbering_depth"]] = depth or 0
        row[_COL["dotted"]] = _DOTTED.match(text) is not None
        row[_COL["word_numbered"]] = _WORD_NUMBERED.match(text) is not None
        row[_COL["roman"]] = _ROMAN.match(text) is not None
        row[_COL["letter_label"]] = _LETTER_LABEL.match(text) is not None
        row[_COL["label_only"]] = bool(_LABEL_ONLY.match(text) or _BARE_LABEL.match(text))
        # A line with nothing above it on its page (the first line, or the first under a
        # running head: parse.measure_space_above then gives its distance from the page's
        # top) has no measured space above: the margin says nothing of a heading, so it
        # counts as set a paragraph's gap below what precedes it.
        above = gap if abs(b.space_above - b.y0) < 0.01 else b.space_above
        row[_COL["space_above_em"]] = min(above / max(c.font_size, 1.0), 20.0)
        row[_COL["space_above_gap"]] = min(above / gap, 50.0)
        on_page = page_blocks.get(b.page, [])
        k = on_page.index(c.index) if c.index in on_page else -1
        nxt = blocks[on_page[k + 1]] if 0 <= k < len(on_page) - 1 else None
        prv = blocks[on_page[k - 1]] if k > 0 else None
        row[_COL["space_below_em"]] = (
            min(max(nxt.y0 - b.y1, 0.0) / max(c.font_size, 1.0), 20.0) if nxt else 20.0
        )
        width = max(b.page_width, 1.0)
        row[_COL["x0_rel"]], row[_COL["centre_off"]] = columns.place(b)
        row[_COL["width_rel"]] = (b.x1 - b.x0) / width
        row[_COL["y0_rel"]] = b.y0 / max(b.page_height, 1.0)
        row[_COL["page_rel"]] = c.page / n_pages
        # A page's first line under a running head continues the page before; a chapter
        # opens on a page without one. Running heads above count as lines before it.
        heads_above = sum(y1 <= b.y0 + 1.0 for y1 in head_bottoms.get(b.page, ()))
        row[_COL["first_on_page"]] = k == 0 and heads_above == 0
        row[_COL["order_on_page"]] = min(max(k, 0) + heads_above, 30)
        row[_COL["next_is_para"]] = nxt is not None and nxt.kind == TEXT and nxt.n_lines >= 3
        row[_COL["next_size_ratio"]] = nxt.font_size / body_size if nxt else 0.0
        row[_COL["prev_is_title"]] = prv is not None and prv.kind == TITLE
        st = style_stats[c.style]
        row[_COL["style_count"]] = st[0]
        row[_COL["style_pages_rel"]] = st[1]
        row[_COL["style_per_page"]] = st[2]
        row[_COL["style_words"]] = st[3]
        row[_COL["style_sentences"]] = st[4]
        row[_COL["style_numbered"]] = st[5]
        row[_COL["style_rank"]] = rank[c.style]
        row[_COL["style_rank_rel"]] = recurring_rank.get(c.style, len(recurring))
        row[_COL["style_size_rank"]] = size_rank[c.style[0]]
        norm = normalise_title(text)
        row[_COL["in_contents"]] = len(norm) >= 4 and c.page not in toc_pages and norm in contents
        row[_COL["on_contents_page"]] = c.page in toc_pages
        row[_COL["front_matter"]] = bool(b.extra.get("front_matter"))
        row[_COL["never_heading"]] = bool(b.extra.get(NEVER_HEADING))
        row[_COL["same_text_count"]] = text_count[norm]
        shape = running_shape(text)
        same_y, near = _repeats(places.get(shape, []), b.page, b.y0 / max(b.page_height, 1.0))
        row[_COL["repeat_same_y"]] = min(same_y, 50)
        row[_COL["repeat_near"]] = near
        row[_COL["is_part"]] = _PART.match(text) is not None
        row[_COL["doc_parts"]] = min(len(part_pages), 30)
        row[_COL["matter_name"]] = _MATTER.match(shape) is not None
        lead_bold, lead_italic = b.extra.get("lead", (0.0, 0.0))
        row[_COL["lead_bold"]] = lead_bold
        row[_COL["lead_italic"]] = lead_italic
        row[_COL["label_beside"]] = label_beside(b, hanging.get(b.page, []))
        row[_COL["short_run"]] = runs.get(c.index, 1)
        d = layout[pos]
        row[_COL["is_candidate"]] = b.kind == TITLE
        row[_COL["kind_list"]] = b.kind == LIST
        row[_COL["rule_level"]] = d.level or 0
        key = _reason_key(d.reason)
        if key in RULE_REASONS:
            row[_COL[f"rule_{key}"]] = 1.0
        if outline is not None:
            o = outline[pos]
            row[_COL["has_outline"]] = 1.0
            row[_COL["outline_level"]] = o.level or 0
            if o.reason in OUTLINE_REASONS:
                row[_COL[f"outline_{o.reason}"]] = 1.0
            row[_COL["outline_prev_level"]] = outline_prev
            row[_COL["outline_per_page"]] = min(outline_per_page, 5.0)
            shares = style_entries[c.style]
            row[_COL["style_entry_share"]] = sum(shares) / len(shares)
            if o.reason == "outline entry" and o.level:
                outline_prev = o.level
    return CandidateFeatures(x, layout, outline)
