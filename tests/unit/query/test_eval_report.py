"""report.html of the PDF QA evaluation, from real answers: MMLongBench's questions on the
paper of this folder's in-memory index, answered by two methods beside dense; the curves of
page recall against units, the per-document bars and the seconds come out of metrics.json as
written, and the plot's marks sit where their figures put them."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from bookindex.operators.eval.pdf_qa import evaluate_pdf_method, summarise_pdf
from bookindex.operators.eval.report import PDF, report_html, y_of
from tests.conftest import PAPER

K = 5
METHODS = ("bookrag", "zoom")


class Marks(HTMLParser):
    """Every element with a data-value: its tag and attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[tuple[str, dict]] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.add(tag)
        found = dict(attrs)
        if "data-value" in found:
            self.marks.append((tag, found))


@pytest.fixture(scope="module")
def evaluated(engine, shared_data):
    path = shared_data / "mmlongbench" / "questions.jsonl"
    questions = [json.loads(line) for line in path.read_text().splitlines()]
    questions = [q for q in questions if q["doc"] == PAPER]
    rows = {m: evaluate_pdf_method(engine, questions, m, K) for m in METHODS}
    metrics = json.loads(json.dumps({m: summarise_pdf(r) for m, r in rows.items()}))
    return rows, metrics


def test_dense_at_the_same_units_is_its_curve_at_that_many_units(evaluated):
    rows, _ = evaluated
    checked = 0
    for row in (r for method_rows in rows.values() for r in method_rows):
        if "recall_by_units" in row and 1 <= row["n_units"] <= K:
            units = row["n_units"]
            assert row["recall_by_units"][units - 1] == row["page_recall"]
            assert row["dense_recall_by_units"][units - 1] == row["dense_page_recall"]
            checked += 1
    assert checked >= 4


def test_the_report_draws_the_figures_of_metrics_json(evaluated):
    _, metrics = evaluated
    html = report_html(metrics, PDF, "questions.jsonl")
    parser = Marks()
    parser.feed(html)
    assert "svg" in parser.tags and not {"script", "link", "img", "iframe"} & parser.tags
    assert "http" not in html  # nothing from elsewhere
    points = [a for tag, a in parser.marks if tag == "circle"]
    for method in METHODS:
        curve = metrics[method]["recall_by_units"]
        assert [p["units"] for p in curve] == list(range(1, K + 1))
        for who, key in ((method, "page_recall"), ("dense", "dense_page_recall")):
            drawn = [p for p in points if p["data-panel"] == method and p["data-method"] == who]
            assert [float(p["data-value"]) for p in drawn] == pytest.approx(
                [c[key] for c in curve], abs=1e-6
            )
            assert [float(p["cy"]) for p in drawn] == pytest.approx(
                [y_of(c[key]) for c in curve], abs=0.01
            )
        squares = {
            a["data-method"]: float(a["data-value"])
            for tag, a in parser.marks
            if a.get("class") == "operating-point" and a["data-panel"] == method
        }
        assert squares == pytest.approx(  # as run, and dense asked for as many units
            {method: metrics[method]["page_recall"], "dense": metrics[method]["dense_page_recall"]},
            abs=1e-6,
        )
        bars = [a for tag, a in parser.marks if tag == "rect" and a.get("data-of") == method]
        per_doc = metrics[method]["per_document"][PAPER]
        assert {b["data-method"]: float(b["data-value"]) for b in bars} == pytest.approx(
            {method: per_doc["page_recall"], "dense": per_doc["dense_page_recall"]}, abs=1e-6
        )
        mean = next(
            a
            for tag, a in parser.marks
            if tag == "rect"
            and a.get("class") == "bar"
            and "data-of" not in a
            and a["data-method"] == method
        )
        assert float(mean["data-value"]) == pytest.approx(
            metrics[method]["seconds_per_query"], abs=1e-6
        )
        ticks = {
            a["data-stat"]: float(a["data-value"])
            for tag, a in parser.marks
            if tag == "line" and a["data-method"] == method
        }
        assert ticks == pytest.approx(
            {k: metrics[method]["seconds"][k] for k in ("p50", "p90")}, abs=1e-6
        )
