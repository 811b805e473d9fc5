"""The BookRAG agent (§5.2–5.3): classify the question, build the operator plan of its class
(eq. 9–12), run it, and keep a trace of every operator with its input and output sizes.

    Ps      = Extract →(found) Select_by_Entity | (none) Select_by_Section → Pstd      (9)
    Pstd    = (Graph_Reasoning ‖ Text_Reasoning) → Skyline_Ranker → Reduce             (10)
    Pmulti  = Decompose → Ps per sub-question → Map → Reduce                           (11)
    Pglobal = (Filter_Modal | Filter_Range)* → Map (check each node) → Reduce          (12)

The default ``structured`` plan keeps these operators but turns the selections into scents
(Select_by_Entity's subtrees, the section heading's similarity and a named modality raise a
node's relevance instead of cutting everything else) and ends with a Page_Ranker (k nodes on k
different pages) instead of Skyline: on MMLongBench the hard cuts and the graph criterion lost
page recall offline (docs/results.md, PDF QA). ``plan="paper"`` runs eq. 9–10 as written. A
global question whose kept items are fewer than k units gets the rest of k from the structured
single-hop evidence inside its pages or sections, after them (a ``Fill`` step; its answer is
Reduce's over the kept items).

With a generative backend the classifier, the filter planner, Map and Reduce call it with JSON
schemas: Map in one request per question (``operators.query.bookrag_map``: the sub-questions
answered together from the kept nodes; a global question's filtered nodes checked together),
Reduce the cited answer (``operators.query.answering``), global COUNT and LIST questions
included (the rules' count goes with the evidence as a note). A model answer that is unusable
falls back to the rules, recorded in the step's ``fallbacks``. Offline the rules of
``operators.query.rules`` plan, Map checks by rules and Reduce answers extractively; every Map
and Reduce step says ``by`` "model" or "rules".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bookindex.operators.config import RelevanceConfig
from bookindex.operators.kinds import STRUCTURE_KINDS
from bookindex.operators.models import ModelError, is_generative
from bookindex.operators.models.prompts import CLASS_PROMPT, FILTER_PROMPT, chat
from bookindex.operators.models.prompts import CLASS_SCHEMA as _CLASS_SCHEMA
from bookindex.operators.models.prompts import FILTER_SCHEMA as _FILTER_SCHEMA
from bookindex.operators.query import bookrag_ops as ops
from bookindex.operators.query import scoring
from bookindex.operators.query.answering import cited_answer
from bookindex.operators.query.bookrag_map import MAP_UNITS, map_check, map_partials
from bookindex.operators.query.rules import (
    GLOBAL,
    MULTI,
    OPERATIONS,
    QUERY_CLASSES,
    classify,
    global_spec,
    modalities,
    retrieval_text,
)

if TYPE_CHECKING:
    from bookindex.operators.query.read_model import ReadModel

SELECT_DEPTH = 2
MAX_GLOBAL_EVIDENCE = 50


@dataclass
class AgentResult:
    query_class: str
    plan: list[str]
    evidence: list[int]  # node positions, best first
    scores: list[float]
    answer: str | None
    answer_type: str  # generated / extractive / count / none
    trace: list[dict] = field(default_factory=list)
    citations: list[dict] | None = None  # the model's Reduce: what its answer cites


class Trace:
    """The steps of one answer. ``pending`` collects the model calls that fell back to the
    rules (``bookrag_ops.record_fallback``) while a step runs; the step takes them as its
    ``fallbacks``, so a broken backend shows in every trace instead of looking like a working
    one."""

    def __init__(self) -> None:
        self.steps: list[dict] = []
        self.pending: list[dict] = []

    def step(self, op: str, n_in: int, n_out: int, started: float, **details: Any) -> None:
        entry = {
            "op": op,
            "in": int(n_in),
            "out": int(n_out),
            "s": round(time.perf_counter() - started, 4),
            **details,
        }
        if self.pending:
            entry["fallbacks"], self.pending = self.pending, []
        self.steps.append(entry)


def fallbacks(trace: list[dict]) -> list[dict]:
    """Every fallback from a model to the rules recorded in a result's trace."""
    return [f for step in trace for f in step.get("fallbacks", [])]


