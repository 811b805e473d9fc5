"""A front- or back-matter name that a book sets three or more times away from its contents
pages ("Notes" after each chapter) is a heading wherever the rules keep it
(``learned_filter.recurring_matter``): access-controlled sets its 40 chapters' "Notes" in the
endnotes' small type, and the model, which has seen such headings only in a heading's face,
dropped all 40 out of fold (stop 13)."""

from __future__ import annotations

import numpy as np

from bookindex.operators.structure.heading_features import FEATURE_NAMES
from bookindex.operators.structure.learned_filter import (
    MODEL_PATH,
    first_stage,
    load_model,
    recurring_matter,
)
from bookindex.operators.structure.sections import Decision
from tests.conftest import missing_shared_data

COL = {name: i for i, name in enumerate(FEATURE_NAMES)}


def _notes_row(**changes: float) -> np.ndarray:
    """access-controlled's p. 29 "Notes" as the features see it (outline on)."""
    row = np.zeros(len(FEATURE_NAMES))
    values = {
        "size_ratio": 0.89,
        "n_lines": 1,
        "n_words": 1,
        "n_chars": 5,
        "title_case": 1,
        "space_above_em": 1.94,
        "space_below_em": 0.5,
        "face_share": 0.01,
        "style_count": 292,
        "same_text_count": 40,
        "matter_name": 1,
        "is_candidate": 1,
        "rule_level": 6,
        "has_outline": 1,
        "outline_level": 6,
    }
    values.update(changes)
    for name, value in values.items():
        row[COL[name]] = value
    return row


def test_recurring_matter_names_the_rows_the_rules_keep_off_the_contents():
    x = np.vstack(
        [
            _notes_row(),
            _notes_row(same_text_count=2),  # not recurring
            _notes_row(on_contents_page=1),  # the contents page's own line
            _notes_row(in_contents=1),  # listed in the contents: the outline and model judge
            _notes_row(rule_level=0),  # the rules do not keep it
            _notes_row(matter_name=0),  # not a matter name
        ]
    )
    assert recurring_matter(x).tolist() == [True, False, False, False, False, False]
    assert recurring_matter(np.zeros((0, len(FEATURE_NAMES)))).shape == (0,)


BOOK = "access-controlled-the-shaping-of-power-rights-and-rule-in-cyberspace"


def test_the_committed_model_keeps_a_recurring_notes_heading_in_small_type(shared_data):
    """The book itself: the indexer with the committed model keeps every one of its 40
    chapters' "Notes" headings (set in the endnotes' small type), on the gold's pages, outline
    on and off."""
    from bookindex.operators.eval.heading_gold import load_hips_gold
    from bookindex.operators.structure.assemble import extract_headings

    pdf = shared_data / "hips" / "PDFs" / f"{BOOK}.pdf"
    if not pdf.is_file():
        missing_shared_data(f"{BOOK} missing from the shared data")
    gold = sorted(page for _, title, page in load_hips_gold(BOOK) if title == "Notes")
    assert len(gold) == 40
    for use_outline in (True, False):
        found = extract_headings(str(pdf), use_outline=use_outline)
        assert sorted(page for _, title, page in found if title == "Notes") == gold


def test_recurring_matter_rows_score_one_in_both_stages_whatever_the_trees_say():
    model = load_model(MODEL_PATH).on
    x = np.vstack([_notes_row(), _notes_row(same_text_count=1)])
    layout = [Decision(6, "style"), Decision(6, "style")]
    texts = ["Notes", "Notes"]
    p1 = first_stage(model.heading, x, layout, texts)
    assert p1[0] == 1.0 and p1[1] < 1.0
    # the final score too, where a stage-2 model sees the context of the first
    p, _ = model.score(x, texts, [29, 49], layout)
    assert p[0] == 1.0 and p[0] >= model.threshold2
    # the document's title is the root, never a section, whatever its text
    root = [Decision(None, "document title"), Decision(6, "style")]
    assert first_stage(model.heading, x[:1].repeat(2, axis=0), root, texts).tolist()[0] == 0.0
