"""A numbered heading the model scores just under its threshold is kept where it continues a
kept sibling set in the same style (``learned_filter._continues_sibling``, inside
``decide_with_scores``): bank-regulation's "1.2.1.3 Banks' role in the payments system" after
the kept "1.2.1.2 …", both in the body face, was dropped outline on in stop 10's first CV run
while 216 of its 4-level siblings were kept."""

from __future__ import annotations

import numpy as np

from bookindex.operators.structure.learned_filter import (
    LEARNED_SIBLING,
    decide_with_scores,
    sibling_styles,
)
from bookindex.operators.structure.sections import Candidate, Decision

CLASSES = (1, 2, 3, 4, 5, 6)
BODY = (1.0, False, False, False, 0.9, False, False)  # row_style: the body face
BOLD = (1.2, True, False, False, 0.05, False, False)


def _decide(texts, p, styles, model_levels=None, outline=None):
    model_levels = model_levels or [4] * len(texts)
    probs = np.zeros((len(texts), len(CLASSES)))
    probs[np.arange(len(texts)), [lv - 1 for lv in model_levels]] = 1.0
    cands = [Candidate(i, t, i + 1, 10.0, False, False, 1, 0.0) for i, t in enumerate(texts)]
    layout = [Decision(None, "unset")] * len(texts)
    return decide_with_scores(
        cands, layout, outline, np.asarray(p, dtype=float), probs, CLASSES, 0.5, styles=styles
    )


def test_a_dotted_number_continuing_a_kept_sibling_in_its_style_is_kept_at_its_level():
    texts = ["1.2.1.1 Credit", "1.2.1.2 Savers", "1.2.1.3 Payments", "1.2.1.4 Deposits"]
    got = _decide(texts, [0.9, 0.9, 0.2, 0.1], [BODY] * 4, model_levels=[4, 4, 3, 5])
    assert [d.level for d in got] == [4, 4, 4, 4]  # a chain: "1.2.1.4" continues "1.2.1.3"
    assert got[2].reason.startswith(LEARNED_SIBLING)
    # without styles (the CV's "no siblings" row) the scores alone decide
    plain = _decide(texts, [0.9, 0.9, 0.2, 0.1], None, model_levels=[4, 4, 3, 5])
    assert [d.level for d in plain] == [4, 4, None, None]


def test_no_sibling_no_style_no_depth_no_keep():
    # set in another style than the kept sibling: not kept
    got = _decide(["2.3 Risk", "2.4 Note on risk"], [0.9, 0.2], [BOLD, BODY])
    assert got[1].level is None
    # a bare "2." after a kept "1.": a numbered paragraph as often as a heading
    got = _decide(["1. Scope", "2. The bank shall report"], [0.9, 0.2], [BODY, BODY])
    assert got[1].level is None
    # the first of a run has no sibling; a gap in the numbers is no continuation
    got = _decide(["1.2 Risk", "1.2.1 Credit", "1.2.3 Market"], [0.9, 0.2, 0.2], [BODY] * 3)
    assert [d.level for d in got][1:] == [None, None]
    # a sibling of an earlier chapter is no longer current once a shallower number is kept
    got = _decide(["1.1 Risk", "2 Capital", "1.2 Stale"], [0.9, 0.9, 0.2], [BODY] * 3)
    assert got[2].level is None


def test_outline_on_the_kept_sibling_level_holds_below_the_entry():
    texts = ["Chapter 1", "1.1 Credit", "1.2 Savers", "1.3 Payments"]
    outline = [Decision(1, "outline entry")] + [Decision(None, "unset")] * 3
    got = _decide(texts, [1.0, 0.9, 0.9, 0.3], [BOLD] + [BODY] * 3, outline=outline)
    assert [d.level for d in got] == [1, 2, 2, 2]


def test_the_first_of_a_run_is_kept_where_its_next_sibling_is_kept_further_on():
    texts = ["3.5.1.1 Credit", "3.5.1.2 Savers", "3.5.1.3 Payments", "3.5.1.4 Deposits"]
    got = _decide(texts, [0.2, 0.1, 0.9, 0.9], [BODY] * 4)
    assert [d.level for d in got] == [4, 4, 4, 4]  # the run carried back to its first member
    assert got[0].reason.startswith(LEARNED_SIBLING) and got[1].reason.startswith(LEARNED_SIBLING)
    # the next sibling set in another style, or kept before it rather than after: not kept
    got = _decide(texts[:2], [0.2, 0.9], [BOLD, BODY])
    assert got[0].level is None
    got = _decide(["3.5.1.2 Savers", "3.5.1.1 Credit"], [0.9, 0.2], [BODY] * 2)
    assert got[1].level is None
    # without styles (the CV's "no siblings" row) the scores alone decide
    assert [d.level for d in _decide(texts, [0.2, 0.1, 0.9, 0.9], None)] == [None, None, 4, 4]


# climate-change-and-international-shipping sets its third-level headings in bold italic after a
# number in bold roman. "2.1.1 The Concept of 'Pollution'" is one PDF line, not wholly italic,
# so upright; "2.1.2", whose number the PDF puts on a line of its own, is joined to a title
# block that is wholly italic (row_style keys from the stop 13 CV rows).
CLIMATE_ONE_LINE = (1.01, True, False, False, 1.0, False, False)
CLIMATE_JOINED = (1.01, True, True, False, 1.0, False, False)


def test_siblings_that_differ_only_in_italics_are_one_style():
    assert sibling_styles(CLIMATE_ONE_LINE, CLIMATE_JOINED)
    assert not sibling_styles(CLIMATE_ONE_LINE, BODY)  # weight and size still count
    assert not sibling_styles(CLIMATE_ONE_LINE, (1.01, True, False, True, 1.0, False, False))
    assert not sibling_styles(None, CLIMATE_ONE_LINE)
    texts = ["2.1.1 The Concept of 'Pollution'", "2.1.2 'Pollution' and Greenhouse Gas Emissions"]
    got = _decide(texts, [0.99, 0.09], [CLIMATE_ONE_LINE, CLIMATE_JOINED])
    assert [d.level for d in got] == [4, 4]
    assert got[1].reason.startswith(LEARNED_SIBLING)
    # and the first of a run, carried back from its kept next sibling
    texts = ["2.1.2 'Pollution' and Greenhouse Gas Emissions", "2.1.3 Legal Nature"]
    got = _decide(texts, [0.09, 0.99], [CLIMATE_JOINED, CLIMATE_ONE_LINE])
    assert [d.level for d in got] == [4, 4]
