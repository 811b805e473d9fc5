"""Numbered headings levelled by the order in which a book's numbering styles nest
(operators/structure/numbering_levels), on the gold tables of contents of real books: their
numbered headings set at one level below the top (what the level model does with headings of
one type) come back at the levels the books print them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bookindex.operators.eval.heading_gold import parse_toc_file
from bookindex.operators.kinds import MAX_LEVEL
from bookindex.operators.structure.numbering_levels import nest_by_numbering, number_of
from tests.conftest import missing_shared_data


def _gold(shared_data: Path, corpus: str, prefix: str) -> list[tuple[int, str, int]]:
    found = sorted((shared_data / corpus / "GT_TOCs").glob(f"{prefix}*"))
    if not found:
        missing_shared_data(f"{corpus} gold {prefix} missing from the shared data")
    return parse_toc_file(found[0])


def _relative(gold: list[tuple[int, str, int]]) -> list[int]:
    top = min(level for level, _, _ in gold)
    return [min(level - top + 1, MAX_LEVEL) for level, _, _ in gold]


def _numbered_flat(gold: list[tuple[int, str, int]]) -> list[int | None]:
    """The gold levels, with every numbered heading below the top level set at level 2."""
    return [
        level if level == 1 or number_of(t) is None else 2
        for level, (_, t, _) in zip(_relative(gold), gold, strict=True)
    ]


@pytest.mark.parametrize(
    ("corpus", "prefix", "least"),
    [
        # A. > I. > 1. > a) > aa) > (1) > (a): seven styles in one type
        ("hips_extra", "the-principle-of-purpose-limitation", 0.95),
        # Chapter > I. > A. > 1. > a.; a court opinion quoted under a case name numbers its
        # own parts "I.", "II.", "A.", "1." again (gold: below the case), read as the book's
        ("hips_extra", "basic-income-tax", 0.8),
        # "1 Title" chapters > 1.1 > 1.1.1 > 1.1.1.1
        ("hips", "the-regulation-of-megabanks", 0.95),
    ],
)
def test_numbered_headings_take_the_levels_their_styles_nest_at(shared_data, corpus, prefix, least):
    gold = _gold(shared_data, corpus, prefix)
    texts = [t for _, t, _ in gold]
    truth = _relative(gold)
    flat = _numbered_flat(gold)
    nested = nest_by_numbering(texts, flat)
    numbered = [i for i, t in enumerate(texts) if number_of(t) is not None and truth[i] > 1]
    assert len(numbered) >= 50
    flat_right = sum(flat[i] == truth[i] for i in numbered) / len(numbered)
    nested_right = sum(nested[i] == truth[i] for i in numbered) / len(numbered)
    assert flat_right < 0.5 < least <= nested_right


def test_one_numbering_style_says_nothing_about_nesting():
    texts = ["Contents", "1 Introduction", "Method", "2 Results", "3 Discussion"]
    levels = [1, 1, 2, 1, 1]
    assert nest_by_numbering(texts, levels) == levels


def test_an_unnumbered_heading_beside_numbered_ones_is_their_sibling():
    # "Introduction" set at the level of "I." and "II." (the level model's levels) stays
    # beside them, and "1." under "II." goes one below it
    texts = ["A. Chapter", "Introduction", "I. First", "II. Second", "1. Point", "Conclusion"]
    levels = [1, 2, 2, 2, 2, 2]
    assert nest_by_numbering(texts, levels) == [1, 2, 2, 2, 3, 2]


def test_number_styles():
    def style(text: str) -> tuple[str, ...] | None:
        number = number_of(text)
        return number.styles if number else None

    assert style("1. Title") == ("arabic.",)
    assert style("(1) Title") == ("(arabic)",)
    assert style("1) Title") == ("arabic)",)
    assert style("2.3.1 Title") == ("dotted3",)
    assert style("aa) Title") == ("letter2)",)
    assert style("Chapter 4 Title") == ("chapter",)
    assert style("I. Title") == ("LETTER.", "ROMAN.")  # read by what came before
    assert style("A Theory of Justice") is None
    assert style("2016 Annual Report") is None
    # "I." after "H." is a letter, after "C." (or nothing) a Roman one
    letters = ["A. a", "B. b", "C. c", "D. d", "E. e", "F. f", "G. g", "H. h", "I. i"]
    nested = nest_by_numbering(["1. x", *letters], [1] + [2] * len(letters))
    assert nested[-1] == nested[1] == 2
    romans = ["A. a", "I. one", "II. two", "B. b"]
    assert nest_by_numbering(romans, [1, 3, 3, 1]) == [1, 2, 2, 1]


def test_a_numbered_heading_at_the_top_of_what_is_open_starts_afresh():
    # bank-regulation: the introduction's "Part I" / "Part II" (an overview's headings, under
    # "Book overview") leave "part" open at level 3; "PART I FOUNDATIONS", which the level
    # model sets at the top, is not their sibling but the book's first part
    texts = ["Introduction", "Book overview", "Part I", "Part II", "PART I FOUNDATIONS"]
    texts += ["CHAPTER 1 The banking business", "1.1 Introductory overview"]
    levels = [1, 2, 3, 3, 1, 5, 5]
    assert nest_by_numbering(texts, levels) == [1, 2, 3, 3, 1, 2, 3]
