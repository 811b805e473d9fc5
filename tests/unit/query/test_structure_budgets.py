"""How the structure-aware methods spend their evidence units, on the real paper of conftest.py
(MMLongBench 2303.05039v2.pdf, 9 pages): the hybrid baseline's reciprocal-rank fusion, the page
budget LAD-RAG spends into, DeepRead's reading of its hits' scan windows with pages already
covered worth less, Chunk-Zoom's query seed and Zoom's fusion of its
walk with BM25 on a PDF."""

from __future__ import annotations

import numpy as np
import pytest

from bookindex.operators.config import ConfigError, RelevanceConfig, WalkConfig, load_config
from bookindex.operators.query import deepread
from bookindex.operators.query.engine import QueryEngine
from bookindex.operators.query.scoring import (
    RRF_K,
    PageBudget,
    fused_scores,
    fused_with_bm25,
    pages_in,
    text_scores,
)
from bookindex.operators.query.zoom import query_seeds, softmax_seeds
from bookindex.operators.walks.engine import _seeded
from tests.conftest import PAPER

QUESTION = "What is the Receptiviti score of user A2GBIFL43U1LKJ?"


def test_fused_scores_are_reciprocal_ranks_of_dense_and_bm25(index, doc):
    leaves = index.leaves(doc)
    vector = index.embed([QUESTION])[0]
    fused = fused_scores(index, QUESTION, leaves, vector)
    dense = index.dense_scores(vector, leaves)
    lexical = index.lexical_scores(QUESTION, leaves, headings=False)  # the baseline's: words
    by_hand = np.zeros(leaves.size)
    for scores, words in ((dense, False), (lexical, True)):
        order = np.lexsort((leaves, -scores))
        for rank, i in enumerate(order, 1):
            if not words or scores[i] > 0:  # a leaf no query word reaches: no BM25 term
                by_hand[i] += 1.0 / (RRF_K + rank)
    assert np.allclose(fused, by_hand)
    assert (lexical == 0).any() and fused.max() <= 2.0 / (RRF_K + 1)


def test_a_weighted_fusion_scales_the_bm25_term_alone(index, doc):
    leaves = index.leaves(doc)
    dense = index.dense_scores(index.embed([QUESTION])[0], leaves)
    lexical = index.lexical_scores(QUESTION, leaves)
    full = fused_with_bm25(index, QUESTION, leaves, dense)
    half = fused_with_bm25(index, QUESTION, leaves, dense, bm25_weight=0.5)
    alone = fused_with_bm25(index, QUESTION, leaves, dense, bm25_weight=0.0)
    plain = fused_with_bm25(index, QUESTION, leaves, dense, headings=False)
    assert np.allclose(plain, fused_scores(index, QUESTION, leaves))
    assert np.allclose(alone, full - 2 * (full - half))  # the BM25 term, halved twice
    assert np.allclose(alone[lexical == 0], full[lexical == 0])  # no query word: no BM25 term
    assert not np.allclose(alone[lexical > 0], full[lexical > 0])


def test_the_hybrid_baseline_is_the_top_of_the_fused_ranking(engine, index, doc):
    result = engine.answer(QUESTION, "hybrid", PAPER, k=4)
    assert result["plan"] == ["Hybrid_TopK"] and len(result["evidence"]) == 4
    leaves = index.leaves(doc)
    fused = fused_scores(index, QUESTION, leaves, index.embed([QUESTION])[0])
    top = leaves[np.lexsort((leaves, -fused))[:4]]
    assert [e["node_id"] for e in result["evidence"]] == [index.node_ids[p] for p in top]


