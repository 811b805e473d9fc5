"""The recall-against-units curves of PDF QA evaluation (operators/eval/pdf_qa.py) and the
document split it can be restricted to (jobs/evaluate.py, benchmarks/pdf_qa_split.json), on
hand-worked cases."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bookindex.jobs.evaluate import document_kinds, split_questions
from bookindex.operators.eval.pdf_qa import (
    CURVE_POINTS,
    Baselines,
    curve_tables,
    kind_table,
    method_curve,
    per_kind,
    recall_curve,
    summarise_pdf,
)
from tests.conftest import SHARED_DATA, missing_shared_data

REPO = Path(__file__).resolve().parents[3]


def _unit(page: int, text: str = "", page_end: int | None = None) -> dict:
    return {"page": page, "page_end": page_end or page, "text": text}


def test_a_curve_scores_each_prefix_of_the_evidence():
    question = {"evidence_pages": [2, 5], "evidence_texts": ["the answer is 42"]}
    evidence = [_unit(1), _unit(2, "so the answer is 42 here"), _unit(3, page_end=5)]
    curves = recall_curve(question, evidence, units=4)
    assert curves["page_recall"] == [0.0, 0.5, 1.0, 1.0]  # a list shorter than n: all of it
    assert curves["span_recall"] == [0.0, 1.0, 1.0, 1.0]
    assert recall_curve({"evidence_pages": [], "evidence_texts": []}, evidence, 3) == {}


class _Engine:
    """Answers a method's question with one unit per page, 1, 2, 3, ..., ``per_k`` · k of
    them (DeepRead returns about 3 units a hit), and counts the calls."""

    def __init__(self, per_k: int) -> None:
        self.per_k, self.asked = per_k, []

    def answer(self, question: str, method: str, doc: str, k: int, generate: bool = True) -> dict:
        assert not generate or not self.asked, "curve and baseline asks want evidence only"
        self.asked.append(k)
        return {"evidence": [_unit(p) for p in range(1, self.per_k * k + 1)]}


def test_a_method_is_asked_with_the_k_that_makes_each_budget():
    engine = _Engine(per_k=3)
    question = {"question": "q", "doc": "d.pdf", "evidence_pages": [4, 12]}
    own = engine.answer("q", "deepread", "d.pdf", 5)["evidence"]  # k = 5: 15 units
    engine.asked.clear()
    curve = method_curve(engine, question, "deepread", 5, own)
    # budgets 1, 3, 5, 10, 15, 20 → k = 1, 1, 2, 4, (5: asked already), 7
    assert engine.asked == [1, 2, 4, 7]
    expected = [0.0, 0.0, 0.5, 0.5, 1.0, 1.0]  # page 4 from 5 units on, page 12 from 15
    assert curve["page_recall"] == expected and len(CURVE_POINTS) == len(expected)


class _CountingEngine(_Engine):
    """A count question's method: all 16 of its matches whatever k, one unit per k past
    them."""

    def answer(self, question: str, method: str, doc: str, k: int, generate: bool = True) -> dict:
        self.asked.append(k)
        return {"evidence": [_unit(p) for p in range(1, max(16, k) + 1)]}


def test_a_budget_the_estimated_k_leaves_short_is_asked_again_with_k_n():
    engine = _CountingEngine(per_k=1)
    question = {"question": "q", "doc": "d.pdf", "evidence_pages": [18]}
    own = engine.answer("q", "ladrag", "d.pdf", 5)["evidence"]  # 16 units at k = 5: 3.2 a k
    engine.asked.clear()
    curve = method_curve(engine, question, "ladrag", 5, own)
    # budgets 1, 3, 5, 10, 15, 20 → k = 1, 1, 2, 4, (5), 7; k = 7 gives 16 of 20: k = 20
    assert engine.asked == [1, 2, 4, 7, 20]
    assert curve["page_recall"] == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]  # page 18: the 18th unit


def test_baselines_are_asked_once_per_question_and_shared():
    engine = _Engine(per_k=1)
    baselines = Baselines(engine)
    question = {"id": "q1", "question": "q", "doc": "d.pdf"}
    assert len(baselines.evidence(question, "dense", 3)) == 3
    assert len(baselines.evidence(question, "dense", 20)) == 20
    assert engine.asked == [20]  # one list of 20; its first n units are its top n
    assert len(baselines.evidence(question, "dense", 25)) == 25 and engine.asked == [20, 25]


def test_summaries_average_the_curves_per_budget():
    rows = [
        {"seconds": 1.0, "error": None, "curve": {"page_recall": [0.0, 1.0]}},
        {"seconds": 1.0, "error": None, "curve": {"page_recall": [1.0, 1.0]}},
        {"seconds": 1.0, "error": None},  # no gold pages: no curve
    ]
    assert summarise_pdf(rows)["curve"] == {"page_recall": [0.5, 1.0]}


def test_the_split_keeps_whole_documents_on_one_side(tmp_path):
    split = json.loads((REPO / "benchmarks" / "pdf_qa_split.json").read_text())
    for name in ("mmlongbench", "syllabusqa_val", "syllabusqa_train"):
        tune, report = set(split[name]["tune"]), set(split[name]["report"])
        assert tune and report and not tune & report
    questions = [{"id": i, "doc": d} for i, d in enumerate(["a.pdf", "b.pdf", "a.pdf", "c.pdf"])]
    path = tmp_path / "split.json"
    path.write_text(json.dumps({"set": {"tune": ["a.pdf"], "report": ["b.pdf", "c.pdf"]}}))
    assert [q["id"] for q in split_questions(questions, str(path), "tune")] == [0, 2]
    assert [q["id"] for q in split_questions(questions, str(path), "report")] == [1, 3]
    with pytest.raises(KeyError, match="no documents in part 'dev'"):
        split_questions(questions, str(path), "dev")
    with pytest.raises(ValueError, match="both"):
        split_questions(questions, None, "tune")


def test_the_syllabus_splits_follow_the_file_s_rule_and_share_no_syllabus():
    """Each SyllabusQA set's syllabi, ordered by sha256('bookindex-split-1' + name), go
    alternately to report and tune (the first to report), as the file's rule says; the training
    syllabi are SyllabusQA's own training documents, none of them a validation one."""
    split = json.loads((REPO / "benchmarks" / "pdf_qa_split.json").read_text())
    for name in ("syllabusqa_val", "syllabusqa_train"):
        names = split[name]["report"] + split[name]["tune"]
        ordered = sorted(
            names, key=lambda n: hashlib.sha256(f"bookindex-split-1{n}".encode()).hexdigest()
        )
        assert sorted(split[name]["report"]) == sorted(ordered[0::2])
        assert sorted(split[name]["tune"]) == sorted(ordered[1::2])
    val = set(split["syllabusqa_val"]["report"]) | set(split["syllabusqa_val"]["tune"])
    train = set(split["syllabusqa_train"]["report"]) | set(split["syllabusqa_train"]["tune"])
    assert len(val) == 11 and len(train) == 39 and not val & train
    questions = SHARED_DATA / "syllabusqa"
    if not questions.is_dir():
        missing_shared_data("SyllabusQA's questions")
    for name, part in (("questions_val.jsonl", val), ("questions_train.jsonl", train)):
        with (questions / name).open() as lines:
            assert {json.loads(line)["doc"] for line in lines} == part


