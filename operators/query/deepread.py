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
spending each unit on the leaf worth most, a page already covered worth less; deterministic) and ``react_loop`` (a generative backend chooses a tool per round, JSON schema,
at most ``QueryConfig.deepread_max_rounds`` rounds).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from bookindex.operators.config import RelevanceConfig
from bookindex.operators.models import ModelError
from bookindex.operators.models.prompts import ACTION_SCHEMA as _ACTION_SCHEMA
from bookindex.operators.models.prompts import REACT_PROMPT, chat
from bookindex.operators.query.bookrag_ops import record_fallback, reduce_answer
from bookindex.operators.query.scoring import text_scores

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


def offline_policy(
    tools: DeepReadTools,
    query: str,
    k: int,
    relevance: RelevanceConfig | None = None,
    neighbour_share: float = 0.8,
    page_repeat: float = 0.8,
) -> ToolRunResult:
    """Locate, then read beside what was located, on one rule for every document length.

    Retrieve ranks the scope's leaves by hybrid relevance (``relevance.dense_weight`` dense, the
    rest BM25, each min–max in the scope). Each hit is read through the scan window inside its
    own section (ReadSection around it: a read never spills into the next section), so a leaf is
    worth its own relevance or ``neighbour_share`` × the relevance of a hit within the window
    above or below it in its section, whichever is higher (``reading_values``). The budget is
    Retrieve's, k hits widened by the window, k · (1 + up + down) units, spent one unit at a
    time on the leaf of highest value, where a leaf on a page an earlier unit covers counts
    ``page_repeat`` × its value (``spend_by_value``): a second paragraph beside a strong hit
    still beats a weak page, a weak one does not. The order does not depend on k, so a budget
    of n units is the first n of any larger one (``bookindex eval``'s curves rise with n).
    ``neighbour_share`` and ``page_repeat`` (``QueryConfig.deepread_neighbour_share``,
    ``deepread_page_repeat``) were chosen on the tune part of the PDF QA split
    (docs/results.md)."""
    weights = relevance or RelevanceConfig()
    index = tools.index
    leaves = index.leaves(tools.doc)
    started = time.perf_counter()
    if leaves.size == 0 or k <= 0:
        return ToolRunResult(
            [], [], None, "none", [_step("Retrieve", {"query": query, "k": k}, 0, started)]
        )
    vector = index.embed([query])[0]
    scores = text_scores(index, query, leaves, vector, weights.dense_weight).astype(np.float64)
    up, down = tools.scan_window
    values, by_window = reading_values(index, leaves, scores, up, down, neighbour_share)
    taken = spend_by_value(index, leaves, values, k * (1 + up + down), page_repeat)
    positions = leaves[taken].tolist()
    hits = int((~by_window[taken]).sum())
    trace = [_step("Retrieve", {"query": query, "k": k}, hits, started)]
    read = leaves[taken[by_window[taken]]].tolist()
    reads = Counter((int(index.doc[p]), int(index.sec_id[p])) for p in read)
    for (doc, sec_id), n in reads.items():
        args = {"doc_id": index.documents[doc].doc_id, "sec_id": sec_id}
        trace.append({"op": "ReadSection", "args": args, "out": n, "s": 0.0})
    answer, how = reduce_answer(index, query, positions)
    return ToolRunResult(positions, values[taken].tolist(), answer, how, trace)


def reading_values(
    index: ReadModel,
    leaves: np.ndarray,
    scores: np.ndarray,
    up: int,
    down: int,
    neighbour_share: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Each leaf's value to a reader who reads every hit with its scan window (``up``
    paragraphs above the hit, ``down`` below, inside its section): the larger of the leaf's own
    score and ``neighbour_share`` × the best score of a hit whose window reaches it (at most
    ``down`` paragraphs before it or ``up`` after it in the same section); and whether the
    window gave the value (the neighbour's share is higher than its own score)."""
    order = np.lexsort((leaves, index.sec_id[leaves], index.doc[leaves]))
    doc, sec = index.doc[leaves][order], index.sec_id[leaves][order]
    ordered = scores[order]
    best_near = np.full(leaves.size, -np.inf)
    for d in range(1, min(max(up, down), leaves.size - 1) + 1):
        same = (doc[d:] == doc[:-d]) & (sec[d:] == sec[:-d])  # leaves i and i + d: one section
        if d <= down:  # the hit d places before a leaf, its window reaching down to it
            best_near[d:] = np.where(same, np.maximum(best_near[d:], ordered[:-d]), best_near[d:])
        if d <= up:  # the hit d places after a leaf, its window reaching up to it
            best_near[:-d] = np.where(same, np.maximum(best_near[:-d], ordered[d:]), best_near[:-d])
    near = np.full(leaves.size, -np.inf)
    reached = np.isfinite(best_near)
    near[order[reached]] = neighbour_share * best_near[reached]
    values = np.maximum(scores, near)
    return values, near > scores


def spend_by_value(
    index: ReadModel, leaves: np.ndarray, values: np.ndarray, budget: int, page_repeat: float
) -> np.ndarray:
    """Indices into ``leaves`` (in document order), at most ``budget``, taken one at a time:
    the highest value, a leaf on a (document, page) an earlier one covers counting
    ``page_repeat`` × its value; ties by position."""
    pages = index.doc[leaves].astype(np.int64) * (1 << 32) + index.page_start[leaves]
    covered = np.zeros(leaves.size, bool)
    open_ = np.ones(leaves.size, bool)
    taken: list[int] = []
    for _ in range(min(budget, leaves.size)):
        worth = np.where(covered, values * page_repeat, values)
        worth[~open_] = -np.inf
        i = int(np.argmax(worth))  # leaves ascend: the first maximum is the lowest position
        taken.append(i)
        open_[i] = False
        covered |= pages == pages[i]
    return np.array(taken, np.int64)


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
