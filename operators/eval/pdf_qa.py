"""PDF QA evaluation: every method of the query API against two baselines at the same number of
evidence units, per question: dense top-k and ``hybrid`` (BM25 and dense fused by reciprocal
rank).

For each question (canonical PDF QA format: question, answers, doc, evidence_pages,
evidence_texts, answer_format) and method, the method answers inside the question's document
at the configured k; then each baseline retrieves exactly as many units as the method returned.
Page metrics count answerable questions (those with evidence pages); span recall those with
evidence texts. Answer metrics (``operators.eval.answer_judge.AnswerScorer``: EM/F1 after
answer extraction, inclusion accuracy, with a judge endpoint the judged accuracy; unanswerable
questions scored as MMLongBench does) count the questions the method answered (``answered``);
each row also holds the answering model's tokens (``usage``: the engine backend's tally
around the call, else the result's own; absent: not measured) and its seconds.

Curves: recall at a budget of n evidence units, n = 1..20: each baseline's top n (one list of
20 a question: its first n units are its top n), and each method asked with k = n at the
budgets of ``CURVE_POINTS`` (1, 3, 5, 10, 15, 20) and scored on the first n units it returns
(a method that returns more than k units spends only the first n); so "at equal units" is read
at every budget, not only at the method's own. The summary also holds what the report
(``operators.eval.report``) draws beside them: per-document scores and the spread of the
seconds per question; where the documents have kinds (a split file's ``kinds``: paper, filing,
report, ...), the same scores per kind (``per_kind``), as held-back documents of those kinds are
read.
"""

from __future__ import annotations

import math
import time
from typing import TextIO

import numpy as np

from bookindex.operators.eval.answer_judge import AnswerScorer
from bookindex.operators.eval.progress import Progress
from bookindex.operators.eval.qa_metrics import page_metrics, span_recall
from bookindex.operators.query.bookrag import fallbacks
from bookindex.operators.query.engine import QueryEngine

PAGE_KEYS = ("page_recall", "perfect_recall", "irrelevant_page_ratio")
BASELINES = ("dense", "hybrid")
CURVE_UNITS = 20
CURVE_POINTS = (1, 3, 5, 10, 15, 20)  # the budgets each method is asked at for its curve
MARGIN_RESAMPLES = 2000  # paired bootstrap of a method's margin over a baseline, per budget
MARGIN_SEED = 0


def score_unit_list(question: dict, evidence: list[dict], answer: str | None = None) -> dict:
    """The retrieval metrics of an evidence list: units, page metrics (answerable questions),
    span recall (questions with evidence texts). ``answer`` is scored apart
    (``AnswerScorer``); kept for callers that pass it."""
    row: dict = {"n_units": len(evidence)}
    pages = page_metrics(evidence, question.get("evidence_pages") or [])
    if pages is not None:
        row.update(pages)
    spans = span_recall(question.get("evidence_texts") or [], [e["text"] for e in evidence])
    if spans is not None:
        row["span_recall"] = spans
    return row


USAGE_KEYS = ("prompt_tokens", "completion_tokens", "requests")


def answer_usage(result: dict, backend, before: dict[str, int] | None) -> dict[str, int] | None:
    """The answering model's tokens of one answer: the difference of the engine backend's
    tally (``usage``, the OpenAI-compatible and vLLM backends keep one) since ``before``, which
    holds every request the answer made (the batch's question vector too); else the result's
    own ``usage``; None when neither is known (not measured). The evaluation asks one question
    at a time, so the difference is that question's."""
    now = usage_tally(backend)
    if now is not None and before is not None:
        return {k: now[k] - before[k] for k in USAGE_KEYS}
    used = result.get("usage")
    if isinstance(used, dict):
        return {k: int(used.get(k, 0) or 0) for k in USAGE_KEYS}
    return None


def engine_backend(engine: QueryEngine):
    """The model backend an engine answers with (None: it has none)."""
    return getattr(getattr(engine, "model", None), "backend", None)


