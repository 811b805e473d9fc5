"""ZoomRAG walk engine: batched == each query alone, coupled leaks, Chunk-Zoom closed form,
incremental == from scratch, backend selection, batched PPR vs igraph."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from bookindex.operators.config import WalkConfig
from bookindex.operators.walks.engine import make_engine
from bookindex.operators.walks.reference import coupled_doc_zoom, reference_doc_zoom_single
from bookindex.operators.walks.topk import top_k_columns, top_k_rows

N_DOC, N_ENT, N_Q, DIM = 300, 500, 32, 32
EXACT = WalkConfig(tolerance=0)  # the walk the dense reference computes (no pruning)


def _indicator(rng: np.random.Generator, rows: int, cols: int, per_row: float) -> sp.csr_matrix:
    m = sp.random(rows, cols, density=per_row / cols, random_state=rng, format="csr")
    m.data[:] = 1.0
    return m


@pytest.fixture(scope="module")
def corpus() -> dict:
    rng = np.random.default_rng(0)
    topics = rng.normal(size=(12, DIM))
    docs = topics[rng.integers(0, 12, N_DOC)] + 1.5 * rng.normal(size=(N_DOC, DIM))
    queries = topics[rng.integers(0, 12, N_Q)] + 1.5 * rng.normal(size=(N_Q, DIM))
    return {
        "docs": docs,
        "doc_entity": _indicator(rng, N_DOC, N_ENT, 5.0),
        "queries": queries,
        "query_entity": _indicator(rng, N_Q, N_ENT, 3.0),
    }


@pytest.fixture(scope="module")
def engine(corpus):
    return make_engine(EXACT, device="cpu", dtype=np.float64).fit(
        corpus["docs"], corpus["doc_entity"]
    )


@pytest.fixture(scope="module")
def references(corpus) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    return [
        reference_doc_zoom_single(
            corpus["docs"], corpus["doc_entity"], corpus["queries"][b], corpus["query_entity"][b]
        )
        for b in range(N_Q)
    ]


def test_batched_doc_zoom_equals_each_query_alone(engine, corpus, references):
    ids, scores, ent = engine.doc_zoom(corpus["queries"], corpus["query_entity"])
    r, _ = engine.walk(corpus["queries"], corpus["query_entity"])
    assert ids.shape == scores.shape == (N_Q, 10) and ent.shape == (N_Q, N_ENT)
    for b, (ref_ids, ref_docs, ref_ent) in enumerate(references):
        assert np.abs(r[:N_DOC, b] - ref_docs).max() < 1e-6
        assert np.abs(ent[b] - ref_ent).max() < 1e-6
        np.testing.assert_array_equal(ids[b], ref_ids)
        np.testing.assert_allclose(scores[b], ref_docs[ref_ids], rtol=0, atol=1e-9)
    assert (scores[:, :-1] >= scores[:, 1:]).all()
    assert scores[:, 0].min() > 0  # every query reaches documents
    # one query alone through the engine gives the same row as inside the batch
    ids1, scores1, _ = engine.doc_zoom(corpus["queries"][5:6], corpus["query_entity"][5:6])
    np.testing.assert_array_equal(ids1[0], ids[5])
    np.testing.assert_allclose(scores1[0], scores[5], rtol=0, atol=1e-12)


def test_coupled_walk_leaks_mass_between_queries(engine, corpus, references):
    q, qe = corpus["queries"], corpus["query_entity"]
    _, c_scores, c_ent = coupled_doc_zoom(engine, q, qe)
    _, scores, ent = engine.doc_zoom(q, qe)
    ours = max(np.abs(ent[b] - references[b][2]).max() for b in range(N_Q))
    coupled = max(np.abs(c_ent[b] - references[b][2]).max() for b in range(N_Q))
    coupled_docs = np.abs(c_scores - scores).max()
    assert ours < 1e-9
    assert coupled > 1e-4 and coupled_docs > 1e-4  # well above 1e-6


def _chunk_inputs(
    rng: np.random.Generator, n_queries: int, max_chunks: int = 9, links: float = 4.0
) -> tuple[list, list, list]:
    """Per query: chunks from 3 documents (2 to ``max_chunks`` − 1 each), their vectors and
    chunk–entity links (about ``links`` a chunk)."""
    vecs, docs, ents = [], [], []
    for _ in range(n_queries):
        sizes = rng.integers(2, max_chunks, size=3)
        docs.append(np.repeat(rng.choice(N_DOC, 3, replace=False), sizes))
        vecs.append(rng.normal(size=(sizes.sum(), DIM)))
        ents.append(_indicator(rng, int(sizes.sum()), N_ENT, links))
    return vecs, docs, ents


def _dense_chunk_transition(vec, doc, ent, omega=0.5, sigma=1.0):
    """Straightforward per-entry construction of B̃ (independent of the engine's code)."""
    n = len(doc)
    c = vec / np.linalg.norm(vec, axis=1, keepdims=True)
    pos, seen = [], {}
    for d in doc:
        pos.append(seen.get(d, 0))
        seen[d] = pos[-1] + 1
    bt = np.zeros((n, n))
    bs = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if doc[i] == doc[j]:
                bt[i, j] = math.exp(-((pos[i] - pos[j]) ** 2) / (2 * sigma**2))
            bs[i, j] = math.exp(float(c[i] @ c[j]))
    bcc = omega * bt / bt.sum(0) + (1 - omega) * bs / bs.sum(0)
    bcc /= bcc[bcc > 0].mean()
    dense = ent.toarray() != 0
    local = np.flatnonzero(dense.any(0))
    big = np.zeros((n + len(local),) * 2)
    big[:n, :n] = bcc
    big[:n, n:] = dense[:, local]
    big[n:, :n] = dense[:, local].T
    return big / big.sum(0), local


def test_chunk_zoom_closed_form_equals_power_iteration(engine, corpus):
    rng = np.random.default_rng(1)
    vecs, docs, ents = _chunk_inputs(rng, 6)
    _, _, ent_scores = engine.doc_zoom(corpus["queries"][:6], corpus["query_entity"][:6])
    ent_scores = ent_scores + rng.random(ent_scores.shape) * 1e-3  # every local entity counts
    everything = WalkConfig(beta=0.9, keep_fraction=1.0)
    ranked = engine.chunk_zoom(vecs, docs, ents, ent_scores, everything)
    kept = engine.chunk_zoom(vecs, docs, ents, ent_scores)
    closed = []
    for order, scores in ranked:
        closed.append(np.empty(len(order)))
        closed[-1][order] = scores
    for b in range(6):
        bt, local = _dense_chunk_transition(vecs[b], docs[b], ents[b])
        y0 = np.concatenate([np.zeros(len(docs[b])), ent_scores[b, local]])
        y = y0.copy()
        for _ in range(500):
            y = 0.1 * bt @ y + 0.9 * y0
        n = len(docs[b])
        assert np.abs(closed[b] - y[:n]).max() < 1e-6 * max(1.0, np.abs(y).max())
        assert np.abs(closed[b] - y[:n]).max() < 1e-6
        order, scores = kept[b]
        assert len(order) == math.ceil(0.7 * n)
        np.testing.assert_array_equal(order, np.argsort(-y[:n], kind="stable")[: len(order)])
        assert (np.diff(scores) <= 0).all()


def test_a_negative_tolerance_is_refused_with_its_field_named():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="tolerance"):
        WalkConfig(tolerance=-1e-7)
    assert WalkConfig(tolerance=0).tolerance == 0  # the exact walk


