"""Doc-Zoom walk throughput: batched engine vs per-query igraph PPR and a per-query SciPy walk.

Run from the repo root::

    python -m benchmarks.walk_throughput [--docs 30000] [--entities 20000] [--device auto]

Graph: ``benchmarks.gpu_check.make_inputs`` (≥ 50k nodes; the doc–doc block follows the
mean + 3σ rule, so it has millions of edges at this size). Rows printed:

* batched ``doc_zoom`` (query links + T = 5 steps + top-10) at batch 1, 16, 64, 256: q/s;
* igraph ``Graph.personalized_pagerank`` per query (what HippoRAG does: one call per query,
  PRPACK solved to convergence, damping 0.5) on the same directed weighted graph, reset vector
  = the query's link row (igraph cannot add the query node without rebuilding the graph);
  a subset of queries is timed and a per-query rate reported;
* a per-query SciPy walk: the (N+1)-node matrix of that query built with ``sp.bmat``, column-
  normalised and iterated 5 times (how a one-query-at-a-time port would do it); its scores are
  checked against the batched engine;
* bytes the batched step must move: S data + indices + indptr read once per step plus the
  dense N×B state read and written once, per second achieved at batch 256, against the
  measured copy bandwidth (``np.copyto`` of a 512 MiB array; read + write bytes counted).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import scipy.sparse as sp

from benchmarks.gpu_check import make_inputs
from operators.walk_engine import ALPHA, T_STEPS, WalkEngine, make_engine


def copy_bandwidth(n_bytes: int = 512 << 20, repeats: int = 5) -> float:
    """Best-of-``repeats`` bytes/s of a large array copy (read + write bytes counted)."""
    src = np.ones(n_bytes // 8)
    dst = np.empty_like(src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(repeats))
    return 2 * src.nbytes / best


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def scipy_single_walk(engine: WalkEngine, h: sp.csr_matrix) -> np.ndarray:
    """One query on its own (N+1)-node graph, built and iterated with SciPy (node scores)."""
    a = sp.bmat([[None, h], [h.T, engine.S]], format="csr")
    colsum = np.asarray(a.sum(axis=0)).ravel()
    a = a @ sp.diags(np.where(colsum > 0, 1 / np.where(colsum > 0, colsum, 1), 0))
    r0 = np.zeros(a.shape[0])
    r0[0] = 1
    r = r0
    for _ in range(T_STEPS):
        r = (1 - ALPHA) * (a @ r) + ALPHA * r0
    return r[1:]


def link_rows(engine: WalkEngine, queries, query_entity) -> sp.csr_matrix:
    hb, hj, hv, nq = engine.query_links(queries, query_entity)
    return sp.csr_matrix((hv, (hb, hj)), shape=(nq, engine.N))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=30_000)
    ap.add_argument("--entities", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--baseline-queries", type=int, default=8, help="timed per-query baselines")
    ap.add_argument("--timed-queries", type=int, default=32, help="min queries per batch size")
    args = ap.parse_args(argv)
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    data = make_inputs(args.docs, args.entities, 256, args.dim)
    q, qe = data["queries"], data["query_entity"]
    engine = make_engine(args.device)
    t_build = _timed(lambda: engine.fit(data["docs"], data["doc_entity"]))
    S = engine.S
    print(
        f"graph: {engine.N} nodes ({args.docs} docs + {args.entities} entities), {S.nnz} edges "
        f"({engine.dd_nnz} doc–doc); build {t_build:.1f} s on {engine.device}",
        flush=True,
    )

    rates = {}
    engine.doc_zoom(q[:16], qe[:16])  # warm-up
    for batch in (1, 16, 64, 256):
        n_batches = max(1, args.timed_queries // batch)
        start = time.perf_counter()
        for i in range(n_batches):
            lo = (i * batch) % (len(q) - batch + 1)
            engine.doc_zoom(q[lo : lo + batch], qe[lo : lo + batch])
        engine.backend.sync()
        rates[batch] = n_batches * batch / (time.perf_counter() - start)
        print(f"batched doc_zoom  batch {batch:>3}: {rates[batch]:8.1f} q/s", flush=True)

    def walk256() -> None:
        engine.walk(q, qe)
        engine.backend.sync()

    t_walk = _timed(walk256)
    n_base = args.baseline_queries
    h = link_rows(engine, q[:n_base], qe[:n_base])
    batched_r = engine.walk(q[:n_base], qe[:n_base])[0]
    batched_r = batched_r.get() if engine.device == "gpu" else batched_r
    diffs, t_scipy = [], 0.0
    for b in range(n_base):
        start = time.perf_counter()
        r = scipy_single_walk(engine, h[b])
        t_scipy += time.perf_counter() - start
        diffs.append(np.abs(r - batched_r[:, b]).max())
    rate_scipy = n_base / t_scipy
    print(f"per-query SciPy walk: {rate_scipy:8.1f} q/s (max |diff| vs batched {max(diffs):.1e})")

    import igraph as ig

    coo = (S.get() if engine.device == "gpu" else S).tocoo()
    g = ig.Graph(n=engine.N, edges=np.column_stack([coo.col, coo.row]).tolist(), directed=True)
    g.es["weight"] = coo.data.tolist()  # edge j -> i carries S[i, j], as in the walk
    hd = h.toarray()
    start = time.perf_counter()
    for b in range(n_base):
        g.personalized_pagerank(reset=hd[b].tolist(), damping=0.5, weights="weight")
    rate_igraph = n_base / (time.perf_counter() - start)
    print(f"per-query igraph personalized_pagerank: {rate_igraph:8.1f} q/s", flush=True)

    bw = copy_bandwidth()
    item = np.dtype(engine.backend.dtype).itemsize
    sparse_bytes = S.data.nbytes + S.indices.nbytes + S.indptr.nbytes
    state_bytes = 2 * engine.N * 256 * item
    achieved = T_STEPS * (sparse_bytes + state_bytes) / t_walk
    gather = T_STEPS * S.nnz * 256 * item / t_walk
    print()
    print(f"{'measure':<52} {'value':>14}")
    for name, value in [
        ("batched q/s @256", f"{rates[256]:.1f}"),
        ("batched q/s @1", f"{rates[1]:.1f}"),
        ("igraph PPR q/s (per query)", f"{rate_igraph:.1f}"),
        ("SciPy per-query walk q/s", f"{rate_scipy:.1f}"),
        ("ratio batched@256 / igraph", f"{rates[256] / rate_igraph:.1f}x"),
        ("ratio batched@256 / SciPy per-query", f"{rates[256] / rate_scipy:.1f}x"),
        ("ratio batched@256 / batched@1", f"{rates[256] / rates[1]:.2f}x"),
        ("walk-only time, 256 queries, 5 steps (s)", f"{t_walk:.3f}"),
        (
            "bytes per step (S once + state read+write)",
            f"{(sparse_bytes + state_bytes) / 1e6:.1f} MB",
        ),
        ("achieved bytes/s (that model)", f"{achieved / 1e9:.2f} GB/s"),
        ("copy bandwidth (np.copyto, read+write)", f"{bw / 1e9:.2f} GB/s"),
        ("ratio achieved / copy bandwidth", f"{achieved / bw:.3f}"),
        ("state rows gathered per nonzero (nnz·B·item)/s", f"{gather / 1e9:.2f} GB/s"),
    ]:
        print(f"{name:<52} {value:>14}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