def test_a_page_budget_refuses_a_covered_page_until_fill(index, doc):
    leaves = index.leaves(doc).tolist()
    same_page = [p for p in leaves if index.page_start[p] == index.page_start[leaves[0]]]
    assert len(same_page) >= 3
    spent = PageBudget(index, budget=3, spread=True)
    assert spent.spend(same_page[0], 1.0)
    assert not spent.spend(same_page[1], 0.9)  # adds no page
    spent.fill(same_page, {same_page[1]: 0.9})  # the pages ran out: any page, in order
    assert list(spent.evidence) == same_page[:3] and spent.full
    assert spent.evidence[same_page[1]] == 0.9 and spent.evidence[same_page[2]] == 0.0
    plain = PageBudget(index, budget=3, spread=False)
    assert plain.spend(same_page[0], 1.0) and plain.spend(same_page[1], 0.5)
    assert not plain.spend(same_page[0], 1.0) and not plain.full  # taken already


def _deepread(index, doc, k: int, share: float = 0.8, repeat: float = 0.8) -> list[int]:
    tools = deepread.DeepReadTools(index, doc)
    return deepread.offline_policy(tools, QUESTION, k, RelevanceConfig(), share, repeat).evidence


def _hybrid_relevance(index, doc) -> tuple[np.ndarray, np.ndarray]:
    leaves = index.leaves(doc)
    vector = index.embed([QUESTION])[0]
    weight = RelevanceConfig().dense_weight  # the relevance DeepRead ranks by
    return leaves, deepread.text_scores(index, QUESTION, leaves, vector, weight).astype(float)


def test_deepread_reads_beside_its_hits_inside_their_sections(engine, index, doc):
    """3k units; the best hit leads; every unit is a hit or lies in the scan window of a
    hit of the same section, worth the neighbour's share of that hit's relevance."""
    result = engine.answer(QUESTION, "deepread", PAPER, k=5)
    evidence = [index.position(e["node_id"]) for e in result["evidence"]]
    assert len(evidence) == 15 == len(set(evidence))
    assert 4 in {e["page"] for e in result["evidence"]}
    ops = [s["op"] for s in result["trace"]]
    assert ops[0] == "Retrieve" and set(ops[1:]) == {"ReadSection"} and len(ops) > 1
    leaves, scores = _hybrid_relevance(index, doc)
    score_of = dict(zip(leaves.tolist(), scores.tolist(), strict=True))
    assert evidence[0] == int(leaves[np.argmax(scores)])
    values = [e["score"] for e in result["evidence"]]
    for p, value in zip(evidence, values, strict=True):
        siblings = index.section_leaves(int(index.doc[p]), int(index.sec_id[p]))
        at = siblings.index(p)
        near = [score_of[q] for q in siblings[max(0, at - 1) : at + 2] if q != p]
        assert np.isclose(value, max([score_of[p]] + [0.8 * s for s in near]), atol=1e-6)


def test_deepread_s_order_does_not_depend_on_k(index, doc):
    """A budget of n units is the first n of any larger one: the eval's curves rise with n
    (before, k decided between two readings and the curve fell from 15 to 20 units)."""
    longest = _deepread(index, doc, 7)
    for k in (1, 2, 3, 5):
        assert _deepread(index, doc, k) == longest[: 3 * k]


def test_deepread_s_two_shares_span_plain_ranking_and_page_by_page(index, doc):
    leaves, scores = _hybrid_relevance(index, doc)
    plain = leaves[np.lexsort((leaves, -scores))][:9].tolist()
    assert _deepread(index, doc, 3, share=0.0, repeat=1.0) == plain  # Retrieve's ranking alone
    by_page = _deepread(index, doc, 3, share=0.8, repeat=0.0)
    pages = [int(index.page_start[p]) for p in by_page]
    n_pages = pages_in(index, leaves)
    assert len(set(pages[:n_pages])) == min(n_pages, 9)  # every page once before any twice
    assert by_page != _deepread(index, doc, 3)  # the default lies between the two


