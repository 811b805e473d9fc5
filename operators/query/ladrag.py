"""LAD-RAG's tools over the layout-aware document graph, and an offline policy that uses them.

- ``semantic_search(query, k)``: nodes by the cosine of their vector (text, caption, figure
  description) to the query.
- ``graph_filter(spec)``: a declarative filter over node attributes, validated by ``FilterSpec``
  (unknown fields, wrong types and empty ranges are rejected with a message). It is data, never
  code: LAD-RAG lets the model write Python against the graph; we do not execute anything.
- ``contextualize(node)``: the node's layout neighbourhood (part_of, next, caption_of,
  references, continues) and the other members of its Louvain community.

Policies: ``agent_loop`` (a generative backend picks a tool per round, JSON schema
``prompts.LADRAG_ACTION_SCHEMA``, at most ``QueryConfig.ladrag_max_rounds`` rounds — LAD-RAG's
20 — until it answers; a malformed action or a tool's error goes back to it as the
observation), ``offline_policy`` (deterministic: ``graph_filter`` when the question names
pages, sections, kinds of node — tables, figures — or asks for a count, ``structural_spec``;
``semantic_search`` otherwise, ``search_policy``; then ``contextualize`` the best hits).
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bookindex.operators.config import RelevanceConfig
from bookindex.operators.kinds import CAPTION, IMAGE, NODE_KINDS, STRUCTURE_KINDS, TABLE
from bookindex.operators.models.prompts import LADRAG_ACTION_SCHEMA, LADRAG_AGENT_PROMPT, chat
from bookindex.operators.query.bookrag_ops import reduce_answer
from bookindex.operators.query.deepread import ToolRunResult, next_action, shown_documents
from bookindex.operators.query.rules import (
    global_spec,
    modalities,
    numbered_references,
    parse_pages,
)
from bookindex.operators.query.scoring import (
    PageBudget,
    answer_section,
    pages_in,
    scented_text_scores,
    text_scores,
)

if TYPE_CHECKING:
    from bookindex.operators.query.read_model import ReadModel

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
    section_number: str | None = Field(default=None, pattern=r"^[A-Za-z0-9]\d*(\.\d+)*$")
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
    def __init__(
        self, index: ReadModel, doc: int | None = None, relevance: RelevanceConfig | None = None
    ) -> None:
        self.index = index
        self.doc = doc
        self.relevance = relevance or RelevanceConfig()  # the engine's: the search reads it

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
        if f.sec_id is not None or f.section_title_contains or f.section_number:
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
            if f.section_number and not _numbered(title, f.section_number.lower()):
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


def search_policy(tools: LadRagTools, query: str, k: int, budget: int) -> ToolRunResult:
    """Search, then contextualize: the scope's leaves ranked by the hybrid relevance and their
    section title's scent (``_scope_ranking``), its best as hits; each hit brings its
    caption/captioned node, referenced nodes and continuation, then its closest community
    member; the budget caps the evidence (``_contextualized``)."""
    index = tools.index
    trace = []
    started = time.perf_counter()
    vector = index.embed([query])[0]
    ranked, score_of = _scope_ranking(tools, query, vector)
    # the hits: enough to spend the budget on pages of their own where the scope has them
    hits = [(p, score_of[p]) for p in ranked[: max(k, budget)]]
    trace.append({"op": "semantic_search", "out": len(hits), "s": _since(started)})
    first = answer_section(ranked, tools.index, tools.relevance, k)
    return _contextualized(tools, query, vector, hits, budget, trace, ranked, score_of, first=first)


def offline_policy(tools: LadRagTools, query: str, k: int, budget: int) -> ToolRunResult:
    """``graph_filter`` with the spec the question implies (``structural_spec``: pages,
    sections, tables or figures, counts), its matches ranked by their text scores to the
    question (a count keeps up to three budgets of them: counting needs them all), then
    contextualized, and a budget they leave open filled from the scope's ranking as
    ``search_policy`` ranks it; a question that names no structure, or whose filter matches
    nothing, goes to ``search_policy``."""
    index = tools.index
    spec, count = structural_spec(query)
    if spec is None:
        return search_policy(tools, query, k, budget)
    started = time.perf_counter()
    try:
        matched = np.asarray(tools.graph_filter(spec), np.int64)
    except FilterSpecError:
        matched = np.zeros(0, np.int64)
    matched = matched[~np.isin(index.kind[matched], STRUCTURE_KINDS)] if matched.size else matched
    matched = _kind_captions(index, matched, spec)
    trace = [
        {
            "op": "graph_filter",
            "args": spec.model_dump(exclude_none=True, exclude_defaults=True),
            "out": int(matched.size),
            "s": _since(started),
        }
    ]
    if matched.size == 0:
        result = search_policy(tools, query, k, budget)
        result.trace[:0] = trace
        return result
    vector = index.embed([query])[0]
    scores = text_scores(index, query, matched, vector, tools.relevance.dense_weight)
    keep = min(matched.size, 3 * budget if count else k)
    top = np.lexsort((matched, -scores))[:keep]
    hits = [(int(matched[i]), float(scores[i])) for i in top]
    ranked, score_of = _scope_ranking(tools, query, vector)  # fills what the matches leave
    return _contextualized(
        tools, query, vector, hits, max(budget, keep), trace, ranked, score_of, matches=True
    )


def _scope_ranking(
    tools: LadRagTools, query: str, vector: np.ndarray
) -> tuple[list[int], dict[int, float]]:
    """The scope's leaves by their text scores to the question with their section title's
    scent (``scoring.scented_text_scores``; ties in document order), and each one's score."""
    index = tools.index
    positions = index.leaves(tools.doc)
    scores = scented_text_scores(index, query, positions, vector, tools.relevance)
    order = np.lexsort((positions, -scores))
    ranked = [int(positions[i]) for i in order]
    return ranked, {position: float(scores[i]) for position, i in zip(ranked, order, strict=True)}


