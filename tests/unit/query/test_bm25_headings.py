"""The methods' BM25 reads each node after the titles of the sections above it
(``ReadModel.lexical_scores``, ``relevance.bm25_headings``); the hybrid baseline reads the
nodes' own words. On the real paper of conftest.py (MMLongBench 2303.05039v2.pdf)."""

from __future__ import annotations

import numpy as np

from bookindex.operators.config import BookindexConfig, RelevanceConfig
from bookindex.operators.kinds import ROOT, SECTION
from bookindex.operators.query.engine import QueryEngine
from bookindex.operators.query.read_model import ReadModel
from bookindex.operators.query.scoring import fused_scores, fused_with_bm25, text_scores

QUESTION = "dataset statistics"


def _section(index: ReadModel, doc: int, prefix: str) -> int:
    lo, hi = index.doc_range(doc)
    found = [p for p in range(lo, hi) if index.kind[p] == SECTION]
    return next(p for p in found if index.title[p].startswith(prefix))


def test_a_node_reads_after_the_titles_of_the_sections_above_it(index, doc):
    paths = index.heading_paths()
    lo, hi = index.doc_range(doc)
    subsection = _section(index, doc, "2.2.1 ")
    leaf = index.section_leaves(doc, int(index.sec_id[subsection]))[0]
    assert paths[leaf].split("\n") == [
        index.title[_section(index, doc, "2 Related Work")],
        index.title[_section(index, doc, "2.2 Personality Detection")],
        index.title[subsection],
    ]
    assert paths[subsection] == "2 Related Work\n2.2 Personality Detection"  # not itself
    root = next(p for p in range(lo, hi) if index.kind[p] == ROOT)
    assert paths[root] == "" and paths[_section(index, doc, "1 Introduction")] == ""
    assert not any(index.title[root] in path for path in paths[lo:hi])  # the root: shared


def test_a_question_about_a_heading_finds_the_paragraphs_under_it(index, doc):
    """Every paragraph under "3.3 Dataset Statistics" is reached by a question about dataset
    statistics, one of them only through its heading, and they lead the document's ranking
    (with at most one other: a long paragraph of "3.2 Dataset Construction" about datasets)."""
    leaves = index.leaves(doc)
    under = index.section_leaves(doc, int(index.sec_id[_section(index, doc, "3.3 ")]))
    with_headings = index.lexical_scores(QUESTION, leaves)
    words_alone = index.lexical_scores(QUESTION, leaves, headings=False)
    mine = np.isin(leaves, under)
    assert (with_headings[mine] > 0).all() and (words_alone[mine] == 0).any()
    top = leaves[np.lexsort((leaves, -with_headings))[: len(under) + 1]]
    assert set(under) <= set(top.tolist())
    assert not set(under) <= set(leaves[np.lexsort((leaves, -words_alone))[: len(under) + 1]])


def test_the_hybrid_baseline_reads_the_words_alone(index, doc):
    leaves = index.leaves(doc)
    dense = index.dense_scores(index.embed([QUESTION])[0], leaves)
    baseline = fused_scores(index, QUESTION, leaves)
    assert np.allclose(baseline, fused_with_bm25(index, QUESTION, leaves, dense, headings=False))
    assert not np.allclose(baseline, fused_with_bm25(index, QUESTION, leaves, dense))


def test_switched_off_every_method_reads_the_words_alone(paper_tables, backend, doc):
    config = BookindexConfig(relevance=RelevanceConfig(bm25_headings=False))
    off = QueryEngine(ReadModel.from_tables(paper_tables, backend), config).model
    on = QueryEngine(ReadModel.from_tables(paper_tables, backend)).model
    leaves = off.leaves(doc)
    vector = off.embed([QUESTION])[0]
    assert np.array_equal(
        off.lexical_scores(QUESTION, leaves), on.lexical_scores(QUESTION, leaves, headings=False)
    )
    assert not np.allclose(
        text_scores(off, QUESTION, leaves, vector), text_scores(on, QUESTION, leaves, vector)
    )


def test_a_warmed_engine_holds_both_indexes_before_any_request(paper_tables, backend):
    """Serve warms an engine before its threads share it: both BM25 indexes are built then, not
    by the first request that needs one (a PDF corpus's are two)."""
    engine = QueryEngine(ReadModel.from_tables(paper_tables, backend))
    engine.warm_up()
    built = dict(engine.model.timings)
    assert {"bm25_nodes_s", "bm25_headings_s"} <= set(built)
    engine.answer(QUESTION, "hybrid", generate=False)
    engine.answer(QUESTION, "deepread", generate=False)
    assert engine.model.timings == built  # nothing built again


def test_the_methods_bm25_weighs_length_by_its_own_b(paper_tables, backend, doc):
    """``relevance.bm25_b`` reaches the methods' index alone: a lower b takes from a short
    node's lead over a long one holding the same word; the baseline keeps bm25s's default."""
    models = {
        b: QueryEngine(
            ReadModel.from_tables(paper_tables, backend),
            BookindexConfig(relevance=RelevanceConfig(bm25_b=b)),
        ).model
        for b in (0.75, 0.3)
    }
    model = models[0.75]
    leaves = model.leaves(doc)
    scores = {b: m.lexical_scores("dataset", leaves) for b, m in models.items()}
    paths = model.heading_paths()
    words = np.array([len(f"{paths[p]} {model.node_text(p)}".split()) for p in leaves])
    holding = np.flatnonzero(scores[0.75] > 0)
    short, long = holding[words[holding].argmin()], holding[words[holding].argmax()]
    assert words[long] > 3 * words[short]
    lead = {b: s[short] / s[long] for b, s in scores.items()}
    assert lead[0.3] < lead[0.75]
    assert np.array_equal(
        models[0.3].lexical_scores("dataset", leaves, headings=False),
        models[0.75].lexical_scores("dataset", leaves, headings=False),
    )
    model.bm25_b = 0.3  # another engine's setting: the index follows it, not the one cached
    assert np.array_equal(model.lexical_scores("dataset", leaves), scores[0.3])
    alone = ReadModel.from_tables(paper_tables, backend)  # before any engine: the default's
    assert alone.bm25_b == RelevanceConfig().bm25_b
