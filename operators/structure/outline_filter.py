"""The outline section filter: the PDF's bookmarks give the upper levels, layout styles below
them the deeper ones (``OutlineSectionFilter``), and ``choose_filter``, which picks it when a PDF
has an outline and the layout filter (``operators.structure.sections``) otherwise.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from bookindex.operators.kinds import LIST, TEXT, TITLE
from bookindex.operators.parsing.parse import Block
from bookindex.operators.structure.sections import (
    ENTRY_LABEL,
    MAX_LEVEL,
    Candidate,
    Decision,
    LayoutSectionFilter,
    OutlineHeading,
    SectionContext,
    SectionDecisions,
    SectionFilter,
    numbering_depth,
    prominence,
    title_similarity,
)

# Bookmarks that name a page of the printed object rather than a section of its text
# ("Cover", "Half Title", "Copyright Page"), or a production file name ("9780415792219c06").
_FURNITURE = re.compile(
    r"^(front\s+)?(cover|half[\s-]*title|title|title\s+page|series(\s+page)?|copyright"
    r"(\s+page)?|imprint|dedication|frontispiece|table\s+of\s+contents|contents)(\s+page)?$",
    re.I,
)
_FILE_NAME = re.compile(r"^(?=\S*(_|\d{5}))[\w.-]{8,}$")


class OutlineSectionFilter:
    """Outline entries give the upper levels; layout styles below them give the rest."""

    def __init__(self, min_similarity: float = 0.8) -> None:
        self.min_similarity = min_similarity
        self.layout = LayoutSectionFilter()

    def decide(self, candidates: list[Candidate], context: SectionContext) -> SectionDecisions:
        outline = [e for e in context.outline if e[1].strip()]
        if len(outline) < 2:
            return self.layout.decide(candidates, context)
        by_block = {c.index: pos for pos, c in enumerate(candidates)}
        decisions = [Decision(None, "unset") for _ in candidates]
        promoted: dict[int, Decision] = {}
        outline_only: list[OutlineHeading] = []
        style_votes: dict[tuple, Counter] = defaultdict(Counter)
        used: set[int] = set()
        titles: dict[int, str] = {}  # block index → the entry located on it
        by_page: dict[int, list[int]] = defaultdict(list)
        for i, b in enumerate(context.blocks):
            # a numbered entry's heading may have been read as a list item ("a) Key
            # elements", its hanging label joined to it: blocks.join_hanging_labels)
            if b.kind in (TITLE, TEXT, LIST):
                by_page[b.page].append(i)
        for level, title, page in outline:
            index = self._locate(title, page, context.blocks, by_page, used)
            named = index is not None
            if index is None and ENTRY_LABEL.match(title):
                # the page's heading without the bookmark's label: that heading is the entry,
                # under the title the page gives it
                bare = ENTRY_LABEL.sub("", title, count=1)
                index = self._locate(bare, page, context.blocks, by_page, used)
            if index is None:
                if not _is_furniture(title):
                    outline_only.append(OutlineHeading(level, title.strip(), max(page, 1)))
                continue
            used.add(index)
            if named:
                titles[index] = title
            decision = Decision(min(level, MAX_LEVEL), "outline entry")
            if index in by_block:
                pos = by_block[index]
                decisions[pos] = decision
                style_votes[candidates[pos].style][level] += 1
            else:
                promoted[index] = decision
        self._deeper_levels(candidates, context, decisions, style_votes, outline)
        return SectionDecisions(
            decisions=decisions, outline_only=outline_only, promoted=promoted, titles=titles
        )

    def _locate(
        self,
        title: str,
        page: int,
        blocks: list[Block],
        by_page: dict[int, list[int]],
        used: set[int],
    ) -> int | None:
        """The block on the entry's page (±1) whose text starts most like the entry."""
        best, best_score = None, self.min_similarity
        near = by_page.get(page, []) + by_page.get(page - 1, []) + by_page.get(page + 1, [])
        for i in near:
            b = blocks[i]
            if i in used:
                continue
            penalty = 0.05 * abs(b.page - page)
            # only a score above best_score + penalty can win (1e-9: never skip a tie-breaker)
            score = title_similarity(title, b.text[: len(title) + 40], best_score + penalty - 1e-9)
            score -= penalty
            if score > best_score:
                best, best_score = i, score
        return best

    def _deeper_levels(
        self,
        candidates: list[Candidate],
        context: SectionContext,
        decisions: list[Decision],
        style_votes: dict[tuple, Counter],
        outline: list[tuple[int, str, int]],
    ) -> None:
        """Unmatched candidates in styles less prominent than every outline style."""
        rest = [i for i, d in enumerate(decisions) if d.reason == "unset"]
        if not rest:
            return
        layout = self.layout.decide([candidates[i] for i in rest], context)
        outline_styles = [s for s, votes in style_votes.items() if sum(votes.values()) >= 1]
        deepest = max(level for level, _, _ in outline)
        located = [
            candidates[i].page for i, d in enumerate(decisions) if d.reason == "outline entry"
        ]
        first_page, last_page = (min(located), max(located)) if located else (0, 10**9)
        floor = min((prominence(s) for s in outline_styles), default=None)
        below = [
            pos
            for pos, i in enumerate(rest)
            if layout.decisions[pos].level is not None
            and (floor is None or prominence(candidates[i].style) < floor)
        ]
        below = self._drop_bylines(below, rest, candidates, decisions, context.blocks)
        deeper_levels = sorted({layout.decisions[pos].level for pos in below})
        depth_levels = self._numbering_levels(candidates, decisions)
        for pos, i in enumerate(rest):
            d = layout.decisions[pos]
            depth = numbering_depth(candidates[i].text)
            dotted = depth is not None and depth >= 2  # "7" alone may be a note or list item
            if d.level is not None and dotted and depth_levels:
                # Numbered like the outline's entries: "2.5.1" sits below the outline's "2.5".
                deepest_known = max(depth_levels)
                level = depth_levels.get(depth, depth_levels[deepest_known] + depth - deepest_known)
                if depth > min(depth_levels):
                    decisions[i] = Decision(min(level, MAX_LEVEL), "numbered below the outline")
                    continue
            style_level = style_votes.get(candidates[i].style)
            outside = candidates[i].page < first_page or candidates[i].page > last_page
            if d.level is None:
                decisions[i] = d
            elif pos not in below and style_level and outside:
                # Bookmarks often start at chapter 1 and stop before the back matter; a
                # heading set like the chapters outside that span is front or back matter.
                level = style_level.most_common(1)[0][0]
                decisions[i] = Decision(level, "front or back matter in an outline style")
            elif pos not in below:
                decisions[i] = Decision(None, "outline-level style the outline does not list")
            else:
                depth = deeper_levels.index(d.level) + 1
                decisions[i] = Decision(min(deepest + depth, MAX_LEVEL), "below the outline")

    @staticmethod
    def _drop_bylines(
        below: list[int],
        rest: list[int],
        candidates: list[Candidate],
        decisions: list[Decision],
        blocks: list[Block],
    ) -> list[int]:
        """A style that only ever appears right under an outline heading (authors' names
        under chapter titles, a chapter's subtitle) is not a level of its own."""
        heads = {
            candidates[i].index for i, d in enumerate(decisions) if d.reason == "outline entry"
        }
        by_style: dict[tuple, list[int]] = defaultdict(list)
        for pos in below:
            by_style[candidates[rest[pos]].style].append(pos)
        dropped: set[int] = set()
        for members in by_style.values():
            under = sum(
                any(
                    h in heads and blocks[h].page == candidates[rest[pos]].page
                    for h in range(candidates[rest[pos]].index - 6, candidates[rest[pos]].index)
                )
                for pos in members
            )
            if len(members) >= 3 and under >= 0.8 * len(members):
                dropped.update(members)
        for pos in dropped:
            decisions[rest[pos]] = Decision(None, "byline or subtitle under an outline heading")
        return [pos for pos in below if pos not in dropped]

    @staticmethod
    def _numbering_levels(candidates: list[Candidate], decisions: list[Decision]) -> dict:
        """Numbering depth → outline level, learned from numbered outline entries."""
        votes: dict[int, Counter] = defaultdict(Counter)
        for cand, decision in zip(candidates, decisions, strict=True):
            depth = numbering_depth(cand.text)
            if decision.reason == "outline entry" and depth is not None:
                votes[depth][decision.level] += 1
        return {depth: c.most_common(1)[0][0] for depth, c in votes.items()}


def _is_furniture(title: str) -> bool:
    """An outline entry no block carries that names book furniture, not a section: kept out
    of the tree (a printed "Contents" heading is matched to its block and kept)."""
    text = " ".join(title.split())
    return bool(_FURNITURE.match(text) or _FILE_NAME.match(text))


def choose_filter(outline: list[tuple[int, str, int]], use_outline: bool) -> SectionFilter:
    if use_outline and len(outline) >= 2:
        return OutlineSectionFilter()
    return LayoutSectionFilter()