def classify_query(index: ReadModel, query: str, fallbacks: ops.Fallbacks = None) -> str:
    if is_generative(index.backend):
        messages = chat(CLASS_PROMPT, query)
        try:
            category = index.backend.complete(messages, schema=_CLASS_SCHEMA)["category"]
            if category in QUERY_CLASSES:
                return category
            ops.record_fallback(fallbacks, "Classify", f"unknown class {category!r}")
        except (ModelError, KeyError, TypeError) as exc:
            ops.record_fallback(fallbacks, "Classify", exc)
    return classify(query)


def plan_global(index: ReadModel, query: str, fallbacks: ops.Fallbacks = None) -> dict:
    spec = global_spec(query)
    if is_generative(index.backend):
        messages = chat(FILTER_PROMPT, query)
        try:
            answer = index.backend.complete(messages, schema=_FILTER_SCHEMA)
            if answer.get("operation") in OPERATIONS and isinstance(answer.get("filters"), list):
                spec.update(filters=answer["filters"], operation=answer["operation"])
            else:
                ops.record_fallback(fallbacks, "Plan_Filters", "no known operation and filters")
        except (ModelError, AttributeError, TypeError) as exc:
            ops.record_fallback(fallbacks, "Plan_Filters", exc)
    return spec


PLANS = ("structured", "paper")


def run(
    index: ReadModel,
    query: str,
    scope: np.ndarray,
    engine: Any,
    k: int,
    query_class: str | None = None,
    plan: str = "structured",
    relevance: RelevanceConfig | None = None,
    reranker: Any = None,
) -> AgentResult:
    """Answer one question inside ``scope`` (node positions: a document or the corpus) with
    ``k`` evidence units (the weights of ``relevance``, default ``RelevanceConfig()``).

    ``plan="paper"`` runs eq. 9–10 as written: hard Select_by_Entity / Select_by_Section, then
    Graph_Reasoning ‖ Text_Reasoning → Skyline_Ranker (at most max(k, 10) nodes).
    ``plan="structured"`` (the default; it measured better, see docs/results.md) keeps the same
    operators but uses the selections as scents instead of cuts: Extract → Select_by_Entity
    (the entity subtrees) → Select_by_Section (section scent) → Filter_Modal (as a preference)
    → Text_Reasoning (``structured_relevance``) → Page_Ranker (k nodes on k pages).
    ``reranker``: a cross-encoder (``models.rerank_model``) for the paper plan's
    Text_Reasoning (``bookrag_ops.text_reasoning``); None: dense + BM25 alone."""
    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; choose one of {PLANS}")
    relevance = relevance or RelevanceConfig()
    trace = Trace()
    started = time.perf_counter()
    category = query_class or classify_query(index, query, trace.pending)
    trace.step("Classify", 1, 1, started, query_class=category)
    if category == GLOBAL:
        result, ranged = _run_global(index, query, scope, trace)
        _fill_global(index, query, ranged if ranged.size else scope, k, relevance, result, trace)
    else:
        questions = [query]
        if category == MULTI:
            started = time.perf_counter()
            parts = ops.decompose(index, query, trace.pending)
            trace.step("Decompose", 1, len(parts), started, sub_questions=parts)
            questions += [p for p in parts if p != query]
        if plan == "paper":
            found = _paper_single(
                index, questions, scope, engine, trace, max(k, 10), relevance, reranker
            )
        else:
            found = structured_evidence(index, questions, scope, k, relevance, trace)
        evidence, scores = found
        partials = None
        if len(questions) > 1:
            started = time.perf_counter()
            by = "rules"
            if is_generative(index.backend):
                partials = map_partials(index, questions[1:], evidence, trace.pending)
                by = "rules" if partials is None else "model"
            if partials is None:
                partials = [
                    ops.best_sentence(index, q, [index.node_text(p) for p in evidence[:3]])
                    for q in questions[1:]
                ]
            trace.step("Map", len(questions) - 1, len(partials), started, by=by)
        notes = []
        if partials:
            notes = ["Partial answers to the sub-questions:", *(f"- {p}" for p in partials)]
        result = _reduce(
            index,
            query,
            evidence,
            trace,
            notes,
            lambda: ops.reduce_answer(index, query, evidence, partials),
        )
        result.query_class, result.scores = category, scores
    result.query_class = category
    result.trace = trace.steps
    result.plan = [s["op"] for s in trace.steps]
    return result