def test_chunk_seeds_mix_into_the_start_vector():
    y0 = np.zeros((2, 5))
    y0[0, 3:] = [2.0, 2.0]  # query 0: entity scores; query 1: none
    seeds = [np.array([3.0, 1.0, 0.0]), np.array([1.0, 1.0, 0.0])]
    mixed = _seeded(np, y0, seeds, [3, 3], 0.25, _Host())
    assert np.allclose(mixed[0], [0.1875, 0.0625, 0.0, 0.375, 0.375])
    assert np.allclose(mixed[1], [0.5, 0.5, 0.0, 0.0, 0.0])  # no entity mass: the seeds alone
    weights = query_seeds(np.eye(3), np.array([1.0, 0.0, 0.0]), WalkConfig(seed_temperature=0.5))
    assert np.isclose(weights.sum(), 1.0) and weights[0] > weights[1] == weights[2]


class _Host:  # the CPU backend's asarray
    @staticmethod
    def asarray(values, dtype=None):
        return np.asarray(values, dtype)


def test_zoom_on_one_pdf_starts_from_the_question_and_spreads_over_pages(index, doc):
    """ZoomRAG inside one document: with the query seed its first unit is the leaf most like
    the question (entities alone started it elsewhere), and its units cover distinct pages."""
    from bookindex.operators.config import BookindexConfig

    # the seed's effect, without BM25, spread by page (its best nodes share a section:
    # section_first would take them first)
    walk_alone = RelevanceConfig(zoom_bm25_weight=0.0, section_first=0)
    seeded = QueryEngine(
        index, BookindexConfig(walk=WalkConfig(device="cpu"), relevance=walk_alone)
    )
    entities_only = QueryEngine(
        index,
        BookindexConfig(walk=WalkConfig(device="cpu", query_seed=0.0), relevance=walk_alone),
    )
    found = seeded.answer(QUESTION, "zoom", PAPER, k=3)["evidence"]
    before = entities_only.answer(QUESTION, "zoom", PAPER, k=3)["evidence"]
    leaves = index.leaves(doc)
    best = leaves[np.argmax(index.dense_scores(index.embed([QUESTION])[0], leaves))]
    assert found[0]["node_id"] == index.node_ids[best]
    assert [e["node_id"] for e in found] != [e["node_id"] for e in before]
    pages = [e["page"] for e in found]
    assert len(pages) == len(set(pages))


def test_zoom_on_a_pdf_spends_k_units_where_chunk_zoom_s_cut_leaves_fewer(index, doc):
    """Chunk-Zoom keeps walk.keep_fraction of a document's leaves; asked for more units than
    it kept, Zoom gives its walk's units first, then the document's other leaves by the
    methods' relevance, k distinct units in all."""
    from bookindex.operators.config import BookindexConfig

    cut = QueryEngine(index, BookindexConfig(walk=WalkConfig(device="cpu", keep_fraction=0.05)))
    k = 20
    result = cut.answer(QUESTION, "zoom", PAPER, k=k)
    kept = next(step["out"] for step in result["trace"] if step["op"] == "Chunk_Zoom")
    assert 0 < kept < k <= index.leaves(doc).size
    found = [e["node_id"] for e in result["evidence"]]
    assert len(found) == len(set(found)) == k
    walked = cut.answer(QUESTION, "zoom", PAPER, k=kept)["evidence"]
    assert set(found[:kept]) == {e["node_id"] for e in walked}  # the walk's units first


AMAZON = "How many items in total of Amazon related datasets in the paper?"


