"""Entity linking for ZoomRAG: title entities (passages linked to the titles they name, like
hyperlinks), query linking (capitalised names, accents folded) and the bridge walk of Doc-Zoom
(operators.query.zoom), on document views made here."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bookindex.operators.config import WalkConfig
from bookindex.operators.graph.entity_linking import EntityLinker, title_forms, title_links
from bookindex.operators.query import zoom as zoom_module
from bookindex.operators.query.documents import DocumentView
from bookindex.operators.query.zoom import Zoom
from bookindex.operators.walks.engine import make_engine


def test_title_forms_drop_the_qualifier_and_a_leading_the():
    assert title_forms("Lilu (mythology)") == ["Lilu (mythology)", "Lilu"]
    assert title_forms("The Rank Organisation") == ["The Rank Organisation", "Rank Organisation"]
    assert title_forms("Brother (Pearl Jam song)")[1] == "Brother"
    assert title_forms("Alû") == ["Alû"]


def test_capitalised_linking_skips_common_words_and_folds_accents():
    linker = EntityLinker([["State"], ["Aschenbrödel"], ["Hank Snow"]], fold_accents=True)
    text = "In which state was the composer of Aschenbrodel born, says hank Snow?"
    assert linker.link(text, capitalised=True) == [1, 2]
    assert linker.link("The State of the art", capitalised=True) == [0]
    # The default (used by chunk linking and the PDF query engine) is unchanged.
    plain = EntityLinker([["State"], ["Aschenbrödel"]])
    assert plain.link("the state") == [0]
    assert plain.link("Aschenbrodel") == []


def test_nested_names_are_all_found_longest_first_and_only_whole():
    names = [["New York"], ["New York City"], ["York"], ["City Hall"], ["United Kingdom"]]
    linker = EntityLinker(names)
    text = "New York City Hall, in York; the United Nations, not a kingdom"
    assert linker.link(text) == [1, 0, 2, 3]  # by position, the longer name at a start first
    assert linker.link("new york city", capitalised=True) == []
    assert linker.link("new York city", capitalised=True) == [1, 0, 2]


def test_title_links_own_title_and_named_titles():
    names, links, own = title_links(
        ["Hank Snow", "Hello Love (song)", "Hank Snow", ""],
        ["He sang Hello Love.", "A song by hank snow.", "Hank Snow again", "Hello Love"],
    )
    assert names == [["Hank Snow"], ["Hello Love (song)", "Hello Love"]]
    assert own == [0, 1, 0, -1]
    # passage 1 names "hank snow" in lower case only: no link; the untitled passage 3 owns none.
    assert sorted(links) == [(0, 0), (0, 1), (1, 1), (2, 0), (3, 1)]


def test_hotpotqa_passages_link_the_titles_they_name(hotpot):
    ids = list(hotpot)
    names, links, _ = title_links(
        [hotpot[i]["title"] for i in ids], [hotpot[i]["text"] for i in ids]
    )
    entity = {n[0]: e for e, n in enumerate(names)}
    linked = {(ids[p], e) for p, e in links}
    # Bridge questions: the first passage names the second passage's title in its text.
    assert ("p24", entity["Recovery of Aristotle"]) in linked  # Haymo of Faversham
    assert ("p5", entity["Alû"]) in linked  # Lilu (mythology)
    assert ("p5", entity["Lilu (mythology)"]) in linked  # its own title
    assert len(links) > len(ids)  # more than the own-title links
    # A question names a title by its short form.
    linker = EntityLinker(names, max_words=10, fold_accents=True)
    found = [names[e][0] for e in linker.link("If Gallu is a demon Lilu is what?", True)]
    assert "Lilu (mythology)" in found


def _corpus(doc_vectors: np.ndarray, doc_entity: sp.csr_matrix) -> DocumentView:
    n, m = doc_entity.shape
    return DocumentView(
        doc_ids=[f"d{i}" for i in range(n)],
        uris=[f"c.jsonl#p{i}" for i in range(n)],
        names=[f"p{i}" for i in range(n)],
        titles=[f"T{i}" for i in range(n)],
        texts=[f"text {i}" for i in range(n)],
        doc_vectors=doc_vectors,
        entity_ids=[f"e{j}" for j in range(m)],
        entity_names=[[f"Entity {j}"] for j in range(m)],
        doc_entity=doc_entity,
        passage=[True] * n,
    )


def _bridge_corpus() -> tuple[DocumentView, np.ndarray, sp.csr_matrix]:
    """Doc 0 answers the first hop (it is the query's direction); doc 1 shares only entity 0
    with doc 0 and is orthogonal to the query; docs 2..n are mildly similar distractors, each
    with an entity of its own."""
    rng = np.random.default_rng(0)
    dim, n = 32, 60
    q = np.zeros(dim)
    q[0] = 1.0
    x = rng.normal(size=(n, dim)) * 0.3
    x[:, 0] = 0.0
    x[0] = q
    x[1, 1] = 1.0
    x[2:8, 0] = 2.0  # distractors close to the query (linked to it directly)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    rows = [0, 1] + list(range(2, n))
    cols = [0, 0] + list(range(1, n - 1))
    doc_entity = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n - 1))
    return _corpus(x, doc_entity), q[None], sp.csr_matrix((1, n - 1))


def _zoom(view: DocumentView) -> Zoom:
    return Zoom(view, backend=None, walk=make_engine(device="cpu"))


def _query_walk_alone(zoom: Zoom, q, query_entity) -> np.ndarray:
    nd = zoom.view.n_docs
    return zoom_module._node_distribution(zoom.engine.walk(q, query_entity)[0], nd)[:, :nd]


def test_bridge_walk_brings_the_next_hop_into_the_top():
    corpus, q, query_entity = _bridge_corpus()
    zoom = _zoom(corpus)
    docs, _ = zoom.doc_zoom_scores(q, query_entity)
    order = np.argsort(-docs[0], kind="stable")
    assert order[0] == 0 and order[1] == 1
    alone = _query_walk_alone(zoom, q, query_entity)
    assert list(np.argsort(-alone[0], kind="stable")).index(1) > 5  # one walk: out of reach


def test_round_robin_takes_the_lists_in_turn_and_skips_taken_documents():
    query_list = np.array([[0.9, 0.8, 0.7, 0.0, 0.0, 0.1], [0.9, 0.8, 0.7, 0.0, 0.0, 0.1]])
    bridge_list = np.array([[-1.0, 0.5, 0.0, 0.9, 0.2, 0.0], [-1.0, 0.5, 0.0, 0.9, 0.2, 0.0]])
    fused = zoom_module._round_robin(query_list, bridge_list, np.array([True, False]), 5)
    # row 0: q0, b3, q1, b4 (b1 taken), q2; the seed (-1) and unreached documents never come
    # from the bridge list. Row 1 has no bridge: the query list alone.
    assert list(np.argsort(-fused[0], kind="stable")[:5]) == [0, 3, 1, 4, 2]
    assert list(np.argsort(-fused[1], kind="stable")[:4]) == [0, 1, 2, 5]
    np.testing.assert_allclose(
        sorted(fused[0], reverse=True)[:6], [1, 1 / 2, 1 / 3, 1 / 4, 1 / 5, 0]
    )


def test_bridge_list_prefers_the_next_hop_about_the_question():
    """The query names document 0 by its title (entity 0); document 0 names entities 1 and 2,
    owned by documents 1 and 2, which the bridge walk reaches with equal mass (the graph is
    symmetric in them); document 2 is nearer the question, so it is the bridge list's first."""
    dim, n = 16, 40
    rng = np.random.default_rng(3)
    x = rng.normal(size=(n, dim))
    x[:, :6] = 0.0
    x[:3] = 0.0
    x[0, 3] = x[1, 4] = x[2, 5] = 1.0
    x[2, 0] = 0.5
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = np.zeros((1, dim))
    q[0, 0] = 1.0
    rows = [0, 0, 0, 1, 2] + list(range(3, n))
    cols = [0, 1, 2, 1, 2] + list(range(3, n))
    doc_entity = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    corpus = _corpus(x, doc_entity)
    corpus.title_entity = np.full(n, -1)
    corpus.title_entity[0] = 0
    zoom = _zoom(corpus)
    query_entity = sp.csr_matrix(([1.0], ([0], [0])), shape=(1, n))
    bridge_only = sp.csr_matrix(([1.0, 1.0], ([0, 0], [1, 2])), shape=(1, n))
    walk = _query_walk_alone(zoom, np.zeros_like(q), bridge_only)[0]
    assert walk[1] == pytest.approx(walk[2])  # the walk alone cannot tell them apart
    docs, _ = zoom.doc_zoom_scores(q, query_entity)
    assert list(np.argsort(-docs[0], kind="stable")[:2]) == [0, 2]


def test_a_named_title_passage_leads_the_ranking():
    """The query names entity 0, which document 5 carries as its own title and many other
    documents mention; document 5 is far from the query's direction."""
    corpus, q, _ = _bridge_corpus()
    n, m = corpus.doc_entity.shape
    mentions = [5, *range(10, 30)]
    extra = sp.csr_matrix((np.ones(21), (mentions, np.zeros(21, int))), shape=(n, m))
    corpus.doc_entity = ((corpus.doc_entity + extra) > 0).astype(np.float64).tocsr()
    query_entity = sp.csr_matrix(([1.0], ([0], [0])), shape=(1, m))
    zoom = _zoom(corpus)
    without, _ = zoom.doc_zoom_scores(q, query_entity)
    assert np.argsort(-without[0], kind="stable")[0] != 5
    corpus.title_entity = np.full(n, -1)
    corpus.title_entity[5] = 0
    named = zoom.named_passages(query_entity)
    assert named.toarray()[0].nonzero()[0].tolist() == [5]
    docs, _ = zoom.doc_zoom_scores(q, query_entity)
    assert np.argsort(-docs[0], kind="stable")[0] == 5


def test_hotpotqa_comparison_reaches_both_named_title_passages(hotpot):
    """'Who is the oldest, Sid Haig or Vic Darchinyan?': seven other passages mention Sid Haig,
    so the walk alone spreads his entity's mass; both title passages must lead the ranking.
    Real link structure (title entities of the HotpotQA passages), random document vectors."""
    ids = list(hotpot)
    names, links, _ = title_links(
        [hotpot[i]["title"] for i in ids], [hotpot[i]["text"] for i in ids]
    )
    rows, cols = zip(*links, strict=True)
    doc_entity = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(ids), len(names)))
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(ids), 32))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    corpus = _corpus(vectors, doc_entity)
    corpus.entity_names = names
    key = {n[0]: e for e, n in enumerate(names)}
    corpus.title_entity = np.array([key[hotpot[i]["title"]] for i in ids])
    zoom = _zoom(corpus)
    question = "Who is the oldest, Sid Haig or Vic Darchinyan?"
    query_entity = zoom.link_entities([question])
    assert doc_entity[:, key["Sid Haig"]].nnz >= 8
    q = rng.normal(size=(1, 32))
    walk = _query_walk_alone(zoom, q, query_entity)
    docs, _ = zoom.doc_zoom_scores(q, query_entity)
    top = {ids[d] for d in np.argsort(-docs[0], kind="stable")[:2]}
    assert top == {"p170", "p172"}
    # the walk alone does not rank both title passages first
    assert {ids[d] for d in np.argsort(-walk[0], kind="stable")[:2]} != {"p170", "p172"}