def test_chunk_zoom_groups_by_size_and_answers_in_the_batch_order(engine, corpus):
    """Questions of very different graph sizes (a few chunks naming few entities, many chunks
    naming many) are solved in groups of similar size (``_size_groups``), each padded to its
    own largest; every question's ranking and scores are what it gets alone, in the batch's
    order."""
    from bookindex.operators.walks.engine import CHUNK_GROUP, _size_groups

    rng = np.random.default_rng(11)
    vecs, docs, ents = [], [], []
    for b in range(20):
        sizes = rng.integers(2, 30 if b % 3 == 0 else 6, size=3)
        docs.append(np.repeat(rng.choice(N_DOC, 3, replace=False), sizes))
        vecs.append(rng.normal(size=(sizes.sum(), DIM)))
        ents.append(_indicator(rng, int(sizes.sum()), N_ENT, 12.0 if b % 3 == 0 else 2.0))
    groups = _size_groups([len(d) for d in docs], ents)
    flat = [q for g in groups for q in g]
    assert sorted(flat) == list(range(20)) and flat != list(range(20))
    assert len(groups) >= 3 and max(map(len, groups)) <= CHUNK_GROUP
    nodes = [len(docs[q]) + np.unique(ents[q].nonzero()[1]).size for q in flat]
    assert nodes == sorted(nodes)  # smallest first: a group is padded to about its own size
    _, _, ent_scores = engine.doc_zoom(corpus["queries"][:20], corpus["query_entity"][:20])
    ent_scores = ent_scores + rng.random(ent_scores.shape) * 1e-3
    together = engine.chunk_zoom(vecs, docs, ents, ent_scores)
    for b in range(20):
        alone = engine.chunk_zoom([vecs[b]], [docs[b]], [ents[b]], ent_scores[b : b + 1])[0]
        np.testing.assert_array_equal(together[b][0], alone[0])
        np.testing.assert_allclose(together[b][1], alone[1], rtol=1e-12)


