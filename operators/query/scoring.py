"""How relevant each node is to a question, and which nodes become the evidence: the hybrid
text relevance (dense + BM25), the reciprocal-rank fusion of a ranking with BM25's (the
``hybrid`` baseline's, and Zoom's on a PDF), the tree's scents, and BookRAG's Page_Ranker. The weights are
``operators.config.RelevanceConfig`` (measured on MMLongBench, see docs/results.md; the PDF QA ablation
adds them one at a time). Node sets are numpy arrays of positions in a read model.
"""

from __future__ import annotations

import heapq
from collections import Counter

import numpy as np

from bookindex.operators.config import RelevanceConfig
from bookindex.operators.kinds import CAPTION, ROOT
from bookindex.operators.query.read_model import ReadModel
from bookindex.operators.query.rules import modalities

HYBRID_DENSE_WEIGHT = 0.5  # the plain hybrid (DeepRead, LAD-RAG, Select_by_Section)


def minmax(values: np.ndarray) -> np.ndarray:
    """Min–max to [0, 1] (all zeros when constant or empty)."""
    values = np.asarray(values, np.float64).ravel()
    if values.size == 0:
        return values
    lo, hi = float(values.min()), float(values.max())
    return (values - lo) / (hi - lo) if hi > lo else np.zeros_like(values)


def text_scores(
    index: ReadModel,
    query: str,
    positions: np.ndarray,
    query_vector: np.ndarray | None = None,
    dense_weight: float = HYBRID_DENSE_WEIGHT,
) -> np.ndarray:
    """Hybrid relevance in [0, 1]: dense_weight × dense cosine + the rest × BM25 (over each
    node read after its section headings), each min–max scaled within ``positions`` (the scope
    the question is asked in)."""
    positions = np.asarray(positions, dtype=np.int64)
    if positions.size == 0:
        return np.zeros(0, np.float32)
    if query_vector is None:
        query_vector = index.embed([query])[0]
    dense = minmax(index.dense_scores(query_vector, positions))
    lexical = minmax(index.lexical_scores(query, positions))
    return (dense_weight * dense + (1 - dense_weight) * lexical).astype(np.float32)


RRF_K = 60  # reciprocal-rank fusion's constant (Cormack et al. 2009): 1 / (RRF_K + rank)


def fused_scores(
    index: ReadModel,
    query: str,
    positions: np.ndarray,
    query_vector: np.ndarray | None = None,
    rrf_k: int = RRF_K,
) -> np.ndarray:
    """BM25 and dense fused by reciprocal rank within ``positions``: each node scores
    1 / (rrf_k + its dense rank) + 1 / (rrf_k + its BM25 rank) (ranks from 1, ties by
    position); a node no query word reaches gets no BM25 term, and an index without vectors
    ranks by BM25 alone. The ``hybrid`` baseline's scores: BM25 over the nodes' own words (no
    section headings, ``ReadModel.lexical_scores``), as plain chunk retrieval has them."""
    positions = np.asarray(positions, np.int64)
    if positions.size == 0:
        return np.zeros(0, np.float64)
    dense = None
    if index.has_vector[positions].any():
        if query_vector is None:
            query_vector = index.embed([query])[0]
        dense = index.dense_scores(query_vector, positions)
    return fused_with_bm25(index, query, positions, dense, rrf_k=rrf_k, headings=False)


def fused_with_bm25(
    index: ReadModel,
    query: str,
    positions: np.ndarray,
    scores: np.ndarray | None,
    bm25_weight: float = 1.0,
    rrf_k: int = RRF_K,
    headings: bool = True,
) -> np.ndarray:
    """A ranking of ``positions`` (by ``scores``; None: none) fused with BM25's by reciprocal
    rank: each node scores 1 / (rrf_k + its rank by ``scores``) + ``bm25_weight`` /
    (rrf_k + its BM25 rank), ranks from 1, ties by position; a node no query word reaches gets
    no BM25 term (``fused_scores`` is dense's ranking fused at weight 1); ``headings``: BM25
    reads each node after its section headings (``ReadModel.lexical_scores``)."""
    positions = np.asarray(positions, np.int64)
    fused = np.zeros(positions.size, np.float64)
    if positions.size == 0:
        return fused
    if scores is not None:
        fused += _reciprocal_ranks(scores, positions, rrf_k)
    lexical = index.lexical_scores(query, positions, headings)
    fused += bm25_weight * np.where(lexical > 0, _reciprocal_ranks(lexical, positions, rrf_k), 0.0)
    return fused


def _reciprocal_ranks(scores: np.ndarray, positions: np.ndarray, rrf_k: int) -> np.ndarray:
    order = np.lexsort((positions, -np.asarray(scores, np.float64)))
    ranks = np.empty(positions.size, np.float64)
    ranks[order] = np.arange(1, positions.size + 1)
    return 1.0 / (rrf_k + ranks)