def _contextualized(
    tools: LadRagTools,
    query: str,
    vector: np.ndarray,
    hits: list[tuple[int, float]],
    budget: int,
    trace: list[dict],
    ranked: list[int],
    score_of: dict[int, float],
    matches: bool = False,
    first: list[int] | tuple[int, ...] = (),
) -> ToolRunResult:
    """Each hit, then its context (a filter's ``matches``: all of them first, then their
    context): its caption or captioned node, referenced nodes and continuation, then its
    closest community member; until ``budget`` units, spent where they
    add a page (``scoring.PageBudget``: in a scope with at least as many pages as hits, a unit
    on a page already covered is skipped; ``matches``, a graph filter's, are not spread: the
    filter chose their pages). A budget the hits and their context leave open goes to the
    next of ``ranked`` (the scope's search order, scored by ``score_of``): first, where
    spreading, to those on pages not yet covered while the scope has pages to give (up to its
    pages // ``relevance.pages_per_unit``, as Page_Ranker spreads), then whatever their pages.
    ``first`` (the search's best nodes that concentrate in one section,
    ``scoring.answer_section``) are spent before the hits, whatever their pages."""
    index = tools.index
    scope = index.leaves(tools.doc)
    scope_pages = pages_in(index, scope)
    spent = PageBudget(index, budget, spread=not matches and scope_pages >= len(hits))
    started = time.perf_counter()
    if matches:  # a filter's matches: every one before any context (counting needs them)
        for hit, score in hits:
            spent.spend(hit, score)
    for position in first:  # the answer's section: its best nodes whatever their pages
        spent.take(position, score_of[position])
    for hit, score in hits:
        if spent.full:
            break
        if not spent.spend(hit, score) and spent.spread and hit not in first:
            continue
        context = tools.contextualize(hit, vector)
        linked = [
            p
            for key, ps in context["neighbours"].items()
            if key.split(":")[0] in LINKED_TYPES
            for p in ps
            if index.kind[p] not in STRUCTURE_KINDS
        ]
        for p in linked + context["community_members"][:1]:
            spent.spend(p, 0.5 * score)
    trace.append(
        {"op": "contextualize", "in": len(hits), "out": len(spent.evidence), "s": _since(started)}
    )
    # the budget left: more pages from the ranking while the scope has them to give (up to
    # its pages // pages_per_unit, as Page_Ranker spreads), then the best nodes wherever
    per_unit = tools.relevance.pages_per_unit
    spent.spread_to(ranked, score_of, scope_pages // per_unit if per_unit else budget)
    spent.fill(ranked, score_of)
    positions = list(spent.evidence)
    answer, how = reduce_answer(index, query, positions)
    return ToolRunResult(positions, [spent.evidence[p] for p in positions], answer, how, trace)


# ---- what a question names of the document's structure ----------------------------------------
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5}
_ORDINAL_PAGE = re.compile(r"\b(first|second|third|fourth|fifth)\s+page\b", re.IGNORECASE)
_TITLED_SECTION = re.compile(
    r"\bthe\s+([A-Z][\w-]+(?:\s+[A-Z][\w-]+){0,3})\s+(?:section|chapter)\b"
)
_SECTION_NUMBER = re.compile(r"^[A-Za-z0-9]\d*(\.\d+)*$")


