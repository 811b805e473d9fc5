"""A question asked of one PDF is scored by BM25 with that PDF's own statistics
(``relevance.bm25_scope``, ``ReadModel.lexical_scores``): its scores, and the evidence of the
methods that read them, are the same whatever else the index holds. On the real paper of
conftest.py (MMLongBench 2303.05039v2.pdf), alone and beside a real syllabus."""

from __future__ import annotations

import numpy as np
import pytest

from bookindex.operators.config import BookindexConfig, RelevanceConfig
from bookindex.operators.query.bm25 import Bm25
from bookindex.operators.query.engine import QueryEngine
from bookindex.operators.query.read_model import ReadModel
from tests.conftest import PAPER
from tests.unit.query.conftest import index_pdfs, tables_of

SYLLABUS = "syllabusqa/syllabi/pdf/web_syllabus_4670.pdf"  # 2 pages
QUESTION = "Which dataset statistics does the paper report?"


@pytest.fixture(scope="module")
def beside_rows(paper_rows, shared_data) -> list[dict]:
    return paper_rows + index_pdfs([str(shared_data / SYLLABUS)])


def _models(rows: list[dict], backend, scope: str) -> ReadModel:
    config = BookindexConfig(relevance=RelevanceConfig(bm25_scope=scope))
    return QueryEngine(ReadModel.from_tables(tables_of(rows), backend), config).model


def _paper_leaves(model: ReadModel) -> np.ndarray:
    return model.leaves(model.find_document(PAPER))


@pytest.mark.parametrize("headings", [True, False])
def test_a_pdfs_scores_do_not_depend_on_the_other_documents(
    paper_rows, beside_rows, backend, headings
):
    alone = _models(paper_rows, backend, "document")
    beside = _models(beside_rows, backend, "document")
    ids = [alone.node_ids[p] for p in _paper_leaves(alone)]
    assert [beside.node_ids[p] for p in _paper_leaves(beside)] == ids
    scores = alone.lexical_scores(QUESTION, _paper_leaves(alone), headings)
    assert (scores > 0).sum() > 5
    assert np.array_equal(beside.lexical_scores(QUESTION, _paper_leaves(beside), headings), scores)
    # with the whole index's statistics the syllabus's words move the paper's scores
    whole = _models(beside_rows, backend, "index")
    assert not np.allclose(whole.lexical_scores(QUESTION, _paper_leaves(whole), headings), scores)


def test_the_documents_own_index_is_bm25_over_its_nodes(beside_rows, backend):
    """Beside another document, the paper's nodes are scored as BM25 built over the paper's
    nodes alone scores them (the words alone: the hybrid baseline's reading)."""
    beside = _models(beside_rows, backend, "document")
    doc = beside.find_document(PAPER)
    lo, hi = beside.doc_range(doc)
    own = Bm25([beside.node_text(p) or " " for p in range(lo, hi)]).scores(QUESTION)
    leaves = beside.leaves(doc)
    assert np.array_equal(beside.lexical_scores(QUESTION, leaves, headings=False), own[leaves - lo])
    # a question over the whole index reads the whole index's statistics
    everything = beside.leaves()
    whole = _models(beside_rows, backend, "index")
    assert np.array_equal(
        beside.lexical_scores(QUESTION, everything), whole.lexical_scores(QUESTION, everything)
    )


@pytest.mark.parametrize("method", ["hybrid", "zoom", "bookrag"])
def test_the_evidence_for_a_question_about_one_pdf_is_the_same_beside_others(
    paper_rows, beside_rows, backend, method
):
    config = BookindexConfig(relevance=RelevanceConfig(bm25_scope="document"))
    engines = [
        QueryEngine(ReadModel.from_tables(tables_of(rows), backend), config)
        for rows in (paper_rows, beside_rows)
    ]
    found = [
        [e["node_id"] for e in engine.answer(QUESTION, method, PAPER, generate=False)["evidence"]]
        for engine in engines
    ]
    assert len(found[0]) == 5 and found[0] == found[1]