def structured_evidence(
    index: ReadModel,
    questions: list[str],
    scope: np.ndarray,
    k: int,
    relevance: RelevanceConfig,
    trace: Trace | None = None,
) -> tuple[list[int], list[float]]:
    """Ps with scents: each (sub-)question scores every leaf of the scope; a multi-hop
    question's node score is the mean of the whole question's and its best sub-question's.
    Named tables and figures come first when ``relevance.named_references``; Page_Ranker (or
    top-k) picks the k units."""
    trace = trace or Trace()
    texts = [retrieval_text(q) for q in questions]
    vectors = index.embed(texts)
    leaves = scope[~np.isin(index.kind[scope], STRUCTURE_KINDS)]
    if leaves.size == 0:
        return [], []
    per_question = []
    forced: list[int] = []
    for text, vector in zip(texts, vectors, strict=True):
        started = time.perf_counter()
        entities = ops.extract(index, text, scope, relevance, trace.pending)
        trace.step(
            "Extract",
            1,
            len(entities),
            started,
            entities=[index.entity_names[e][0] for e in entities],
        )
        region = None
        if entities:
            started = time.perf_counter()
            region, targets = ops.select_by_entity(index, scope, entities, SELECT_DEPTH)
            trace.step("Select_by_Entity", len(scope), len(region), started, sections=len(targets))
        started = time.perf_counter()
        scent = scoring.section_scent(index, leaves, vector)
        trace.step("Select_by_Section", len(leaves), int((scent > 0.5).sum()), started, soft=True)
        wanted = modalities(text)
        if wanted:
            started = time.perf_counter()
            n_modal = int(scoring.modal_scent(index, leaves, text).sum())
            trace.step(
                "Filter_Modal", len(leaves), n_modal, started, modal=sorted(wanted), soft=True
            )
        started = time.perf_counter()
        per_question.append(
            scoring.structured_relevance(index, text, leaves, vector, region, relevance)
        )
        trace.step("Text_Reasoning", len(leaves), len(leaves), started)
        if relevance.named_references:
            forced += [p for p in ops.referenced_nodes(index, leaves, text) if p not in forced]
    scores = per_question[0]
    if len(per_question) > 1:
        scores = 0.5 * scores + 0.5 * np.max(np.stack(per_question[1:]), axis=0)
    started = time.perf_counter()
    kept, kept_scores = scoring.page_ranker(index, leaves, scores, k, forced, relevance)
    trace.step("Page_Ranker", len(leaves), len(kept), started, references=len(forced))
    return kept.tolist(), [float(s) for s in kept_scores]


