"""Levels from the order in which a book's numbering styles nest.

A book that numbers its headings in several styles nests them in a fixed order: a German
legal monograph runs "A." > "I." > "1." > "a)" > "aa)" > "(1)" > "(a)", a report "Chapter 3" >
"3.1" > "3.1.1", a treatise "Part II" > "1." > "(a)". Those headings are often set in one
type, so the level model, which sees one candidate at a time, cannot tell their levels apart;
the sequence can. Reading the kept headings in order with a stack of the numbering styles that
are open:

* a style already open closes everything opened after it and takes its level again;
* a style not open opens one level below the heading on top of the stack (the level model's
  level when the stack is empty);
* a numbered heading the level model sets at or above every open heading's level closes
  them all (a new part or chapter: "PART I" after an introduction that named "Part I" and
  "Part II" in headings of its own);
* a heading without a number keeps the level model's level and closes the styles opened at
  that level or deeper; numbered headings after it open below it, unless the level model
  sets the numbered heading at its level or shallower ("Introduction" set beside "I.", "II.").

A style is the number's form and punctuation: "1." and "(1)" and "1)" are three styles, "a)"
and "aa)" two, "2.3" and "2.3.1" two (dotted depth). "I." is a letter after "H." and a Roman
numeral otherwise. A book with fewer than ``MIN_STYLES`` numbering styles among its kept
headings is left as it is: one style (chapters "1", "2", …) says nothing about nesting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bookindex.operators.kinds import MAX_LEVEL
from bookindex.operators.structure.heading_context import _roman

MIN_STYLES = 2

_WORD = re.compile(
    r"^\s*(chapter|part|section|book|volume|appendix|annex|article)\s+"
    r"([0-9]{1,3}|[ivxlc]{1,6}|[a-z])\b",
    re.IGNORECASE,
)
_DOTTED = re.compile(r"^\s*(\d{1,3}(?:\.\d{1,3}){1,6})\.?\s+\S")
_TOKEN = re.compile(
    r"^\s*(\(?)(\d{1,3}|[IVXLC]{1,6}|[ivxlc]{1,6}|[A-Z]{1,2}|[a-z]{1,2})([.):]?)\s+\S"
)
_ROMAN_CHARS = re.compile(r"^(?:[IVXLC]+|[ivxlc]+)$")
_LETTER_BEFORE = {"i": "h", "v": "u", "x": "w", "l": "k", "c": "b"}


@dataclass(frozen=True)
class Number:
    """A heading's leading number: its style (or styles) and the token itself."""

    styles: tuple[str, ...]  # the style, or the two readings of an ambiguous token (letter first)
    token: str


def number_of(text: str) -> Number | None:
    """The numbering of a heading's text, None when it carries none. The style names the
    form and punctuation ("(arabic)", "LETTER.", "dotted3", "chapter"); a token that reads
    both as a letter and as a Roman numeral ("I.", "c)") carries both styles."""
    m = _WORD.match(text)
    if m:
        return Number((m.group(1).lower(),), m.group(2))
    m = _DOTTED.match(text)
    if m:
        return Number((f"dotted{m.group(1).count('.') + 1}",), m.group(1))
    m = _TOKEN.match(text)
    if m is None:
        return None
    opening, token, closing = m.groups()
    if opening and closing != ")":
        return None
    if token.isdigit():
        if len(token) > 3:
            return None
        return Number((f"{opening}arabic{closing}",), token)
    if not closing:  # "A Theory of …", "I Introduction": words, not numbers
        return None
    case = "LETTER" if token.isupper() else "letter"
    letter = f"{opening}{case}{'2' if len(token) == 2 and token[0] == token[1] else ''}{closing}"
    roman = f"{opening}{'ROMAN' if token.isupper() else 'roman'}{closing}"
    is_roman = bool(_ROMAN_CHARS.match(token)) and _roman(token) is not None
    is_letter = len(token) == 1 or token[0] == token[1]
    if is_roman and is_letter:
        return Number((letter, roman), token)
    if is_roman:
        return Number((roman,), token)
    if is_letter:
        return Number((letter,), token)
    return None


def _resolve(number: Number, last_token: dict[str, str]) -> str:
    """The style of an ambiguous token: the letter when it follows its letter ("I." after
    "H."), the Roman numeral otherwise."""
    if len(number.styles) == 1:
        return number.styles[0]
    letter, roman = number.styles
    before = _LETTER_BEFORE.get(number.token[0].lower())
    previous = last_token.get(letter)
    if before is not None and previous is not None and previous[0].lower() == before:
        return letter
    return roman


def nest_by_numbering(texts: list[str], levels: list[int | None]) -> list[int | None]:
    """The levels of the kept headings (``None``: not a heading) with the numbered ones
    levelled by the order in which their numbering styles nest (module docstring); unchanged
    when the kept headings use fewer than ``MIN_STYLES`` styles."""
    kept = [i for i, level in enumerate(levels) if level is not None]
    numbers = {i: number_of(texts[i]) for i in kept}
    styles = {n.styles[0] for n in numbers.values() if n is not None}
    if len(styles) < MIN_STYLES:
        return levels
    out = list(levels)
    stack: list[tuple[str | None, int]] = []  # open (style, level); None: a heading without one
    last_token: dict[str, str] = {}
    for i in kept:
        model_level = levels[i]
        assert model_level is not None
        number = numbers[i]
        if number is None:
            stack = [entry for entry in stack if entry[1] < model_level]
            stack.append((None, model_level))
            continue
        if stack and model_level <= min(level for _, level in stack):
            stack = []  # set at the top of what is open: a new chapter, part or book
        style = _resolve(number, last_token)
        last_token[style] = number.token
        open_at = next((k for k, entry in enumerate(stack) if entry[0] == style), None)
        if open_at is not None:
            level = stack[open_at][1]
            del stack[open_at + 1 :]
        else:
            # unnumbered headings the level model sets at this one's level or deeper are
            # its siblings or its elders' children ("Introduction" beside "I."), not parents
            while stack and stack[-1][0] is None and stack[-1][1] >= model_level:
                stack.pop()
            level = min(stack[-1][1] + 1, MAX_LEVEL) if stack else model_level
            stack.append((style, level))
        out[i] = level
    return out
