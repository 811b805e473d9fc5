"""The read model from in-memory tables (no Lance): which documents and rows it shows, the
document-level view derived from it, the one BM25, and the one method registry the jobs use."""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow as pa
import pytest

from bookindex.operators.query.bm25 import Bm25
from bookindex.operators.query.documents import TITLE_ENTITY, DocumentView, StaleIndexError
from bookindex.operators.query.read_model import COLUMNS, IndexTables, ReadModel
from bookindex.operators.query.registry import (
    PASSAGE,
    PASSAGE_METHODS,
    QUERY,
    QUERY_METHODS,
    evaluated,
)

DOCS = [  # doc_id, uri, title, status
    ("d2", "c.jsonl#p2", "Hello Love (song)", "ok"),
    ("d1", "c.jsonl#p1", "Hank Snow", "ok"),
    ("dx", "bad.pdf", "", "failed"),
]
TEXTS = {"d1": "He sang Hello Love in 1952.", "d2": "A song by Hank Snow.", "dx": "x", "ghost": "y"}


def _table(name: str, rows: list[dict]) -> pa.Table:
    return pa.table({c: pa.array([r.get(c) for r in rows]) for c in COLUMNS[name]})


def _tables() -> IndexTables:
    """Two passages and a failed PDF; nodes of a document that is not in ``documents`` (what
    a reader never gets from the store, but the model must not show either)."""
    documents = [
        {"doc_id": d, "uri": u, "title": t, "n_pages": 0, "status": s, "toc": "[]"}
        for d, u, t, s in DOCS
    ]
    nodes, rng = [], np.random.default_rng(0)
    for doc_id, text in TEXTS.items():
        common = {"doc_id": doc_id, "page_start": 0, "page_end": 0, "sec_id": 0}
        nodes.append(dict(common, node_id=f"{doc_id}:0", kind="root", order=0, level=0))
        vector = (rng.normal(size=4) * 3).astype(np.float32).tolist()  # not unit length
        sentence = (rng.normal(size=4)).astype(np.float32).tolist()  # its one sentence's
        nodes.append(
            dict(common, node_id=f"{doc_id}:1", parent_id=f"{doc_id}:0", kind="text", order=1,
                 text=text, para_idx=1, vector=vector, sentence_vectors=[sentence])
        )  # fmt: skip
    entities = [{"entity_id": "e1", "name": "Hank Snow", "type": "PERSON", "aliases": ["Snow"]}]
    mentions = [{"entity_id": "e1", "node_id": n} for n in ("d1:1", "ghost:1", "dx:1")]
    return IndexTables(
        documents=_table("documents", documents),
        nodes=_table("nodes", nodes),
        entities=_table("entities", entities),
        mentions=_table("mentions", mentions),
        relations=_table("relations", []),
        edges=_table("edges", [{"src_node": "d1:1", "dst_node": "d1:0", "type": "part_of"}]),
        communities=_table("communities", [{"node_id": "d2:1", "community": 0}]),
    )


@pytest.fixture(scope="module")
def model() -> ReadModel:
    return ReadModel.from_tables(_tables())


def test_only_documents_that_did_not_fail_are_visible_in_uri_order(model):
    assert [d.doc_id for d in model.documents] == ["d1", "d2"]
    assert model.node_ids == ["d1:0", "d1:1", "d2:0", "d2:1"]
    assert model.find_document("p2") == 1 and model.documents[0].passage
    assert model.mentions.shape == (4, 1) and model.mentions[:, 0].nonzero()[0].tolist() == [1]
    assert model.parent.tolist() == [-1, 0, -1, 2]
    assert model.edges["part_of"][0].tolist() == [1] and model.community.tolist()[3] == 0
    np.testing.assert_allclose(np.linalg.norm(model.vectors, axis=1)[[1, 3]], 1.0, rtol=1e-6)


