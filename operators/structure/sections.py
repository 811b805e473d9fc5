"""Section filtering: every title candidate gets a heading level, or is declared not a title.

One interface, several deciders. ``SectionFilter.decide(candidates, context)`` returns one
``Decision`` per candidate (a level ≥ 1, or None for "not a title") plus headings that the
outline names but no candidate carries. Deciders here:

* ``LayoutSectionFilter``: typography only. Candidates are grouped into style clusters (font
  size, bold, italic, capitals); clusters that read like prose or crowd pages are false titles;
  the rest get levels by prominence, refined by numbering such as "2.3.1".
* ``OutlineSectionFilter`` (``operators.structure.outline_filter``): the PDF outline gives the
  upper levels; its entries are located in the text, the styles they are set in are learned,
  and less prominent title styles supply the deeper levels that bookmarks usually omit.

An LLM-based refiner (BookRAG §4.2.2) implements the same ``decide`` and can wrap either.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Protocol

from bookindex.operators.kinds import MAX_LEVEL, TEXT, TITLE
from bookindex.operators.parsing.parse import Block, font_family
from bookindex.operators.structure.blocks import NEVER_HEADING
from bookindex.operators.structure.furniture import BodyStyle

CONTINUES = "continues the title above"
_NUMBERED = re.compile(r"^(\d{1,2}(?:\.\d{1,2}){0,5})\.?(\s+\S|(?=[A-Z][a-z]))")
_WORD_NUMBERED = re.compile(
    r"^(chapter|part|section|appendix|annex|article|book)\s+([0-9]+|[ivxlc]+|[a-z])\b", re.I
)
_LABEL_ONLY = re.compile(
    r"^(chapter|part|section|appendix|annex|book)\s+([0-9]+|[ivxlc]+|[a-z]|[a-z]+)$", re.I
)
# A label set on a line of its own with its number on the next ("CHAPTER" / "ONE").
_BARE_LABEL = re.compile(r"^(chapter|part|section|appendix|annex|book)$", re.I)
_UNITS = "one|two|three|four|five|six|seven|eight|nine"
_LABEL_NUMBER = re.compile(
    rf"^([0-9]{{1,3}}|[ivxlc]{{1,6}}|[a-z]|{_UNITS}|ten|eleven|twelve"
    r"|(thir|four|fif|six|seven|eigh|nine)teen"
    rf"|(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)([\s-]?({_UNITS}))?)$",
    re.I,
)
_ROMAN = re.compile(r"^[IVXL]{1,5}\.\s+\S")
_SUBSECTION = re.compile(r"^\d{1,2}(\.\d{1,2}){1,4}\.?\s+[A-Z]")  # "2.1 Title", "3.2.1. Title"


@dataclass
class Candidate:
    """A title candidate as a decider sees it: text, where it is, how it is set."""

    index: int  # position of the block in the document's block list
    text: str
    page: int
    font_size: float
    bold: bool
    italic: bool
    n_lines: int
    y0: float
    family: str = ""

    @property
    def caps(self) -> bool:
        return self.text.isupper()

    @property
    def style(self) -> tuple:
        return (round(self.font_size * 2) / 2, self.bold, self.italic, self.caps, self.family)


@dataclass
class Decision:
    level: int | None  # None: not a title
    reason: str


@dataclass
class OutlineHeading:
    """An outline entry that no block carries; it becomes a section at the top of its page."""

    level: int
    title: str
    page: int


@dataclass
class SectionContext:
    body: BodyStyle
    n_pages: int
    outline: list[tuple[int, str, int]] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)


@dataclass
class SectionDecisions:
    decisions: list[Decision]
    outline_only: list[OutlineHeading] = field(default_factory=list)
    promoted: dict[int, Decision] = field(default_factory=dict)  # non-candidate blocks → level
    # P(heading) per candidate, from a learned decider (None from the rules): what the LLM
    # refiner reviews first (the least certain) and sees.
    probabilities: list[float] | None = None
    # block index → the title of the outline entry located on that block (``entry_title``)
    titles: dict[int, str] = field(default_factory=dict)


class SectionFilter(Protocol):
    def decide(self, candidates: list[Candidate], context: SectionContext) -> SectionDecisions:
        """One decision per candidate, in the same order."""
        ...


def numbering_depth(text: str) -> int | None:
    """Depth of a heading's numbering: "2" → 1, "2.3.1" → 3, "Chapter 4" → 1; else None."""
    match = _NUMBERED.match(text)
    if match:
        return match.group(1).count(".") + 1
    if _WORD_NUMBERED.match(text) or _ROMAN.match(text):
        return 1
    return None