def test_bridge_scores_of_a_batch_equal_each_query_alone():
    corpus, q, _ = _bridge_corpus()
    rng = np.random.default_rng(1)
    queries = np.vstack([q, rng.normal(size=(2, q.shape[1]))])
    query_entity = sp.csr_matrix(
        ([1.0, 1.0], ([1, 2], [0, 5])), shape=(3, corpus.doc_entity.shape[1])
    )
    zoom = _zoom(corpus)
    docs, entities = zoom.doc_zoom_scores(queries, query_entity)
    for i in range(3):
        one_docs, one_entities = zoom.doc_zoom_scores(queries[i : i + 1], query_entity[i])
        np.testing.assert_allclose(docs[i], one_docs[0], rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(entities[i], one_entities[0], rtol=1e-9, atol=1e-15)
    # positions 0..TOP_K-1 of the fused ranking score 1/(1 + p); the rest 0
    expected = 1 / (1 + np.arange(WalkConfig().top_docs))
    for row in docs:
        np.testing.assert_allclose(np.sort(row[row > 0])[::-1], expected)


def test_a_zero_query_vector_links_no_document():
    """The bridge walk's start node is a zero vector: it must link entities only."""
    corpus, q, _ = _bridge_corpus()
    engine = make_engine(device="cpu").fit(corpus.doc_vectors, corpus.doc_entity)
    seeds = sp.csr_matrix(([1.0], ([0], [3])), shape=(1, corpus.doc_entity.shape[1]))
    _, nodes, _, _ = engine.query_links(np.zeros_like(q), seeds)
    assert [int(j) for j in nodes] == [corpus.n_docs + 3]


def test_questions_link_lower_case_names_over_pdfs_and_capitalised_ones_over_passages():
    corpus, _, _ = _bridge_corpus()
    corpus.entity_names[3], corpus.entity_names[4] = ["alpha ratio"], ["beta ratio"]
    question = "what does the alpha ratio mean, and the Beta ratio?"
    passages = _zoom(corpus).link_entities([question])
    assert passages.indices.tolist() == [4]  # lower case: a common phrase in a passage corpus
    corpus.passage = [False] * corpus.n_docs
    pdfs = _zoom(corpus).link_entities([question])
    assert sorted(pdfs.indices.tolist()) == [3, 4]


def test_a_question_asked_of_one_pdf_gets_the_same_zoom_evidence_whatever_else_is_indexed(
    engine, config, doc
):
    """A question asked of one document walks that document's own graph (QueryEngine.zoom_of):
    on the real paper's index, its evidence (nodes and scores) stays the same when the view
    also holds a second document close to the paper that shares half of its entities (as
    the index job's corpus resolution shares them). Before, Doc-Zoom walked the whole index,
    so another PDF's vector and entities moved this one's Chunk-Zoom scores and ranking."""
    import dataclasses

    from bookindex.operators.query.engine import QueryEngine
    from tests.conftest import PAPER

    view = engine.zoom.view
    shared = view.doc_entity[doc].indices[::2]
    second = sp.csr_matrix(
        (np.ones(len(shared), np.float32), (np.zeros(len(shared), np.int64), shared)),
        shape=(1, len(view.entity_ids)),
    )
    near = view.leaves[doc][0].vector  # the paper's first leaf: a vector the query links to
    two = dataclasses.replace(
        view,
        doc_ids=[*view.doc_ids, "second"],
        uris=[*view.uris, "second.pdf"],
        names=[*view.names, "second.pdf"],
        titles=[*view.titles, "Second"],
        texts=[*view.texts, "Second"],
        doc_vectors=np.vstack([view.doc_vectors, near / np.linalg.norm(near)]),
        doc_entity=sp.vstack([view.doc_entity, second], format="csr"),
        passage=[*view.passage, False],
        title_entity=None if view.title_entity is None else np.append(view.title_entity, -1),
    )
    beside = QueryEngine(engine.model, config)
    beside._zoom = Zoom(two, engine.model.backend, make_engine(config.walk))
    for question in [
        "What datasets are used in the study?",
        "How are the Receptiviti scores computed?",
        "Which baselines are compared?",
        "What is the size of the Amazon-beauty dataset?",
    ]:
        alone = engine.answer(question, "zoom", PAPER, 5)["evidence"]
        both = beside.answer(question, "zoom", PAPER, 5)["evidence"]
        assert alone and [e["node_id"] for e in both] == [e["node_id"] for e in alone]
        assert [e["score"] for e in both] == pytest.approx([e["score"] for e in alone], rel=1e-9)


def test_an_index_without_vectors_refuses_dense_and_zoom_on_every_call_and_serves_bm25():
    from bookindex.operators.query.retrieval import Retrieval

    n = 6
    view = _corpus(np.zeros((n, 8), np.float32), sp.csr_matrix((n, 3)))
    view.texts = ["alpha river", "bravo hill", "charlie lake", "delta plain", "echo", "fox"]
    retrieval = Retrieval(_zoom(view))
    for method in ("dense", "zoom", "dense"):  # the check is remembered, not skipped
        with pytest.raises(ValueError, match="no vectors"):
            retrieval.retrieve(["delta plain"], method, 2)
    assert retrieval.retrieve(["delta plain"], "bm25", 1)[0][0].doc == 3