def test_zoom_on_a_pdf_fuses_its_walk_with_bm25(index, doc):
    """The walk seeded by the question's cosine alone (``walk.seed_scores`` similarity) ranks
    the evidence page's best leaf by BM25 (the one naming the Amazon datasets' items) below two
    leaves BM25 ranks lower; fused with BM25's ranking (``relevance.zoom_bm25_weight`` 0.5; the
    default 0: the default seed reads BM25 already) it is Zoom's first unit, among the same
    five (ranked without Page_Ranker's spreading: the test is about the fusion)."""
    from bookindex.operators.config import BookindexConfig

    def zoom(weight: float) -> list[int]:
        config = BookindexConfig(
            walk=WalkConfig(device="cpu", seed_scores="similarity"),
            relevance=RelevanceConfig(zoom_bm25_weight=weight, page_ranker=False),
        )
        found = QueryEngine(index, config).answer(AMAZON, "zoom", PAPER, k=5)["evidence"]
        return [index.position(e["node_id"]) for e in found]

    leaves = index.leaves(doc)
    lexical = dict(zip(leaves.tolist(), index.lexical_scores(AMAZON, leaves).tolist(), strict=True))
    on_page = [p for p in leaves.tolist() if index.page_start[p] == 4]  # the evidence page
    bm25_best = max(on_page, key=lambda p: (lexical[p], -p))
    fused, walked = zoom(0.5), zoom(0.0)
    assert len(fused) == len(walked) == 5
    assert walked.index(bm25_best) == 2 and fused[0] == bm25_best
    assert all(lexical[p] < lexical[bm25_best] for p in walked[:2])
    assert sorted(fused) == sorted(walked)


def test_zoom_s_seed_over_a_pdf_is_the_methods_relevance(index, doc):
    """Chunk-Zoom's query seed over a PDF's leaves (``walk.seed_scores`` relevance, the
    default) is the softmax of the methods' relevance (dense and BM25 over the leaf read after
    its headings) over ``walk.relevance_temperature``: for the Amazon question the walk's first
    three units are the relevance's three best leaves, where the question's cosine alone
    (``similarity``) puts dense's second best, a leaf the relevance ranks lower, second. Ranked
    without Page_Ranker's spreading: the test is about the seed."""
    from bookindex.operators.config import BookindexConfig

    def engine(seed: str) -> QueryEngine:
        return QueryEngine(
            index,
            BookindexConfig(
                walk=WalkConfig(device="cpu", seed_scores=seed),
                relevance=RelevanceConfig(page_ranker=False, section_first=0),
            ),
        )

    relevance_engine, similarity_engine = engine("relevance"), engine("similarity")
    leaves = index.leaves(doc)
    vector = index.embed([AMAZON])[0]
    relevance = text_scores(index, AMAZON, leaves, vector, RelevanceConfig().dense_weight)
    dense = index.dense_scores(vector, leaves)
    by_relevance = leaves[np.lexsort((leaves, -relevance))].tolist()
    by_dense = leaves[np.lexsort((leaves, -dense))].tolist()
    assert by_relevance[:3] != by_dense[:3] and by_dense[1] not in by_relevance[:3]

    chunks = relevance_engine.zoom_of(doc).chunks(0)
    positions = np.asarray([index.position(c.node_id) for c in chunks])
    assert sorted(positions.tolist()) == leaves.tolist()  # a PDF's chunks: its leaves
    seeds = relevance_engine._relevance_seeds([AMAZON], vector[None], chunks)[0]
    order = np.searchsorted(leaves, positions)
    expected = softmax_seeds(relevance[order], WalkConfig().relevance_temperature)
    assert np.allclose(seeds, expected) and np.isclose(seeds.sum(), 1.0)
    assert similarity_engine._relevance_seeds([AMAZON], vector[None], chunks) == [None]

    def units(engine: QueryEngine) -> list[int]:
        found = engine.answer(AMAZON, "zoom", PAPER, k=3)["evidence"]
        return [index.position(e["node_id"]) for e in found]

    assert units(relevance_engine) == by_relevance[:3]
    assert units(similarity_engine)[:2] == by_dense[:2]


def test_deepread_s_shares_outside_0_1_and_an_empty_budget_are_refused_or_empty(index, doc):
    for field in ("deepread_neighbour_share", "deepread_page_repeat"):
        for bad in (-0.1, 1.5):
            with pytest.raises(ConfigError, match=rf"query\.{field}"):
                load_config(env={}, overrides={"query": {field: bad}})
    empty = deepread.offline_policy(deepread.DeepReadTools(index, doc), QUESTION, 0)
    assert empty.evidence == [] and [s["op"] for s in empty.trace] == ["Retrieve"]
