"""Parts: a book divided into numbered parts ("Part I", "PART TWO", "Section III") sets them at
its top level, with the front matter, and the chapters inside them one level below. The level
model, which sees one candidate at a time, puts a part and a chapter set alike at one level;
this pass, given the whole decided sequence, nests the chapters in their parts.

Only a run of parts numbered 1, 2, 3, … in order, set at the top level or one below it,
with headings between them, counts (a "Part I" that starts again inside every chapter, or a
document's "SECTION 1." … "SECTION 5." quoted deep in a chapter, is not a part), and the last
part ends at the first back-matter heading (bibliography, index, appendix, …) set at the parts'
level or above.
"""

from __future__ import annotations

import re

from bookindex.operators.kinds import MAX_LEVEL

_PART = re.compile(r"^\s*(part|section|book|volume)\s+([ivx]+|\d{1,2}|[a-z]+)\b", re.IGNORECASE)
_ROMAN = {"i": 1, "ii": 2, "iii": 3, "iv": 4, "v": 5, "vi": 6, "vii": 7, "viii": 8, "ix": 9}
_ROMAN |= {"x": 10, "xi": 11, "xii": 12}
_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_WORDS |= {"eight": 8, "nine": 9, "ten": 10, "first": 1, "second": 2, "third": 3}
_WORDS |= {"fourth": 4, "fifth": 5}
_BACK_MATTER = re.compile(
    r"^\s*(bibliography|references|index|select bibliography|general index|subject index|"
    r"appendi|annex|notes\b|about the|list of contributors|table of cases|glossary|"
    r"works cited|sources|afterword|epilogue|conclusion)",
    re.IGNORECASE,
)


def part_number(text: str) -> int | None:
    """The number of a part's heading ("Part II: …" → 2, "PART ONE" → 1), else None."""
    match = _PART.match(text)
    if match is None:
        return None
    word = match.group(2).lower()
    if word.isdigit():
        return int(word)
    return _ROMAN.get(word) or _WORDS.get(word)


def nest_in_parts(texts: list[str], levels: list[int | None]) -> list[int | None]:
    """The levels of the kept headings (``None``: not a heading) with a book's numbered parts
    at its top level and the headings between the first part and the back matter after the
    last one pushed down as far as it takes to sit under their part: each one level below
    its parent at least (the nearest earlier heading set shallower, else its part), never
    higher than it was, so a chapter set beside the parts goes under them with its sections,
    and sections already set deeper than their chapter stay where they are."""
    kept = [i for i, level in enumerate(levels) if level is not None]
    parts = [(i, part_number(texts[i])) for i in kept]
    parts = [(i, n) for i, n in parts if n is not None]
    if len(parts) < 2 or [n for _, n in parts] != list(range(1, len(parts) + 1)):
        return levels
    part_rows = {i for i, _ in parts}
    top = min(levels[i] for i in kept)
    part_level = min(levels[i] for i in part_rows)
    if part_level > top + 1:
        return levels  # numbered "sections" deep in a chapter, not the book's parts
    last = parts[-1][0]
    end = next(
        (i for i in kept if i > last and levels[i] <= part_level and _BACK_MATTER.match(texts[i])),
        len(levels),
    )
    if not any(parts[0][0] < i < end and i not in part_rows for i in kept):
        return levels  # nothing inside the parts
    out = list(levels)
    stack: list[tuple[int, int]] = []  # the open headings under the part: (level, level given)
    for i in kept:
        if i < parts[0][0] or i >= end:
            continue
        if i in part_rows:
            out[i] = top
            stack = []
            continue
        while stack and stack[-1][0] >= levels[i]:
            stack.pop()
        parent = stack[-1][1] if stack else top
        out[i] = min(max(levels[i], parent + 1), MAX_LEVEL)
        stack.append((levels[i], out[i]))
    return out
