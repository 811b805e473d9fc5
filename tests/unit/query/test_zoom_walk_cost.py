"""The walk-cost changes of ZoomRAG's Doc-Zoom on real HotpotQA passages and questions (the
first 50 questions and their 500 passages): a walk product that reads only the rows of the
state that can be nonzero (``_SpMM``'s masked products and pushes by column) gives the plain
product's state bit for bit; the query–document similarities a caller passes in link as those
the walk computes; float32 walks rank the documents as float64 walks do (the default
``walk.dtype``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from bookindex.operators.graph.entity_linking import EntityLinker, title_links
from bookindex.operators.models import ModelConfig, load_backend
from bookindex.operators.walks import engine as walk_engine
from bookindex.operators.walks.engine import make_engine
from bookindex.operators.walks.topk import top_k_columns

N_QUESTIONS, N_PASSAGES = 50, 500


@pytest.fixture(scope="module")
def graph(hotpot, shared_data):
    """A float64 engine over the first half of HotpotQA: its first 50 questions and their
    passages (10 a question, the gold two and eight distractors: p0-p499; vectors of the
    offline embedder, entities: the titles each names), the questions' vectors and the
    entities each names. (Half, not all 994 passages: embedding them is the test's setup, 47 s
    of one core for all.)"""
    passages = list(hotpot.values())[:N_PASSAGES]
    backend = load_backend(ModelConfig())
    names, links, _ = title_links([p["title"] for p in passages], [p["text"] for p in passages])
    rows, cols = zip(*links, strict=True)
    shape = (len(passages), len(names))
    doc_entity = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
    engine = make_engine(device="cpu", dtype=np.float64)
    engine.fit(backend.embed([p["text"] for p in passages]), doc_entity)
    path = shared_data / "multihop" / "hotpotqa" / "questions.jsonl"
    lines = path.read_text().splitlines()[:N_QUESTIONS]
    questions = [json.loads(line)["question"] for line in lines]
    assert {int(g[1:]) for line in lines for g in json.loads(line)["gold_ids"]} < set(
        range(N_PASSAGES)
    )
    linker = EntityLinker(names, max_words=10, fold_accents=True)
    found = [linker.link(q, capitalised=True) for q in questions]
    qe = sp.csr_matrix(
        (
            np.ones(sum(map(len, found))),
            ([i for i, f in enumerate(found) for _ in f], [e for f in found for e in f]),
        ),
        shape=(len(questions), len(names)),
    )
    return engine, backend.embed(questions), qe, doc_entity


def _walks(engine, vectors, qe, batch: int) -> list[np.ndarray]:
    return [
        np.array(engine.walk(vectors[lo : lo + batch], qe[lo : lo + batch])[0])
        for lo in range(0, len(vectors), batch)
    ]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sparse_products_give_the_plain_walk_bit_for_bit(graph, dtype, monkeypatch):
    """Question walks and bridge-like walks (zero vectors, a passage's entities as seeds), one
    at a time and in batches: the same bits with the masked and pushed products as with the
    plain kernel alone, and both kinds did run."""
    engine, vectors, qe, doc_entity = graph
    engine = engine.astype(dtype)
    seeds = sp.csr_matrix(doc_entity[: len(vectors)] > 0, dtype=np.float32)
    cases = [(vectors[:40], qe[:40]), (np.zeros_like(vectors[:40]), seeds[:40])]
    kernel = engine._spmm().kernel
    calls = {"masked": 0, "push": 0}

    def counted(name):
        method = getattr(kernel, name)

        def call(*args, **kwargs):
            calls[name] += 1
            return method(*args, **kwargs)

        return call

    for name in calls:
        monkeypatch.setattr(kernel, name, counted(name))
    for v, e in cases:
        for batch in (1, 16, 40):
            sparse = _walks(engine, v, e, batch)
            monkeypatch.setattr(walk_engine, "SPARSE_MARKS", -1.0)  # every product plain
            plain = _walks(engine, v, e, batch)
            monkeypatch.setattr(walk_engine, "SPARSE_MARKS", 0.9)
            for a, b in zip(sparse, plain, strict=True):
                assert a.dtype == dtype
                np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    assert calls["masked"] > 0 and calls["push"] > 0


def test_similarities_passed_in_link_as_computed(graph):
    engine, vectors, qe, _ = graph
    computed = engine.query_links(vectors, qe)
    given = engine.query_links(vectors, qe, engine.similarities(vectors))
    for a, b in zip(computed[:3], given[:3], strict=True):
        np.testing.assert_array_equal(a, b)
    assert computed[1].size > len(vectors)  # questions link documents


def test_float32_walks_rank_documents_as_float64(graph):
    """The top 10 documents of every question's walk, in order, and scores within
    1e-6 of the float64 walk's."""
    engine, vectors, qe, _ = graph
    assert make_engine(device="cpu").backend.dtype is np.float32  # the default
    nd = engine.n_d
    r64 = np.asarray(engine.walk(vectors, qe)[0])
    r32 = np.asarray(engine.astype(np.float32).walk(vectors, qe)[0])
    ids64, s64 = top_k_columns(r64[:nd], 10)
    ids32, s32 = top_k_columns(r32[:nd], 10)
    assert ids64.tolist() == ids32.tolist()
    np.testing.assert_allclose(s32, s64, rtol=1e-6)
    assert not np.array_equal(r64, r32)  # the walks did run in different arithmetic


def _pruned(engine, tolerance: float):
    """A copy of ``engine`` whose walks are pruned at ``tolerance`` (``walk.tolerance``)."""
    pruned = engine.astype(engine.backend.dtype)
    pruned.config = pruned.config.model_copy(update={"tolerance": tolerance})
    return pruned


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pruned_walks_are_each_query_alone_and_agree_with_the_library_product(
    graph, dtype, monkeypatch
):
    """A pruned walk (``walk.tolerance``) drops each small entry on its own: every question's
    walk gives the same bits alone and in a batch of 16 or 40; the compiled kernel's pruned
    walk agrees with the same walk through SciPy's product (the GPU's path: a plain product,
    then the floor) within a few floors; and it did drop something."""
    engine, vectors, qe, _ = graph
    tolerance = 1e-6
    pruned = _pruned(engine.astype(dtype), tolerance)
    # the question-document similarities computed once (BLAS may round a product of one row
    # and of many rows apart in the last bit; the walk is what is compared)
    sims = pruned.similarities(vectors)

    def walks(batch: int) -> np.ndarray:
        parts = [
            np.array(
                pruned.walk(
                    vectors[lo : lo + batch], qe[lo : lo + batch], None, sims[lo : lo + batch]
                )[0]
            )
            for lo in range(0, len(vectors), batch)
        ]
        return np.concatenate(parts, axis=1)

    alone = walks(1)
    for batch in (16, 40):
        np.testing.assert_array_equal(alone.view(np.uint8), walks(batch).view(np.uint8))
    monkeypatch.setattr(walk_engine, "kernel_or_reason", lambda a: (None, "test: no kernel"))
    library = _pruned(engine.astype(dtype), tolerance)
    assert library._spmm().kernel is None
    scipy_walk = np.asarray(library.walk(vectors, qe)[0])
    floors = np.asarray(library._spmm().floor(tolerance))
    np.testing.assert_allclose(alone, scipy_walk, rtol=1e-4, atol=4 * floors.max())
    exact = np.asarray(engine.astype(dtype).walk(vectors, qe)[0])
    assert (alone == 0).sum() > (exact == 0).sum()


def test_pruned_walks_rank_documents_as_the_exact_walk(graph):
    """At the default tolerance the top 10 documents of every question, in order, are the
    exact walk's (what the pruning saves shows at corpus scale: benchmarks/walk_prune.py)."""
    engine, vectors, qe, _ = graph
    engine = engine.astype(np.float32)
    tolerance = walk_engine.WalkConfig().tolerance
    assert tolerance > 0
    nd = engine.n_d
    exact = np.asarray(engine.walk(vectors, qe)[0])
    pruned = np.asarray(_pruned(engine, tolerance).walk(vectors, qe)[0])
    assert top_k_columns(pruned[:nd], 10)[0].tolist() == top_k_columns(exact[:nd], 10)[0].tolist()
