"""Doc-Zoom walk throughput: batched engine vs per-query igraph PPR and a per-query SciPy walk.

Run from the repo root::

    python -m benchmarks.walk_throughput [--docs 8000] [--entities 44000] [--dtype float32]
        [--threads N] [--device auto]
    python -m benchmarks.walk_throughput --index DIR [--index DIR]   # a real index's graph

Graph: ``benchmarks.gpu_check.make_inputs``; by default 8,000 documents + 44,000 entities =
52k nodes, about 5.5 entities per document as in the indexed MuSiQue and HotpotQA corpora
(5.5 and 6.7). Its edges are what the Doc-Zoom rule gives, not a chosen count: doc–doc pairs
above mean + 3σ of each row, at most ``walk.max_doc_links`` (64) a row (~26 per document on
these topic-clustered vectors) plus the
doc–entity indicator both ways: ~304k, the issue's floor of 300k. ``--docs 30000 --entities
20000`` gives the denser graph earlier runs used before the bound (50k nodes, 3.2M edges, ~96
doc–doc links per document; now at most 64); the doc–doc share grows with the corpus up to the
bound (the rule keeps a fixed tail of each row:
0.3 % of the documents here, 1.1 % and 1.0 % on the MuSiQue and HotpotQA embeddings;
``--index`` prints these shapes for an index). The
baselines run on exactly the walk's graph. Every rate is 1 / the median of per-call times (the
machine may be shared; single timings swing 2-3x); ``--threads`` (default 1) limits torch and
NumPy's BLAS (the query links); the product kernel runs on one thread, so by default everything
runs on one core, as igraph's PRPACK and the SciPy walk do. Rows printed:

* batched ``doc_zoom`` (query links + T = 5 steps + top-10) at batch 1, 16, 64, 256: q/s, in
  ``--dtype`` (float32 by default; the float64 rate at 256 is printed too);
* igraph ``Graph.personalized_pagerank`` per query (what HippoRAG does: one call per query,
  PRPACK solved to convergence, damping 0.5) on the same directed weighted graph, reset vector
  = the query's link row as a NumPy array (igraph cannot add the query node without
  rebuilding the graph). Its
  calls are interleaved with the batch-256 calls (``--rounds``, two igraph queries per round),
  and the ratio is given from the medians, as the median of per-round ratios, and per
  CPU-second of this process;
* the equal-work comparison: the same T = 5-step walk run one query at a time with the matrix
  built once (``PrebuiltWalk``: S scaled by its column sums once, in ``--dtype``; per query only
  the query's links are applied, as the batched engine does, and T CSR × vector products run in
  SciPy), checked against the batched scores. The batched engine's speed-up over it is what
  batching itself buys; the speed-up over igraph is the system-level comparison (what HippoRAG
  and LinearRAG run: PPR solved to convergence, a different amount of work);
* a per-query SciPy walk (float64): the (N+1)-node matrix of that query built with ``sp.bmat``,
  column-normalised and iterated 5 times (a naive one-query-at-a-time port: it rebuilds the
  matrix per query); the batched scores (both dtypes) are checked against it;
* bytes the batched step must move: one dense step at batch 256 (the product of the
  column-scaled S with the chunked state, timed alone; the walk makes no other pass over the
  state in a step) must read S's data + indices + indptr once and read and write the N × 256
  state once; that many bytes per second of the step, against the measured copy bandwidth
  (``np.copyto`` of a 512 MiB array; read + write bytes counted), and the bytes the CSR × dense
  product actually gathers (one state row per nonzero: nnz · B · item per step);
* the roofline: the step's multiply-adds (nnz · B) against a dense GEMM's multiply-adds per
  second on the same threads (the compute roof), and the step time the roofline allows,
  max(bytes / copy bandwidth, multiply-adds / GEMM rate). On the default graph (~6 nonzeros
  per node) the step does ~0.7 multiply-adds per byte it must move, under this machine's
  balance (~1.8): memory bound. On the denser one (~64 per node) it does ~6: bound by
  arithmetic and by the gathers, so the memory-only bound is out of reach of any CSR × dense
  kernel there.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from benchmarks.gpu_check import make_inputs
from bookindex.operators.config import WalkConfig
from bookindex.operators.walks.engine import WalkEngine, make_engine


def copy_bandwidth(n_bytes: int = 512 << 20, repeats: int = 5) -> float:
    """Best-of-``repeats`` bytes/s of a large array copy (read + write bytes counted)."""
    src = np.ones(n_bytes // 8)
    dst = np.empty_like(src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(repeats))
    return 2 * src.nbytes / best


def fma_rate(dtype: type = np.float32, n: int = 2048, repeats: int = 3) -> float:
    """Best-of-``repeats`` multiply-adds per second of a dense n × n × n product (torch, else
    NumPy), on the threads ``set_threads`` allows: the compute roof for the step."""
    a = np.random.default_rng(0).random((n, n)).astype(dtype)
    try:
        import torch

        ta, out = torch.from_numpy(a), torch.empty(n, n, dtype=torch.from_numpy(a).dtype)

        def product() -> None:
            torch.mm(ta, ta, out=out)
    except ImportError:
        out_np = np.empty_like(a)

        def product() -> None:
            np.matmul(a, a, out=out_np)

    product()
    return n**3 / min(_timed(product) for _ in range(repeats))


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def clocked(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, all its threads) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def batch_call(
    engine: WalkEngine, q: np.ndarray, qe: sp.csr_matrix, batch: int, i: int
) -> Callable[[], None]:
    """The ``i``-th batch of ``batch`` queries through ``doc_zoom`` (as a thunk)."""
    lo = (i * batch) % (len(q) - batch + 1)

    def call() -> None:
        engine.doc_zoom(q[lo : lo + batch], qe[lo : lo + batch])
        engine.backend.sync()

    return call


def dense_step_time(engine: WalkEngine, batch: int = 256, repeats: int = 3) -> float:
    """Best-of-``repeats`` seconds of one dense walk step at ``batch``: the product of the
    column-scaled S with the chunked state, into the preallocated buffer (the walk has no other
    pass over the state in a step)."""
    op, xp = engine._spmm(), engine.backend.xp
    nc, w = op.layout(batch)
    z, out = op.empty(nc, w), op.empty(nc, w)
    z[...] = xp.asarray(np.random.default_rng(0).random((nc, engine.N, w)), dtype=z.dtype)

    def step() -> None:
        op.dense(z, out)
        engine.backend.sync()

    step()
    return min(_timed(step) for _ in range(repeats))


def scipy_single_walk(engine: WalkEngine, h: sp.csr_matrix) -> np.ndarray:
    """One query on its own (N+1)-node graph, built and iterated with SciPy (node scores)."""
    a = sp.bmat([[None, h], [h.T, engine.S.astype(np.float64)]], format="csr")
    colsum = np.asarray(a.sum(axis=0)).ravel()
    a = a @ sp.diags(np.where(colsum > 0, 1 / np.where(colsum > 0, colsum, 1), 0))
    r0 = np.zeros(a.shape[0])
    r0[0] = 1
    r = r0
    alpha = engine.config.alpha
    for _ in range(engine.config.steps):
        r = (1 - alpha) * (a @ r) + alpha * r0
    return r[1:]


class PrebuiltWalk:
    """The Doc-Zoom walk of one query at a time, the query-independent matrix built once:
    A0 = S · diag(1/s) (s: S's column sums). The query node is kept apart: at its links the
    column sums are s_j + h_j, so the state there is rescaled by s_j / (s_j + h_j) before the
    product, and the query's column spreads its mass over its links by h / Σh."""

    def __init__(self, S: sp.csr_matrix, alpha: float, steps: int, dtype: type) -> None:
        self.s = np.asarray(S.sum(axis=0), np.float64).ravel()
        inv = np.where(self.s > 0, 1 / np.where(self.s > 0, self.s, 1), 0)
        self.a0 = sp.csr_matrix(S @ sp.diags(inv), dtype=dtype)
        self.alpha, self.steps, self.dtype = alpha, steps, dtype

    def walk(self, h: sp.csr_matrix) -> np.ndarray:
        """Node scores of the query whose links are the one row ``h`` (1 × N)."""
        links, weights = h.indices, h.data.astype(self.dtype)
        s_h = self.s[links].astype(self.dtype)
        scale, to_query = s_h / (s_h + weights), weights / (s_h + weights)
        spread = weights / weights.sum()
        c, alpha = 1 - self.alpha, self.alpha
        r = np.zeros(self.a0.shape[0], self.dtype)
        rq = 1.0
        for _ in range(self.steps):
            at = r[links]
            r[links] = at * scale
            r = self.a0 @ r
            r[links] += spread * rq
            r *= c
            rq = c * float(to_query @ at) + alpha
        return r


def link_rows(engine: WalkEngine, queries, query_entity) -> sp.csr_matrix:
    hb, hj, hv, nq = engine.query_links(queries, query_entity)
    return sp.csr_matrix((hv, (hb, hj)), shape=(nq, engine.N))


def set_threads(n: int) -> str:
    """Limit torch (MKL, the CPU product) and NumPy's BLAS (query links) to ``n`` threads, when
    they are installed; 0 leaves both as they are. Describes the result."""
    try:
        from threadpoolctl import threadpool_limits

        if n:
            threadpool_limits(n, user_api="blas")
    except ImportError:
        pass
    try:
        import torch
    except ImportError:
        return "torch not installed: SciPy product, 1 thread"
    if n:
        torch.set_num_threads(n)
    return f"{torch.get_num_threads()} torch thread(s)"


def index_graph_shape(index_dir: str) -> str:
    """The Doc-Zoom graph the retrieval engine builds from an index, in one line: documents,
    entities per document, doc–doc links per document and as a share of the documents, all
    edges. What the default synthetic graph is shaped after."""
    from bookindex.operators.config import BookindexConfig
    from bookindex.pipelines.store.reader import open_engine

    config = BookindexConfig(walk=WalkConfig(device="cpu"))
    engine = open_engine(index_dir, config).zoom.engine
    nd, ne = engine.n_d, engine.n_e
    return (
        f"{index_dir}: {nd} documents, {ne} entities ({ne / nd:.2f} per document), "
        f"{engine.dd_nnz} doc–doc links ({engine.dd_nnz / nd:.1f} per document, "
        f"{100 * engine.dd_nnz / nd / max(nd - 1, 1):.2f} % of the documents), "
        f"{engine.S.nnz} edges in all"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=8_000)
    ap.add_argument("--entities", type=int, default=44_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads for the product and BLAS (default 1: one core, like igraph's PRPACK and the "
        "SciPy walk; 0 = leave torch's and BLAS's defaults)",
    )
    ap.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help="walk.tolerance of the batched engine (default 0: the exact walk, the work the "
        "baselines do; benchmarks/walk_prune.py compares pruned walks with it)",
    )
    ap.add_argument("--baseline-queries", type=int, default=8, help="timed per-query baselines")
    ap.add_argument("--timed-queries", type=int, default=64, help="queries per batch size ≤ 64")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved batch-256 / igraph rounds")
    ap.add_argument(
        "--index",
        action="append",
        default=[],
        help="print the Doc-Zoom graph shape of this index and exit (repeatable)",
    )
    args = ap.parse_args(argv)
    if args.index:
        for index in args.index:
            print(index_graph_shape(index))
        return
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    data = make_inputs(args.docs, args.entities, 256, args.dim)
    q, qe = data["queries"], data["query_entity"]
    # float64: graph construction and the reference walk; the exact walk unless --tolerance
    # (the baselines do the exact walk's work)
    exact = make_engine(WalkConfig(tolerance=args.tolerance), device=args.device, dtype=np.float64)
    t_build = _timed(lambda: exact.fit(data["docs"], data["doc_entity"]))
    engine = exact.astype(np.dtype(args.dtype).type)
    S = exact.S
    print(
        f"graph: {engine.N} nodes ({args.docs} docs + {args.entities} entities), {S.nnz} edges "
        f"({engine.dd_nnz} doc–doc); build {t_build:.1f} s on {engine.device}; walk in "
        f"{args.dtype}, product: {engine.kernel}, {set_threads(args.threads)}",
        flush=True,
    )

    import igraph as ig

    coo = (S.get() if engine.device == "gpu" else S).tocoo()
    g = ig.Graph(n=engine.N, edges=np.column_stack([coo.col, coo.row]).tolist(), directed=True)
    g.es["weight"] = coo.data.tolist()  # edge j -> i carries S[i, j], as in the walk
    n_base = args.baseline_queries
    h = link_rows(exact, q[:n_base], qe[:n_base])
    hd = h.toarray()

    def igraph_call(b: int) -> Callable[[], object]:
        reset = hd[b % n_base]  # a NumPy row: igraph's fastest input (a list is slower)
        return lambda: g.personalized_pagerank(reset=reset, damping=0.5, weights="weight")

    # Medians of per-call times: this machine is shared, so single timings swing by 2-3x.
    rates = {}
    for batch in (1, 16, 64):
        batch_call(engine, q, qe, batch, 0)()  # warm-up: builds the kernel, touches buffers
        times = [
            clocked(batch_call(engine, q, qe, batch, i))[0]
            for i in range(max(3, args.timed_queries // batch))
        ]
        rates[batch] = batch / float(np.median(times))
        print(f"batched doc_zoom  batch {batch:>3}: {rates[batch]:8.1f} q/s", flush=True)
    cpu_s = S.get() if engine.device == "gpu" else S
    prebuilt = PrebuiltWalk(cpu_s, engine.config.alpha, engine.config.steps, engine.backend.dtype)
    prebuilt.walk(h[0])  # warm-up

    def once_call(b: int) -> Callable[[], object]:
        return lambda: prebuilt.walk(h[b % n_base])

    # batch 256, igraph and the equal-work walk interleaved, round by round: the same load
    batch_call(engine, q, qe, 256, 0)()
    big, ig_t, once_t = [], [], []
    for i in range(args.rounds):
        big.append(clocked(batch_call(engine, q, qe, 256, i)))
        ig_t += [clocked(igraph_call(2 * i + j)) for j in range(2)]
        once_t += [clocked(once_call(8 * i + j))[0] for j in range(8)]
    big_w, big_c = np.array(big).T
    ig_w, ig_c = np.array(ig_t).T
    rates[256], cpu_256 = 256 / np.median(big_w), 256 / np.median(big_c)
    rate_igraph, cpu_igraph = 1 / np.median(ig_w), 1 / np.median(ig_c)
    paired = np.median(256 / big_w / (2 / ig_w.reshape(-1, 2).sum(axis=1)))
    print(f"batched doc_zoom  batch 256: {rates[256]:8.1f} q/s", flush=True)
    print(f"per-query igraph personalized_pagerank: {rate_igraph:8.1f} q/s", flush=True)
    batch_call(exact, q, qe, 256, 0)()
    rate_exact = 256 / np.median([clocked(batch_call(exact, q, qe, 256, i))[0] for i in range(3)])
    print(f"batched doc_zoom  batch 256 in float64: {rate_exact:8.1f} q/s", flush=True)

    def walk256() -> None:
        engine.walk(q, qe)
        engine.backend.sync()

    t_walk = float(np.median([_timed(walk256) for _ in range(3)]))
    t_step = dense_step_time(engine)
    batched = [e.walk(q[:n_base], qe[:n_base])[0] for e in (engine, exact)]
    batched = [b.get() if engine.device == "gpu" else b for b in batched]
    diffs, diffs_exact, t_scipy = [], [], []
    for b in range(n_base):
        start = time.perf_counter()
        r = scipy_single_walk(exact, h[b])
        t_scipy.append(time.perf_counter() - start)
        diffs.append(np.abs(r - batched[0][:, b]).max())
        diffs_exact.append(np.abs(r - batched[1][:, b]).max())
    rate_scipy = 1 / float(np.median(t_scipy))
    print(
        f"per-query SciPy walk, matrix per query: {rate_scipy:8.1f} q/s (max |diff| vs batched "
        f"{args.dtype} {max(diffs):.1e}, vs batched float64 {max(diffs_exact):.1e}; max score "
        f"{float(np.abs(batched[1]).max()):.1e})"
    )
    diffs_once = [np.abs(prebuilt.walk(h[b]) - batched[1][:, b]).max() for b in range(n_base)]
    rate_once = 1 / float(np.median(once_t))
    paired_once = np.median(256 / big_w / (8 / np.array(once_t).reshape(-1, 8).sum(axis=1)))
    print(
        f"per-query walk, matrix built once (equal work): {rate_once:8.1f} q/s (max |diff| vs "
        f"batched float64 {max(diffs_once):.1e})"
    )

    bw = copy_bandwidth()
    mat = engine._spmm().mat
    item = np.dtype(engine.backend.dtype).itemsize
    sparse_bytes = mat.data.nbytes + mat.indices.nbytes + mat.indptr.nbytes
    state_bytes = 2 * engine.N * 256 * item
    achieved = (sparse_bytes + state_bytes) / t_step
    gather = S.nnz * 256 * item / t_step
    fma = fma_rate(np.dtype(engine.backend.dtype).type) if engine.device == "cpu" else 0.0
    step_fma = S.nnz * 256  # one multiply-add per nonzero and query
    t_memory = (sparse_bytes + state_bytes) / bw
    t_roof = max(t_memory, step_fma / fma) if fma else t_memory
    print()
    print(f"{'measure':<56} {'value':>14}")
    for name, value in [
        ("batched q/s @1", f"{rates[1]:.1f}"),
        ("batched q/s @16", f"{rates[16]:.1f}"),
        ("batched q/s @64", f"{rates[64]:.1f}"),
        (f"batched q/s @256 ({args.dtype})", f"{rates[256]:.1f}"),
        ("batched q/s @256 (float64)", f"{rate_exact:.1f}"),
        ("igraph PPR q/s (per query)", f"{rate_igraph:.1f}"),
        ("per-query walk, matrix built once q/s (equal work)", f"{rate_once:.1f}"),
        ("SciPy per-query walk, matrix per query q/s", f"{rate_scipy:.1f}"),
        ("ratio batched@256 / igraph (medians)", f"{rates[256] / rate_igraph:.1f}x"),
        ("  median of per-round ratios (interleaved)", f"{paired:.1f}x"),
        ("  q per CPU-second, batched@256 : igraph", f"{cpu_256:.0f} : {cpu_igraph:.1f}"),
        ("  ratio per CPU-second", f"{cpu_256 / cpu_igraph:.1f}x"),
        ("ratio batched@256 (float64) / igraph", f"{rate_exact / rate_igraph:.1f}x"),
        (
            "ratio batched@256 / per-query, built once (equal work)",
            f"{rates[256] / rate_once:.1f}x",
        ),
        ("  median of per-round ratios (interleaved)", f"{paired_once:.1f}x"),
        (
            "ratio batched@256 / SciPy per-query, matrix per query",
            f"{rates[256] / rate_scipy:.1f}x",
        ),
        ("ratio batched@256 / batched@1", f"{rates[256] / rates[1]:.2f}x"),
        ("walk only, 256 queries, T = 5 (s)", f"{t_walk:.3f}"),
        ("one dense step, 256 queries (s)", f"{t_step:.3f}"),
        (
            "bytes per step (S once + state read + write)",
            f"{(sparse_bytes + state_bytes) / 1e6:.1f} MB",
        ),
        ("achieved bytes/s of the step (that model)", f"{achieved / 1e9:.2f} GB/s"),
        ("copy bandwidth (np.copyto, read + write)", f"{bw / 1e9:.2f} GB/s"),
        ("ratio achieved / copy bandwidth", f"{achieved / bw:.3f}"),
        ("state bytes gathered by the product (nnz·B·item)/s", f"{gather / 1e9:.2f} GB/s"),
        ("  ratio gathered bytes/s / copy bandwidth", f"{gather / bw:.3f}"),
        ("multiply-adds per step (nnz·B)", f"{step_fma / 1e6:.0f} M"),
        (
            "  per byte of the step (arithmetic intensity)",
            f"{step_fma / (sparse_bytes + state_bytes):.1f}",
        ),
        ("dense GEMM multiply-adds/s (compute roof)", f"{fma / 1e9:.1f} G" if fma else "n/a"),
        ("  machine balance (multiply-adds per copied byte)", f"{fma / bw:.1f}" if fma else "n/a"),
        ("step time at the memory bound (s)", f"{t_memory:.4f}"),
        ("step time at the roofline max(memory, compute) (s)", f"{t_roof:.4f}"),
        ("ratio roofline time / measured step", f"{t_roof / t_step:.3f}"),
    ]:
        print(f"{name:<56} {value:>14}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
