"""The serving-cost changes of ZoomRAG give the results of the code they replace, on real
HotpotQA passages: the entity linker's first-word index and its linking among a document's
own entities (operators.graph.entity_linking),
Chunk-Zoom's links as index lists instead of a sparse matrix per query, and the bridge walk's
zero start vectors skipping the pass over the corpus (operators.walks.engine)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bookindex.operators.graph.entity_linking import EntityLinker, sentences, title_links
from bookindex.operators.models import ModelConfig, load_backend
from bookindex.operators.walks.engine import ChunkLinks, make_engine


def every_span(linker: EntityLinker, text: str, capitalised: bool = False) -> list[int]:
    """``EntityLinker.link`` as it was: every span of up to ``max_words`` words looked up."""
    if capitalised:
        words, caps = linker._words(text)
    else:
        words, caps = linker._normalise(text).split(), []
    found: dict[int, None] = {}
    for start in range(len(words)):
        for stop in range(min(len(words), start + linker.max_words), start, -1):
            positions = linker._by_name.get(" ".join(words[start:stop]), ())
            if positions and (not caps or any(caps[start:stop])):
                for position in positions:
                    found.setdefault(position, None)
    return list(found)


@pytest.fixture(scope="module")
def passages(hotpot) -> list[dict]:
    return list(hotpot.values())


def test_linker_finds_what_every_span_finds_on_hotpotqa(passages):
    names, _, _ = title_links([p["title"] for p in passages], [p["text"] for p in passages])
    folded = EntityLinker(names, max_words=10, fold_accents=True)
    plain = EntityLinker(names)
    found = 0
    for p in passages:
        for linker, caps in ((folded, True), (folded, False), (plain, False)):
            links = linker.link(p["text"], caps)
            assert links == every_span(linker, p["text"], caps)
            found += len(links)
    assert found > len(passages)  # the passages name titles: the comparison is not empty


def test_linking_among_a_documents_entities_filters_what_link_finds(passages):
    """Chunk-Zoom's linking (``link_among``: only the names of the document's own entities)
    finds, per sentence, what linking against every name finds among those entities."""
    names, links, _ = title_links([p["title"] for p in passages], [p["text"] for p in passages])
    linker = EntityLinker(names)
    own: dict[int, set[int]] = {}
    for p, e in links:
        own.setdefault(p, set()).add(e)
    found = 0
    for p, passage in enumerate(passages):
        allowed = own.get(p, set())
        texts = sentences(passage["text"])
        got = linker.link_among(texts, allowed)
        assert got == [[e for e in linker.link(t) if e in allowed] for t in texts]
        found += sum(map(len, got))
    assert found > len(passages) // 2  # sentences name their passage's entities
    assert linker.link_among(["Anything at all"], set()) == [[]]


def test_chunk_links_rank_as_the_sparse_indicator_on_real_sentences(passages):
    """Chunk-Zoom over the sentences of real passages (vectors of the offline embedder, entity
    links from the titles they name), each query's links as a sparse matrix and as
    ``ChunkLinks``: the same chunks, the same scores."""
    docs = passages[:40]
    names, _, _ = title_links([p["title"] for p in passages], [p["text"] for p in passages])
    linker = EntityLinker(names, max_words=10, fold_accents=True)
    backend = load_backend(ModelConfig())
    groups = [docs[i : i + 8] for i in range(0, len(docs), 8)]  # a query's documents
    vectors, chunk_doc, as_matrix, as_lists = [], [], [], []
    for group in groups:
        chunks = [(d, s) for d, p in enumerate(group) for s in sentences(p["text"])]
        vectors.append(backend.embed([s for _, s in chunks]))
        chunk_doc.append(np.array([d for d, _ in chunks]))
        rows, cols = [], []
        for j, (_, text) in enumerate(chunks):
            ents = linker.link(text)
            rows += [j] * len(ents)
            cols += ents
        rows += [0, 0]  # a repeated link counts once, as in the matrix
        cols += [cols[0], cols[0]] if cols else [0, 0]
        as_lists.append(ChunkLinks(rows, cols))
        as_matrix.append(
            sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(chunks), len(names)))
        )
    assert sum(m.nnz for m in as_matrix) > len(groups)
    entity_scores = np.random.default_rng(0).random((len(groups), len(names)))
    engine = make_engine(device="cpu")
    expected = engine.chunk_zoom(vectors, chunk_doc, as_matrix, entity_scores)
    got = engine.chunk_zoom(vectors, chunk_doc, as_lists, entity_scores)
    for (order_a, scores_a), (order_b, scores_b) in zip(expected, got, strict=True):
        assert order_a.tolist() == order_b.tolist()
        assert scores_a.tolist() == scores_b.tolist()
    with pytest.raises(ValueError):
        engine.chunk_zoom(vectors[:1], chunk_doc[:1], [ChunkLinks([10_000], [0])], entity_scores)


def test_zero_start_vectors_in_a_batch_link_as_alone(passages):
    """Query links of a batch mixing zero vectors (bridge walks) and questions: each row's
    links are those it has alone; a zero row links its entities only."""
    docs = passages[:200]
    backend = load_backend(ModelConfig())
    doc_vectors = backend.embed([p["text"] for p in docs])
    names, links, _ = title_links([p["title"] for p in docs], [p["text"] for p in docs])
    rows, cols = zip(*links, strict=True)
    doc_entity = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(docs), len(names)))
    engine = make_engine(device="cpu").fit(doc_vectors, doc_entity)
    questions = backend.embed(["Who directed the film?", "Which river flows through it?"])
    batch = np.vstack([questions[0], np.zeros_like(questions[0]), questions[1]])
    query_entity = sp.csr_matrix(([1.0, 1.0], ([1, 2], [3, 5])), shape=(3, len(names)))
    hb, hj, hv, nq = engine.query_links(batch, query_entity)
    assert nq == 3
    for i in range(3):
        b1, j1, v1, _ = engine.query_links(batch[i : i + 1], query_entity[i])
        mine = hb == i
        order, alone = np.argsort(hj[mine]), np.argsort(j1)
        assert hj[mine][order].tolist() == j1[alone].tolist()
        np.testing.assert_allclose(hv[mine][order], v1[alone], rtol=1e-12)
    assert hj[hb == 1].tolist() == [len(docs) + 3]  # the zero row: its entity, no document
    assert (hj[hb == 0] < len(docs)).any()  # a question links documents