def usage_tally(backend) -> dict[str, int] | None:
    """The backend's tokens and requests so far (None: it keeps no tally, as the offline one)."""
    used = getattr(backend, "usage", None)
    if not isinstance(used, dict):
        return None
    return {k: int(used.get(k, 0) or 0) for k in USAGE_KEYS}


def add_usage(total: dict[str, int] | None, more: dict[str, int] | None) -> dict[str, int] | None:
    if more is None:
        return total
    return {k: (total or {}).get(k, 0) + more[k] for k in USAGE_KEYS}


def recall_curve(question: dict, evidence: list[dict], units: int = CURVE_UNITS) -> dict:
    """Page recall (answerable questions) and span recall (questions with evidence texts) of
    the first n evidence units, n = 1..``units`` (a list shorter than n: all of it)."""
    curves: dict[str, list[float]] = {}
    gold_pages = question.get("evidence_pages") or []
    spans = question.get("evidence_texts") or []
    for n in range(1, units + 1):
        prefix = evidence[:n]
        pages = page_metrics(prefix, gold_pages)
        if pages is not None:
            curves.setdefault("page_recall", []).append(pages["page_recall"])
        found = span_recall(spans, [e["text"] for e in prefix])
        if found is not None:
            curves.setdefault("span_recall", []).append(found)
    return curves


def method_curve(
    engine: QueryEngine,
    question: dict,
    method: str,
    k: int,
    evidence: list[dict],
    usage: dict | None = None,
) -> dict[str, list[float]]:
    """A method's recall at each budget n of ``CURVE_POINTS``, as lists over ``CURVE_POINTS``
    (a baseline's curve: ``recall_curve``, over 1..20): the method asked with the k that makes
    about n units and scored on its first n. A method returns a number of units per k of its
    own (DeepRead widens each of its k hits by its scan window: about 3k; LAD-RAG spends a
    budget of ``query.ladrag_budget`` × k), read from its answer at ``k`` (``evidence``), so
    at budget n it is asked with k = ⌈n / units per k⌉, for its evidence only (no answering
    request); where that gives fewer than n units (a count's matches made its answer at ``k``
    long), it is asked again with k = n. The model's tokens of these extra asks (an agent's
    own steps) are added to ``usage["curve"]`` when given."""
    per_k = max(1.0, len(evidence) / k) if evidence else 1.0
    asked: dict[int, list[dict]] = {k: evidence}
    curves: dict[str, list[float]] = {}

    def ask(k_n: int) -> list[dict]:
        if k_n not in asked:
            before = usage_tally(engine_backend(engine))
            found = engine.answer(  # evidence only: the method's own steps, no answer request
                question["question"], method, question["doc"], k_n, generate=False
            )
            asked[k_n] = found["evidence"]
            if usage is not None:
                spent = answer_usage(found, engine_backend(engine), before)
                usage["curve"] = add_usage(usage.get("curve"), spent)
        return asked[k_n]

    for n in CURVE_POINTS:
        k_n = max(1, math.ceil(n / per_k - 1e-9))
        found = ask(k_n)
        if len(found) < n and k_n < n:  # fewer units than the budget: asked with k = n
            found = ask(n)
        point = recall_curve(question, found[:n], n)
        for metric, values in point.items():
            curves.setdefault(metric, []).append(values[-1])
    return curves


class Baselines:
    """Each question's baseline evidence (dense, hybrid), asked once at ``CURVE_UNITS`` (for
    the evidence only: no answering request) and shared by every method's row; a method that
    returned more units gets a longer list."""

    def __init__(self, engine: QueryEngine) -> None:
        self.engine = engine
        self._found: dict[tuple[str, str, int], list[dict]] = {}

    def evidence(self, question: dict, method: str, units: int) -> list[dict]:
        k = max(units, CURVE_UNITS)
        key = (question["id"], method, k)
        if key not in self._found:
            asked = self.engine.answer(  # evidence only: no answer request
                question["question"], method, question["doc"], k, generate=False
            )
            self._found[key] = asked["evidence"]
        return self._found[key][:units]