def structural_spec(question: str) -> tuple[FilterSpec | None, bool]:
    """The graph_filter spec a question implies, and whether it asks for a count, read with
    the question rules BookRAG uses (``operators.query.rules``): pages ("page 5", "pages 3-4";
    also "the first page"), sections ("Section 3.2", the "Related Work" section), kinds
    ("tables", "figures", "charts": table / image nodes and their captions), a numbered object
    ("Table 2": the nodes whose text names it). None: it names no structure (a count alone
    does not make one: "how many people ..." is a search)."""
    plan = global_spec(question)
    fields: dict = {}
    for f in plan["filters"]:
        if f["filter_type"] == "page" and "page_from" not in fields:
            pages = parse_pages(f["filter_value"])
            if pages:
                fields.update(page_from=max(1, pages[0]), page_to=max(1, pages[1]))
        elif f["filter_type"] == "section" and f["filter_value"] and "sec" not in fields:
            value = str(f["filter_value"]).strip()
            key = "section_number" if _SECTION_NUMBER.match(value) else "section_title_contains"
            fields.update({key: value, "sec": True})
    if "page_from" not in fields and (ordinal := _ORDINAL_PAGE.search(question)):
        fields["page_from"] = fields["page_to"] = _ORDINALS[ordinal.group(1).lower()]
    if "sec" not in fields and (titled := _TITLED_SECTION.search(question)):
        fields["section_title_contains"] = titled.group(1)
    fields.pop("sec", None)
    named = numbered_references(question)
    if named:
        kind, number = named[0]
        fields["text_contains"] = f"{'Table' if kind == TABLE else 'Figure'} {number}"
    else:
        kinds = sorted(modalities(question), key=lambda m: m != TABLE)
        if kinds:
            fields["kinds"] = [*kinds, CAPTION]
    count = plan["operation"] == "COUNT"
    if not fields:
        return None, count
    return FilterSpec(**fields, limit=10_000), count


def _kind_captions(index: ReadModel, positions: np.ndarray, spec: FilterSpec) -> np.ndarray:
    """Captions kept only where they caption the kind asked for ("Table 3: ..." for tables)."""
    if not spec.kinds or CAPTION not in spec.kinds or positions.size == 0:
        return positions
    words = []
    if TABLE in spec.kinds:
        words.append("tab")
    if IMAGE in spec.kinds:
        words += ["fig", "chart", "graph", "image", "photo", "map", "diagram", "plot", "exhibit"]
    keep = [
        index.kind[p] != CAPTION or index.node_text(int(p)).strip().lower().startswith(tuple(words))
        for p in positions
    ]
    return positions[np.asarray(keep, bool)]


def _numbered(title: str, number: str) -> bool:
    """A section title that starts with ``number`` ("3.2 Data", "3.2. Data", "Section 3.2")."""
    title = title.strip().lower()
    for prefix in ("section ", "chapter ", "appendix ", "§"):
        if title.startswith(prefix):
            title = title[len(prefix) :].strip()
    return title.startswith(number) and not title[len(number) : len(number) + 1].isdigit()


# ---- LAD-RAG's agent ------------------------------------------------------------------------------
SHOWN_NODES = 20  # nodes an observation lists
SHOWN_CHARS = 300  # characters of each node's text


def agent_loop(
    tools: LadRagTools, query: str, k: int, max_rounds: int, budget: int, toc_documents: int = 5
) -> ToolRunResult:
    """LAD-RAG's retriever agent (§2.2): a generative backend calls semantic_search,
    graph_filter and contextualize, one per round, until it answers or ``max_rounds`` pass.
    A malformed action, an invalid spec or an unknown node comes back to it as the
    observation (the round counts). The evidence: the nodes it keeps when it answers (those
    it was shown), else everything it was shown, by score; ``budget`` units at most. Without
    the agent's answer the rules' answer (``reduce_answer``) stands here, and with a generative
    backend the engine's ``Cited_Answer`` request answers from the evidence (a failed call is
    traced there, with its fallback). On a corpus question it is shown
    ``toc_documents`` documents' top-level sections (``deepread.shown_documents``)."""
    index = tools.index
    vector = index.embed([query])[0]
    trace: list[dict] = []
    docs = shown_documents(len(index.documents), tools.doc, toc_documents, trace)
    intro = "\n".join(_document_line(index, d) for d in docs)
    system = LADRAG_AGENT_PROMPT.format(kinds=", ".join(NODE_KINDS), rounds=max_rounds)
    messages = chat(system, f"Question: {query}\n\nDocuments:\n{intro}")
    seen: dict[int, float] = {}
    answer, kept = None, None
    for _ in range(max_rounds):
        started = time.perf_counter()
        step = next_action(index.backend, messages, LADRAG_ACTION_SCHEMA, trace, "LAD-RAG agent")
        if step is None:
            break
        action = step.get("action")
        if action == "answer":
            answer = str(step.get("answer") or "") or None
            kept = _kept(index, step.get("node_ids"), seen)
            trace.append(_step("answer", {"node_ids": len(kept or [])}, 1, started))
            break
        observation, n, args = _agent_act(tools, step, query, vector, seen, k)
        trace.append(_step(str(action), args, n, started))
        messages.append({"role": "assistant", "content": json.dumps(step)})
        messages.append({"role": "user", "content": f"Observation:\n{observation[:6000]}"})
    ranked = kept or sorted(seen, key=lambda p: (-seen[p], p))
    ranked = ranked[:budget]
    how = "generated"
    if answer is None:  # the rules' answer from what it was shown (with a model, the
        answer, how = reduce_answer(index, query, ranked)  # engine's Cited_Answer replaces it)
    return ToolRunResult(ranked, [seen.get(p, 0.0) for p in ranked], answer, how, trace)