@functools.lru_cache(maxsize=4096)
def normalise_title(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[^\w\s]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def title_similarity(a: str, b: str, above: float = 0.0) -> float:
    """1.0 for equal normalised titles, 0.9 when one starts the other (and is ≥ 60 % of
    it), else difflib's ratio, 0.0 below 0.6. With ``above``, a pair whose ratio cannot
    exceed it scores 0.0 without the full comparison (for callers that only want a match
    better than ``above``: the upper bounds decide, and the answer they need is the same)."""
    na, nb = normalise_title(a), normalise_title(b)
    if not na or not nb:
        return 0.0
    if na == nb:
        return 1.0
    short, long_ = sorted((na, nb), key=len)
    if long_.startswith(short) and len(short) >= 0.6 * len(long_):
        return 0.9
    floor = max(0.6, above)
    if 2 * len(short) < floor * (len(short) + len(long_)):
        return 0.0  # real_quick_ratio's bound, without building the matcher
    matcher = SequenceMatcher(None, na, nb, autojunk=False)
    bound = matcher.quick_ratio()
    if bound < 0.6 or bound <= above:
        return 0.0  # an upper bound already too low to match: skip the full comparison
    return matcher.ratio()


ENTRY_TITLE_SLACK = 1.25  # a block this much longer than its entry's title carries more


def entry_title(block_text: str, outline_title: str | None) -> str:
    """The title of a heading whose block was located as an outline entry: the entry's own
    title, as the author named it, where the block carries no more than a title (a chapter
    read as "Historic Exclusion and Persisting Inequalities" with its number "2" set apart,
    bookmarked "2 Historic Exclusion and Persisting Inequalities"); the block's text where it
    carries more (a run-in heading and its paragraph: nothing is lost), or without an entry."""
    if not outline_title or not outline_title.strip():
        return block_text
    title = " ".join(outline_title.split())
    limit = ENTRY_TITLE_SLACK * len(normalise_title(title)) + 2
    return title if len(normalise_title(block_text)) <= limit else block_text


def part_of_title(text: str, title: str) -> bool:
    """Whether a line the rules join to a heading is part of its title (a title wrapped over
    two lines), not a subtitle under it."""
    line = normalise_title(text)
    return bool(line) and line in normalise_title(title)


def prominence(style: tuple) -> tuple:
    size, bold, italic, caps = style[:4]
    return (size, bold, caps, not italic)


def _is_prose_cluster(members: list[Candidate]) -> bool:
    """A style used for sentences, or several times on a page, is emphasis, not a level."""
    numbered = sum(numbering_depth(c.text) is not None for c in members)
    if numbered >= 0.6 * len(members):
        return False
    words = sum(len(c.text.split()) for c in members) / len(members)
    sentences = sum(c.text.rstrip().endswith((".", ",", ";")) for c in members) / len(members)
    pages = Counter(c.page for c in members)
    crowded = len(members) / max(len(pages), 1) > 3.0
    return words > 14 or sentences > 0.5 or crowded


def _merge_split_titles(candidates: list[Candidate], blocks: list[Block]) -> dict[int, int]:
    """Consecutive candidates that form one title (a title over two styles, or a subtitle).

    Returns follower position → leader position (positions in ``candidates``).
    """
    merged: dict[int, int] = {}
    group_text: dict[int, str] = {}  # leader position → its text and its followers' so far
    for i in range(1, len(candidates)):
        prev, cur = candidates[i - 1], candidates[i]
        if cur.page != prev.page or cur.index != prev.index + 1:
            continue
        leader = merged.get(i - 1, i - 1)
        head = candidates[leader]
        gap = cur.y0 - blocks[prev.index].y1
        so_far = group_text.get(leader, head.text.strip())
        bare_label = (
            leader == i - 1
            and _BARE_LABEL.match(so_far) is not None
            and _LABEL_NUMBER.match(cur.text.strip()) is not None
        )
        label_only = _LABEL_ONLY.match(so_far) is not None and (
            leader == i - 1 or _BARE_LABEL.match(head.text.strip()) is not None
        )
        subtitle = (
            gap < 0.6 * prev.font_size
            and cur.font_size < head.font_size
            and cur.font_size >= 0.55 * head.font_size
            and numbering_depth(cur.text) is None
        )
        if subtitle or ((bare_label or label_only) and gap < 4 * prev.font_size):
            merged[i] = leader
            group_text[leader] = f"{so_far} {cur.text.strip()}"
    return merged


def _label_heads(candidates: list[Candidate], merged: dict[int, int]) -> dict[int, Candidate]:
    """A label ("CHAPTER", "CHAPTER 1") heading a merged title takes the style of the
    group's most prominent line ("ONE", "PREREQUISITES", the title under "CHAPTER 1") for
    clustering: the label's often smaller type, shared with other one-line labels, would
    otherwise rank a chapter below its sections."""
    groups: dict[int, list[int]] = defaultdict(list)
    for follower, leader in merged.items():
        groups[leader].append(follower)
    heads: dict[int, Candidate] = {}
    for leader, followers in groups.items():
        head = candidates[leader]
        if not (_BARE_LABEL.match(head.text.strip()) or _LABEL_ONLY.match(head.text.strip())):
            continue
        members = [candidates[i] for i in followers]
        top = max(members, key=lambda c: prominence(c.style))
        if prominence(top.style) > prominence(head.style):
            heads[leader] = dataclasses.replace(
                top, index=head.index, text=" ".join([head.text, *(c.text for c in members)])
            )
    return heads


def _numbered_subsections(candidates: list[Candidate], members: list[int]) -> list[int]:
    """In a style that is mostly run-in emphasis ("Rung 1 ("seeing")." opening a paragraph),
    the lines numbered "2.1 Title" with no closing full stop are still subsection headings
    (a paper sets both in bold at text size). At least two of them."""
    numbered = [
        i
        for i in members
        if _SUBSECTION.match(candidates[i].text) and not candidates[i].text.rstrip().endswith(".")
    ]
    return numbered if len(numbered) >= 2 else []


def _numbered_level(candidate: Candidate, style_level: int, style_depth: int | None) -> int:
    """In a numbered style ("1.1 …" and "1.1.1 …" set alike), a heading numbered deeper or
    shallower than the style's usual depth sits that many levels below or above it."""
    depth = numbering_depth(candidate.text) if style_depth is not None else None
    if depth is None:
        return style_level
    return max(1, min(style_level + depth - style_depth, MAX_LEVEL))


class LayoutSectionFilter:
    """Levels from typography and numbering alone."""

    def decide(self, candidates: list[Candidate], context: SectionContext) -> SectionDecisions:
        decisions = [Decision(None, "unset") for _ in candidates]
        merged = _merge_split_titles(candidates, context.blocks)
        for follower in merged:
            decisions[follower] = Decision(None, CONTINUES)
        heads = [i for i in range(len(candidates)) if i not in merged]
        self._drop_cover_title(candidates, heads, decisions, context.blocks)
        heads = [i for i in heads if decisions[i].reason == "unset"]
        candidates = list(candidates)
        for i, labelled in _label_heads(candidates, merged).items():
            candidates[i] = labelled
        clusters: dict[tuple, list[int]] = defaultdict(list)
        for i in heads:
            clusters[candidates[i].style].append(i)
        kept: list[tuple] = []
        for style, members in list(clusters.items()):
            if _is_prose_cluster([candidates[i] for i in members]):
                for i in members:
                    decisions[i] = Decision(None, "style used for prose or emphasis")
                subsections = _numbered_subsections(candidates, members)
                if subsections:
                    clusters[(*style, "numbered")] = subsections
                    kept.append((*style, "numbered"))
            else:
                kept.append(style)
        kept = self._drop_bylines(kept, clusters, candidates, decisions)
        levels, depth_of = self._style_levels(kept, clusters, candidates)
        for style in kept:
            for i in clusters[style]:
                if context.blocks and context.blocks[candidates[i].index].extra.get("front_matter"):
                    decisions[i] = Decision(None, "front matter before the contents")
                else:
                    decisions[i] = Decision(
                        _numbered_level(candidates[i], levels[style], depth_of.get(style)),
                        f"style {style}",
                    )
        return SectionDecisions(decisions=decisions)

    @staticmethod
    def _drop_bylines(
        kept: list[tuple],
        clusters: dict[tuple, list[int]],
        candidates: list[Candidate],
        decisions: list[Decision],
    ) -> list[tuple]:
        """A style that only ever appears right under a heading of a more prominent style
        (authors' names under chapter titles) is not a level of its own: at least 3 members,
        and on 80 % of the pages it is on, a member is the next candidate after such a
        heading (or its subtitle), within 3 blocks."""
        dropped: set[tuple] = set()
        for style in kept:
            members = clusters[style]
            above = {
                candidates[i].index
                for s in kept
                if prominence(s) > prominence(style)
                for i in clusters[s]
            }
            under_pages: set[int] = set()
            for i in members:
                head = i - 1  # the heading above, its subtitle (a continuation) skipped
                while head >= 0 and decisions[head].reason == CONTINUES:
                    head -= 1
                cand = candidates[i]
                if (
                    head >= 0
                    and candidates[head].index in above
                    and candidates[head].page == cand.page
                    and cand.index - candidates[i - 1].index <= 3
                ):
                    under_pages.add(cand.page)
            # Counted by pages: a list of contributors (many names on one page) is one
            # exception, not many.
            pages = {candidates[i].page for i in members}
            if len(members) >= 3 and len(under_pages) >= 0.8 * len(pages):
                dropped.add(style)
                for i in members:
                    decisions[i] = Decision(None, "byline under a heading")
        return [s for s in kept if s not in dropped]

    @staticmethod
    def _drop_cover_title(
        candidates: list[Candidate],
        heads: list[int],
        decisions: list[Decision],
        blocks: list[Block],
    ) -> None:
        """The largest text on the first pages, in a style used nowhere else, is the
        document's title; everything on a title page (no running text) is front matter."""
        if not heads:
            return
        biggest = max(candidates[i].font_size for i in heads)
        style_count = Counter(candidates[i].style for i in heads)
        first_page = min(b.page for b in blocks) if blocks else 1
        cover = (
            first_page
            if not any(b.page == first_page and b.kind == TEXT and b.n_lines >= 3 for b in blocks)
            else None
        )
        for i in heads:
            c = candidates[i]
            if c.page <= 2 and c.font_size == biggest and style_count[c.style] <= 2:
                decisions[i] = Decision(None, "document title")
            elif c.page == cover:
                decisions[i] = Decision(None, "title page")

    @staticmethod
    def _style_levels(
        kept: list[tuple], clusters: dict[tuple, list[int]], candidates: list[Candidate]
    ) -> tuple[dict[tuple, int], dict[tuple, int]]:
        """Levels by prominence; numbered clusters take the depth their numbering shows.
        Returns the level of each style and the usual numbering depth of the numbered ones."""
        ordered = sorted(kept, key=prominence, reverse=True)
        levels: dict[tuple, int] = {}
        depth_of: dict[tuple, int] = {}
        for style in ordered:
            depths = [numbering_depth(candidates[i].text) for i in clusters[style]]
            numbered = [d for d in depths if d is not None]
            if len(numbered) >= 0.6 * len(depths) and len(numbered) >= 2:
                depth_of[style] = Counter(numbered).most_common(1)[0][0]
        level = 0
        for style in ordered:
            if len(clusters[style]) <= 2 and style not in depth_of:
                # A style met once or twice (a cover line, a one-off display head) sits
                # below the styles above it but does not push the recurring ones down.
                levels[style] = min(level + 1, MAX_LEVEL)
                continue
            level = max(level + 1, depth_of.get(style, 0))
            levels[style] = min(level, MAX_LEVEL)
        return levels, depth_of


def candidate_of(index: int, b: Block) -> Candidate:
    """Block ``index`` as a decider sees it."""
    return Candidate(
        index=index,
        text=b.text,
        page=b.page,
        font_size=b.font_size,
        bold=b.bold,
        italic=b.italic,
        n_lines=b.n_lines,
        y0=b.y0,
        family=font_family(b.font),
    )


def candidates_of(blocks: list[Block]) -> list[Candidate]:
    return [candidate_of(i, b) for i, b in enumerate(blocks) if b.kind == TITLE]


@dataclass
class Heading:
    level: int
    title: str
    page: int
    block_index: int | None  # None for outline entries no block carries


def resolve_headings(
    blocks: list[Block], context: SectionContext, section_filter: SectionFilter
) -> list[Heading]:
    """Run a section filter; returns the headings in document order. Blocks that are not
    titles after all go back to plain text."""
    candidates = candidates_of(blocks)
    result = section_filter.decide(candidates, context)
    headings: list[Heading] = []
    last = -2  # candidate position of the latest heading or its continuation
    named = False  # the latest heading took its outline entry's title (``entry_title``)
    for pos, (cand, decision) in enumerate(zip(candidates, result.decisions, strict=True)):
        block = blocks[cand.index]
        if decision.reason == CONTINUES and last == pos - 1:
            if not named:
                headings[-1].title = f"{headings[-1].title} {block.text}"
            # part of the heading, not a paragraph of its own; a subtitle under a title the
            # outline names stays text
            named_subtitle = named and not part_of_title(block.text, headings[-1].title)
            block.kind = TEXT if named_subtitle else TITLE
            last = pos
        elif decision.level is None or block.extra.get(NEVER_HEADING):
            block.kind = TEXT
        else:
            title = entry_title(block.text, result.titles.get(cand.index))
            named = title != block.text
            headings.append(Heading(decision.level, title, block.page, cand.index))
            last = pos
    for index, decision in result.promoted.items():
        blocks[index].kind = TITLE
        title = entry_title(blocks[index].text, result.titles.get(index))
        headings.append(Heading(decision.level, title, blocks[index].page, index))
    headings.sort(key=lambda h: h.block_index)
    return _place_outline_only(headings, result.outline_only, blocks)


# A bookmark's label before its title, which the page may set apart or not print at all
# ("Chapter 1. Context" over the page's "Context", "Chapter 1: From women's rights …").
ENTRY_LABEL = re.compile(
    r"^\s*(chapter|part|section|appendix|annex)\s+([\divxlc]+|§\s*\d+|one|two|three|four|five|six|seven|eight|nine|ten)\s*[.:\-–—]?\s+(?=\w)",
    re.I,
)
_LEADING_NUMBER = re.compile(r"^\s*\d+(?:\.\d+)*\.?\s+(?=\w)")
MIN_BARE_TITLE = 4  # characters a title keeps without its label or number to be matched bare


def bare_title(text: str) -> str:
    """A title without the label or number before it, normalised (``normalise_title``):
    "Chapter 1: From women's rights: The influence …" and the page's "1 From women's rights
    The influence …" both read "from women s rights the influence …"."""
    return normalise_title(_LEADING_NUMBER.sub("", ENTRY_LABEL.sub("", text, count=1), count=1))


def _starts(short: str, long: str) -> bool:
    """Whether the words of ``short`` are the first words of ``long``."""
    return long.split()[: len(short.split())] == short.split()


def _names_one_heading(entry_keys: tuple[str, str], heading_keys: tuple[str, str]) -> bool:
    """Whether one title is the other's start, whole words, as written or with the label or
    number before each set aside (their ``normalise_title`` and ``bare_title`` keys), the
    shorter keeping ``MIN_BARE_TITLE`` characters at least."""
    for a, b in zip(entry_keys, heading_keys, strict=True):
        short, long = sorted((a, b), key=len)
        if len(short) >= MIN_BARE_TITLE and _starts(short, long):
            return True
    return False


def carried_entries(
    entries: list[tuple[str, int]], carried: list[tuple[str, int]]
) -> dict[int, int]:
    """Outline entries the locator did not place ((title, page) each) that are headings blocks
    carry ((title, page) each): entry position → position in ``carried`` of the heading not
    taken yet with the same title (``normalise_title``) on the entry's page, else next to it
    (the first of equals); then, for the entries left, in the same way, of one with the same
    title once the label or number before each is set aside (``bare_title``: the bookmark
    "Chapter 6: The Czech Constitutional Court …: From judicial activism …" and the page's
    heading "6 The Czech Constitutional Court … From judicial activism …" are one heading, not
    two); then of one whose title starts the entry's or that the entry's starts
    (``_names_one_heading``): the page split a title over blocks and the heading kept its
    first ("2 America" under the bookmark "2 America Islam and the Problems of Liberal
    Democracy"), or the bookmark gives the label alone ("Appendix A." over "Appendix A:
    Sources on …"); ``carried_title`` then names it. Each heading is at most one entry."""
    free = list(range(len(carried)))
    found: dict[int, int] = {}
    # (normalise_title, bare_title) of every heading and every entry, each computed once
    heading_keys = [(normalise_title(text), bare_title(text)) for text, _ in carried]
    entry_keys = [(normalise_title(title), bare_title(title)) for title, _ in entries]
    passes = (
        lambda e, k: heading_keys[k][0] == entry_keys[e][0],
        lambda e, k: (
            len(heading_keys[k][1]) >= MIN_BARE_TITLE and heading_keys[k][1] == entry_keys[e][1]
        ),
        lambda e, k: _names_one_heading(entry_keys[e], heading_keys[k]),
    )
    for same in passes:
        for e, (_, page) in enumerate(entries):
            if e in found:
                continue
            near = [k for k in free if abs(carried[k][1] - page) <= 1 and same(e, k)]
            if near:
                k = min(near, key=lambda k: abs(carried[k][1] - page))  # a tie: the first
                found[e] = k
                free.remove(k)
    return found


def carried_title(entry: str, heading: str) -> str:
    """The title of a heading an outline entry is (``carried_entries``): the entry's where
    the heading's title is only its start ("2 America" of "2 America Islam and the Problems
    of Liberal Democracy"), else the heading's own."""
    a, b = normalise_title(entry), normalise_title(heading)
    return entry if len(b) < len(a) and _starts(b, a) else heading


def _place_outline_only(
    headings: list[Heading], outline_only: list[OutlineHeading], blocks: list[Block]
) -> list[Heading]:
    """Outline entries with no block go before the first heading of their page that a block
    carries (after the entries of that page placed before them: the outline's order holds).
    An entry whose title a kept heading on its page carries (``carried_entries``: the locator
    searches title and text blocks, a heading kept from a list block is "a) …") is that
    heading, at the entry's level (and under the entry's title where the heading's is only its
    start, ``carried_title``), not a second one."""
    carried = [h for h in headings if h.block_index is not None]
    found = carried_entries(
        [(e.title, e.page) for e in outline_only], [(h.title, h.page) for h in carried]
    )
    for e, k in found.items():
        carried[k].level = outline_only[e].level
        carried[k].title = carried_title(outline_only[e].title, carried[k].title)
    rest = [entry for e, entry in enumerate(outline_only) if e not in found]
    placed = list(headings)
    for entry in rest:
        heading = Heading(entry.level, entry.title, entry.page, None)
        pos = next(
            (
                n
                for n, h in enumerate(placed)
                if h.page > entry.page or (h.page == entry.page and h.block_index is not None)
            ),
            len(placed),
        )
        placed.insert(pos, heading)
    return placed