def test_document_view_is_derived_from_the_node_arrays(model):
    view = DocumentView.from_read_model(model)
    stored = np.asarray(_tables().nodes.column("vector").to_pylist()[1], np.float32)
    np.testing.assert_array_equal(view.doc_vectors[0], stored / np.linalg.norm(stored))
    assert view.texts[0] == "Hank Snow\nHe sang Hello Love in 1952."
    assert view.n_index_entities == 1
    titles = view.entity_ids[1:]
    assert titles == [TITLE_ENTITY + "hank snow", TITLE_ENTITY + "hello love song"]
    linked = [sorted(view.entity_ids[e] for e in view.doc_entity[d].indices) for d in (0, 1)]
    assert linked[0] == ["e1", *titles]  # its mention, its title, the title it names
    assert linked[1] == titles  # names "Hank Snow", is "Hello Love (song)"
    assert [view.entity_ids[e] for e in view.title_entity] == titles
    assert [c.text for c in view.chunks(0)] == ["He sang Hello Love in 1952."]
    stored = _tables().nodes.column("sentence_vectors").to_pylist()[1][0]
    np.testing.assert_array_equal(view.chunks(0)[0].vector, np.asarray(stored, np.float32))


def test_an_index_without_sentence_vectors_asks_for_a_re_index():
    """An index from before the index job stored sentence vectors: the read model opens, and
    Chunk-Zoom over a passage says to re-index instead of embedding at query time."""
    tables = _tables()
    tables.nodes = tables.nodes.drop_columns(["sentence_vectors"])
    view = DocumentView.from_read_model(ReadModel.from_tables(tables))
    with pytest.raises(StaleIndexError, match="re-index"):
        view.chunks(0)


def test_one_bm25_scores_and_ranks_alike():
    texts = ["the cat sat", "a dog barked at the cat", "nothing here", ""]
    bm25 = Bm25(texts)
    scores = bm25.scores("cat dog")
    (ids, top), *_ = bm25.search(["cat dog"], 2)
    assert ids == [1, 0] and top == pytest.approx(scores[[1, 0]].tolist())
    assert not bm25.scores("the").any() and bm25.search(["zebra"], 10)[0][0] != []


def test_the_method_registry_feeds_the_jobs():
    from bookindex.jobs import evaluate, query

    assert PASSAGE_METHODS == ("zoom", "bm25", "dense")
    assert set(QUERY_METHODS) == {"auto", "bookrag", "deepread", "zoom", "ladrag", "dense",
                                  "hybrid", "bookrag_paper"}  # fmt: skip
    parser = query.build_parser()
    assert parser.parse_args(["q", "--index", "i"]).method == ["auto"]
    assert (
        tuple(parser.parse_args(["q", "--index", "i", "--method", "all"]).method) == QUERY_METHODS
    )
    for name in QUERY_METHODS:
        assert query.methods_arg(name) == [name]
    assert query.methods_arg("dense, zoom") == ["dense", "zoom"]
    for bad in ("magic", "dense,magic", ","):
        with pytest.raises(argparse.ArgumentTypeError, match="one of auto, bookrag"):
            query.methods_arg(bad)
    assert evaluate.parse_methods(None, QUERY) == list(evaluated(QUERY))
    assert evaluate.parse_methods(None, PASSAGE) == list(PASSAGE_METHODS)
    assert evaluate.parse_methods("zoom,magic", PASSAGE) is None


class _CountingBackend:
    """Deterministic 4-wide vectors of any text; records what it was asked to embed."""

    dim = 4

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rng = [np.random.default_rng(sum(map(ord, t))) for t in texts]
        return np.asarray([r.normal(size=4) for r in rng], np.float32)


def test_zoom_embeds_only_the_questions_and_ranks_stored_sentence_vectors():
    """Chunk-Zoom over passages reads the sentence vectors the index stored: a batch of
    questions costs one embedding call holding exactly those questions."""
    from bookindex.operators.query.retrieval import Retrieval
    from bookindex.operators.query.zoom import Zoom
    from bookindex.operators.walks.engine import make_engine

    backend = _CountingBackend()
    model = ReadModel.from_tables(_tables(), backend)
    view = DocumentView.from_read_model(model)
    questions = ["Who sang Hello Love?", "Which song did Hank Snow record?"]
    found = Retrieval(Zoom(view, backend, make_engine(device="cpu"))).retrieve(questions, "zoom", 2)
    assert backend.calls == [questions]
    chunks = [c for hits in found for h in hits for c in h.chunks]
    assert chunks and {c.text for c in chunks} <= {"He sang Hello Love in 1952.",
                                                   "A song by Hank Snow."}  # fmt: skip