def _agent_act(
    tools: LadRagTools, step, question: str, vector: np.ndarray, seen: dict[int, float], k: int
) -> tuple[str, int, dict]:
    """One tool call of the agent: (observation, nodes returned, the call's arguments)."""
    index = tools.index
    action = step.get("action")
    if action is None:
        return "error: reply with one JSON object (thought, action, arguments)", 0, {}
    try:
        if action == "semantic_search":
            query = step.get("query")
            if not isinstance(query, str) or not query.strip():
                raise ValueError("semantic_search needs a non-empty 'query' string")
            found = tools.semantic_search(query, k)
            args: dict = {"query": query}
        elif action == "graph_filter":
            spec = parse_filter_spec(step.get("spec"))
            args = {"spec": spec.model_dump(exclude_none=True, exclude_defaults=True)}
            positions = tools.graph_filter(spec)
            scores = text_scores(index, question, np.asarray(positions, np.int64), vector)
            found = [(p, float(s)) for p, s in zip(positions, scores, strict=True)]
        elif action == "contextualize":
            node_id = step.get("node_id")
            args = {"node_id": node_id}
            position = _position(index, node_id)
            if position is None:
                raise ValueError(f"no node {node_id!r}: give the node_id of a node you were shown")
            context = tools.contextualize(position, vector)
            base = seen.get(position, 0.0)
            linked = [p for ps in context["neighbours"].values() for p in ps]
            found = [
                (p, 0.5 * base)
                for p in dict.fromkeys(linked + context["community_members"])
                if index.kind[p] not in STRUCTURE_KINDS
            ]
        else:
            return (
                f"error: unknown action {action!r}; choose one of semantic_search, "
                "graph_filter, contextualize, answer",
                0,
                {},
            )
    except (FilterSpecError, ValueError, TypeError, KeyError, IndexError) as exc:
        return f"error: {exc}", 0, {}
    for p, score in found:
        seen[p] = max(seen.get(p, float("-inf")), score)
    rows = [_node_row(index, p, score) for p, score in found[:SHOWN_NODES]]
    more = f"\n... and {len(found) - SHOWN_NODES} more" if len(found) > SHOWN_NODES else ""
    return f"{len(found)} nodes:\n" + "\n".join(rows) + more, len(found), args


def _node_row(index: ReadModel, position: int, score: float) -> str:
    return json.dumps(
        {
            "node_id": index.node_ids[position],
            "kind": str(index.kind[position]),
            "page": int(index.page_start[position]),
            "sec_id": int(index.sec_id[position]),
            "text": index.node_text(position)[:SHOWN_CHARS],
            "score": round(score, 4),
        }
    )


def _document_line(index: ReadModel, doc: int) -> str:
    d = index.documents[doc]
    sections = [e.get("title", "") for e in index.toc(doc) if e.get("level", 1) <= 1][:30]
    return f"{d.name}: {d.n_pages} pages; top-level sections: " + "; ".join(sections)


def _kept(index: ReadModel, node_ids, seen: dict[int, float]) -> list[int] | None:
    """The node_ids the agent keeps that it was shown, in its order (None: it named none)."""
    if not isinstance(node_ids, list):
        return None
    kept = [_position(index, n) for n in node_ids]
    kept = [p for p in dict.fromkeys(kept) if p is not None and p in seen]
    return kept or None


def _position(index: ReadModel, node_id) -> int | None:
    if not isinstance(node_id, str):
        return None
    try:
        return index.position(node_id)
    except KeyError:
        return None


def _step(tool: str, args: dict, n_out: int, started: float) -> dict:
    return {"op": tool, "args": args, "out": n_out, "s": _since(started)}


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 4)