def evaluate_pdf_method(
    engine: QueryEngine,
    questions: list[dict],
    method: str,
    k: int,
    baselines: Baselines | None = None,
    curves: bool = True,
    stream: TextIO | None = None,
    scorer: AnswerScorer | None = None,
) -> list[dict]:
    """One row per question: the method's answer and evidence at ``k`` scored (retrieval,
    and the answer by ``scorer``: extraction by rule and no judge when None), each baseline
    at the same number of units (``dense_*``, ``hybrid_*``), and with ``curves`` the recall
    curves of the method and of the baselines (``curve``, ``dense_curve``, ``hybrid_curve``).
    ``usage``: the answering model's tokens of the answer at ``k`` (absent: not measured),
    ``curve_usage`` those of the curve's extra asks; ``seconds``: the answer at ``k``."""
    baselines = baselines or Baselines(engine)
    scorer = scorer or AnswerScorer()
    rows = []
    progress = Progress(method, len(questions), stream)
    for question in questions:
        before = usage_tally(engine_backend(engine))
        started = time.perf_counter()
        result = engine.answer(question["question"], method, question["doc"], k)
        seconds = time.perf_counter() - started
        usage = answer_usage(result, engine_backend(engine), before)
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
        if usage is not None:
            row["usage"] = usage
        row.update(score_unit_list(question, evidence))
        row.update(scorer.score(question, result["answer"]))
        for name in BASELINES:
            found = []
            if evidence and result["error"] is None:
                found = baselines.evidence(question, name, len(evidence))
            matched = score_unit_list(question, found, None)
            row.update({f"{name}_{key}": value for key, value in matched.items()})
        if curves and result["error"] is None:
            extra: dict = {}
            row["curve"] = method_curve(engine, question, method, k, evidence, extra)
            if extra.get("curve") is not None:
                row["curve_usage"] = extra["curve"]
            for name in BASELINES:
                found = baselines.evidence(question, name, CURVE_UNITS)
                row[f"{name}_curve"] = recall_curve(question, found)
        rows.append(row)
        progress.done()
    return rows


def summarise_pdf(rows: list[dict]) -> dict:
    def mean(key: str) -> float | None:
        values = [r[key] for r in rows if key in r]
        return sum(values) / len(values) if values else None

    out: dict = {"questions": len(rows)}
    keys = (*PAGE_KEYS, "span_recall", "n_units")
    for key in keys:
        for name in (key, *(f"{b}_{key}" for b in BASELINES)):
            value = mean(name)
            if value is not None:
                out[name] = value
    for name in ("curve", *(f"{b}_curve" for b in BASELINES)):  # over CURVE_POINTS / 1..20
        for metric in ("page_recall", "span_recall"):
            found = [r[name][metric] for r in rows if metric in r.get(name, {})]
            if found:
                out.setdefault(name, {})[metric] = [
                    sum(values) / len(found) for values in zip(*found, strict=True)
                ]
    margins = curve_margins(rows)
    if margins:
        out["curve_margin"] = margins
    out["answerable"] = sum(1 for r in rows if "page_recall" in r)
    out["errors"] = sum(1 for r in rows if r["error"])
    out["fallbacks"] = sum(len(r.get("fallbacks", [])) for r in rows)
    out["answers_with_fallback"] = sum(1 for r in rows if r.get("fallbacks"))
    out.update(summarise_answers(rows))
    out["seconds_per_query"] = mean("seconds") or 0.0
    out["seconds"] = seconds_spread([r["seconds"] for r in rows if "seconds" in r])
    out["per_document"] = per_document(rows)
    return out


