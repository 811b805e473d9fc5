"""The retrieval and SQuAD metrics of ``operators.eval.qa_metrics`` and ``jobs.evaluate``'s
recall code on hand-worked cases (each expected figure worked out in the comment beside it),
and on real MMLongBench questions."""

from __future__ import annotations

import json

import pytest

from bookindex.jobs.evaluate import read_questions, recall_at, split_questions, summarise
from bookindex.operators.eval.qa_metrics import (
    exact_match,
    normalise_answer,
    page_metrics,
    retrieved_pages,
    span_recall,
    token_f1,
)


def test_normalisation_is_squads():
    assert normalise_answer("The  Cat, sat!") == "cat sat"  # case, punctuation, article
    assert normalise_answer("An apple a day") == "apple day"
    assert normalise_answer("U.S.A.") == "usa"
    assert normalise_answer("18.29%") == "1829"  # punctuation goes, digits stay
    assert normalise_answer("") == ""
    assert normalise_answer(42) == "42"  # a number given as a number


def test_exact_match_is_the_best_over_the_aliases():
    assert exact_match("the cat", ["Cat"]) == 1.0
    assert exact_match("NYC", ["New York City", "nyc."]) == 1.0
    assert exact_match("cats", ["cat"]) == 0.0
    assert exact_match("", ["cat"]) == 0.0
    assert exact_match("4,087", ["4087"]) == 1.0  # the comma is punctuation


def test_token_f1_by_hand():
    # pred {cat, sat}, gold {cat, sat, on, mat}: P = 2/2, R = 2/4, F1 = 2·1·0.5/1.5 = 2/3
    assert token_f1("the cat sat", ["cat sat on mat"]) == pytest.approx(2 / 3)
    # the best over the aliases: "mat" shares nothing with {cat, sat} (0), the other 2/3
    assert token_f1("the cat sat", ["mat", "cat sat on mat"]) == pytest.approx(2 / 3)
    # repeated tokens count as often as both have them: pred [a1, a1, b], gold [a1, b]:
    # common 2, P = 2/3, R = 1, F1 = 0.8
    assert token_f1("x x y", ["x y"]) == pytest.approx(0.8)
    assert token_f1("", ["cat"]) == 0.0  # empty prediction
    assert token_f1("the", ["a"]) == 1.0  # both normalise to nothing: equal (SQuAD)
    assert token_f1("dog", ["cat"]) == 0.0


def test_retrieved_pages_cover_each_units_range():
    units = [{"page": 3, "page_end": 5}, {"page": 7}, {"page": 9, "page_end": None}]
    assert retrieved_pages(units) == {3, 4, 5, 7, 9}
    assert retrieved_pages([{"page": 6, "page_end": 2}]) == {6}  # an end before its start
    assert retrieved_pages([]) == set()


def test_page_metrics_by_hand():
    evidence = [{"page": 3, "page_end": 4}, {"page": 7}]  # pages {3, 4, 7}
    m = page_metrics(evidence, [3, 5])
    # gold {3, 5}: hit {3} → recall 1/2, not perfect; irrelevant {4, 7} of 3 pages → 2/3
    assert m == {
        "page_recall": 0.5,
        "perfect_recall": 0.0,
        "irrelevant_page_ratio": pytest.approx(2 / 3),
    }
    assert page_metrics(evidence, [4, 3]) == {
        "page_recall": 1.0,
        "perfect_recall": 1.0,
        "irrelevant_page_ratio": pytest.approx(1 / 3),  # only 7 is irrelevant
    }
    assert page_metrics(evidence, []) is None  # unanswerable: no gold page, not counted
    # nothing retrieved: no recall, and the ratio counts as all irrelevant
    assert page_metrics([], [1]) == {
        "page_recall": 0.0,
        "perfect_recall": 0.0,
        "irrelevant_page_ratio": 1.0,
    }


def test_span_recall_by_hand():
    assert span_recall(["Deep  Learning"], ["we use DEEP learning here"]) == 1.0  # squashed
    five = "alpha beta gamma delta epsilon"
    # fuzzy: 4 of 5 words present (0.8 ≥ SPAN_COVERAGE) counts, 3 of 5 does not
    assert span_recall([five], ["alpha beta gamma delta zeta"]) == 1.0
    assert span_recall([five], ["alpha beta gamma"]) == 0.0
    assert span_recall([five, "zeta"], ["alpha beta gamma delta zeta"]) == 1.0
    assert span_recall([five, "omega"], ["alpha beta gamma delta"]) == 0.5
    assert span_recall([], ["anything"]) is None
    assert span_recall(["  ", ""], ["anything"]) is None  # blank spans are no gold
    assert span_recall(["x y"], []) == 0.0


def test_recall_at_k_by_hand():
    ranked = ["a", "b", "c"]
    assert recall_at(ranked, ["b", "d"], 2) == 0.5  # top-2 {a, b} ∩ {b, d} = {b}: 1/2
    assert recall_at(ranked, ["b", "d"], 1) == 0.0
    assert recall_at(ranked, ["c", "a"], 10) == 1.0  # k beyond the list: all of it
    assert recall_at(ranked, [], 5) == 0.0  # no gold
    assert recall_at(["1", "2"], [1], 1) == 1.0  # gold ids given as numbers
    assert recall_at(ranked, ["a", "a"], 1) == 1.0  # a repeated gold id counts once


def test_summarise_averages_over_questions():
    rows = [
        {"recall@2": 1.0, "recall@5": 1.0, "recall@10": 1.0, "seconds": 0.2},
        {"recall@2": 0.0, "recall@5": 0.5, "recall@10": 1.0, "seconds": 0.4},
    ]
    assert summarise(rows) == {
        "recall@2": 0.5,
        "recall@5": 0.75,
        "recall@10": 1.0,
        "questions": 2,
        "seconds_per_query": pytest.approx(0.3),
    }
    empty = summarise([])
    assert empty["questions"] == 0 and empty["recall@5"] == 0.0


def test_read_and_split_real_questions(shared_data, tmp_path):
    path = shared_data / "mmlongbench" / "questions.jsonl"
    questions = read_questions(str(path), key="doc")
    assert len(questions) == 246  # MMLongBench-Doc's questions here (data README)
    assert read_questions(str(path), limit=3, key="doc")[2]["id"] == "mmlb-2"
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"mmlongbench": {"tune": ["2401.18059v1.pdf"], "report": []}}))
    tuned = split_questions(questions, str(split), "tune")
    assert tuned and {q["doc"] for q in tuned} == {"2401.18059v1.pdf"}
    assert len(tuned) == sum(q["doc"] == "2401.18059v1.pdf" for q in questions)
    with pytest.raises(KeyError):
        split_questions(questions, str(split), "report")  # an empty part
    with pytest.raises(ValueError):
        split_questions(questions, str(split), None)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "doc": ""}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        read_questions(str(bad), key="doc")
