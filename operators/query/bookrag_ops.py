"""BookRAG's operator library (§5.2) over a loaded index (``pipelines.query_index.QueryIndex``).

Formulators: ``extract`` (query entities linked to KG entities), ``decompose``.
Selectors: ``filter_modal``, ``filter_range``, ``select_by_entity``, ``select_by_section``.
Reasoners: ``graph_reasoning`` (personalised PageRank on the selected entity subgraph, mapped to
tree nodes through the mention matrix, S_G = I_G × M, on the batched walk engine),
``text_reasoning`` (rerank), ``skyline_ranker`` (Pareto front over S_G and S_T).
Synthesizers: Map is ``best_sentence`` per sub-question or ``passes_check`` per filtered node;
``reduce_answer`` calls a generative backend with a JSON schema, offline it is extractive (the
best sentence of the best evidence).

Node sets are numpy arrays of node positions in the index.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from operators.graph.entity_linking import sentences
from operators.models import ModelError, is_generative
from operators.models.prompts import (
    ANSWER_PROMPT,
    ANSWER_SCHEMA,
    DECOMPOSE_PROMPT,
    NAMES_PROMPT,
    SECTIONS_PROMPT,
    SECTIONS_SCHEMA,
)
from operators.models.prompts import DECOMPOSE_SCHEMA as _DECOMPOSE_SCHEMA
from operators.models.prompts import NAMES_SCHEMA as _NAMES_SCHEMA
from operators.query.rules import modalities, numbered_references, parse_pages, split_question

if TYPE_CHECKING:
    from pipelines.query_index import QueryIndex

PPR_DAMPING = 0.5  # BookRAG's official code
# Weights of the structure-aware relevance (measured on MMLongBench, see README): text is
# 0.8 dense + 0.2 BM25; the section heading's similarity, a named modality and the entity
# subtrees add to it.
DENSE_WEIGHT, SECTION_SCENT, MODAL_SCENT, ENTITY_SCENT = 0.8, 0.3, 0.2, 0.2
PAGE_RUNNERS_UP = 0.3  # Page_Ranker: a page scores its best node + 0.3 × its next two
PAGES_PER_UNIT = 3  # Page_Ranker spreads over pages only in scopes of at least 3k pages
MAX_QUERY_ENTITIES = 5
MIN_FIGURE_SIDE = 40.0  # points: smaller images are icons and bullets, not figures
MODAL_KINDS = {"table": ("table",), "image": ("image",), "formula": ("formula",)}
_WORD = re.compile(r"\w+")


# ---- Formulators --------------------------------------------------------------------------------
def extract(index: QueryIndex, query: str, scope: np.ndarray) -> list[int]:
    """KG entities the query names, restricted to those mentioned inside ``scope``: names and
    aliases matched in the query text; with a generative backend, the entity names it reads
    from the query are linked the same way. At most MAX_QUERY_ENTITIES, longest names first."""
    found = list(index.linker.link(query))
    if is_generative(index.backend):
        try:
            answer = index.backend.complete(_extract_messages(query), schema=_NAMES_SCHEMA)
            for name in answer.get("entities", []):
                found += [e for e in index.linker.link(str(name)) if e not in found]
        except (ModelError, AttributeError, TypeError):
            pass  # the rule-based links stand
    if not found:
        return []
    in_scope = np.asarray(index.mentions[scope].sum(axis=0)).ravel() > 0
    kept = [e for e in dict.fromkeys(found) if in_scope[e]]
    kept.sort(key=lambda e: -len(index.entity_names[e][0]))
    return kept[:MAX_QUERY_ENTITIES]


def _extract_messages(query: str) -> list[dict]:
    return [
        {
            "role": "system",
            "content": NAMES_PROMPT,
        },
        {"role": "user", "content": query},
    ]


def decompose(index: QueryIndex, query: str) -> list[str]:
    """Independent retrieval sub-questions (BookRAG eq. 2); the question itself when it does
    not split. Offline: the rules of ``query_rules.split_question``."""
    if is_generative(index.backend):
        messages = [
            {
                "role": "system",
                "content": DECOMPOSE_PROMPT,
            },
            {"role": "user", "content": query},
        ]
        try:
            answer = index.backend.complete(messages, schema=_DECOMPOSE_SCHEMA)
            parts = [
                str(s["question"])
                for s in answer.get("sub_questions", [])
                if s.get("type") == "retrieval" and s.get("question")
            ]
            if parts:
                return parts[:6]
        except (ModelError, AttributeError, TypeError, KeyError):
            pass
    return split_question(query)


# ---- Selectors ----------------------------------------------------------------------------------
def filter_modal(index: QueryIndex, positions: np.ndarray, modal: str) -> np.ndarray:
    """Nodes of one modality: table, image (figures, charts, photos) or formula; 'section'
    keeps section headings."""
    kinds = MODAL_KINDS.get(modal, (modal,))
    positions = np.asarray(positions, np.int64)
    return positions[np.isin(index.kind[positions], kinds)]


def filter_range(
    index: QueryIndex,
    positions: np.ndarray,
    pages: tuple[int, int] | str | None = None,
    sections: list[int] | None = None,
) -> np.ndarray:
    """Nodes overlapping a page range (1-based, inclusive; '3-10' is accepted) and/or lying in
    the subtrees of the given sections (sec_ids of the nodes' document)."""
    positions = np.asarray(positions, np.int64)
    if isinstance(pages, str):
        pages = parse_pages(pages)
    if pages is not None:
        lo, hi = pages
        keep = (index.page_end[positions] >= lo) & (index.page_start[positions] <= hi)
        positions = positions[keep]
    if sections:
        inside: set[int] = set()
        for doc in np.unique(index.doc[positions]):
            for sec_id in sections:
                node = index.section_node(int(doc), int(sec_id))
                if node is not None:
                    inside.update(index.subtree(node).tolist())
        positions = positions[np.isin(positions, list(inside))]
    return positions


def select_by_entity(
    index: QueryIndex, scope: np.ndarray, entities: list[int], depth: int = 2
) -> tuple[np.ndarray, list[int]]:
    """Subtrees (eq. 5) of the sections at ``depth`` that hold a mention of a query entity.
    Returns (selected node positions, the target section positions)."""
    scope = np.asarray(scope, np.int64)
    if not entities:
        return scope[:0], []
    linked = index.mentions[scope][:, entities]
    holders = scope[np.asarray(linked.sum(axis=1)).ravel() > 0]
    targets = sorted({index.ancestor_section(int(p), depth) for p in holders})
    return _union_subtrees(index, targets, scope), targets


def select_by_section(
    index: QueryIndex,
    query: str,
    scope: np.ndarray,
    depth: int = 2,
    n_sections: int = 3,
    query_vector: np.ndarray | None = None,
) -> tuple[np.ndarray, list[int]]:
    """Subtrees of the sections most relevant to the query. With a generative backend the model
    picks sec_ids from the TOC; offline a section scores the best hybrid relevance among its
    leaves and its title."""
    scope = np.asarray(scope, np.int64)
    leaves = scope[~np.isin(index.kind[scope], ("root", "section"))]
    if leaves.size == 0:
        return scope, []
    scores = index.text_scores(query, leaves, query_vector)
    best: dict[int, float] = {}
    for position, score in zip(leaves.tolist(), scores.tolist(), strict=True):
        section = index.ancestor_section(position, depth)
        best[section] = max(best.get(section, 0.0), score)
    ranked = sorted(best, key=lambda s: (-best[s], s))
    if is_generative(index.backend):
        chosen = _model_sections(index, query, ranked)
        if chosen:
            ranked = chosen
    targets = sorted(ranked[:n_sections])
    return _union_subtrees(index, targets, scope), targets


def _model_sections(index: QueryIndex, query: str, candidates: list[int]) -> list[int]:
    lines = [
        f"{p}: {index.title[p] or '(untitled)'} (pages {index.page_start[p]}-{index.page_end[p]})"
        for p in candidates[:40]
    ]
    messages = [
        {
            "role": "system",
            "content": SECTIONS_PROMPT,
        },
        {"role": "user", "content": f"Question: {query}\nSections:\n" + "\n".join(lines)},
    ]
    schema = SECTIONS_SCHEMA
    try:
        answer = index.backend.complete(messages, schema=schema)
        return [int(s) for s in answer.get("sections", []) if int(s) in candidates]
    except (ModelError, AttributeError, TypeError, ValueError):
        return []


def _union_subtrees(index: QueryIndex, targets: list[int], scope: np.ndarray) -> np.ndarray:
    if not targets:
        return scope[:0]
    members = np.unique(np.concatenate([index.subtree(t) for t in targets]))
    return members[np.isin(members, scope)]


# ---- Reasoners ----------------------------------------------------------------------------------
def graph_reasoning(
    index: QueryIndex,
    positions: np.ndarray,
    seed_entities: list[list[int]],
    engine: Any,
    damping: float = PPR_DAMPING,
) -> np.ndarray:
    """S_G for each seed list (one row per sub-question): personalised PageRank over the entity
    subgraph G' of ``positions`` (relations, plus co-mention in one node), run for all rows in
    one batched ``engine.ppr_batch`` call, mapped to the nodes through M: S_G = M_s · I_G,
    scaled to [0, 1] per row. Rows whose seeds are not in G' score zero."""
    positions = np.asarray(positions, np.int64)
    out = np.zeros((len(seed_entities), positions.size), np.float32)
    if positions.size == 0 or not seed_entities:
        return out
    m_s = index.mentions[positions]
    present = np.flatnonzero(np.asarray(m_s.sum(axis=0)).ravel() > 0)
    if present.size == 0:
        return out
    local = {int(e): i for i, e in enumerate(present)}
    m_local = m_s[:, present]
    adjacency = index.relations[present][:, present] + (m_local.T @ m_local)
    adjacency = sp.csr_matrix(adjacency, dtype=np.float64)
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    seeds = np.zeros((len(seed_entities), present.size))
    for row, entities in enumerate(seed_entities):
        for e in entities:
            if e in local:
                seeds[row, local[e]] = 1.0
    live = seeds.sum(axis=1) > 0
    if not live.any():
        return out
    importance = engine.ppr_batch(adjacency, seeds[live], damping=damping)
    scores = np.asarray(m_local @ importance.T).T  # (live rows, nodes)
    out[live] = [minmax(row) for row in scores]
    return out


def text_reasoning(
    index: QueryIndex, query: str, positions: np.ndarray, query_vector: np.ndarray | None = None
) -> np.ndarray:
    """S_T: the backend's reranker where it is a model of its own (generative backends), else
    the hybrid dense + BM25 relevance of ``QueryIndex.text_scores``; in [0, 1]."""
    positions = np.asarray(positions, np.int64)
    if positions.size == 0:
        return np.zeros(0, np.float32)
    if is_generative(index.backend):
        try:
            texts = [index.node_text(int(p))[:2000] for p in positions]
            return minmax(np.asarray(index.backend.rerank(query, texts), np.float32))
        except (ModelError, NotImplementedError):
            pass
    return index.text_scores(query, positions, query_vector)


def skyline_ranker(
    positions: np.ndarray,
    criteria: list[np.ndarray],
    min_keep: int = 5,
    max_keep: int = 10,
) -> tuple[np.ndarray, np.ndarray]:
    """Nodes on the Pareto front of the criteria (no other node at least as good in every
    criterion and better in one). When the front holds fewer than ``min_keep`` nodes the next
    fronts are added (skyline layers) up to ``max_keep``. Returns (positions, summed score),
    best first."""
    positions = np.asarray(positions, np.int64)
    if positions.size == 0:
        return positions, np.zeros(0, np.float32)
    points = np.stack([np.asarray(c, np.float64) for c in criteria], axis=1)
    remaining = np.arange(positions.size)
    kept: list[int] = []
    while remaining.size and len(kept) < min_keep:
        front = _pareto_front(points[remaining])
        layer = remaining[front]
        layer = layer[np.lexsort((positions[layer], -points[layer].sum(axis=1)))]
        kept += layer.tolist()
        remaining = np.setdiff1d(remaining, layer)
    kept = kept[:max_keep]
    return positions[kept], points[kept].sum(axis=1).astype(np.float32)


def minmax(values: np.ndarray) -> np.ndarray:
    """Min–max to [0, 1] (all zeros when constant or empty)."""
    values = np.asarray(values, np.float64).ravel()
    if values.size == 0:
        return values
    lo, hi = float(values.min()), float(values.max())
    return (values - lo) / (hi - lo) if hi > lo else np.zeros_like(values)


def _pareto_front(points: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated rows (maximising every column)."""
    order = np.lexsort(tuple(-points[:, c] for c in reversed(range(points.shape[1]))))
    front: list[int] = []
    for i in order:
        p = points[i]
        if not any(np.all(points[j] >= p) and np.any(points[j] > p) for j in front):
            front.append(int(i))
    return np.asarray(sorted(front), np.int64)


def section_scent(index: QueryIndex, positions: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """The information scent of each node's section: the cosine of its section heading to the
    query, min–max scaled within ``positions`` (Select_by_Section's signal, used softly)."""
    positions = np.asarray(positions, np.int64)
    parents = index.parent[positions]
    heads = np.where(parents >= 0, parents, positions)
    return minmax(index.vectors[heads] @ np.asarray(query_vector, np.float32)).astype(np.float32)


def modal_scent(index: QueryIndex, positions: np.ndarray, question: str) -> np.ndarray:
    """1 for nodes of a modality the question names (and for captions), else 0: Filter_Modal
    as a preference for single-hop questions rather than a hard filter."""
    positions = np.asarray(positions, np.int64)
    wanted = modalities(question)
    if not wanted:
        return np.zeros(positions.size, np.float32)
    kinds = index.kind[positions]
    return (np.isin(kinds, list(wanted)) | (kinds == "caption")).astype(np.float32)


def referenced_nodes(index: QueryIndex, positions: np.ndarray, question: str) -> list[int]:
    """Tables and figures the question names by number ('Table 3', 'Fig. 2'), found by their
    caption inside ``positions``."""
    found = []
    for kind, number in numbered_references(question):
        label = re.compile(
            rf"^(table|tab\.)\s*{number}\b"
            if kind == "table"
            else rf"^(figure|fig\.?)\s*{number}\b",
            re.I,
        )
        for p in np.asarray(positions, np.int64).tolist():
            if index.kind[p] == kind and label.match(index.title[p].strip()):
                found.append(p)
                break
    return found


def structured_relevance(
    index: QueryIndex,
    question: str,
    positions: np.ndarray,
    query_vector: np.ndarray,
    entity_region: np.ndarray | None = None,
) -> np.ndarray:
    """Text_Reasoning with the tree's scents: 0.8·dense + 0.2·BM25 (each min–max in scope)
    + 0.3·section scent + 0.2·modal scent + 0.2 inside the subtrees Select_by_Entity chose."""
    positions = np.asarray(positions, np.int64)
    if positions.size == 0:
        return np.zeros(0, np.float32)
    score = index.text_scores(question, positions, query_vector, DENSE_WEIGHT).astype(np.float64)
    score += SECTION_SCENT * section_scent(index, positions, query_vector)
    score += MODAL_SCENT * modal_scent(index, positions, question)
    if entity_region is not None and entity_region.size:
        score += ENTITY_SCENT * np.isin(positions, entity_region)
    return score.astype(np.float32)


def page_ranker(
    index: QueryIndex,
    positions: np.ndarray,
    scores: np.ndarray,
    k: int,
    forced: list[int] | tuple[int, ...] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """Evidence that covers pages, not one page many times: a page scores its best node plus
    PAGE_RUNNERS_UP × its next two; the best node of each of the top-k pages is returned, best
    page first. ``forced`` nodes (named references) come first. Where the scope has fewer than
    PAGES_PER_UNIT × k pages (a short document), spreading would trade the best evidence for
    weak pages, so the nodes are simply ranked by score."""
    positions = np.asarray(positions, np.int64)
    scores = np.asarray(scores, np.float64)
    by_page: dict[tuple[int, int], list[int]] = {}
    for i in np.lexsort((positions, -scores)).tolist():
        key = (int(index.doc[positions[i]]), int(index.page_start[positions[i]]))
        by_page.setdefault(key, []).append(i)
    if len(by_page) < PAGES_PER_UNIT * k:
        by_page = {(0, i): [i] for i in range(positions.size)}  # every node its own "page"

    def page_score(key: tuple[int, int]) -> float:
        ranked = scores[by_page[key]]
        return float(ranked[0] + PAGE_RUNNERS_UP * ranked[1:3].sum())

    chosen = [int(p) for p in forced][:k]
    pages = {(int(index.doc[p]), int(index.page_start[p])) for p in chosen}
    top = max(scores.max(initial=0.0), 1.0)
    out_scores = [top] * len(chosen)
    for key in sorted(by_page, key=lambda key: (-page_score(key), key)):
        if len(chosen) >= k:
            break
        if key in pages:
            continue
        best = by_page[key][0]
        chosen.append(int(positions[best]))
        out_scores.append(float(scores[best]))
    if len(chosen) < k:  # fewer pages than k: the next best nodes fill the rest
        taken = set(chosen)
        for i in np.lexsort((positions, -scores)).tolist():
            if len(chosen) >= k:
                break
            if int(positions[i]) not in taken:
                chosen.append(int(positions[i]))
                out_scores.append(float(scores[i]))
    return np.asarray(chosen, np.int64), np.asarray(out_scores, np.float32)


# ---- Synthesizers -------------------------------------------------------------------------------
def passes_check(index: QueryIndex, position: int, check: str, topic: str = "") -> bool:
    """Whether a filtered node is a real instance of what is counted: a table with content, a
    figure larger than an icon, a heading with a title, and (with a topic) one whose text or
    caption is about the topic."""
    kind = index.kind[position]
    x0, y0, x1, y1 = index.bbox[position]
    if check == "table":
        ok = kind == "table" and len(_WORD.findall(index.text[position])) >= 4
    elif check == "image":
        ok = kind == "image" and (x1 - x0) >= MIN_FIGURE_SIDE and (y1 - y0) >= MIN_FIGURE_SIDE
    elif check == "section":
        ok = kind == "section" and bool(index.title[position].strip())
    else:
        ok = True
    if ok and topic:
        ok = topic_match(index, position, topic)
    return bool(ok)


def figure_units(index: QueryIndex, images: list[int]) -> list[int]:
    """Images → figures: the uncaptioned panels on the page and in the section of a captioned
    image are parts of that figure (a chart made of ten small plots is one figure); other
    uncaptioned images count on their own only when they are larger than an icon."""
    captioned = {
        (int(index.doc[p]), int(index.page_start[p]), int(index.parent[p]))
        for p in images
        if index.title[p].strip()
    }
    out = []
    for p in images:
        key = (int(index.doc[p]), int(index.page_start[p]), int(index.parent[p]))
        if index.title[p].strip() or key not in captioned:
            out.append(p)
    return out


def topic_match(index: QueryIndex, position: int, topic: str) -> bool:
    """A node is about a topic when it (or its caption) names one of the topic's content words,
    or its vector is close to the topic's."""
    words = {w.lower() for w in _WORD.findall(topic) if len(w) > 2}
    text = index.node_text(position).lower()
    if words and sum(w in text for w in words) >= max(1, len(words) // 2):
        return True
    vector = index.embed([topic])[0]
    return float(index.vectors[position] @ vector) >= 0.45


def best_sentence(index: QueryIndex, query: str, texts: list[str], shortlist: int = 8) -> str:
    """The sentence of ``texts`` closest to the query: word overlap picks a shortlist, the
    cosine to the query orders it (ties keep the earlier sentence)."""
    candidates = [s for t in texts for s in (sentences(t, min_chars=10) or [t]) if s.strip()]
    if not candidates:
        return ""
    query_words = {w.lower() for w in _WORD.findall(query) if len(w) > 2}
    overlap = np.array(
        [len(query_words & {w.lower() for w in _WORD.findall(c)}) for c in candidates], float
    )
    short = np.lexsort((np.arange(len(candidates)), -overlap))[:shortlist]
    vectors = index.embed([query, *(candidates[i] for i in short)])
    cosine = vectors[1:] @ vectors[0]
    best = int(short[np.lexsort((short, -cosine, -overlap[short]))[0]])
    return candidates[best][:600]


def reduce_answer(
    index: QueryIndex, query: str, evidence: list[int], partials: list[str] | None = None
) -> tuple[str, str]:
    """The final answer and how it was made ('generated' or 'extractive')."""
    texts = [index.node_text(p) for p in evidence[:8]]
    if is_generative(index.backend) and texts:
        context = "\n\n".join(f"[{i + 1}] {t[:1500]}" for i, t in enumerate(texts))
        if partials:
            context += "\n\nPartial answers:\n" + "\n".join(partials)
        messages = [
            {
                "role": "system",
                "content": ANSWER_PROMPT,
            },
            {"role": "user", "content": f"Question: {query}\n\nEvidence:\n{context}"},
        ]
        schema = ANSWER_SCHEMA
        try:
            return str(index.backend.complete(messages, schema=schema)["answer"]), "generated"
        except (ModelError, KeyError, TypeError):
            pass
    if partials:
        return " | ".join(p for p in partials if p), "extractive"
    return best_sentence(index, query, texts), "extractive"