def test_chunk_zoom_on_a_gpu_solves_the_batch_as_one_stack(corpus):
    """On a GPU each group's solve is a few hundred kernel launches whatever its size (an
    H200 ran a batch of 256 in 0.38 s as 32 groups of 8, 0.097 s as one stack), so its
    batch is one group (split only by ``BLOCK_ELEMS``), sorted by size; the CPU's groups are
    ``CHUNK_GROUP``. The GPU's path, with NumPy standing in for CuPy, ranks as the CPU's."""
    from bookindex.operators.walks.engine import CHUNK_GROUP, Backend, WalkEngine

    n_q = 20
    vecs, docs, ents = _chunk_inputs(np.random.default_rng(5), n_q, max_chunks=12, links=3.0)
    cpu = make_engine(EXACT, device="cpu", dtype=np.float64)
    cpu.fit(corpus["docs"], corpus["doc_entity"])
    gpu = WalkEngine(Backend("gpu", np, sp, np.float64), EXACT)
    gpu.fit(corpus["docs"], corpus["doc_entity"])
    _, _, ent_scores = cpu.doc_zoom(corpus["queries"][:n_q], corpus["query_entity"][:n_q])
    stacks = {}
    for name, engine in (("cpu", cpu), ("gpu", gpu)):
        build, stacks[name] = engine.chunk_graphs, []

        def counted(*args, _build=build, _seen=stacks[name]):
            _seen.append(len(args[0]))
            return _build(*args)

        engine.chunk_graphs = counted
    ranked = {
        name: e.chunk_zoom(vecs, docs, ents, ent_scores) for name, e in (("cpu", cpu), ("gpu", gpu))
    }
    assert stacks["gpu"] == [n_q]
    assert len(stacks["cpu"]) == -(-n_q // CHUNK_GROUP) and max(stacks["cpu"]) == CHUNK_GROUP
    for (ids_c, scores_c), (ids_g, scores_g) in zip(ranked["cpu"], ranked["gpu"], strict=True):
        np.testing.assert_array_equal(ids_c, ids_g)
        np.testing.assert_allclose(scores_c, scores_g, rtol=1e-12)


@pytest.mark.parametrize(("slack", "cap"), [(0.5, 64), (0.0, 64), (0.5, 3), (0.0, 3)])
def test_incremental_add_equals_full_build(corpus, slack, cap):
    q, qe = corpus["queries"], corpus["query_entity"]
    docs, de = corpus["docs"], corpus["doc_entity"].tocsr()
    config = WalkConfig(max_doc_links=cap)
    # The first 150 docs only know entities < 400; later batches bring 50 new entities each.
    inc = make_engine(config, device="cpu", threshold_slack=slack)
    inc.add_documents(docs[:150], de[:150, :400], n_new_entities=400)
    recomputed = 0
    for lo, hi, n_e in ((150, 230, 450), (230, 300, 500)):
        inc.add_documents(docs[lo:hi], de[lo:hi, :n_e], n_new_entities=50)
        recomputed += inc.last_add["rows_recomputed"]
    # existing rows never gain entities, so the full build sees the same indicator matrix
    de_ref = de.tolil()
    de_ref[:150, 400:] = 0
    de_ref[150:230, 450:] = 0
    full = make_engine(config, device="cpu", threshold_slack=slack).fit(docs, de_ref.tocsr())
    a = full.doc_zoom(q, qe)
    b = inc.doc_zoom(q, qe)
    assert inc.n_d == N_DOC and inc.n_e == N_ENT and inc.dd_nnz == full.dd_nnz
    np.testing.assert_array_equal(a[0], b[0])
    assert np.abs(a[1] - b[1]).max() < 1e-9 and np.abs(a[2] - b[2]).max() < 1e-9
    if slack == 0.0:
        assert recomputed > 0  # thresholds fell below stored floors: those rows were redone


def _doc_links(engine) -> list[dict[int, float]]:
    """Each document row's document links (column -> weight) in the engine's graph."""
    dd = engine.S[: engine.n_d, : engine.n_d].tocsr()
    return [
        dict(zip(dd.indices[a:b].tolist(), dd.data[a:b].tolist(), strict=True))
        for a, b in zip(dd.indptr[:-1], dd.indptr[1:], strict=True)
    ]


def test_a_bounded_row_keeps_its_largest_links_and_the_walk_equals_the_reference(corpus):
    docs, de = corpus["docs"], corpus["doc_entity"]
    config = WalkConfig(max_doc_links=3, tolerance=0)
    free = _doc_links(make_engine(WalkConfig(max_doc_links=0), device="cpu").fit(docs, de))
    bounded = make_engine(config, device="cpu", dtype=np.float64).fit(docs, de)
    kept = _doc_links(bounded)
    assert max(len(row) for row in free) > 3  # the bound is reached on this corpus
    assert sum(len(row) for row in kept) == bounded.dd_nnz
    for free_row, kept_row in zip(free, kept, strict=True):
        largest = sorted(free_row, key=lambda j, row=free_row: (-row[j], j))[:3]
        assert sorted(kept_row) == sorted(largest)  # the same columns, rescaled weights
    unbounded = make_engine(WalkConfig(max_doc_links=64), device="cpu").fit(docs, de)
    assert _doc_links(unbounded) == free  # a bound no row reaches changes nothing
    r, _ = bounded.walk(corpus["queries"], corpus["query_entity"])
    for b in range(N_Q):
        _, ref_docs, ref_ent = reference_doc_zoom_single(
            docs, de, corpus["queries"][b], corpus["query_entity"][b], config
        )
        assert np.abs(r[:N_DOC, b] - ref_docs).max() < 1e-6
        assert np.abs(r[N_DOC:, b] - ref_ent).max() < 1e-6


def _gpu_available() -> bool:
    try:
        import cupy

        return bool(cupy.cuda.is_available())
    except Exception:
        return False


def test_backend_selection():
    assert make_engine(device="cpu").device == "cpu"
    with pytest.raises(ValueError):
        make_engine(device="tpu")
    if _gpu_available():
        assert (
            make_engine(device="auto").device == "gpu" and make_engine(device="gpu").device == "gpu"
        )
        return
    with pytest.raises(RuntimeError, match="device='gpu' requested but .*(CuPy|CUDA)"):
        make_engine(device="gpu")
    assert make_engine(device="auto").device == "cpu"


@pytest.mark.skipif(not _gpu_available(), reason="needs CuPy and a CUDA device")
def test_gpu_backend_matches_cpu(engine, corpus):
    """The exact walk, and the pruned walk at the default tolerance (the GPU applies the floor
    after cuSPARSE's product, the CPU inside its kernel), agree between the backends."""
    for config in (EXACT, WalkConfig()):
        cpu = make_engine(config, device="cpu", dtype=np.float64)
        gpu = make_engine(config, device="gpu", dtype=np.float64)
        cpu.fit(corpus["docs"], corpus["doc_entity"])
        gpu.fit(corpus["docs"], corpus["doc_entity"])
        a = cpu.doc_zoom(corpus["queries"], corpus["query_entity"])
        b = gpu.doc_zoom(corpus["queries"], corpus["query_entity"])
        np.testing.assert_array_equal(a[0], b[0])
        assert np.abs(a[1] - b[1]).max() < 1e-9 and np.abs(a[2] - b[2]).max() < 1e-9


def test_ppr_batch_matches_igraph():
    ig = pytest.importorskip("igraph")
    rng = np.random.default_rng(3)
    n, n_seeds = 400, 8
    a = sp.random(n, n, density=0.01, random_state=rng, format="lil")
    a.setdiag(0)
    a[np.arange(5), :] = 0  # dangling nodes
    a = a.tocsr()
    a.eliminate_zeros()
    seeds = np.zeros((n_seeds, n))
    for b in range(n_seeds):
        seeds[b, rng.choice(n, 3, replace=False)] = rng.random(3) + 0.1
    got = make_engine(device="cpu").ppr_batch(a, seeds, damping=0.5, iterations=200)
    coo = a.tocoo()
    g = ig.Graph(
        n=n, edges=list(zip(coo.row.tolist(), coo.col.tolist(), strict=True)), directed=True
    )
    g.es["weight"] = coo.data.tolist()
    for b in range(n_seeds):
        ref = g.personalized_pagerank(
            reset=seeds[b].tolist(), damping=0.5, weights="weight", directed=True
        )
        assert np.abs(got[b] - np.asarray(ref)).max() < 1e-8
    np.testing.assert_allclose(got.sum(1), 1.0, atol=1e-9)


@pytest.mark.parametrize("steps", [0, 1, 2, 3])
def test_short_walks_equal_reference(engine, corpus, steps):
    """Step 1 skips the product (r = 0) and step 2 is a sparse product: check T ≤ 3 too."""
    q, qe = corpus["queries"][:6], corpus["query_entity"][:6]
    config = WalkConfig().model_copy(update={"steps": steps})  # 0 is below the config's range
    r, _ = engine.walk(q, qe, config)
    for b in range(6):
        _, ref_docs, ref_ent = reference_doc_zoom_single(
            corpus["docs"], corpus["doc_entity"], q[b], qe[b], config
        )
        assert np.abs(r[:N_DOC, b] - ref_docs).max() < 1e-12
        assert np.abs(r[N_DOC:, b] - ref_ent).max() < 1e-12


def test_scipy_product_and_float32_match(engine, corpus):
    """The SciPy fallback (no llvmlite) gives the compiled kernel's scores; float32 stays
    within 1e-8 of float64 and keeps the top-10."""
    q, qe = corpus["queries"], corpus["query_entity"]
    assert engine.kernel.startswith("compiled CSR kernel")
    ids, scores, ent = engine.doc_zoom(q, qe)
    fallback = engine.astype(np.float64)
    fallback._spmm().kernel = None
    ids2, scores2, ent2 = fallback.doc_zoom(q, qe)
    np.testing.assert_array_equal(ids, ids2)
    assert np.abs(scores - scores2).max() < 1e-15 and np.abs(ent - ent2).max() < 1e-15
    ids3, scores3, ent3 = engine.astype(np.float32).doc_zoom(q, qe)
    np.testing.assert_array_equal(ids, ids3)
    assert np.abs(scores - scores3).max() < 1e-8 and np.abs(ent - ent3).max() < 1e-8


def test_top_k_ties_prefer_smaller_ids():
    e = make_engine(device="cpu")
    e.n_d = 50
    rng = np.random.default_rng(1)
    r = np.round(rng.random((60, 40)) * 4) / 4  # many ties
    r[:, :6] = 0  # columns with no score at all
    ids, vals, ent = e._finish(r, 10)
    for b in range(40):
        ref = np.lexsort((np.arange(50), -r[:50, b]))[:10]
        np.testing.assert_array_equal(ids[b], ref)
        np.testing.assert_array_equal(vals[b], r[ref, b])
    np.testing.assert_array_equal(ent, r[50:].T)


@pytest.mark.parametrize("dtype, n_queries", [(np.float64, 150), (np.float32, 300)])
def test_several_state_chunks_equal_each_query_alone(corpus, dtype, n_queries):
    """Batches wider than one CPU state chunk (128 float64 / 256 float32 lanes here) are cut
    into chunks, the last one padded: each query still gets what it gets alone (up to rounding:
    the query links of a batch come from one matrix product, a single query's from another)."""
    engine = make_engine(EXACT, device="cpu", dtype=dtype)
    engine.fit(corpus["docs"], corpus["doc_entity"])
    nc, w = engine._spmm().layout(n_queries)
    assert nc == 2 and w * nc > n_queries  # two chunks, padding lanes in the second
    rng = np.random.default_rng(7)
    q = rng.normal(size=(n_queries, DIM))
    qe = _indicator(rng, n_queries, N_ENT, 2.0)
    r, rq = engine.walk(q, qe)
    for b in range(0, n_queries, 7):
        alone, rq_alone = engine.walk(q[b : b + 1], qe[b : b + 1])
        rtol = 1e-12 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(r[:, b], alone[:, 0], rtol=rtol, atol=1e-15)
        np.testing.assert_allclose(rq[b], rq_alone[0], rtol=1e-12)
    assert (r.max(axis=0) > 1e-3).mean() > 0.9  # queries reach their nodes: not empty columns


@pytest.mark.parametrize("n", [5, 64, 300, 1000])
def test_top_k_columns_equals_a_full_sort(n):
    """The block-maximum threshold selects exactly what sorting every column would, ties and
    all, on a strided view (as ``walk`` returns it); ``top_k_rows`` is the same on rows."""
    rng = np.random.default_rng(n)
    state = np.round(rng.random((n, 48)) * 6) / 6  # many ties
    state[:, :4] = 0  # columns with no score at all
    state[: n // 2, 4] = 1  # a column whose best entries all sit in the first blocks
    view = state[:, :40]  # rows 48 apart in memory, as a state chunk wider than the batch
    ids, vals = top_k_columns(view, 10)
    assert ids.shape == vals.shape == (40, min(10, n))
    for b in range(40):
        ref = np.lexsort((np.arange(n), -view[:, b]))[:10]
        np.testing.assert_array_equal(ids[b], ref)
        np.testing.assert_array_equal(vals[b], view[ref, b])
    row_ids, row_vals = top_k_rows(np.ascontiguousarray(view.T), 10)
    np.testing.assert_array_equal(row_ids, ids)
    np.testing.assert_array_equal(row_vals, vals)


def test_top_k_columns_of_an_empty_batch():
    ids, vals = top_k_columns(np.zeros((5, 0), np.float32), 3)
    assert ids.shape == vals.shape == (0, 3) and vals.dtype == np.float32


def test_gpu_branches_with_numpy_in_place_of_cupy(engine, corpus):
    """The GPU code path (one state chunk per batch, cuSPARSE-style product, no compiled
    kernel), run with NumPy/SciPy standing in for CuPy, gives the CPU path's results; the real
    CuPy run is ``test_gpu_backend_matches_cpu`` / ``benchmarks/gpu_check.py``. Exact walks,
    and walks pruned at a tolerance that drops entries here (the floor after the product on the
    GPU's path, inside the kernel on the CPU's)."""
    from bookindex.operators.walks.engine import Backend, WalkEngine

    q, qe = corpus["queries"], corpus["query_entity"]
    for config in (EXACT, WalkConfig(tolerance=1e-5)):
        cpu = make_engine(config, device="cpu", dtype=np.float64)
        cpu.fit(corpus["docs"], corpus["doc_entity"])
        stand_in = WalkEngine(Backend("gpu", np, sp, np.float64), config)
        stand_in.fit(corpus["docs"], corpus["doc_entity"])
        assert stand_in._spmm().layout(N_Q) == (1, N_Q) and stand_in._spmm().kernel is None
        ids, scores, ent = cpu.doc_zoom(q, qe)
        ids2, scores2, ent2 = stand_in.doc_zoom(q, qe)
        np.testing.assert_array_equal(ids, ids2)
        assert np.abs(scores - scores2).max() < 1e-15 and np.abs(ent - ent2).max() < 1e-15
        dropped = (np.asarray(cpu.walk(q, qe)[0]) == 0).sum()
        if config.tolerance:
            assert dropped > (np.asarray(engine.walk(q, qe)[0]) == 0).sum()
