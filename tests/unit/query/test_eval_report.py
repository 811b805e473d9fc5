"""report.html of the PDF QA evaluation, from real answers: MMLongBench's questions on the
paper of this folder's in-memory index, answered by two methods beside the baselines; the
curves, the per-document bars and the seconds come out of metrics.json as written, and the
plot's marks sit where their figures put them."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bookindex.jobs.evaluate import document_kinds
from bookindex.operators.eval.pdf_qa import (
    BASELINES,
    CURVE_POINTS,
    evaluate_pdf_method,
    per_kind,
    summarise_pdf,
)
from bookindex.operators.eval.report import PDF, report_html, y_of
from tests.conftest import PAPER

REPO = Path(__file__).resolve().parents[3]
K = 5
METHODS = ("bookrag", "ladrag")


class Marks(HTMLParser):
    """Every element with a data-value: its tag and attributes; and every tag seen."""

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


def test_the_per_document_figures_are_the_means_of_its_questions(evaluated):
    rows, metrics = evaluated
    for method in METHODS:
        entry = metrics[method]["per_document"][PAPER]
        answerable = [r for r in rows[method] if "page_recall" in r]
        assert entry["answerable"] == len(answerable) >= 4
        for key in ("page_recall", *(f"{b}_page_recall" for b in BASELINES)):
            assert entry[key] == pytest.approx(sum(r[key] for r in answerable) / len(answerable))
        spread = metrics[method]["seconds"]
        seconds = sorted(r["seconds"] for r in rows[method])
        assert seconds[0] <= spread["p50"] <= spread["p90"] <= spread["max"] == seconds[-1]


def test_the_report_draws_the_figures_of_metrics_json(evaluated):
    _, metrics = evaluated
    html = report_html(metrics, PDF, "questions.jsonl")
    parser = Marks()
    parser.feed(html)
    assert "svg" in parser.tags and not {"script", "link", "img", "iframe"} & parser.tags
    assert "http" not in html  # nothing from elsewhere
    points = [a for tag, a in parser.marks if tag == "circle"]
    for method in METHODS:
        m = metrics[method]
        curves = {method: list(zip(CURVE_POINTS, m["curve"]["page_recall"], strict=True))}
        for name in BASELINES:  # the baselines' points at the method's budgets
            values = m[f"{name}_curve"]["page_recall"]
            curves[name] = [(n, values[n - 1]) for n in CURVE_POINTS]
        for who, curve in curves.items():
            drawn = [p for p in points if p["data-panel"] == method and p["data-method"] == who]
            assert [int(p["data-units"]) for p in drawn] == [n for n, _ in curve]
            assert [float(p["data-value"]) for p in drawn] == pytest.approx(
                [v for _, v in curve], abs=1e-6
            )
            assert [float(p["cy"]) for p in drawn] == pytest.approx(
                [y_of(v) for _, v in curve], abs=0.01
            )
        squares = {
            a["data-method"]: float(a["data-value"])
            for tag, a in parser.marks
            if a.get("class") == "operating-point" and a["data-panel"] == method
        }
        expected = {method: m["page_recall"]} | {b: m[f"{b}_page_recall"] for b in BASELINES}
        assert squares == pytest.approx(expected, abs=1e-6)  # as run, baselines at its units
        bars = {
            a["data-method"]: float(a["data-value"])
            for tag, a in parser.marks
            if tag == "rect" and a.get("data-of") == method
        }
        per_doc = m["per_document"][PAPER]
        expected = {method: per_doc["page_recall"]}
        expected |= {b: per_doc[f"{b}_page_recall"] for b in BASELINES}
        assert bars == pytest.approx(expected, abs=1e-6)
        mean = next(
            a
            for tag, a in parser.marks
            if tag == "rect"
            and a.get("class") == "bar"
            and "data-of" not in a
            and a["data-method"] == method
        )
        assert float(mean["data-value"]) == pytest.approx(m["seconds_per_query"], abs=1e-6)
        ticks = {
            a["data-stat"]: float(a["data-value"])
            for tag, a in parser.marks
            if tag == "line" and a["data-method"] == method
        }
        assert ticks == pytest.approx({k: m["seconds"][k] for k in ("p50", "p90")}, abs=1e-6)


def test_the_report_tables_each_margin_with_its_interval(evaluated):
    """The margin table holds every method's paired margin over every baseline at the curve's
    budgets as ``metrics.json`` has it, each cell marked by where its interval lies."""
    _, metrics = evaluated
    parser = Marks()
    parser.feed(report_html(metrics, PDF, "questions.jsonl"))
    cells = [a for tag, a in parser.marks if tag == "td" and "data-baseline" in a]
    assert len(cells) == len(METHODS) * len(BASELINES) * len(CURVE_POINTS)
    sides = set()
    for cell in cells:
        margin = metrics[cell["data-method"]]["curve_margin"]["page_recall"]
        expected = margin[cell["data-baseline"]][CURVE_POINTS.index(int(cell["data-units"]))]
        low, high = float(cell["data-low"]), float(cell["data-high"])
        assert float(cell["data-value"]) == pytest.approx(expected["mean"], abs=1e-9)
        assert (low, high) == pytest.approx((expected["low"], expected["high"]), abs=1e-9)
        assert low <= float(cell["data-value"]) <= high
        side = "above" if low > 0 else "below" if high < 0 else "either"
        assert cell["class"] == side
        sides.add(side)
    assert "either" in sides  # a handful of questions: some margins cannot be told from 0
    no_margins = {
        m: {k: v for k, v in e.items() if k != "curve_margin"} for m, e in metrics.items()
    }
    assert "data-baseline" not in report_html(no_margins, PDF, "questions.jsonl")


def test_the_report_tables_each_method_per_kind_of_document(evaluated):
    """Where the split names each document's kind, the report holds each method's recall per
    kind beside the baselines', as ``pdf_qa.per_kind`` computes it from the answers' rows."""
    rows, metrics = evaluated
    kinds = document_kinds(str(REPO / "benchmarks" / "pdf_qa_split.json"))
    with_kinds = {m: dict(e, per_kind=per_kind(rows[m], kinds)) for m, e in metrics.items()}
    parser = Marks()
    parser.feed(report_html(json.loads(json.dumps(with_kinds)), PDF, "questions.jsonl"))
    cells = [a for tag, a in parser.marks if tag == "td" and "data-kind" in a]
    assert len(cells) == len(METHODS) * (1 + len(BASELINES))
    for cell in cells:
        assert cell["data-kind"] == "paper"  # the test paper's kind in the split
        entry = with_kinds[cell["data-of"]]["per_kind"]["paper"]
        who = cell["data-method"]
        key = "page_recall" if who == cell["data-of"] else f"{who}_page_recall"
        assert float(cell["data-value"]) == pytest.approx(entry[key], abs=1e-9)
        assert entry[key] == pytest.approx(metrics[cell["data-of"]]["per_document"][PAPER][key])
        if who == cell["data-of"]:
            baselines = [entry[f"{b}_page_recall"] for b in BASELINES]
            above, below = (
                all(entry[key] > v for v in baselines),
                any(entry[key] < v for v in baselines),
            )
            assert cell["class"] == ("above" if above else "below" if below else "either")
    assert "per kind of document" not in report_html(metrics, PDF, "questions.jsonl")