def section_scent(index: ReadModel, positions: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """The information scent of each node's section: the cosine of its section heading to the
    query, min–max scaled within ``positions`` (Select_by_Section's signal, used softly)."""
    positions = np.asarray(positions, np.int64)
    parents = index.parent[positions]
    heads = np.where(parents >= 0, parents, positions)
    return minmax(index.vectors[heads] @ np.asarray(query_vector, np.float32)).astype(np.float32)


def scented_text_scores(
    index: ReadModel,
    query: str,
    positions: np.ndarray,
    query_vector: np.ndarray,
    relevance: RelevanceConfig,
) -> np.ndarray:
    """``text_scores`` plus ``relevance.section_scent`` × the section title's scent
    (``section_scent``), in float64: the methods' relevance read with the tree (LAD-RAG's
    search ranking; BookRAG's ``structured_relevance`` adds its other scents to it)."""
    positions = np.asarray(positions, np.int64)
    score = text_scores(index, query, positions, query_vector, relevance.dense_weight)
    score = score.astype(np.float64)
    if positions.size:
        score += relevance.section_scent * section_scent(index, positions, query_vector)
    return score


def modal_scent(index: ReadModel, positions: np.ndarray, question: str) -> np.ndarray:
    """1 for nodes of a modality the question names (and for captions), else 0: Filter_Modal
    as a preference for single-hop questions rather than a hard filter."""
    positions = np.asarray(positions, np.int64)
    wanted = modalities(question)
    if not wanted:
        return np.zeros(positions.size, np.float32)
    kinds = index.kind[positions]
    return (np.isin(kinds, list(wanted)) | (kinds == CAPTION)).astype(np.float32)


def structured_relevance(
    index: ReadModel,
    question: str,
    positions: np.ndarray,
    query_vector: np.ndarray,
    entity_region: np.ndarray | None = None,
    relevance: RelevanceConfig | None = None,
) -> np.ndarray:
    """Text_Reasoning with the tree's scents: dense_weight·dense + the rest·BM25 (each min–max
    in scope) + section_scent·section scent + modal_scent·modal scent + entity_scent inside the
    subtrees Select_by_Entity chose (weights: ``relevance``, default 0.7 / 0.3 / 0.2 / 0.2)."""
    weights = relevance or RelevanceConfig()
    positions = np.asarray(positions, np.int64)
    if positions.size == 0:
        return np.zeros(0, np.float32)
    score = scented_text_scores(index, question, positions, query_vector, weights)
    score += weights.modal_scent * modal_scent(index, positions, question)
    if entity_region is not None and entity_region.size:
        score += weights.entity_scent * np.isin(positions, entity_region)
    return score.astype(np.float32)


class PageBudget:
    """Evidence spent unit by unit, in the order a policy values it, up to ``budget`` units;
    where ``spread`` (the scope has enough pages), a unit on a page an earlier unit covers is
    refused: it would add no page (LAD-RAG's offline policies; DeepRead's weighs a covered page
    down instead, ``deepread.spend_by_value``; BookRAG's Page_Ranker spreads by page scores).
    Unspread it also tops up a global question's kept items (BookRAG's ``Fill``)."""

    def __init__(self, index: ReadModel, budget: int, spread: bool) -> None:
        self.index, self.budget, self.spread = index, budget, spread
        self.evidence: dict[int, float] = {}
        self.covered: set[tuple[int, int]] = set()

    @property
    def full(self) -> bool:
        return len(self.evidence) >= self.budget

    def spend(self, position: int, score: float) -> bool:
        """Take ``position`` (scored ``score``) unless the budget is spent, it is taken, or
        (spreading) its page is covered; whether it was taken."""
        page = page_of(self.index, position)
        covered = self.spread and page in self.covered
        if self.full or position in self.evidence or covered:
            return False
        self.evidence[position] = score
        self.covered.add(page)
        return True

    def spread_to(self, ranked: list[int], score_of: dict[int, float], pages: int) -> None:
        """Where spreading: the next of ``ranked`` on pages not yet covered, until ``pages``
        pages are covered or the budget is spent (a top-up that keeps adding pages where the
        scope has more to give, before ``fill`` spends the rest whatever their pages)."""
        if not self.spread:
            return
        for position in ranked:
            if self.full or len(self.covered) >= pages:
                break
            self.spend(position, score_of.get(position, 0.0))

    def take(self, position: int, score: float) -> None:
        """Take ``position`` whatever its page (not past the budget); its page is covered."""
        if not self.full:
            self.evidence.setdefault(position, score)
            self.covered.add(page_of(self.index, position))

    def fill(self, ranked: list[int], score_of: dict[int, float]) -> None:
        """The rest of the budget from ``ranked`` whatever their pages (the pages ran out)."""
        for position in ranked:
            if self.full:
                break
            self.evidence.setdefault(position, score_of.get(position, 0.0))


def page_of(index: ReadModel, position: int) -> tuple[int, int]:
    """The (document, page) a node starts on: the unit Page_Ranker and ``PageBudget`` spread over."""
    return int(index.doc[position]), int(index.page_start[position])


def pages_in(index: ReadModel, positions: np.ndarray) -> int:
    """The distinct (document, page) pairs of ``positions``."""
    positions = np.asarray(positions, np.int64)
    pairs = zip(index.doc[positions].tolist(), index.page_start[positions].tolist(), strict=True)
    return len(set(pairs))


def answer_section(
    ranked: list[int], index: ReadModel, relevance: RelevanceConfig, k: int
) -> list[int]:
    """For a budget of k ≤ ``section_window`` units: the nodes among the ``section_window``
    best of ``ranked`` that share the best one's section, where they are at least
    ``section_first`` (0: never). The best nodes concentrate in one section, so that section
    holds the answer and its nodes are worth more than other pages' best; a larger budget
    has room for the section and the pages both. Else none. A node directly under the
    document's root has no section."""
    if not relevance.section_first or not ranked or k > relevance.section_window:
        return []
    window = ranked[: relevance.section_window]
    head = int(index.parent[window[0]])
    if head < 0 or index.kind[head] == ROOT:
        return []
    members = [p for p in window if int(index.parent[p]) == head]
    return members[:k] if len(members) >= relevance.section_first else []


def page_ranker(
    index: ReadModel,
    positions: np.ndarray,
    scores: np.ndarray,
    k: int,
    forced: list[int] | tuple[int, ...] = (),
    relevance: RelevanceConfig | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Evidence that covers pages, not one page many times. ``forced`` nodes (named references)
    come first, or else the best nodes where they concentrate in one section
    (``answer_section``, for k up to ``section_window``); then, up to as many units as the scope
    holds ``pages_per_unit`` pages (at most k; 0: k), each unit is the best of: a page not yet
    taken, valued at its best node plus ``page_runners_up`` × its next two, and the next node of
    a page already taken, valued at its own score discounted by ``page_repeat`` for each unit
    its page holds (on the scale above the scope's lowest score; 0: one unit a page). The next
    best nodes fill the rest of k wherever they are. Spreading over every page of a short
    document trades the best evidence for weak pages, while a long document asked for many units
    still gets them spread; the discount lets an answer page's second paragraph beat a weak
    page's best (a syllabus answer's spans sit on one page). With ``page_floor`` > 0 (off by
    default) a page scoring under that share of the best page's is not spread to. The config's
    ``page_ranker`` off: the nodes ranked by score."""
    weights = relevance or RelevanceConfig()
    positions = np.asarray(positions, np.int64)
    scores = np.asarray(scores, np.float64)
    by_score = np.lexsort((positions, -scores)).tolist()
    by_page: dict[tuple[int, int], list[int]] = {}
    for i in by_score:
        by_page.setdefault(page_of(index, positions[i]), []).append(i)
    per_unit = weights.pages_per_unit
    n_spread = (min(k, len(by_page) // per_unit) if per_unit else k) if weights.page_ranker else 0
    page_score = {
        key: float(scores[nodes[0]] + weights.page_runners_up * scores[nodes[1:3]].sum())
        for key, nodes in by_page.items()
    }

    chosen = [int(p) for p in forced][:k]
    out_scores = [max(scores.max(initial=0.0), 1.0)] * len(chosen)  # named: first, as the best
    if weights.page_ranker and not chosen:
        best = {int(positions[i]): float(scores[i]) for i in by_score[: weights.section_window]}
        chosen = answer_section(list(best), index, weights, k)
        out_scores = [best[p] for p in chosen]
    taken = set(chosen)
    on_page = Counter(page_of(index, p) for p in chosen)  # units on each page
    lowest = scores.min(initial=0.0)
    floor = weights.page_floor * max(page_score.values(), default=0.0)
    untaken = {
        key: [i for i in nodes if int(positions[i]) not in taken] for key, nodes in by_page.items()
    }

    def value(key: tuple[int, int]) -> float:
        """What the page's next node is worth as the next unit (-inf: not a candidate)."""
        if not untaken[key]:
            return -np.inf
        repeats = on_page[key]
        if repeats == 0:
            weak = weights.page_floor > 0 and page_score[key] < floor
            return -np.inf if weak else page_score[key]
        if weights.page_repeat <= 0:
            return -np.inf
        return lowest + (scores[untaken[key][0]] - lowest) * weights.page_repeat**repeats

    # the best candidate first, ties by page; only the page a unit was taken from changes value
    candidates = [(-worth, key) for key in by_page if (worth := value(key)) > -np.inf]
    heapq.heapify(candidates)
    spread_to = max(len(chosen), n_spread)  # named references count among the spread units
    while len(chosen) < spread_to and candidates:
        _, key = heapq.heappop(candidates)
        i = untaken[key].pop(0)
        chosen.append(int(positions[i]))
        out_scores.append(float(scores[i]))
        taken.add(int(positions[i]))
        on_page[key] += 1
        if (worth := value(key)) > -np.inf:
            heapq.heappush(candidates, (-worth, key))
    for i in by_score:  # the rest of k: the next best nodes wherever they are
        if len(chosen) >= k:
            break
        if int(positions[i]) not in taken:
            chosen.append(int(positions[i]))
            out_scores.append(float(scores[i]))
            taken.add(int(positions[i]))
    return np.asarray(chosen, np.int64), np.asarray(out_scores, np.float32)