def _paper_single(
    index: ReadModel,
    questions: list[str],
    scope: np.ndarray,
    engine: Any,
    trace: Trace,
    max_keep: int,
    relevance: RelevanceConfig,
    reranker: Any = None,
) -> tuple[list[int], list[float]]:
    """eq. 9–10 as written, for each (sub-)question; the union keeps each node's best score."""
    merged: dict[int, float] = {}
    per_part = max_keep if len(questions) == 1 else max(3, max_keep // len(questions))
    vectors = index.embed(questions)
    for query, vector in zip(questions, vectors, strict=True):
        started = time.perf_counter()
        entities = ops.extract(index, query, scope, relevance, trace.pending)
        names = [index.entity_names[e][0] for e in entities]
        trace.step("Extract", 1, len(entities), started, entities=names)
        started = time.perf_counter()
        selected = scope[:0]
        if entities:
            selected, targets = ops.select_by_entity(index, scope, entities, SELECT_DEPTH)
            trace.step(
                "Select_by_Entity", len(scope), len(selected), started, sections=len(targets)
            )
        if selected.size == 0:
            started = time.perf_counter()
            selected, targets = ops.select_by_section(
                index, query, scope, SELECT_DEPTH, query_vector=vector, fallbacks=trace.pending
            )
            trace.step(
                "Select_by_Section", len(scope), len(selected), started, sections=len(targets)
            )
        leaves = selected[~np.isin(index.kind[selected], STRUCTURE_KINDS)]
        if leaves.size == 0:
            leaves = selected
        started = time.perf_counter()
        graph = ops.graph_reasoning(index, leaves, [entities], engine, relevance)[0]
        trace.step("Graph_Reasoning", len(leaves), int((graph > 0).sum()), started)
        started = time.perf_counter()
        text = ops.text_reasoning(index, query, leaves, vector, reranker)
        scorer = "cross-encoder + bm25 + dense" if reranker is not None else "bm25 + dense"
        trace.step("Text_Reasoning", len(leaves), len(leaves), started, scorer=scorer)
        started = time.perf_counter()
        if (graph > 0).any():
            kept, scores = ops.skyline_ranker(leaves, [graph, text], max_keep=per_part)
        else:  # one criterion: the skyline is the single best node; keep the top nodes instead
            order = np.lexsort((leaves, -text))[:per_part]
            kept, scores = leaves[order], text[order]
        trace.step("Skyline_Ranker", len(leaves), len(kept), started)
        for p, score in zip(kept.tolist(), scores.tolist(), strict=True):
            merged[p] = max(merged.get(p, 0.0), float(score))
    ranked = sorted(merged, key=lambda p: (-merged[p], p))[:max_keep]
    return ranked, [merged[p] for p in ranked]


def _run_global(
    index: ReadModel, query: str, scope: np.ndarray, trace: Trace
) -> tuple[AgentResult, np.ndarray]:
    """Filters, Map's check and Reduce; and the scope as the question's ranges (pages,
    sections) alone narrow it (the whole scope when it names none)."""
    started = time.perf_counter()
    spec = plan_global(index, query, trace.pending)
    trace.step("Plan_Filters", 1, len(spec["filters"]), started, spec=spec)
    selected = np.asarray(scope, np.int64)
    ranged = selected
    check = None
    for f in spec["filters"]:
        started = time.perf_counter()
        kind, value = f.get("filter_type"), f.get("filter_value")
        before = len(selected)
        if kind == "page":
            selected = ops.filter_range(index, selected, pages=value)
            ranged = ops.filter_range(index, ranged, pages=value)
            trace.step("Filter_Range", before, len(selected), started, pages=value)
        elif kind == "section" and value:
            sections = _sections_named(index, selected, str(value))
            selected = ops.filter_range(index, selected, sections=sections)
            ranged = ops.filter_range(index, ranged, sections=sections)
            trace.step("Filter_Range", before, len(selected), started, sections=sections)
        elif kind in ("image", "table"):
            selected = ops.filter_modal(index, selected, kind)
            check = kind
            trace.step("Filter_Modal", before, len(selected), started, modal=kind)
        elif kind == "section":
            selected = ops.filter_modal(index, selected, "section")
            selected = _top_level(index, selected)
            check = "section"
            trace.step("Filter_Modal", before, len(selected), started, modal="section")
    started = time.perf_counter()
    topic = spec.get("topic", "")
    candidates, kept, by = selected.tolist(), None, "rules"
    if is_generative(index.backend):
        kept = map_check(index, query, candidates, trace.pending)
        by = "rules" if kept is None else "model"
    if kept is None:
        checked = [p for p in candidates if ops.passes_check(index, p, check or "", topic)]
    else:  # the nodes past the request's are checked by the rules
        rest = candidates[MAP_UNITS:]
        checked = kept + [p for p in rest if ops.passes_check(index, p, check or "", topic)]
    if check == "image":
        checked = ops.figure_units(index, checked)
    trace.step("Map", len(selected), len(checked), started, check=check, topic=topic, by=by)
    operation = spec["operation"]
    notes = [
        f"A structural filter ({operation} question) kept {len(selected)} items and the check "
        f"kept {len(checked)}; the evidence below is those items in document order."
    ]

    def rules() -> tuple[str, str]:
        if operation == "COUNT":
            return str(len(checked)), "count"
        if operation == "LIST":
            listed = "; ".join(index.title[p] or index.text[p][:80] for p in checked[:50])
            return listed, "extractive"
        return ops.reduce_answer(index, query, checked)

    result = _reduce(index, query, checked, trace, notes, rules, operation=operation)
    evidence = checked[:MAX_GLOBAL_EVIDENCE]
    result.evidence, result.scores = evidence, [1.0] * len(evidence)
    return result, ranged


def _fill_global(
    index: ReadModel,
    query: str,
    scope: np.ndarray,
    k: int,
    relevance: RelevanceConfig,
    result: AgentResult,
    trace: Trace,
) -> None:
    """A global question's evidence is the items its filters and check kept; where they are
    fewer than ``k`` units, the rest of k goes, after them, to the nodes of ``scope`` (the
    question's pages or sections where it names them) that the structured single-hop plan
    picks (``structured_evidence``: Text_Reasoning, Page_Ranker; whatever ``plan``). The
    answer stays the one Reduce gave from the kept items (a count counts those alone)."""
    kept = len(result.evidence)
    if kept >= k:
        return
    started = time.perf_counter()
    spent = scoring.PageBudget(index, k, spread=False)
    for position, score in zip(result.evidence, result.scores, strict=True):
        spent.spend(position, score)
    ranked, ranked_scores = structured_evidence(index, [query], scope, k, relevance)
    spent.fill(ranked, dict(zip(ranked, ranked_scores, strict=True)))
    result.evidence, result.scores = list(spent.evidence), list(spent.evidence.values())
    trace.step("Fill", len(scope), len(result.evidence) - kept, started)


def _reduce(
    index: ReadModel,
    query: str,
    evidence: list[int],
    trace: Trace,
    notes: list[str],
    rules: Callable[[], tuple[str, str]],
    **details: Any,
) -> AgentResult:
    """Reduce: the model's cited answer from the evidence (and the notes: partial answers,
    the filter's counts) with a generative backend; else, or when it fails (recorded), the
    rules' answer and how it was made (``rules()``)."""
    started = time.perf_counter()
    if is_generative(index.backend) and evidence:
        answered = cited_answer(index, query, evidence, notes)
        if answered.answer is not None:
            dropped = ("op", "in", "out", "s")
            model_step = {k: v for k, v in answered.step.items() if k not in dropped}
            trace.step("Reduce", len(evidence), 1, started, **details, **model_step)
            return AgentResult(
                "", [], evidence, [], answered.answer, "generated", citations=answered.citations
            )
        ops.record_fallback(trace.pending, "Reduce", answered.step["fallbacks"][0]["error"])
    answer, how = rules()
    trace.step("Reduce", len(evidence), 1, started, **details, by="rules")
    return AgentResult("", [], evidence, [], answer, how)


def _sections_named(index: ReadModel, positions: np.ndarray, value: str) -> list[int]:
    """sec_ids whose heading starts with a number ('3', '4.1', 'A') or contains a title."""
    wanted = value.strip().lower().rstrip(".")
    found = []
    docs = np.unique(index.doc[positions])
    for doc in docs.tolist():
        for entry in index.toc(doc):
            title = (entry.get("title") or "").strip().lower()
            number = title.split()[0].rstrip(".:") if title else ""
            if (
                number == wanted
                or title.startswith(f"chapter {wanted}")
                or title.startswith(f"section {wanted}")
                or title.startswith(f"appendix {wanted}")
                or (len(wanted) > 3 and wanted in title)
            ):
                found.append(int(entry["sec_id"]))
    return found


def _top_level(index: ReadModel, sections: np.ndarray) -> np.ndarray:
    """'How many chapters/sections': the shallowest heading level present."""
    if sections.size == 0:
        return sections
    level = index.level[sections].min()
    return sections[index.level[sections] == level]