def curve_margins(rows: list[dict]) -> dict[str, dict[str, list[dict[str, float]]]]:
    """The method's margin over each baseline at each budget of ``CURVE_POINTS``, paired by
    question: the mean of (method's recall − the baseline's at the same n units) and its 95 %
    percentile bootstrap interval (``MARGIN_RESAMPLES`` resamples of the questions, seeded:
    the same rows give the same interval). {metric: {baseline: [{mean, low, high}, ...]}}."""
    out: dict[str, dict[str, list[dict[str, float]]]] = {}
    columns = [n - 1 for n in CURVE_POINTS]
    for metric in ("page_recall", "span_recall"):
        for name in BASELINES:
            paired = [
                (r["curve"][metric], r[f"{name}_curve"][metric])
                for r in rows
                if metric in r.get("curve", {}) and metric in r.get(f"{name}_curve", {})
            ]
            if not paired:
                continue
            method = np.asarray([m for m, _ in paired], np.float64)
            baseline = np.asarray([[b[c] for c in columns] for _, b in paired], np.float64)
            diffs = method - baseline  # questions × budgets
            rng = np.random.default_rng(MARGIN_SEED)
            picks = rng.integers(0, len(diffs), (MARGIN_RESAMPLES, len(diffs)))
            resampled = np.sort(  # resamples × budgets, one budget at a time (memory)
                np.stack([column[picks].mean(axis=1) for column in diffs.T], axis=1), axis=0
            )
            low = resampled[int(0.025 * (MARGIN_RESAMPLES - 1))]
            high = resampled[int(math.ceil(0.975 * (MARGIN_RESAMPLES - 1)))]
            out.setdefault(metric, {})[name] = [
                {"mean": float(m), "low": float(lo), "high": float(hi)}
                for m, lo, hi in zip(diffs.mean(axis=0), low, high, strict=True)
            ]
    return out


ANSWER_KEYS = ("em", "f1", "inclusion", "judge")


def summarise_answers(rows: list[dict]) -> dict:
    """The answer metrics over the questions a method answered: ``answered`` (with an answer
    and a gold one), the means of EM, F1, inclusion and the judge's verdict (``judge``: only
    over judged questions, ``judged`` of them; absent: not computed), ``judge_errors``,
    ``extracted_by_model``, and ``tokens``: the answering model's prompt and completion tokens
    and requests over every question (``measured`` questions; None: not measured), per
    question, and those of the curves' extra asks (``curve_tokens``)."""
    out: dict = {"answered": sum(1 for r in rows if "em" in r)}
    for key in ANSWER_KEYS:
        values = [r[key] for r in rows if key in r]
        if values:
            out[key] = sum(values) / len(values)
    out["judged"] = sum(1 for r in rows if "judge" in r)
    out["judge_errors"] = sum(1 for r in rows if "judge_error" in r)
    out["extracted_by_model"] = sum(1 for r in rows if r.get("extraction") == "model")
    measured = [r["usage"] for r in rows if "usage" in r]
    tokens = None
    if measured:
        tokens = {k: sum(u[k] for u in measured) for k in USAGE_KEYS}
        tokens["measured"] = len(measured)
        for k in ("prompt_tokens", "completion_tokens"):
            tokens[f"{k}_per_question"] = tokens[k] / len(measured)
    out["tokens"] = tokens
    curve = [r["curve_usage"] for r in rows if "curve_usage" in r]
    if curve:
        out["curve_tokens"] = {k: sum(u[k] for u in curve) for k in USAGE_KEYS}
    return out


def seconds_spread(seconds: list[float]) -> dict[str, float]:
    """Median, 90th percentile and maximum of the seconds per question."""
    if not seconds:
        return {"p50": 0.0, "p90": 0.0, "max": 0.0}
    ordered = sorted(seconds)

    def at(share: float) -> float:
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]

    return {"p50": at(0.5), "p90": at(0.9), "max": ordered[-1]}


def per_document(rows: list[dict]) -> dict[str, dict]:
    """Per document: questions, answerable ones, and the means over its questions that have
    each of page and span recall (the method's and each baseline's at the same units), units
    and seconds per question."""
    return {
        doc: _group_means([r for r in rows if r.get("doc") == doc])
        for doc in sorted({r["doc"] for r in rows if "doc" in r})
    }