def test_the_figures_are_read_per_kind_of_document_where_the_split_names_kinds(tmp_path):
    split = REPO / "benchmarks" / "pdf_qa_split.json"
    kinds = document_kinds(str(split))
    parts = json.loads(split.read_text())["mmlongbench"]
    assert set(kinds) == set(parts["tune"]) | set(parts["report"])  # every PDF has its kind
    assert kinds["3M_2018_10K.pdf"] == "filing" and kinds["2303.05039v2.pdf"] == "paper"
    rows = [
        {"doc": "3M_2018_10K.pdf", "page_recall": 1.0, "dense_page_recall": 0.5, "n_units": 5},
        {"doc": "AMAZON_2017_10K.pdf", "page_recall": 0.0, "dense_page_recall": 0.5, "n_units": 5},
        {"doc": "2303.05039v2.pdf", "page_recall": 0.5, "dense_page_recall": 1.0, "n_units": 3},
        {"doc": "2303.05039v2.pdf", "n_units": 4},  # unanswerable: no page recall
        {"doc": "elsewhere.pdf", "span_recall": 0.25, "n_units": 5},
    ]
    found = per_kind(rows, kinds)
    assert list(found) == ["filing", "other", "paper"]
    assert found["filing"] == {
        "documents": 2,
        "questions": 2,
        "answerable": 2,
        "page_recall": 0.5,
        "dense_page_recall": 0.5,
        "n_units": 5.0,
    }
    assert found["paper"]["answerable"] == 1 and found["paper"]["n_units"] == 3.5
    table = kind_table({"bookrag": {"per_kind": found}})
    assert "| bookrag | filing | 2 | 2 | 5.0 | 50.0 | 50.0 | – | – | – | – |" in table
    assert "| bookrag | other | 1 | 1 | 5.0 | – | – | – | 25.0 | – | – |" in table
    assert kind_table({"bookrag": {}}) == []  # no kinds, no table
    path = tmp_path / "split.json"
    path.write_text(json.dumps({"set": {"tune": ["a.pdf"], "report": ["b.pdf"]}}))
    assert document_kinds(str(path)) == {}
    for bad in (["a.pdf"], {"paper": "a.pdf"}, {"paper": [1]}):
        path.write_text(json.dumps({"set": {"tune": ["a.pdf"], "kinds": bad}}))
        with pytest.raises(ValueError, match=r"set\.kinds in .*expected \{kind: \[file names\]\}"):
            document_kinds(str(path))


