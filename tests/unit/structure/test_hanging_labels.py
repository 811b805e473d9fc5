"""A heading's number hung in the margin as a block of its own on the heading's first line
(``operators.structure.blocks.join_hanging_labels``) starts the heading's text; a label beside
a paragraph, or a page's folio, stays as it is."""

from __future__ import annotations

import pytest

from bookindex.operators.structure.blocks import join_hanging_labels
from tests.unit.structure.test_running_heads import _marked


@pytest.mark.parametrize(
    ("corpus", "prefix", "page", "start", "heading"),
    [
        # "1.2" at x 74, "Contribution of International Shipping to Greenhouse Gas" at x 115,
        # two lines (a one-line heading keeps its number on its line)
        ("hips", "climate-change", 32, 30, "1.2 Contribution of International Shipping"),
        # "3." at x 60 beside a body-face heading over two lines at x 73
        ("hips_extra", "the-principle-of-purpose-limitation", 34, 33, "3. Uncertainty about"),
    ],
)
def test_a_hanging_number_starts_its_heading(shared_data, corpus, prefix, page, start, heading):
    blocks = _marked(shared_data, corpus, prefix, start, page + 1)
    words = heading.split(" ", 1)[1]
    before = [b for b in blocks if b.page == page and b.text.startswith(words)]
    assert len(before) == 1
    label_x0 = min(
        b.x0 for b in blocks if b.page == page and b.text.strip() == heading.split(" ", 1)[0]
    )
    joined = join_hanging_labels(blocks)
    assert len(joined) == len(blocks) - sum(
        1 for b in blocks if b.page == page and b.text.strip() == heading.split(" ", 1)[0]
    )
    found = [b for b in joined if b.page == page and words in b.text]
    assert len(found) == 1 and found[0].text.startswith(heading)
    assert found[0].x0 == label_x0


def test_a_label_beside_a_long_block_stays_apart(shared_data):
    # climate-change p. 21: "16" on the first line of a 14-line block, a list's number, not a
    # heading's; a heading has at most three lines
    blocks = _marked(shared_data, "hips", "climate-change", 21, 21)
    label = [b for b in blocks if b.text.strip() == "16"]
    long_block = [b for b in blocks if b.n_lines > 3 and abs(b.y0 - label[0].y0) < 4]
    assert label and long_block
    texts = [b.text for b in long_block]
    joined = join_hanging_labels(blocks)
    assert label[0] in joined and [b.text for b in long_block] == texts
