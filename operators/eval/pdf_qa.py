"""PDF QA evaluation: every method of the query API against dense top-k at the same number of
evidence units, per question.

For each question (canonical PDF QA format: question, answers, doc, evidence_pages,
evidence_texts, answer_format) and method, the method answers inside the question's document;
then the dense baseline retrieves exactly as many units as the method returned. Page metrics
count answerable questions (those with evidence pages); span recall those with evidence texts;
EM/F1 those with a gold answer other than "Not answerable" whenever the method answered.
"""

from __future__ import annotations

import time

from bookindex.operators.eval.progress import Progress
from bookindex.operators.eval.qa_metrics import exact_match, page_metrics, span_recall, token_f1
from bookindex.operators.query.bookrag import fallbacks
from bookindex.operators.query.engine import QueryEngine

PAGE_KEYS = ("page_recall", "perfect_recall", "irrelevant_page_ratio")
UNANSWERABLE = "not answerable"


def score_unit_list(question: dict, evidence: list[dict], answer: str | None) -> dict:
    row: dict = {"n_units": len(evidence)}
    pages = page_metrics(evidence, question.get("evidence_pages") or [])
    if pages is not None:
        row.update(pages)
    spans = span_recall(question.get("evidence_texts") or [], [e["text"] for e in evidence])
    if spans is not None:
        row["span_recall"] = spans
    answers = [a for a in question.get("answers", []) if a]
    if answer and answers and UNANSWERABLE not in {a.strip().lower() for a in answers}:
        row["em"] = exact_match(answer, answers)
        row["f1"] = token_f1(answer, answers)
    return row


def evaluate_pdf_method(
    engine: QueryEngine, questions: list[dict], method: str, k: int
) -> list[dict]:
    rows = []
    progress = Progress(method, len(questions))
    for question in questions:
        started = time.perf_counter()
        result = engine.answer(question["question"], method, question["doc"], k)
        seconds = time.perf_counter() - started
        evidence = result["evidence"]
        row = {
            "id": question["id"],
            "doc": question["doc"],
            "method": result["method"],
            "query_class": result["query_class"],
            "error": result["error"],
            "answer": result["answer"],
            "gold_pages": question.get("evidence_pages") or [],
            "pages": [[e["page"], e["page_end"]] for e in evidence],
            "plan": result["plan"],
            "fallbacks": fallbacks(result["trace"]),
            "seconds": round(seconds, 4),
        }
        row.update(score_unit_list(question, evidence, result["answer"]))
        baseline = []
        if evidence and result["error"] is None:
            dense = engine.answer(question["question"], "dense", question["doc"], len(evidence))
            baseline = dense["evidence"]
        matched = score_unit_list(question, baseline, None)
        row.update({f"dense_{key}": value for key, value in matched.items()})
        rows.append(row)
        progress.done()
    return rows


def summarise_pdf(rows: list[dict]) -> dict[str, float]:
    def mean(key: str) -> float | None:
        values = [r[key] for r in rows if key in r]
        return sum(values) / len(values) if values else None

    out: dict[str, float] = {"questions": len(rows)}
    keys = (*PAGE_KEYS, "span_recall", "em", "f1", "n_units")
    for key in keys:
        for name in (key, f"dense_{key}"):
            value = mean(name)
            if value is not None:
                out[name] = value
    out["answerable"] = sum(1 for r in rows if "page_recall" in r)
    out["errors"] = sum(1 for r in rows if r["error"])
    out["fallbacks"] = sum(len(r.get("fallbacks", [])) for r in rows)
    out["answers_with_fallback"] = sum(1 for r in rows if r.get("fallbacks"))
    out["seconds_per_query"] = mean("seconds") or 0.0
    return out


def pdf_markdown(metrics: dict[str, dict], questions: str) -> str:
    lines = [
        f"# PDF QA evaluation\n\nquestions: `{questions}`\n",
        "Each method beside dense top-k with the same number of evidence units per question.\n",
        "| method | units | page recall | dense | PR | dense PR | IPR | dense IPR | span recall "
        "| dense span | EM | F1 | s/query |",
        "|---|" + "---|" * 12,
    ]

    def pct(m: dict, key: str) -> str:
        return f"{100 * m[key]:.1f}" if key in m else "–"

    for method, m in metrics.items():
        cells = [
            f"{m.get('n_units', 0):.1f}",
            pct(m, "page_recall"),
            pct(m, "dense_page_recall"),
            pct(m, "perfect_recall"),
            pct(m, "dense_perfect_recall"),
            pct(m, "irrelevant_page_ratio"),
            pct(m, "dense_irrelevant_page_ratio"),
            pct(m, "span_recall"),
            pct(m, "dense_span_recall"),
            pct(m, "em"),
            pct(m, "f1"),
            f"{m['seconds_per_query']:.2f}",
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += ["", "Model calls that fell back to the rules (each is in the answer's trace):", ""]
    lines += [
        f"- {method}: {m.get('fallbacks', 0)} in {m.get('answers_with_fallback', 0)} of "
        f"{m['questions']} answers"
        for method, m in metrics.items()
    ]
    return "\n".join(lines) + "\n"
