"""LAD-RAG's tools over the layout-aware document graph, and an offline policy that uses them.

- ``semantic_search(query, k)``: nodes by the cosine of their vector (text, caption, figure
  description) to the query.
- ``graph_filter(spec)``: a declarative filter over node attributes, validated by ``FilterSpec``
  (unknown fields, wrong types and empty ranges are rejected with a message). It is data, never
  code: LAD-RAG lets the model write Python against the graph; we do not execute anything.
- ``contextualize(node)``: the node's layout neighbourhood (part_of, next, caption_of,
  references, continues) and the other members of its Louvain community.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from operators.kinds import NODE_KINDS, STRUCTURE_KINDS
from operators.query.bookrag_ops import reduce_answer
from operators.query.deepread import ToolRunResult
from operators.query.scoring import text_scores

if TYPE_CHECKING:
    from operators.query.read_model import ReadModel

NodeKind = Literal[NODE_KINDS]  # type: ignore[valid-type]  (the kinds of operators.kinds)
LINKED_TYPES = ("caption_of", "references", "continues")  # what contextualize brings along


class FilterSpecError(ValueError):
    """A graph_filter spec that does not validate; the message names every problem."""


class FilterSpec(BaseModel):
    """Every field optional; the conditions are ANDed."""

    model_config = ConfigDict(extra="forbid")

    doc: str | None = None  # file name or doc_id
    kinds: list[NodeKind] | None = None
    page_from: int | None = Field(default=None, ge=1)
    page_to: int | None = Field(default=None, ge=1)
    sec_id: int | None = Field(default=None, ge=0)  # the node is in this section's subtree
    section_title_contains: str | None = None
    text_contains: str | None = Field(default=None, min_length=1)
    has_caption: bool | None = None
    min_tokens: int | None = Field(default=None, ge=0)
    limit: int = Field(default=100, ge=1, le=10_000)

    @model_validator(mode="after")
    def _ranges(self) -> FilterSpec:
        if self.page_from and self.page_to and self.page_from > self.page_to:
            raise ValueError(f"page_from {self.page_from} is after page_to {self.page_to}")
        return self


def parse_filter_spec(spec: dict | FilterSpec) -> FilterSpec:
    if isinstance(spec, FilterSpec):
        return spec
    if not isinstance(spec, dict):
        raise FilterSpecError(f"a filter spec is a JSON object, not {type(spec).__name__}")
    try:
        return FilterSpec.model_validate(spec)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'spec'}: {e['msg']}" for e in exc.errors()
        )
        raise FilterSpecError(f"invalid graph_filter spec: {problems}") from None


class LadRagTools:
    def __init__(self, index: ReadModel, doc: int | None = None) -> None:
        self.index = index
        self.doc = doc

    def semantic_search(
        self, query: str, k: int, query_vector: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        index = self.index
        positions = index.leaves(self.doc)
        if positions.size == 0:
            return []
        vector = index.embed([query])[0] if query_vector is None else query_vector
        scores = index.dense_scores(vector, positions)
        top = np.lexsort((positions, -scores))[:k]
        return [(int(positions[i]), float(scores[i])) for i in top]

    def graph_filter(self, spec: dict | FilterSpec) -> list[int]:
        """Node positions matching the spec, in document order (at most ``limit``)."""
        f = parse_filter_spec(spec)
        index = self.index
        doc = self.doc
        if f.doc is not None:
            try:
                doc = index.find_document(f.doc)
            except KeyError as exc:
                raise FilterSpecError(str(exc)) from None
        positions = index.scope(doc)
        keep = np.ones(positions.size, bool)
        if f.kinds:
            keep &= np.isin(index.kind[positions], f.kinds)
        if f.page_from:
            keep &= index.page_end[positions] >= f.page_from
        if f.page_to:
            keep &= index.page_start[positions] <= f.page_to
        if f.min_tokens is not None:
            keep &= np.array([len(index.text[p].split()) >= f.min_tokens for p in positions])
        if f.sec_id is not None or f.section_title_contains:
            inside = self._sections(positions, f)
            keep &= np.isin(positions, inside)
        if f.text_contains:
            needle = f.text_contains.lower()
            keep &= np.array([needle in index.node_text(p).lower() for p in positions])
        if f.has_caption is not None:
            captioned = set()
            if "caption_of" in index.edges:
                captioned = set(index.edges["caption_of"][1].tolist())
            has = np.array([p in captioned for p in positions])
            keep &= has if f.has_caption else ~has
        return positions[keep][: f.limit].tolist()

    def _sections(self, positions: np.ndarray, f: FilterSpec) -> np.ndarray:
        index = self.index
        roots = []
        for p in positions[np.isin(index.kind[positions], STRUCTURE_KINDS)].tolist():
            if f.sec_id is not None and int(index.sec_id[p]) != f.sec_id:
                continue
            title = index.title[p].lower()
            if f.section_title_contains and f.section_title_contains.lower() not in title:
                continue
            roots.append(p)
        if not roots:
            return positions[:0]
        return np.unique(np.concatenate([index.subtree(r) for r in roots]))

    def contextualize(self, position: int, query_vector: np.ndarray | None = None) -> dict:
        """Layout neighbours by edge type, and the community's other members (closest to the
        query first when a query vector is given)."""
        index = self.index
        neighbours: dict[str, list[int]] = {}
        for other, edge_type, direction in index.neighbours(position):
            neighbours.setdefault(f"{edge_type}:{direction}", []).append(other)
        members = [int(m) for m in index.community_members(position) if m != position]
        if query_vector is not None and members:
            sims = index.vectors[members] @ query_vector
            members = [members[i] for i in np.lexsort((members, -sims))]
        return {
            "node": position,
            "neighbours": neighbours,
            "community": int(index.community[position]),
            "community_members": members,
        }


def offline_policy(tools: LadRagTools, query: str, k: int, budget: int) -> ToolRunResult:
    """Search, then contextualize: semantic_search top-k; each hit brings its caption/captioned
    node, referenced nodes and continuation, then its closest community member; the budget caps
    the evidence (hits rank first)."""
    index = tools.index
    trace = []
    started = time.perf_counter()
    vector = index.embed([query])[0]
    positions = index.leaves(tools.doc)
    scores = text_scores(index, query, positions, vector)
    top = np.lexsort((positions, -scores))[:k]
    hits = [(int(positions[i]), float(scores[i])) for i in top]
    trace.append({"op": "semantic_search", "out": len(hits), "s": _since(started)})
    evidence: dict[int, float] = dict(hits)
    started = time.perf_counter()
    for hit, score in hits:
        context = tools.contextualize(hit, vector)
        linked = [
            p
            for key, ps in context["neighbours"].items()
            if key.split(":")[0] in LINKED_TYPES
            for p in ps
            if index.kind[p] not in STRUCTURE_KINDS
        ]
        for p in linked + context["community_members"][:1]:
            if len(evidence) >= budget:
                break
            evidence.setdefault(p, 0.5 * score)
    trace.append(
        {"op": "contextualize", "in": len(hits), "out": len(evidence), "s": _since(started)}
    )
    ranked = sorted(evidence, key=lambda p: (-evidence[p], p))[:budget]
    answer, how = reduce_answer(index, query, ranked)
    return ToolRunResult(ranked, [evidence[p] for p in ranked], answer, how, trace)


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 4)
