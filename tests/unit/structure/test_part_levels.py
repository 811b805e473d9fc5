"""Chapters nested in a book's numbered parts (operators/structure/part_levels), on the gold
tables of contents of real books: their headings set flat at the level model's usual two levels
(parts and chapters alike at 1, everything below at 2) come back with the chapters under the
parts, as the books print them; parts that restart inside chapters, or code sections, are left
alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from bookindex.operators.eval.heading_gold import parse_toc_file
from bookindex.operators.kinds import MAX_LEVEL
from bookindex.operators.structure.part_levels import nest_in_parts, part_number
from tests.conftest import missing_shared_data


def _gold(shared_data: Path, corpus: str, prefix: str) -> list[tuple[int, str, int]]:
    found = sorted((shared_data / corpus / "GT_TOCs").glob(f"{prefix}*"))
    if not found:
        missing_shared_data(f"{corpus} gold {prefix} missing from the shared data")
    return parse_toc_file(found[0])


def _flattened(gold: list[tuple[int, str, int]]) -> list[int | None]:
    """Parts and chapters at 1, everything below at 2 (the levels the model gives alike)."""
    top = min(level for level, _, _ in gold)
    chapter = top + 1 if any(part_number(t) for _, t, _ in gold) else top
    return [1 if level <= chapter else 2 for level, _, _ in gold]


@pytest.mark.parametrize(
    ("corpus", "prefix"),
    [("hips_extra", "amicus-curiae"), ("hips", "access-controlled"), ("hips_extra", "applying")],
)
def test_chapters_go_under_their_parts(shared_data, corpus, prefix):
    gold = _gold(shared_data, corpus, prefix)
    texts = [t for _, t, _ in gold]
    nested = nest_in_parts(texts, _flattened(gold))
    parts = [i for i, t in enumerate(texts) if part_number(t)]
    assert len(parts) >= 2 and all(nested[i] == 1 for i in parts)
    first = parts[0]
    chapter_level = min(level for level, _, _ in gold[first + 1 :] if level > gold[first][0])
    # every gold chapter inside the parts (the level under the parts', up to the back matter
    # that follows the last part at the parts' level) is one below the parts
    end = next(
        (i for i in range(parts[-1] + 1, len(gold)) if gold[i][0] <= gold[first][0]), len(gold)
    )
    chapters = [i for i in range(first, end) if gold[i][0] == chapter_level and i not in parts]
    assert chapters and all(nested[i] == 2 for i in chapters)


def test_parts_that_restart_in_every_chapter_are_not_parts_of_the_book(shared_data):
    # Cameroon's chapters are divided into "Part I.", "Part II.", … again and again
    gold = _gold(shared_data, "hips_extra", "the-constitution-and-governance-in-camer")
    texts = [t for _, t, _ in gold]
    levels = [level for level, _, _ in gold]
    assert sum(part_number(t) == 1 for t in texts) >= 3
    assert nest_in_parts(texts, levels) == levels


def test_code_sections_are_not_parts(shared_data):
    gold = _gold(shared_data, "hips_extra", "basic-income-tax")
    texts = [t for _, t, _ in gold]
    assert any(t.startswith("Section 1") for t in texts)
    assert part_number("Section 179") is None and part_number("Section 197") is None
    levels = [level for level, _, _ in gold]
    assert nest_in_parts(texts, levels) == levels


def test_a_book_without_parts_keeps_its_levels():
    texts = ["Contents", "1 Introduction", "1.1 Scope", "2 Methods", "Index"]
    levels: list[int | None] = [1, 1, 2, 1, None]
    assert nest_in_parts(texts, levels) == levels


def test_sections_already_below_their_chapter_stay_where_they_are(shared_data):
    # the chapters set beside the parts, their sections at their gold level already (a level
    # left empty between them): the chapters go under the parts, the sections do not move
    gold = _gold(shared_data, "hips_extra", "amicus-curiae")
    texts = [t for _, t, _ in gold]
    parts = [i for i, t in enumerate(texts) if part_number(t)]
    part_level = gold[parts[0]][0]
    levels = [level if level > part_level + 1 else part_level for level, _, _ in gold]
    nested = nest_in_parts(texts, levels)
    inside = range(parts[0], parts[-1])
    deeper = [i for i in inside if gold[i][0] > part_level + 1]
    assert deeper and all(nested[i] == min(gold[i][0], MAX_LEVEL) for i in deeper)
    assert all(nested[i] == part_level + 1 for i in inside if gold[i][0] == part_level + 1)