def per_kind(rows: list[dict], kinds: dict[str, str]) -> dict[str, dict]:
    """Per kind of document (``kinds``: file name → kind; a document it does not name:
    "other"): its documents, and ``per_document``'s means over the kind's questions."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        if "doc" in row:
            groups.setdefault(kinds.get(row["doc"], "other"), []).append(row)
    return {
        kind: {"documents": len({r["doc"] for r in mine}), **_group_means(mine)}
        for kind, mine in sorted(groups.items())
    }


def _group_means(rows: list[dict]) -> dict:
    keys = [f"{p}{m}" for m in ("page_recall", "span_recall") for p in ("", "dense_", "hybrid_")]
    entry: dict = {"questions": len(rows), "answerable": sum("page_recall" in r for r in rows)}
    for key in (*keys, "n_units", "seconds"):
        values = [r[key] for r in rows if key in r]
        if values:
            name = "seconds_per_query" if key == "seconds" else key
            entry[name] = sum(values) / len(values)
    return entry


def pdf_markdown(metrics: dict[str, dict], questions: str) -> str:
    lines = [
        f"# PDF QA evaluation\n\nquestions: `{questions}`\n",
        "Each method beside dense top-k and hybrid (BM25 + dense, reciprocal-rank fused) with "
        "the same number of evidence units per question.\n",
        "| method | units | page recall | dense | hybrid | PR | dense PR | IPR | dense IPR "
        "| span recall | dense span | hybrid span | s/query |",
        "|---|" + "---|" * 12,
    ]

    def pct(m: dict, key: str) -> str:
        return f"{100 * m[key]:.1f}" if key in m else "–"

    for method, m in metrics.items():
        cells = [
            f"{m.get('n_units', 0):.1f}",
            pct(m, "page_recall"),
            pct(m, "dense_page_recall"),
            pct(m, "hybrid_page_recall"),
            pct(m, "perfect_recall"),
            pct(m, "dense_perfect_recall"),
            pct(m, "irrelevant_page_ratio"),
            pct(m, "dense_irrelevant_page_ratio"),
            pct(m, "span_recall"),
            pct(m, "dense_span_recall"),
            pct(m, "hybrid_span_recall"),
            f"{m['seconds_per_query']:.2f}",
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += answer_table(metrics)
    lines += curve_tables(metrics)
    lines += kind_table(metrics)
    lines += ["", "Model calls that fell back to the rules (each is in the answer's trace):", ""]
    lines += [
        f"- {method}: {m.get('fallbacks', 0)} in {m.get('answers_with_fallback', 0)} of "
        f"{m['questions']} answers"
        for method, m in metrics.items()
    ]
    return "\n".join(lines) + "\n"


def kind_table(metrics: dict[str, dict]) -> list[str]:
    """Each method's figures per kind of document (``per_kind``), at its own budget beside the
    baselines at the same units; nothing where the documents have no kinds."""
    if not any(m.get("per_kind") for m in metrics.values()):
        return []
    lines = [
        "",
        "By kind of document (the split file's kinds), each method at its own budget beside the "
        "baselines at the same units:",
        "",
        "| method | kind | documents | questions | units | page recall | dense | hybrid "
        "| span recall | dense span | hybrid span |",
        "|---|" + "---|" * 10,
    ]
    keys = [f"{p}{m}" for m in ("page_recall", "span_recall") for p in ("", "dense_", "hybrid_")]
    for method, m in metrics.items():
        for kind, entry in m.get("per_kind", {}).items():
            cells = [str(entry["documents"]), str(entry["questions"])]
            cells.append(f"{entry['n_units']:.1f}" if "n_units" in entry else "–")
            cells += [f"{100 * entry[k]:.1f}" if k in entry else "–" for k in keys]
            lines.append(f"| {method} | {kind} | " + " | ".join(cells) + " |")
    return lines


def answer_table(metrics: dict[str, dict]) -> list[str]:
    """The answer metrics per method (``summarise_answers``), "–" where a method gave no
    answer, "not computed" (no judge endpoint) and "not measured" (no token counts) said."""
    lines = [
        "",
        "Answers (EM/F1 after answer extraction, inclusion accuracy, LLM-judged accuracy; "
        "unanswerable questions right when the answer declines; tokens: the answering "
        "model's, from the endpoint's usage):",
        "",
        "| method | answered | EM | F1 | inclusion | judge | prompt tok/q | completion tok/q "
        "| requests | s/question |",
        "|---|" + "---|" * 9,
    ]
    for method, m in metrics.items():
        answered = m.get("answered", 0)
        judge = "not computed" if not m.get("judged") else f"{100 * m['judge']:.1f}"
        tokens = m.get("tokens")
        if tokens:
            used = [
                f"{tokens['prompt_tokens_per_question']:.0f}",
                f"{tokens['completion_tokens_per_question']:.0f}",
                str(tokens["requests"]),
            ]
        else:
            used = ["not measured"] * 3
        cells = [
            f"{answered} of {m['questions']}",
            *(f"{100 * m[k]:.1f}" if answered and k in m else "–" for k in ("em", "f1")),
            f"{100 * m['inclusion']:.1f}" if answered and "inclusion" in m else "–",
            judge,
            *used,
            f"{m['seconds_per_query']:.2f}",
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    judge_notes = [
        f"- {method}: {m['judge_errors']} judge call(s) failed (those questions unjudged)"
        for method, m in metrics.items()
        if m.get("judge_errors")
    ]
    judge_notes += [
        f"- {method}: the judge used {m['judge_tokens']['prompt_tokens']} prompt and "
        f"{m['judge_tokens']['completion_tokens']} completion tokens in "
        f"{m['judge_tokens']['requests']} requests (not counted above)"
        for method, m in metrics.items()
        if m.get("judge_tokens")
    ]
    extracted = {m.get("extracted_by_model", 0) for m in metrics.values()}
    how = "by the judge model" if extracted != {0} else "by rule (no judge endpoint)"
    lines += ["", f"Short answers extracted {how}.", *judge_notes]
    return lines


def curve_tables(metrics: dict[str, dict]) -> list[str]:
    """Recall at n units (``CURVE_POINTS``) per method and per baseline, one table a metric."""
    lines: list[str] = []
    for metric in ("page_recall", "span_recall"):
        rows = {m: v["curve"][metric] for m, v in metrics.items() if metric in v.get("curve", {})}
        if not rows:
            continue
        first = next(v for v in metrics.values() if metric in v.get("curve", {}))
        for name in BASELINES:  # over 1..20: read at the methods' budgets
            rows[name] = [first[f"{name}_curve"][metric][n - 1] for n in CURVE_POINTS]
        header = " | ".join(f"{n}" for n in CURVE_POINTS)
        lines += ["", f"{metric.replace('_', ' ')} at a budget of n evidence units:", ""]
        lines += [f"| method | {header} |", "|---|" + "---|" * len(CURVE_POINTS)]
        for name, curve in rows.items():
            cells = " | ".join(f"{100 * value:.1f}" for value in curve)
            lines.append(f"| {name} | {cells} |")
        lines += margin_table(metrics, metric)
    return lines


def margin_table(metrics: dict[str, dict], metric: str) -> list[str]:
    """Each method's margin over each baseline at the curve's budgets, in points: the mean
    paired difference and its 95 % bootstrap interval (``curve_margins``)."""
    found = [
        (method, name, values)
        for method, m in metrics.items()
        for name, values in m.get("curve_margin", {}).get(metric, {}).items()
    ]
    if not found:
        return []
    header = " | ".join(f"{n}" for n in CURVE_POINTS)
    lines = [
        "",
        f"{metric.replace('_', ' ')}: each method's margin over a baseline at n units, in "
        "points, paired by question (mean, and its 95 % bootstrap interval):",
        "",
        f"| method − baseline | {header} |",
        "|---|" + "---|" * len(CURVE_POINTS),
    ]
    for method, name, values in found:
        cells = " | ".join(margin_text(v) for v in values)
        lines.append(f"| {method} − {name} | {cells} |")
    return lines


def margin_text(margin: dict[str, float]) -> str:
    """One margin of ``curve_margins`` in points: "+1.0 (-1.9, +4.1)" (mean, interval)."""
    return f"{100 * margin['mean']:+.1f} ({100 * margin['low']:+.1f}, {100 * margin['high']:+.1f})"