def _row(method: list[float], baseline_at_points: list[float]) -> dict:
    """A question's row: the method's curve over CURVE_POINTS, and a baseline curve over 1..20
    holding ``baseline_at_points`` at those budgets (and junk elsewhere, which must not be read)."""
    baseline = [9.0] * 20
    for n, value in zip(CURVE_POINTS, baseline_at_points, strict=True):
        baseline[n - 1] = value
    return {
        "seconds": 0.0,
        "error": None,
        "curve": {"span_recall": method},
        "hybrid_curve": {"span_recall": baseline},
        "dense_curve": {"span_recall": baseline},
    }


def test_margins_pair_each_question_with_the_baseline_at_the_same_units():
    """The margin over a baseline at n units is the mean of the per-question differences at n
    (the baseline read at its n-th unit), with a seeded 95 % bootstrap interval: a constant
    difference has no spread; a mixed one an interval around its mean, the same on every call."""
    constant = [_row([0.5] * 6, [0.25] * 6) for _ in range(10)]
    margin = summarise_pdf(constant)["curve_margin"]["span_recall"]["hybrid"]
    assert [m["mean"] for m in margin] == pytest.approx([0.25] * 6)
    assert all(m["low"] == pytest.approx(m["mean"]) == pytest.approx(m["high"]) for m in margin)
    mixed = [_row([1.0] * 6, [0.0] * 6)] * 3 + [_row([0.0] * 6, [1.0] * 6)] * 2
    mixed += [_row([0.5] * 6, [0.5] * 6)] * 5
    first = summarise_pdf(mixed)["curve_margin"]["span_recall"]["hybrid"]
    assert first[2]["mean"] == pytest.approx(0.1)  # (3 − 2) / 10
    assert first[2]["low"] < 0.1 < first[2]["high"] and first[2]["low"] < 0 < first[2]["high"]
    assert summarise_pdf(mixed)["curve_margin"]["span_recall"]["hybrid"] == first
    metrics = {"zoom": summarise_pdf(mixed)}
    table = "\n".join(curve_tables(metrics))
    assert "| zoom − hybrid | +10.0 (" in table and "| zoom − dense |" in table
