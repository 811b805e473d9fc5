"""DeepRead's tools over the index and the two policies that drive them.

Tools (every paragraph carries its coordinates doc_id, sec_id, para_idx):
- ``toc(doc)``: the table-of-contents skeleton (sec_id, title, level, children, n_paragraphs,
  n_tokens), also rendered as an indented text for a model.
- ``retrieve(query, k, window)``: the top-k paragraphs, each widened by a scan window within its
  section (the tools' ``scan_window``, ``QueryConfig.deepread_scan_window``: one paragraph up and
  one down), deduplicated and put in document order.
- ``read_section(doc, sec_id, start, end)``: paragraphs start..end (1-based, inclusive) of a
  section, the range clipped to the section.

Policies: ``offline_policy`` (locate with Retrieve, then read each hit's section around it,
spending every unit where it adds a page; deterministic) and ``react_loop`` (a generative backend chooses a tool per round, JSON schema,
at most ``QueryConfig.deepread_max_rounds`` rounds).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from bookindex.operators.config import RelevanceConfig
from bookindex.operators.models import ModelError
from bookindex.operators.models.prompts import ACTION_SCHEMA as _ACTION_SCHEMA
from bookindex.operators.models.prompts import REACT_PROMPT, chat
from bookindex.operators.query.bookrag_ops import record_fallback, reduce_answer
from bookindex.operators.query.scoring import PageBudget, pages_in, text_scores

if TYPE_CHECKING:
    from bookindex.operators.query.read_model import ReadModel


@dataclass
class Paragraph:
    position: int
    doc_id: str
    sec_id: int
    para_idx: int
    text: str
    score: float = 0.0

    def to_dict(self) -> dict:
        return {
            "doc_id": self.doc_id,
            "sec_id": self.sec_id,
            "para_idx": self.para_idx,
            "text": self.text,
            "score": round(self.score, 6),
        }


@dataclass
class ToolRunResult:
    """What a tool-driven policy (DeepRead, LAD-RAG) found: node positions best first."""

    evidence: list[int]
    scores: list[float]
    answer: str | None
    answer_type: str
    trace: list[dict] = field(default_factory=list)


class DeepReadTools:
    def __init__(
        self, index: ReadModel, doc: int | None = None, scan_window: tuple[int, int] = (1, 1)
    ) -> None:
        self.index = index
        self.doc = doc  # restrict Retrieve to one document
        self.scan_window = scan_window  # Retrieve widens each hit by (up, down) paragraphs

    # ---- tools ----------------------------------------------------------------------------
    def toc(self, doc: int) -> list[dict]:
        return self.index.toc(doc)

    def toc_text(self, doc: int) -> str:
        lines = []
        for entry in self.index.toc(doc):
            indent = "  " * max(0, int(entry["level"]) - 1)
            lines.append(
                f"{indent}[{entry['sec_id']}] {entry['title'] or '(untitled)'} "
                f"(p.{entry.get('page', '?')}, {entry['n_paragraphs']} paragraphs)"
            )
        return "\n".join(lines)

    def retrieve(
        self,
        query: str,
        k: int,
        window: tuple[int, int] | None = None,
        query_vector: np.ndarray | None = None,
    ) -> list[Paragraph]:
        """Top-k paragraphs by hybrid relevance, widened by ``window`` (up, down; default the
        tools' scan window) inside their section, deduplicated (a paragraph keeps its best
        score) and in document order."""
        index = self.index
        leaves = index.leaves(self.doc)
        if leaves.size == 0 or k <= 0:
            return []
        scores = text_scores(index, query, leaves, query_vector)
        top = np.lexsort((leaves, -scores))[:k]
        found: dict[int, float] = {}
        up, down = window or self.scan_window
        for i in top.tolist():
            hit, score = int(leaves[i]), float(scores[i])
            siblings = index.section_leaves(int(index.doc[hit]), int(index.sec_id[hit]))
            at = siblings.index(hit) if hit in siblings else None
            around = siblings[max(0, at - up) : at + down + 1] if at is not None else [hit]
            for p in around:
                value = score if p == hit else 0.0
                found[p] = max(found.get(p, -1.0), value)
        return [self._paragraph(p, found[p]) for p in sorted(found)]

    def read_section(
        self, doc: int, sec_id: int, start: int = 1, end: int | None = None
    ) -> list[Paragraph]:
        """Paragraphs start..end of a section, clipped to 1..n_paragraphs; an unknown section
        raises KeyError with the valid range."""
        leaves = self.index.section_leaves(doc, sec_id)
        if self.index.section_node(doc, sec_id) is None:
            n_sections = len(self.index.toc(doc))
            raise KeyError(f"no section {sec_id} in this document (sec_id 0..{n_sections - 1})")
        start = max(1, int(start))
        end = len(leaves) if end is None else min(len(leaves), int(end))
        return [self._paragraph(p) for p in leaves[start - 1 : end]]

    def _paragraph(self, position: int, score: float = 0.0) -> Paragraph:
        index = self.index
        return Paragraph(
            position=position,
            doc_id=index.documents[int(index.doc[position])].doc_id,
            sec_id=int(index.sec_id[position]),
            para_idx=int(index.para_idx[position]),
            text=index.node_text(position),
            score=score,
        )


READ_DEPTH = 6  # paragraphs a short document's best section is read to, around its first hit
DEPTH_SHARE = 4  # a long document: 1/4 of the budget reads the top hit's section, any page


def _read_in_depth(tools: DeepReadTools, query: str, k: int) -> ToolRunResult:
    """A document too short to spread over: Retrieve top-k with the scan window (the tools'
    plain hybrid relevance), then the section whose hits score highest read around its first
    hit (``READ_DEPTH`` paragraphs); evidence = the hits first (best first), then the window
    and the read paragraphs."""
    trace = []
    started = time.perf_counter()
    hits = tools.retrieve(query, k=k)
    trace.append(_step("Retrieve", {"query": query, "k": k}, len(hits), started))
    if not hits:
        return ToolRunResult([], [], None, "none", trace)
    by_section: dict[tuple[int, int], float] = {}
    for h in hits:
        key = (int(tools.index.doc[h.position]), h.sec_id)
        by_section[key] = by_section.get(key, 0.0) + h.score
    (doc, sec_id), _ = max(by_section.items(), key=lambda item: (item[1], -item[0][1]))
    in_section = [h.para_idx for h in hits if h.sec_id == sec_id and h.score > 0]
    centre = in_section[0] if in_section else 1
    start = max(1, centre - READ_DEPTH // 2)
    started = time.perf_counter()
    read = tools.read_section(doc, sec_id, start, start + READ_DEPTH - 1)
    doc_id = tools.index.documents[doc].doc_id
    args = {"doc_id": doc_id, "sec_id": sec_id, "start": start}
    trace.append(_step("ReadSection", args, len(read), started))
    ranked = sorted(hits, key=lambda h: (-h.score, h.position))
    evidence: dict[int, float] = {h.position: h.score for h in ranked}
    for paragraph in read:
        evidence.setdefault(paragraph.position, 0.0)
    positions = list(evidence)
    answer, how = reduce_answer(tools.index, query, positions)
    return ToolRunResult(positions, [evidence[p] for p in positions], answer, how, trace)


def offline_policy(
    tools: DeepReadTools, query: str, k: int, relevance: RelevanceConfig | None = None
) -> ToolRunResult:
    """Locate, then read around what was located.

    A document too short to spread the evidence over (fewer than ``relevance.pages_per_unit``
    · k pages, BookRAG's Page_Ranker's rule) is read in depth (``_read_in_depth``). Otherwise
    each unit is spent where it can add a page. The budget is Retrieve's: k hits, each widened
    by the scan window (one paragraph up and one down by default), k · (1 + up + down) units.
    Retrieve ranks the scope's leaves by hybrid relevance (``relevance.dense_weight`` dense,
    the rest BM25, each min–max in the scope); the evidence, in the order it is spent: the
    best hit and its own section read in depth around it (a ``DEPTH_SHARE``-th of the budget,
    whatever the pages: the answer's words are often beside the best hit), then each hit in
    rank order with ReadSection around it (the paragraphs of its own section nearest to it,
    up + down of them: the section's ends bound the read, so a window never spills into the
    next section), a unit on a page already covered skipped (it adds no page). Hits keep
    coming until the budget is spent. The order is the value:
    a budget of n units is the first n (``bookindex eval``'s curves)."""
    weights = relevance or RelevanceConfig()
    index = tools.index
    leaves = index.leaves(tools.doc)
    if leaves.size == 0 or k <= 0 or pages_in(index, leaves) < weights.pages_per_unit * k:
        return _read_in_depth(tools, query, k)
    started = time.perf_counter()
    vector = index.embed([query])[0]
    scores = text_scores(index, query, leaves, vector, weights.dense_weight)
    ranked = [int(leaves[i]) for i in np.lexsort((leaves, -scores))]
    score_of = dict(zip(leaves.tolist(), scores.tolist(), strict=True))
    up, down = tools.scan_window
    spent = PageBudget(index, k * (1 + up + down), spread=True)
    hits, reads = 0, []
    for hit in ranked:
        if spent.full:
            break
        if not spent.spend(hit, score_of[hit]):
            continue
        hits += 1
        read = 0
        if hits == 1:  # the best hit's section read in depth, whatever its pages
            depth = spent.budget // DEPTH_SHARE
            read += _read_around(index, spent, hit, depth, score_of, any_page=True)
        read += _read_around(index, spent, hit, up + down, score_of)
        if read:
            reads.append(((int(index.doc[hit]), int(index.sec_id[hit])), read))
    trace = [_step("Retrieve", {"query": query, "k": k}, hits, started)]
    for (doc, sec_id), n in reads:
        args = {"doc_id": index.documents[doc].doc_id, "sec_id": sec_id}
        trace.append({"op": "ReadSection", "args": args, "out": n, "s": 0.0})
    spent.fill(ranked, score_of)  # pages ran out: the next best leaves
    positions = list(spent.evidence)
    answer, how = reduce_answer(index, query, positions)
    return ToolRunResult(positions, [spent.evidence[p] for p in positions], answer, how, trace)


def _read_around(
    index: ReadModel,
    spent: PageBudget,
    hit: int,
    most: int,
    score_of: dict[int, float],
    any_page: bool = False,
) -> int:
    """ReadSection around ``hit``: up to ``most`` paragraphs of its own section, nearest
    first, spent into ``spent`` (``any_page``: whatever their pages); how many were taken."""
    siblings = index.section_leaves(int(index.doc[hit]), int(index.sec_id[hit]))
    if hit not in siblings:
        return 0
    at = siblings.index(hit)
    near = sorted(range(len(siblings)), key=lambda j: (abs(j - at), j))
    read = 0
    for j in near:
        if read >= most or spent.full:
            break
        read += spent.spend(siblings[j], score_of.get(siblings[j], 0.0), any_page=any_page)
    return read


def shown_documents(
    n_documents: int, doc: int | None, limit: int, trace: list[dict] | None = None
) -> list[int]:
    """The documents whose tables of contents an agent (DeepRead, LAD-RAG) is shown first:
    the question's own, or on a corpus question the first ``limit`` (``QueryConfig.
    agent_toc_documents``); a corpus question leaves a ``Documents`` step in ``trace`` that
    says how many were shown and how many left out (its tools still search every document)."""
    if doc is not None:
        return [doc]
    shown = list(range(min(limit, n_documents)))
    if trace is not None:
        args = {"shown": len(shown), "left_out": n_documents - len(shown), "limit": limit}
        trace.append({"op": "Documents", "args": args, "out": len(shown), "s": 0.0})
    return shown


def react_loop(
    tools: DeepReadTools, query: str, k: int, max_rounds: int, toc_documents: int = 5
) -> ToolRunResult:
    """A generative backend reasons and acts (toc / retrieve / read_section / answer) until it
    answers or ``max_rounds`` pass; everything it read is the evidence. On a corpus question
    it is shown the tables of contents of ``toc_documents`` documents (``shown_documents``)."""
    index = tools.index
    trace: list[dict] = []
    docs = shown_documents(len(index.documents), tools.doc, toc_documents, trace)
    intro = "\n\n".join(
        f"Document {d} ({index.documents[d].name}):\n{tools.toc_text(d)}" for d in docs
    )
    messages = chat(REACT_PROMPT, f"Question: {query}\n\nTables of contents:\n{intro}")
    seen: dict[int, float] = {}
    answer = None
    for _ in range(max_rounds):
        started = time.perf_counter()
        step = next_action(index.backend, messages, _ACTION_SCHEMA, trace)
        if step is None:
            break
        action = step.get("action")
        if action == "answer":
            answer = str(step.get("answer", ""))
            trace.append(_step("Answer", {}, 1, started))
            break
        observation, n = _act(tools, step, seen, k)
        trace.append(
            _step(str(action), {k_: step.get(k_) for k_ in ("query", "sec_id")}, n, started)
        )
        messages.append({"role": "assistant", "content": json.dumps(step)})
        messages.append({"role": "user", "content": f"Observation:\n{observation[:6000]}"})
    positions = sorted(seen, key=lambda p: (-seen[p], p))
    if answer is None:
        started = time.perf_counter()
        answer, how = reduce_answer(index, query, positions)
        trace.append(_step("Reduce", {}, 1, started) | {"by": "rules"})
    else:
        how = "generated"
    return ToolRunResult(positions, [seen[p] for p in positions], answer, how, trace)


def next_action(
    backend, messages: list[dict], schema: dict, trace: list[dict], label: str = "ReAct"
) -> dict | None:
    """The model's next step of a tool loop (DeepRead, LAD-RAG); None when the model failed
    (the failure is traced: the loop stops there)."""
    started = time.perf_counter()
    try:
        step = backend.complete(messages, schema=schema)
    except ModelError as exc:  # what was read so far is the evidence; the rules answer
        failed = _step("error", {"error": str(exc)}, 0, started)
        record_fallback(failed.setdefault("fallbacks", []), label, exc)
        trace.append(failed)
        return None
    return step if isinstance(step, dict) else {"action": None, "reply": step}


def _act(tools: DeepReadTools, step: dict, seen: dict[int, float], k: int) -> tuple[str, int]:
    action = step.get("action")
    try:
        if action == "toc":
            return tools.toc_text(int(step.get("doc", tools.doc or 0))), 1
        if action == "retrieve":
            found = tools.retrieve(str(step.get("query", "")), k=k)
        elif action == "read_section":
            doc = int(step.get("doc", tools.doc if tools.doc is not None else 0))
            found = tools.read_section(
                doc, int(step["sec_id"]), int(step.get("start", 1)), step.get("end")
            )
        else:
            return f"unknown action {action!r}", 0
    except (KeyError, ValueError, TypeError, IndexError) as exc:
        return f"error: {exc}", 0
    for p in found:
        seen[p.position] = max(seen.get(p.position, 0.0), p.score)
    return "\n".join(json.dumps(p.to_dict()) for p in found), len(found)


def _step(tool: str, args: dict, n_out: int, started: float) -> dict:
    return {"op": tool, "args": args, "out": n_out, "s": round(time.perf_counter() - started, 4)}
