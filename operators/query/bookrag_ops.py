"""BookRAG's operator library (§5.2) over a read model (``operators.query.read_model``).

Formulators: ``extract`` (query entities linked to KG entities), ``decompose``.
Selectors: ``filter_modal``, ``filter_range``, ``select_by_entity``, ``select_by_section``.
Reasoners: ``graph_reasoning`` (personalised PageRank on the selected entity subgraph, mapped to
tree nodes through the mention matrix, S_G = I_G × M, on the batched walk engine),
``text_reasoning`` (hybrid dense + BM25, fused with a cross-encoder where one is configured),
``skyline_ranker`` (Pareto front over S_G and S_T); the scents,
the structure-aware relevance and Page_Ranker are ``operators.query.scoring``.
Synthesizers, the rules: Map is ``best_sentence`` per sub-question or ``passes_check`` per
filtered node; ``reduce_answer`` is extractive (the best sentence of the best evidence). With a
generative backend Map and Reduce are the model's (``operators.query.bookrag_map``,
``operators.query.answering``) and these rules stand in when a model call fails.

Node sets are numpy arrays of node positions in the index.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from bookindex.operators.config import RelevanceConfig
from bookindex.operators.graph.entity_linking import sentences
from bookindex.operators.kinds import IMAGE, SECTION, STRUCTURE_KINDS, TABLE
from bookindex.operators.models import ModelError, is_generative
from bookindex.operators.models.prompts import (
    DECOMPOSE_PROMPT,
    NAMES_PROMPT,
    SECTIONS_PROMPT,
    SECTIONS_SCHEMA,
    chat,
)
from bookindex.operators.models.prompts import DECOMPOSE_SCHEMA as _DECOMPOSE_SCHEMA
from bookindex.operators.models.prompts import NAMES_SCHEMA as _NAMES_SCHEMA
from bookindex.operators.query.rules import numbered_references, parse_pages, split_question
from bookindex.operators.query.scoring import minmax, text_scores

if TYPE_CHECKING:
    from bookindex.operators.query.read_model import ReadModel

MIN_FIGURE_SIDE = 40.0  # points: smaller images are icons and bullets, not figures
_WORD = re.compile(r"\w+")
Fallbacks = list[dict] | None  # where a model call that fell back to the rules is recorded


def record_fallback(fallbacks: Fallbacks, step: str, error: Exception | str) -> None:
    """A model call that failed or answered unusably, and the rules that stood in for it: one
    entry (which step, which error) for the answer's trace (``bookrag.Trace`` attaches it to
    the step that made the call). ``fallbacks`` None: not recorded."""
    if fallbacks is not None:
        what = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        fallbacks.append({"step": step, "error": what[:300], "fallback": "rules"})


# ---- Formulators --------------------------------------------------------------------------------
def extract(
    index: ReadModel,
    query: str,
    scope: np.ndarray,
    relevance: RelevanceConfig | None = None,
    fallbacks: Fallbacks = None,
) -> list[int]:
    """KG entities the query names, restricted to those mentioned inside ``scope``: names and
    aliases matched in the query text; with a generative backend, the entity names it reads
    from the query are linked the same way. At most ``max_query_entities``, longest names
    first."""
    found = list(index.linker.link(query))
    if is_generative(index.backend):
        try:
            answer = index.backend.complete(_extract_messages(query), schema=_NAMES_SCHEMA)
            for name in answer.get("entities", []):
                found += [e for e in index.linker.link(str(name)) if e not in found]
        except (ModelError, AttributeError, TypeError) as exc:
            record_fallback(fallbacks, "Extract", exc)  # the rule-based links stand
    if not found:
        return []
    in_scope = np.asarray(index.mentions[scope].sum(axis=0)).ravel() > 0
    kept = [e for e in dict.fromkeys(found) if in_scope[e]]
    kept.sort(key=lambda e: -len(index.entity_names[e][0]))
    return kept[: (relevance or RelevanceConfig()).max_query_entities]


def _extract_messages(query: str) -> list[dict]:
    return chat(NAMES_PROMPT, query)


def decompose(index: ReadModel, query: str, fallbacks: Fallbacks = None) -> list[str]:
    """Independent retrieval sub-questions (BookRAG eq. 2); the question itself when it does
    not split. Offline: the rules of ``query_rules.split_question``."""
    if is_generative(index.backend):
        messages = chat(DECOMPOSE_PROMPT, query)
        try:
            answer = index.backend.complete(messages, schema=_DECOMPOSE_SCHEMA)
            parts = [
                str(s["question"])
                for s in answer.get("sub_questions", [])
                if s.get("type") == "retrieval" and s.get("question")
            ]
            if parts:
                return parts[:6]
            record_fallback(fallbacks, "Decompose", "the model gave no retrieval sub-question")
        except (ModelError, AttributeError, TypeError, KeyError) as exc:
            record_fallback(fallbacks, "Decompose", exc)
    return split_question(query)


# ---- Selectors ----------------------------------------------------------------------------------
def filter_modal(index: ReadModel, positions: np.ndarray, modal: str) -> np.ndarray:
    """Nodes of one modality: table, image (figures, charts, photos) or formula; 'section'
    keeps section headings."""
    positions = np.asarray(positions, np.int64)
    return positions[index.kind[positions] == modal]


def filter_range(
    index: ReadModel,
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
    index: ReadModel, scope: np.ndarray, entities: list[int], depth: int = 2
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
    index: ReadModel,
    query: str,
    scope: np.ndarray,
    depth: int = 2,
    n_sections: int = 3,
    query_vector: np.ndarray | None = None,
    fallbacks: Fallbacks = None,
) -> tuple[np.ndarray, list[int]]:
    """Subtrees of the sections most relevant to the query. With a generative backend the model
    picks sec_ids from the TOC; offline a section scores the best hybrid relevance among its
    leaves and its title."""
    scope = np.asarray(scope, np.int64)
    leaves = scope[~np.isin(index.kind[scope], STRUCTURE_KINDS)]
    if leaves.size == 0:
        return scope, []
    scores = text_scores(index, query, leaves, query_vector)
    best: dict[int, float] = {}
    for position, score in zip(leaves.tolist(), scores.tolist(), strict=True):
        section = index.ancestor_section(position, depth)
        best[section] = max(best.get(section, 0.0), score)
    ranked = sorted(best, key=lambda s: (-best[s], s))
    if is_generative(index.backend):
        chosen = _model_sections(index, query, ranked, fallbacks)
        if chosen:
            ranked = chosen
    targets = sorted(ranked[:n_sections])
    return _union_subtrees(index, targets, scope), targets


def _model_sections(
    index: ReadModel, query: str, candidates: list[int], fallbacks: Fallbacks = None
) -> list[int]:
    lines = [
        f"{p}: {index.title[p] or '(untitled)'} (pages {index.page_start[p]}-{index.page_end[p]})"
        for p in candidates[:40]
    ]
    messages = chat(SECTIONS_PROMPT, f"Question: {query}\nSections:\n" + "\n".join(lines))
    schema = SECTIONS_SCHEMA
    try:
        answer = index.backend.complete(messages, schema=schema)
        chosen = [int(s) for s in answer.get("sections", []) if int(s) in candidates]
    except (ModelError, AttributeError, TypeError, ValueError) as exc:
        record_fallback(fallbacks, "Select_by_Section", exc)
        return []
    if not chosen:
        record_fallback(fallbacks, "Select_by_Section", "the model chose no listed section")
    return chosen


def _union_subtrees(index: ReadModel, targets: list[int], scope: np.ndarray) -> np.ndarray:
    if not targets:
        return scope[:0]
    members = np.unique(np.concatenate([index.subtree(t) for t in targets]))
    return members[np.isin(members, scope)]


# ---- Reasoners ----------------------------------------------------------------------------------
def graph_reasoning(
    index: ReadModel,
    positions: np.ndarray,
    seed_entities: list[list[int]],
    engine: Any,
    relevance: RelevanceConfig | None = None,
) -> np.ndarray:
    """S_G for each seed list (one row per sub-question): personalised PageRank (damping
    ``ppr_damping``, 0.5 as BookRAG's code) over the entity subgraph G' of ``positions``
    (relations, plus co-mention in one node), run for all rows in one batched
    ``engine.ppr_batch`` call, mapped to the nodes through M: S_G = M_s · I_G, scaled to
    [0, 1] per row. Rows whose seeds are not in G' score zero."""
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
    damping = (relevance or RelevanceConfig()).ppr_damping
    importance = engine.ppr_batch(adjacency, seeds[live], damping=damping)
    scores = np.asarray(m_local @ importance.T).T  # (live rows, nodes)
    out[live] = [minmax(row) for row in scores]
    return out


def text_reasoning(
    index: ReadModel,
    query: str,
    positions: np.ndarray,
    query_vector: np.ndarray | None = None,
    reranker: Any = None,
) -> np.ndarray:
    """S_T in [0, 1]: the hybrid dense + BM25 relevance of ``scoring.text_scores``, with or
    without a generative backend (its ``rerank`` is only the embedding cosine, which the dense
    half already is). With a cross-encoder configured (``models.rerank_model``,
    ``operators.models.reranker``: ``reranker(query, texts, cosines) -> scores``) the mean of
    its min-max scaled scores and the hybrid relevance: BM25 stays in the score."""
    positions = np.asarray(positions, np.int64)
    if positions.size == 0:
        return np.zeros(0, np.float32)
    hybrid = text_scores(index, query, positions, query_vector)
    if reranker is None:
        return hybrid
    texts = [index.node_text(int(p))[:2000] for p in positions]
    crossed = minmax(np.asarray(reranker(query, texts, hybrid), np.float32))
    return (0.5 * crossed + 0.5 * np.asarray(hybrid, np.float32)).astype(np.float32)


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


def _pareto_front(points: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated rows (maximising every column)."""
    order = np.lexsort(tuple(-points[:, c] for c in reversed(range(points.shape[1]))))
    front: list[int] = []
    for i in order:
        p = points[i]
        if not any(np.all(points[j] >= p) and np.any(points[j] > p) for j in front):
            front.append(int(i))
    return np.asarray(sorted(front), np.int64)


def referenced_nodes(index: ReadModel, positions: np.ndarray, question: str) -> list[int]:
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


# ---- Synthesizers -------------------------------------------------------------------------------
def passes_check(index: ReadModel, position: int, check: str, topic: str = "") -> bool:
    """Whether a filtered node is a real instance of what is counted: a table with content, a
    figure larger than an icon, a heading with a title, and (with a topic) one whose text or
    caption is about the topic."""
    kind = index.kind[position]
    x0, y0, x1, y1 = index.bbox[position]
    if check == TABLE:
        ok = kind == TABLE and len(_WORD.findall(index.text[position])) >= 4
    elif check == IMAGE:
        ok = kind == IMAGE and (x1 - x0) >= MIN_FIGURE_SIDE and (y1 - y0) >= MIN_FIGURE_SIDE
    elif check == SECTION:
        ok = kind == SECTION and bool(index.title[position].strip())
    else:
        ok = True
    if ok and topic:
        ok = topic_match(index, position, topic)
    return bool(ok)


def figure_units(index: ReadModel, images: list[int]) -> list[int]:
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


def topic_match(index: ReadModel, position: int, topic: str) -> bool:
    """A node is about a topic when it (or its caption) names one of the topic's content words,
    or its vector is close to the topic's."""
    words = {w.lower() for w in _WORD.findall(topic) if len(w) > 2}
    text = index.node_text(position).lower()
    if words and sum(w in text for w in words) >= max(1, len(words) // 2):
        return True
    vector = index.embed([topic])[0]
    return float(index.vectors[position] @ vector) >= 0.45


def best_sentence(index: ReadModel, query: str, texts: list[str], shortlist: int = 8) -> str:
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
    index: ReadModel, query: str, evidence: list[int], partials: list[str] | None = None
) -> tuple[str, str]:
    """The rules' answer (extractive): the partial answers joined, else the best sentence of
    the first eight evidence units; and how it was made ('extractive'). With a generative
    backend the model's answer is ``operators.query.answering.cited_answer`` (BookRAG's Reduce,
    the query API's final answer); this is what stands when it fails."""
    texts = [index.node_text(p) for p in evidence[:8]]
    if partials:
        return " | ".join(p for p in partials if p), "extractive"
    return best_sentence(index, query, texts), "extractive"
