"""ZoomRAG random walks (Doc-Zoom, Chunk-Zoom) and batched personalised PageRank.

One engine, two backends chosen at start-up (``make_engine``): SciPy/NumPy on CPU or CuPy
(``cupyx.scipy.sparse``) on GPU, the maths written once against ``xp``/``sparse``. Imports
numpy, scipy and the CPU product kernel (``operators.walks.kernel``, llvmlite; cupy lazily).
Inputs are numpy/scipy arrays; outputs are numpy.

Doc-Zoom graph of one query (nodes: query, n_d documents, n_e entities; A[i, j] carries mass
from node j to node i; walk r <- (1-α)·Ã·r + α·e_q, Ã = A with columns normalised):

The parameters (T, α, K, β, keep, ω, σ, n_std, max_doc_links) are
``operators.config.WalkConfig``: an engine is made with one (``make_engine(config)``) and every
walk reads it; a call may pass another section of the same kind to change the walk's own
parameters (not n_std or max_doc_links, which shape the graph).

* doc–doc D[i, j] = exp(cos(p_i, p_j)) kept iff above τ_i = mean_i + n·std_i (population
  statistics of row i over the other n_d − 1 documents; diagonal excluded; not symmetrised),
  and among the ``max_doc_links`` largest of row i (ties by the smaller j). The threshold alone
  keeps a fixed share of each row (about 1 % on passage corpora: 10 links a document at 1,000
  passages), so links would grow with the square of the corpus (a walk step's cost and the
  graph's memory with them); the bound makes them grow with the corpus, and leaves a corpus
  whose rows keep fewer as it was.
  query–doc w_j = exp(cos(q, p_j)), same rule over the query's n_d entries, used both ways.
  doc–entity and query–entity: 0/1 indicators, used both ways.
* "Sub-blocks rescaled to equal mean weight": each block is divided by the mean of its non-zero
  entries (target 1, what the 0/1 blocks have), so the shared blocks never depend on the query.
* Coupling: with S = [[D, M], [Mᵀ, 0]] (N×N, shared) and h the query's link row, the column sum
  of node j is s_j + h_j and that of the query Σh. With z = r / (s + h): r_q' = h·z and
  r_nodes' = S·z + h·r_q/Σh. A batch is one sparse S × dense Z (N×B) product plus terms on the
  nnz of each query's own h, so each column is exactly that query's walk alone on its own
  (N+1)-node graph. A node with an empty column is dangling: mass reaching it is dropped (the
  dense reference does the same).
* Batched step (``walk``, ``_SpMM``): one product A × state per step, A = S·diag((1 − α)/s)
  built once per α (so the column scaling and the (1 − α) factor cost no pass over the state);
  at a query's links the state is set to z·s_j before the product, so A carries that node's
  true z (its column sum includes the query's edge). The state is stored as column chunks
  (chunks, N, width), C-ordered. On CPU the product is the compiled kernel of
  ``operators.walks.kernel`` (SciPy where llvmlite is missing), a chunk row is a whole number of
  64-byte vectors, up to 1 KiB (256 float32 queries) when S has at most 16 nonzeros per row
  (the step streams the state: one pass) and 512 B above (the step gathers: a chunk of the
  state stays in the last-level cache); the buffers are 64-byte aligned for streaming stores.
  On GPU one chunk holds the whole batch (cuSPARSE). The walk starts at the query node, so
  step 1 needs no product; steps 2..T are products. Top-k reads the state in place
  (``top_k_columns``: maxima of row blocks give a threshold, only entries above it are sorted).
* Sparse steps (CPU kernel): the state after step t is nonzero only within t − 1 hops of the
  query links, so each chunk carries a mark of the rows that can be nonzero and a product reads
  only those rows of the state (``CsrKernel.masked``; where the marked columns hold at most
  ``SPARSE_ROWS`` of the nonzeros, the product runs by those columns instead, ``CsrKernel.push``,
  its work their nonzeros; a spare buffer is cleared only where it held state), bit for bit the
  full product; above ``SPARSE_MARKS`` of the rows marked, the plain kernel.
* Pruned walks (``WalkConfig.tolerance`` > 0): after each product an entry of node j's state
  under tolerance × (j's out-links) is set to zero, each query's entry on its own (the push
  rule of Andersen, Chung and Lang: a node passes mass on only where each of its links would
  carry at least the tolerance), so the marked support stays where the question's mass is and
  a step reads that part of the graph, however large the corpus (an exact walk's support
  covers most of the graph after two products). Every product is then a masked one (the plain
  kernel's shortcut would skip the floor); the dropped mass is at most the tolerance a link;
  CPU (the floor in the compiled kernel) and GPU or SciPy (the floor applied after the
  library product) drop the same entries up to rounding at the floor.
* The walk's dtype is ``WalkConfig.dtype`` (float32 by default: half the bytes a step reads;
  the same rankings as float64 on the multi-hop sets, docs/results.md); the graph is built in
  float64, Chunk-Zoom and ``ppr_batch`` run in float64.

Incremental documents (``add_documents``): computed are the new rows (new docs × all docs) and
the new columns of old rows (old × new), which update each old row's running Σexp and Σexp²; so
every τ_i is the exact full-corpus value and results equal a build from scratch. Each row keeps
candidates above a floor mean + (3 − slack)·std (slack 0.5), at most its ``max_doc_links``
largest (the bounded row's links are the largest above τ_i, so they are among them, and a new
document only pushes a dropped candidate further down); an old row is recomputed in full only
when its new τ_i falls below that floor (``last_add['rows_recomputed']``). Not recomputed:
existing similarities and existing documents' entity rows. The doc–doc scale and the sparse S
are reassembled from stored values in O(nnz).
"""

from __future__ import annotations

import copy
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import numpy as np
import scipy.sparse as sp

from bookindex.operators.config import WalkConfig
from bookindex.operators.walks.backend import Backend, cupy_or_reason
from bookindex.operators.walks.kernel import VECTOR_BYTES, StatePool, kernel_or_reason
from bookindex.operators.walks.topk import host as _host
from bookindex.operators.walks.topk import top_k_columns

log = logging.getLogger(__name__)

BLOCK_ELEMS = 1 << 24  # dense temporaries hold at most this many elements (128 MiB in float64)
STATE_ROW_BYTES = (1024, 512)  # CPU state chunk row: sparse S (streams) / denser S (gathers)
DENSE_ROW_NNZ = 16  # nonzeros per row of S above which the narrower chunks are used
SPARSE_MARKS = 0.9  # a walk state with more of its rows marked is multiplied by the plain kernel
SPARSE_ROWS = 0.25  # share of S's nonzeros in marked columns up to which the product pushes
CHUNK_GROUP = 8  # Chunk-Zoom on CPU: queries solved together, of similar graph sizes (_size_groups)
DOC_LINK_ARRAYS = ("s1", "s2", "floor", "rows", "cols", "vals")  # WalkEngine.doc_links
F64 = np.float64  # graph construction always runs in float64; the walk in the engine's dtype
_cpu_notice_done = False


def make_engine(
    config: WalkConfig | None = None,
    *,
    device: str | None = None,
    dtype: Any = None,
    threshold_slack: float = 0.5,
) -> WalkEngine:
    """An empty engine with the walk parameters of ``config`` (default: ``WalkConfig()``) on
    its device, or on ``device`` when given: "cpu", "gpu" (error if CuPy/GPU missing) or "auto"
    (GPU if usable); its walks in ``dtype``, default the config's."""
    global _cpu_notice_done
    config = config or WalkConfig()
    device = device or config.device
    dtype = np.dtype(config.dtype if dtype is None else dtype).type
    if device not in ("auto", "cpu", "gpu"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', not {device!r}")
    if device != "cpu":
        cupy, cusparse, reason = cupy_or_reason()
        if cupy is not None:
            return WalkEngine(Backend("gpu", cupy, cusparse, dtype), config, threshold_slack)
        if device == "gpu":
            raise RuntimeError(f"walk engine: device='gpu' requested but {reason}")
        if not _cpu_notice_done:  # once; a notice only where a GPU is there to be used
            level = logging.INFO if gpu_visible() else logging.DEBUG
            log.log(level, "walk engine runs on CPU (SciPy/NumPy): %s", reason)
            _cpu_notice_done = True
    if config.blas_threads:
        limit_blas_threads(config.blas_threads)
    return WalkEngine(Backend("cpu", np, sp, dtype), config, threshold_slack)


def _seeded(xp, y0, seeds: Sequence[Any], sizes: list[int], weight: float, backend) -> Any:
    """Chunk-Zoom's start vectors with the chunk seeds mixed in (``WalkEngine.chunk_zoom``): per
    row, (1 − weight) · its entity part and weight · its seeds, each scaled to sum 1 (a part that
    is all zero gives its share to the other)."""
    mixed = xp.zeros_like(y0)
    for g, (seed, n) in enumerate(zip(seeds, sizes, strict=True)):
        entity = y0[g]
        total_e = float(entity.sum())
        chunk = backend.asarray(np.clip(np.asarray(_host(seed), np.float64).ravel()[:n], 0, None))
        total_c = float(chunk.sum())
        w = weight if total_c > 0 else 0.0
        w = w if total_e > 0 else (1.0 if total_c > 0 else 0.0)
        if total_e > 0:
            mixed[g] = (1 - w) * entity / total_e
        if w > 0:
            mixed[g, :n] += w * chunk / total_c
    return mixed


def gpu_visible() -> bool:
    """Whether this machine shows an NVIDIA GPU (its driver's device list), whatever CuPy."""
    return os.path.isdir("/proc/driver/nvidia/gpus") and bool(
        os.listdir("/proc/driver/nvidia/gpus")
    )


def limit_blas_threads(threads: int) -> None:
    """The process's BLAS (NumPy's OpenBLAS/MKL) on at most ``threads`` threads, from now on.
    Chunk-Zoom's batched (B, L, L) products are a few MB each: on a small or shared machine a
    second BLAS thread only spins against the other work (measured on 2 cores: a batch of 64
    MuSiQue questions' graphs 15–40 ms on one thread, 40–630 ms on two). Ray workers already
    run their BLAS on ``OMP_NUM_THREADS`` = their CPUs; this sets the same in a driver such as
    ``bookindex eval``."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


def _inv(xp: ModuleType, a: Any) -> Any:
    return xp.where(a > 0, 1 / xp.where(a > 0, a, 1), 0)


def unit_rows(xp: ModuleType, x: Any) -> Any:
    """``x`` with each row (last axis) scaled to unit length; zero rows stay zero."""
    norm = xp.sqrt((x * x).sum(axis=-1, keepdims=True))
    return x / xp.where(norm > 0, norm, 1)


def _indicator(m: Any, n_rows: int, n_cols: int | None = None) -> tuple[Any, Any]:
    """Host (rows, cols) of the non-zeros of a dense or scipy matrix (used as 0/1), or of a
    pair (rows, cols) of index lists (``ChunkLinks``: no matrix built; repeated pairs once),
    in row-major order."""
    if isinstance(m, ChunkLinks):
        rows, cols = np.asarray(m.rows, np.int64), np.asarray(m.cols, np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= n_rows or cols.min() < 0):
            raise ValueError(f"indicator rows out of range: expected {n_rows} rows")
        if n_cols is not None and cols.size and cols.max() >= n_cols:
            raise ValueError(f"indicator columns out of range: expected ≤ {n_cols} cols")
        width = int(cols.max()) + 1 if cols.size else 1
        key = np.unique(rows * width + cols)
        return key // width, key % width
    m = sp.coo_matrix(sp.csr_matrix(_host(m)))
    m.sum_duplicates()
    m.eliminate_zeros()
    if m.shape[0] != n_rows or (n_cols is not None and m.shape[1] > n_cols):
        raise ValueError(f"indicator shape {m.shape}: expected {n_rows} rows, ≤ {n_cols} cols")
    return m.row.astype(np.int64), m.col.astype(np.int64)


def _size_groups(
    sizes: list[int], chunk_entity: Sequence[Any], cap: int = CHUNK_GROUP
) -> list[list[int]]:
    """Chunk-Zoom's queries in groups solved together: each group's graphs are padded to its
    largest (chunks + local entities), and the solve costs the group's size × that squared,
    so the queries go in order of their own size, at most ``cap`` a group and at most
    ``BLOCK_ELEMS`` entries a group's stack (a question whose chunks name 100 entities is not
    padded to one whose chunks name 400). ``cap``: ``CHUNK_GROUP`` on the CPU, where the
    padding is the cost; on a GPU, where each group's solve is a few hundred kernel launches
    whatever its size, the batch (only ``BLOCK_ELEMS`` splits it)."""
    nodes = []
    for n, links in zip(sizes, chunk_entity, strict=True):
        entities = np.unique(_indicator(links, n)[1]).size if n else 0
        nodes.append(n + entities)
    order = sorted(range(len(sizes)), key=lambda q: (nodes[q], q))
    groups: list[list[int]] = []
    for q in order:  # ascending: the last query added is a group's largest
        if groups:
            last = groups[-1]
            per = max(1, BLOCK_ELEMS // (nodes[q] + 64) ** 2)
            if len(last) < min(per, cap):
                last.append(q)
                continue
        groups.append([q])
    return groups


@dataclass(frozen=True)
class ChunkLinks:
    """A query's chunk–entity links as index lists (chunk, entity), one pair per link: what
    ``WalkEngine.chunk_zoom`` reads of a chunk–entity indicator, without a sparse matrix (a
    SciPy matrix per query cost more than the rest of its Chunk-Zoom graph)."""

    rows: Sequence[int]
    cols: Sequence[int]


def _row_blocks(n_rows: int, n_cols: int) -> range:
    return range(0, n_rows, max(1, BLOCK_ELEMS // max(n_cols, 1)))


def _stats(xp: ModuleType, s1: Any, s2: Any, count: int) -> tuple[Any, Any]:
    """Row mean and population std from Σx and Σx² over ``count`` entries."""
    mean = s1 / max(count, 1)
    return mean, xp.sqrt(xp.maximum(s2 / max(count, 1) - mean * mean, 0))


def _capped(xp: ModuleType, cand: tuple[Any, Any, Any], m: int) -> tuple[Any, Any, Any]:
    """Candidates (rows, cols, vals) cut to the ``m`` largest values of each row (ties by the
    smaller column), the kept ones in their input order; ``cand`` itself where ``m`` is 0 or no
    row has more than ``m`` (so a graph no row of which reaches the bound is built exactly as
    without one)."""
    rows, cols, vals = cand
    if m <= 0 or rows.size == 0:
        return cand
    base = rows.min()
    heavy = (xp.bincount(rows - base) > m)[rows - base]  # entries of rows over the bound
    if not heavy.any():
        return cand
    at = xp.nonzero(heavy)[0]
    order = at[xp.lexsort(xp.stack([cols[at], -vals[at], rows[at]]))]  # row, value down, col
    ordered = rows[order]
    rank = xp.arange(ordered.size) - xp.searchsorted(ordered, ordered, side="left")
    keep = ~heavy
    keep[order[rank < m]] = True
    return rows[keep], cols[keep], vals[keep]


class _SpMM:
    """out[c] = A @ z[c] for a walk state stored as column chunks z (chunks, N, width), where
    A = S·diag((1 − α)/s): S with each column scaled by the walk's factor over its column sum,
    so a step needs no scaling pass over the state (only the query-linked entries, which sit
    in columns whose sums include the query's edge, are set by the walk before the product)."""

    def __init__(self, backend: Backend, S: Any, alpha: float, inv_s: Any) -> None:
        self.src, self.alpha, self.backend, self.xp = S, alpha, backend, backend.xp
        scaled = S.astype(F64) @ backend.sparse.diags((1 - alpha) * inv_s)
        self.mat = backend.sparse.csr_matrix(scaled).astype(backend.dtype)
        self.kernel, self.reason = None, "GPU: cuSPARSE"
        self.pool: StatePool | None = None  # GPU: CuPy pools device memory itself
        self.width = None  # GPU: one chunk holds the whole batch
        # each node's out-links (A's nonzeros in its column): the pruned walk's floor is
        # tolerance × these (``floor``)
        self.out_links = self.xp.bincount(self.mat.indices, minlength=self.mat.shape[1])
        self._floor: tuple[float, Any] | None = None  # (tolerance, its floor): ``floor``
        if backend.name == "cpu":
            self.pool = StatePool()
            self.kernel, self.reason = kernel_or_reason(self.mat)
            if self.kernel is None:
                log.warning("walk engine: SciPy product on CPU: %s", self.reason)
            item = np.dtype(backend.dtype).itemsize
            dense = self.mat.nnz > DENSE_ROW_NNZ * max(self.mat.shape[0], 1)
            self.lanes = VECTOR_BYTES // item
            self.width = (STATE_ROW_BYTES[1] if dense else STATE_ROW_BYTES[0]) // item

    def layout(self, nq: int) -> tuple[int, int]:
        """(number of chunks, chunk width) for a batch of ``nq`` queries; on CPU the width is a
        whole number of vectors (padding lanes stay zero)."""
        if self.width is None:
            return 1, max(1, nq)
        w = min(self.width, -(-max(1, nq) // self.lanes) * self.lanes)
        return -(-max(1, nq) // w), w

    def empty(self, nc: int, w: int) -> Any:
        """An uninitialised state (nc, N, w); on CPU 64-byte aligned (streaming stores) and
        from a pool of reused buffers (a fresh one costs its page faults at first touch; CuPy
        pools device memory itself)."""
        shape, dt = (nc, self.mat.shape[0], w), self.backend.dtype
        return self.xp.empty(shape, dt) if self.pool is None else self.pool.empty(shape, dt)

    def floor(self, tolerance: float) -> Any:
        """Per node, the mass under which the pruned walk drops its state after a product:
        ``tolerance`` × its out-links (the push rule of Andersen, Chung and Lang: a node
        passes mass on only where each of its links would carry at least ``tolerance``);
        None for 0 (the exact walk)."""
        if tolerance <= 0:
            return None
        if self._floor is None or self._floor[0] != tolerance:  # walks use one at a time
            self._floor = (tolerance, (tolerance * self.out_links).astype(self.backend.dtype))
        return self._floor[1]

    def dense(
        self,
        z: Any,
        out: Any,
        marks: list[Any] | None = None,
        floor: Any = None,
        stale: list[Any] | None = None,
    ) -> Any:
        """out[c] = A @ z[c] for every chunk c, written into ``out``; returns it. ``marks``
        (``start_marks``), updated in place: per chunk, the rows of its state that may be
        nonzero (uint8), or None where that is every row. ``floor`` (``floor``): entries of
        the product under their row's floor are set to zero, each on its own (a query's
        column never depends on the rest of its batch). ``stale``: per chunk, the rows of
        ``out`` that may be nonzero now (as ``marks``; None: any row), so that a product of a
        few rows clears only those, not the whole buffer."""
        for c in range(z.shape[0]):
            if self.kernel is None:
                out[c] = self.mat @ z[c]
                if floor is not None:
                    part = out[c]
                    part[self.xp.abs(part) < floor[:, None]] = 0
            elif marks is None or marks[c] is None:
                self.kernel(z[c], out[c])  # (a floor comes with marks: start_marks)
            else:
                old = None if stale is None else stale[c]
                marks[c] = self._sparse(z[c], out[c], marks[c], floor, old)
        return out

    def start_marks(self, nc: int, chunk: Any, node: Any) -> list[Any] | None:
        """Per chunk of a walk's state, its support (uint8 over the N rows: where the state
        may be nonzero), set at the query links (``chunk``, ``node``); None off the compiled
        kernel. A walk marks its links again after each step (its restart mass lands there)."""
        if self.kernel is None:
            return None
        marks = np.zeros((nc, self.mat.shape[0]), np.uint8)
        marks[chunk, node] = 1
        return list(marks)

    def _sparse(
        self,
        z: np.ndarray,
        out: np.ndarray,
        mark: np.ndarray,
        floor: Any = None,
        stale: np.ndarray | None = None,
    ) -> np.ndarray | None:
        """out = A @ z for a state that is zero outside ``mark``, bit for bit the plain
        product, reading only the marked rows of z: the state a few steps from the query links
        covers a small part of the graph (on the 10,000-passage index a question's links reach
        0.3 % of the nodes, 10 % after one product, 63 % after two). Where the marked
        columns hold a small share of A's nonzeros (``SPARSE_ROWS``) the product runs by those
        columns (``CsrKernel.push``: the work is their nonzeros; the rest of ``out`` zero),
        otherwise by every row (``CsrKernel.masked``); the plain kernel where most rows are
        marked (``SPARSE_MARKS``). The support of ``out`` (None: every row).
        With a ``floor`` every product is masked, and the support is the rows that kept an
        entry (the pruned walk's state stays small). ``stale``: the rows of ``out`` that may
        be nonzero before the product (None: any)."""
        n = mark.size
        if floor is None and np.count_nonzero(mark) > SPARSE_MARKS * n:
            self.kernel(z, out)
            return None
        reached = np.empty(n, np.uint8)  # every row's mark is written by either product
        if self.kernel.marked_nnz(mark) <= SPARSE_ROWS * self.kernel.nnz:
            if stale is None:
                out[...] = 0
            else:
                out[np.flatnonzero(stale)] = 0
            self.kernel.push(z, out, mark, reached, floor)
        else:
            self.kernel.masked(z, out, mark, reached, floor=floor)
        return reached


class WalkEngine:
    """Holds the query-independent Doc-Zoom graph once; runs batched walks on one backend."""

    def __init__(
        self, backend: Backend, config: WalkConfig | None = None, threshold_slack: float = 0.5
    ) -> None:
        self.backend, self.device, self.slack = backend, backend.name, float(threshold_slack)
        self.config = config or WalkConfig()
        ei, ef = backend.xp.zeros(0, dtype=np.int64), backend.xp.zeros(0, dtype=F64)
        self.n_d = self.n_e = 0
        self.X = None  # normalised document vectors (n_d × dim)
        self._s1 = self._s2 = self._floor = ef  # per doc row: Σexp, Σexp², candidate floor
        self._cr, self._cc, self._cv = ei, ei, ef  # doc–doc candidates (raw exp(cos)), COO
        self._mr, self._mc = ei, ei  # doc–entity indicator, COO
        self.last_add: dict[str, int] = {}
        self._op: _SpMM | None = None  # batched-product kernel, built at the first walk

    # ---- query-independent graph -------------------------------------------------------------
    def fit(self, doc_vectors: Any, doc_entity: Any) -> WalkEngine:
        """Build from scratch (same code path as adding every document to an empty engine)."""
        return self.add_documents(doc_vectors, doc_entity, n_new_entities=doc_entity.shape[1])

    def add_documents(
        self, doc_vectors: Any, doc_entity_rows: Any, n_new_entities: int = 0
    ) -> WalkEngine:
        """Append documents; ``doc_entity_rows`` spans up to n_e + n_new_entities columns."""
        xp = self.backend.xp
        xn = unit_rows(xp, self.backend.asarray(doc_vectors, F64))
        n_old, n_new = self.n_d, xn.shape[0]
        self.n_e += int(n_new_entities)
        er, ec = _indicator(doc_entity_rows, n_new, self.n_e)
        self._mr = xp.concatenate([self._mr, xp.asarray(er + n_old)])
        self._mc = xp.concatenate([self._mc, xp.asarray(ec)])
        self.X = xn if self.X is None else xp.concatenate([self.X, xn])
        self.n_d = n = n_old + n_new
        parts = [(self._cr, self._cc, self._cv)]
        m = self.config.max_doc_links
        blocks = _row_blocks(n_old, n_new)
        buf = xp.empty((min(blocks.step, n_old), n_new), dtype=F64) if n_old else None
        for lo in blocks:  # old rows × new columns: update Σ, Σ² and candidates
            hi = min(lo + blocks.step, n_old)
            c = xp.matmul(self.X[lo:hi], xn.T, out=buf[: hi - lo])  # one buffer, reused
            xp.exp(c, out=c)
            self._s1[lo:hi] += c.sum(axis=1)
            self._s2[lo:hi] += xp.einsum("ij,ij->i", c, c)
            r, k = xp.nonzero(c > self._floor[lo:hi, None])
            parts.append(_capped(xp, (r + lo, k + n_old, c[r, k]), m))
        s1, s2, floor, new = self._full_rows(xp.arange(n_old, n))
        parts.append(new)
        self._s1, self._s2 = xp.concatenate([self._s1, s1]), xp.concatenate([self._s2, s2])
        self._floor = xp.concatenate([self._floor, floor])
        cr, cc, cv = (xp.concatenate(p) for p in zip(*parts, strict=True))
        mean, std = _stats(xp, self._s1, self._s2, n - 1)
        n_std = self.config.n_std
        redo = xp.nonzero(mean + n_std * std < self._floor)[0]  # floor no longer covers τ
        if redo.size:
            keep = xp.ones(n, dtype=bool)
            keep[redo] = False
            keep = keep[cr]
            s1, s2, floor, (rr, rc, rv) = self._full_rows(redo)
            self._s1[redo], self._s2[redo], self._floor[redo] = s1, s2, floor
            cr, cc, cv = (xp.concatenate([a[keep], x]) for a, x in ((cr, rr), (cc, rc), (cv, rv)))
            mean, std = _stats(xp, self._s1, self._s2, n - 1)
        # Raise floors where the new statistics allow, and prune candidates under them.
        self._floor = xp.maximum(self._floor, mean + (n_std - self.slack) * std)
        keep = cv > self._floor[cr]
        self._cr, self._cc, self._cv = _capped(xp, (cr[keep], cc[keep], cv[keep]), m)
        self._assemble(mean + n_std * std)
        self.last_add = dict(n_new=n_new, rows_recomputed=int(redo.size), dd_nnz=self.dd_nnz)
        return self

    def _full_rows(self, idx: Any) -> tuple[Any, Any, Any, tuple[Any, Any, Any]]:
        """Σexp, Σexp², floors and candidates (rows, cols, values) of rows ``idx`` vs all docs."""
        xp, n = self.backend.xp, self.n_d
        ei, ef = xp.zeros(0, dtype=xp.int64), xp.zeros(0, dtype=F64)
        out = [(ef, ef, ef, ei, ei, ef)]
        blocks = _row_blocks(len(idx), n)
        buf = xp.empty((min(blocks.step, len(idx)), n), dtype=F64)  # reused across blocks
        for lo in blocks:
            rows = idx[lo : lo + blocks.step]
            c = xp.matmul(self.X[rows], self.X.T, out=buf[: len(rows)])
            xp.exp(c, out=c)
            c[xp.arange(len(rows)), rows] = 0  # diagonal excluded (0 never passes a floor > 0)
            s1, s2 = c.sum(axis=1), xp.einsum("ij,ij->i", c, c)
            mean, std = _stats(xp, s1, s2, n - 1)
            floor = mean + (self.config.n_std - self.slack) * std
            r, k = xp.nonzero(c > floor[:, None])
            cand = _capped(xp, (rows[r], k, c[r, k]), self.config.max_doc_links)
            out.append((s1, s2, floor, *cand))
        s1, s2, floor, *cand = (xp.concatenate(p) for p in zip(*out, strict=True))
        return s1, s2, floor, tuple(cand)

    def _assemble(self, tau: Any) -> None:
        """S = [[D/mean(D), M], [Mᵀ, 0]] from the stored candidates, and its column sums."""
        xp, nd = self.backend.xp, self.n_d
        act = self._cv > tau[self._cr]
        dr, dc, dv = self._cr[act], self._cc[act], self._cv[act]
        self.dd_nnz, self.dd_scale = int(dv.size), float(dv.mean()) if dv.size else 1.0
        one = xp.ones(self._mr.size, dtype=F64)
        rows = xp.concatenate([dr, self._mr, self._mc + nd])
        cols = xp.concatenate([dc, self._mc + nd, self._mr])
        vals = xp.concatenate([dv / self.dd_scale, one, one])
        self.N = nd + self.n_e
        self.S = self.backend.coo_csr(vals, rows, cols, (self.N, self.N))
        self.s = xp.asarray(self.S.sum(axis=0)).ravel()
        self.inv_s = _inv(xp, self.s)

    def _tau(self) -> Any:
        mean, std = _stats(self.backend.xp, self._s1, self._s2, self.n_d - 1)
        return mean + self.config.n_std * std

    # ---- the document rows kept between processes (operators.walks.graph_store) -------------
    def doc_links(self) -> dict[str, np.ndarray]:
        """What the document rows of the graph cost to compute, on the host: each row's Σexp,
        Σexp² and candidate floor, and the candidates (rows, cols, raw exp(cos) values)."""
        arrays = (self._s1, self._s2, self._floor, self._cr, self._cc, self._cv)
        return {k: _host(a) for k, a in zip(DOC_LINK_ARRAYS, arrays, strict=True)}

    def restore_doc_links(self, doc_vectors: Any, links: dict[str, Any]) -> WalkEngine:
        """This empty engine holding the documents ``doc_vectors`` with the rows ``links``
        (``doc_links`` of an engine built with this config and slack on the same vectors, in
        the same order) and no entities: ``add_documents`` may append documents to it, then
        ``set_doc_entity`` gives it its entities."""
        if self.n_d:
            raise ValueError("restore_doc_links needs an empty engine")
        xp = self.backend.xp
        x = unit_rows(xp, self.backend.asarray(doc_vectors, F64))
        n = x.shape[0]
        s1, s2, floor = (xp.asarray(links[k], F64) for k in DOC_LINK_ARRAYS[:3])
        cr, cc = (xp.asarray(links[k], np.int64) for k in DOC_LINK_ARRAYS[3:5])
        cv = xp.asarray(links["vals"], F64)
        if not (s1.size == s2.size == floor.size == n and cr.size == cc.size == cv.size) or (
            cr.size and int(max(cr.max(), cc.max())) >= n
        ):
            raise ValueError(f"document links do not fit {n} documents")
        self.X, self.n_d, self.n_e = x, n, 0
        self._s1, self._s2, self._floor = s1, s2, floor
        self._cr, self._cc, self._cv = cr, cc, cv
        self._assemble(self._tau())
        return self

    def reorder(self, at: Any) -> WalkEngine:
        """The documents renumbered: document i becomes document ``at[i]`` (a permutation);
        their vectors, statistics and links follow, and the graph is reassembled (the same
        graph, its rows in the new order)."""
        xp = self.backend.xp
        at = xp.asarray(at, np.int64)
        if at.size != self.n_d or not bool((xp.sort(at) == xp.arange(self.n_d)).all()):
            raise ValueError(f"reorder needs a permutation of {self.n_d} documents")
        inv = xp.empty_like(at)
        inv[at] = xp.arange(at.size)
        self.X = self.X[inv]
        self._s1, self._s2, self._floor = (a[inv] for a in (self._s1, self._s2, self._floor))
        self._cr, self._cc, self._mr = at[self._cr], at[self._cc], at[self._mr]
        self._assemble(self._tau())
        return self

    def set_doc_entity(self, doc_entity: Any) -> WalkEngine:
        """The document–entity links replaced by ``doc_entity`` (n_d × n_e, used as 0/1), the
        graph reassembled."""
        er, ec = _indicator(doc_entity, self.n_d)
        xp = self.backend.xp
        self.n_e = int(doc_entity.shape[1])
        self._mr, self._mc = xp.asarray(er), xp.asarray(ec)
        self._assemble(self._tau())
        return self

    # ---- Doc-Zoom ---------------------------------------------------------------------------
    def similarities(self, query_vectors: Any) -> Any:
        """exp(cos(q, p_j)) of each query with every document (B × n_d, float64, on the
        backend): the query–document weights before sparsification (``query_links``), in the
        row blocks ``query_links`` computes them in."""
        xp, nd = self.backend.xp, self.n_d
        q = unit_rows(xp, self.backend.asarray(query_vectors, F64).reshape(-1, self.X.shape[1]))
        out = xp.empty((q.shape[0], nd), dtype=F64)
        blocks = _row_blocks(q.shape[0], nd)
        for lo in blocks:
            block = out[lo : lo + blocks.step]
            xp.exp(xp.matmul(q[lo : lo + blocks.step], self.X.T, out=block), out=block)
        return out

    def query_links(
        self, query_vectors: Any, query_entity: Any, similarities: Any = None
    ) -> tuple[Any, Any, Any, int]:
        """Link rows h as COO (query index, node index, weight) on the backend; number of
        queries. Query–doc weights are rescaled to mean 1 per query. ``similarities``: the
        queries' ``similarities`` when the caller has them (not computed again)."""
        xp, nd = self.backend.xp, self.n_d
        q = unit_rows(xp, self.backend.asarray(query_vectors, F64).reshape(-1, self.X.shape[1]))
        nq = q.shape[0]
        out = [(xp.zeros(0, dtype=xp.int64),) * 2 + (xp.zeros(0, dtype=F64),)]
        # A zero vector links no document (its exp(cos) is 1 everywhere: std 0, nothing above
        # the mean): only the other rows are compared with the documents (the bridge walk's
        # start nodes are all zero vectors, so its batch skips the pass over the corpus).
        live = xp.nonzero(xp.any(q != 0, axis=1))[0]
        q = q[live] if live.size < nq else q
        blocks = _row_blocks(int(live.size), nd)
        buf = xp.empty((min(blocks.step, int(live.size)), nd), dtype=F64)  # reused across blocks
        for lo in blocks:
            block = q[lo : lo + blocks.step]
            if similarities is None:
                w = xp.matmul(block, self.X.T, out=buf[: len(block)])
                xp.exp(w, out=w)
            else:
                w = similarities[live[lo : lo + blocks.step]]
            # one pass for Σw and one for Σw² (no (w − mean)² temporary, as w.std would make)
            mean, std = _stats(xp, w.sum(axis=1), xp.einsum("ij,ij->i", w, w), nd)
            r, k = xp.nonzero(w > (mean + self.config.n_std * std)[:, None])
            out.append((live[r + lo], k, w[r, k]))
        hb, hj, hv = (xp.concatenate(p) for p in zip(*out, strict=True))
        hv = hv * (xp.bincount(hb, minlength=nq) * _inv(xp, xp.bincount(hb, hv, minlength=nq)))[hb]
        er, ec = _indicator(query_entity, nq, self.n_e)
        hb = xp.concatenate([hb, xp.asarray(er)])
        hj = xp.concatenate([hj, xp.asarray(ec) + nd])
        return hb, hj, xp.concatenate([hv, xp.ones(er.size, dtype=F64)]), nq

    def walk(
        self,
        query_vectors: Any,
        query_entity: Any,
        config: WalkConfig | None = None,
        similarities: Any = None,
    ) -> tuple[Any, Any]:
        """Batched decoupled walk of ``config.steps`` steps, restart ``config.alpha`` (default:
        the engine's config): (node scores N×B, query-node scores B) on the backend. When one
        state chunk holds the batch, the N×B scores are a view of the walk's state.
        ``similarities``: the queries' ``similarities``, when the caller has them."""
        config = config or self.config
        T, alpha = config.steps, config.alpha
        xp = self.backend.xp
        hb, hj, hv, nq = self.query_links(query_vectors, query_entity, similarities)
        inv_cq = _inv(xp, xp.bincount(hb, hv, minlength=nq))  # query column sum Σh
        s_h = self.s[hj]  # S's column sums at the links
        inv_h = 1 / (s_h + hv)  # column sums of linked nodes include the query's edge
        op, c = self._spmm(alpha), 1 - alpha
        nc, w = op.layout(nq)
        at = (hb // w, hj, hb % w)  # (chunk, node, lane) of each link in the chunked state
        restart = hv * inv_cq[hb]  # the query's restart mass, spread over its links
        # Step 1: r = 0, so nothing returns to the query node; only the restart mass arrives,
        # on the query's links.
        r = op.empty(nc, w)
        r[...] = 0
        if T:
            r[at] = c * restart
        rq = xp.full(nq, alpha if T else 1.0, dtype=F64)
        out = op.empty(nc, w) if T > 1 else None
        marks = op.start_marks(nc, *at[:2]) if T > 1 else None  # the state's support by chunk
        floor = op.floor(config.tolerance)
        stale = None  # the support of ``out``'s contents (None: unknown, the first buffer)
        for _ in range(1, T):
            zh = r[at] * inv_h  # z / (1 − α) at the links
            new_q = xp.bincount(hb, hv * zh, minlength=nq)
            # A = S·diag((1 − α)/s) scales column j by 1/s_j; at a link the sum is s_j + h_j,
            # so the state there is set to zh·s_j: A carries (1 − α)·zh through column j.
            r[at] = zh * s_h
            held = None if marks is None else list(marks)  # r's support: out's after the swap
            r, out = op.dense(r, out, marks, floor, stale), r
            stale = held
            r[at] += c * restart * rq[hb]
            for chunk, mark in enumerate(marks or ()):
                if mark is not None:
                    mark[at[1][at[0] == chunk]] = 1
            rq = c * new_q + alpha
        if nc == 1:
            return r[0, :, :nq], rq
        return r.transpose(1, 0, 2).reshape(self.N, nc * w)[:, :nq], rq

    def astype(self, dtype: Any) -> WalkEngine:
        """A copy whose walks run in ``dtype`` (e.g. float32: half the bytes per step, scores
        within ~1e-8 of float64). Graph construction stays float64; the copy can grow on its own."""
        other = copy.copy(self)
        other.backend = replace(self.backend, dtype=dtype)
        other._s1, other._s2, other._floor = (a.copy() for a in (self._s1, self._s2, self._floor))
        if getattr(self, "S", None) is not None:
            other.S = self.S.astype(dtype)
        other._op = None
        return other

    @property
    def kernel(self) -> str:
        """Which code runs the batched product on this engine's backend."""
        op = self._spmm()
        if self.device == "gpu":
            return "cupyx.scipy.sparse (cuSPARSE)"
        if op.kernel is None:
            return f"scipy.sparse ({op.reason})"
        return f"compiled CSR kernel (llvmlite, {op.width}-wide state rows)"

    def _spmm(self, alpha: float | None = None) -> _SpMM:
        """The batched product for the current S and ``alpha`` (default: the engine's; rebuilt
        after ``add_documents``)."""
        alpha = self.config.alpha if alpha is None else alpha
        op = self._op
        if op is None or op.src is not self.S or op.alpha != alpha:
            self._op = op = _SpMM(self.backend, self.S, alpha, self.inv_s)
        return op

    def _finish(self, r: Any, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top-k documents per column of ``r`` (ties: smaller id first); entity scores."""
        nd = self.n_d
        ids, vals = top_k_columns(r[:nd], k, self.backend.xp)
        return ids, vals, _host(r[nd:].T)

    def doc_zoom(
        self,
        query_vectors: Any,
        query_entity: Any,
        k: int | None = None,
        config: WalkConfig | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(top-k doc ids B×k, their scores B×k, entity scores B×n_e), each query independent;
        k defaults to the config's ``top_docs``."""
        config = config or self.config
        r = self.walk(query_vectors, query_entity, config)[0]
        return self._finish(r, config.top_docs if k is None else k)

    # ---- Chunk-Zoom -------------------------------------------------------------------------
    def chunk_graphs(
        self,
        chunk_vectors: Sequence[Any],
        chunk_doc: Sequence[Any],
        chunk_entity: Sequence[Any],
        omega: float,
        sigma: float,
    ) -> tuple[Any, list[np.ndarray], int]:
        """The column-normalised B̃ of every query at once, as one padded stack (B, L, L):
        query b's chunks at rows 0..l_b−1, its h_b local entities at rows Lc..Lc+h_b−1 (Lc:
        the most chunks of any query); padding rows and columns are zero, so they carry no
        mass. Also each query's local entity ids, and Lc."""
        b, xp = self.backend, self.backend.xp
        nq = len(chunk_vectors)
        sizes = [int(np.asarray(d).size) for d in chunk_doc]
        lc = max(sizes, default=0)
        dim = next((np.shape(v)[-1] for v, n in zip(chunk_vectors, sizes, strict=True) if n), 1)
        vec = np.zeros((nq, lc, dim))
        doc = np.full((nq, lc), -1, np.int64)
        pos = np.zeros((nq, lc))
        links, local = [], []
        for q, (v, d, e, n) in enumerate(
            zip(chunk_vectors, chunk_doc, chunk_entity, sizes, strict=True)
        ):
            d = np.asarray(d, np.int64).ravel()
            vec[q, :n] = _host(v)
            doc[q, :n] = d
            # position in reading order within the chunk's document
            order = np.argsort(d, kind="stable")
            starts = np.searchsorted(d[order], d[order])
            pos[q, order] = np.arange(n) - starts
            er, ec = _indicator(e, n)
            ents, loc = np.unique(ec, return_inverse=True)
            local.append(ents)
            links.append((np.full(er.size, q), er, loc))
        h = max((e.size for e in local), default=0)
        c = unit_rows(xp, b.asarray(vec, F64))
        docs, p = xp.asarray(doc), b.asarray(pos, F64)
        valid = docs >= 0
        pair = valid[:, :, None] & valid[:, None, :]
        bt = (docs[:, :, None] == docs[:, None, :]) & pair
        bt = bt * xp.exp(-((p[:, :, None] - p[:, None, :]) ** 2) / (2 * sigma * sigma))
        bs = xp.exp(xp.matmul(c, c.transpose(0, 2, 1))) * pair
        bcc = omega * bt * _inv(xp, bt.sum(axis=1))[:, None, :]
        bcc += (1 - omega) * bs * _inv(xp, bs.sum(axis=1))[:, None, :]
        positive = bcc > 0  # chunk block rescaled to mean weight 1 (like the 0/1 block)
        mean = (bcc * positive).sum(axis=(1, 2)) * _inv(xp, positive.sum(axis=(1, 2)))
        big = xp.zeros((nq, lc + h, lc + h), dtype=F64)
        big[:, :lc, :lc] = bcc * _inv(xp, mean)[:, None, None]
        if links:
            qs, rows, cols = (xp.asarray(np.concatenate(a)) for a in zip(*links, strict=True))
            big[qs, rows, cols + lc] = 1
            big[qs, cols + lc, rows] = 1
        return big * _inv(xp, big.sum(axis=1))[:, None, :], local, lc

    def chunk_zoom(
        self,
        chunk_vectors: Sequence[Any],
        chunk_doc: Sequence[Any],
        chunk_entity: Sequence[Any],
        entity_scores: Any,
        config: WalkConfig | None = None,
        chunk_seeds: Sequence[Any] | None = None,
        seed_weight: float = 0.0,
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query (sequences indexed by query; entity_scores B×n_e from Doc-Zoom): the top
        ceil(keep·l) chunk indices by stationary score y = β(I − (1−β)B̃)⁻¹y⁽⁰⁾, ranked, and
        their scores (β, keep, ω, σ: the config's). The start vector y⁽⁰⁾ is the entity
        scores; with ``chunk_seeds`` (per query, a non-negative weight per chunk: the query's
        own similarity to each chunk) and ``seed_weight`` w > 0 it is (1 − w) · the entity
        scores + w · the chunk seeds, each scaled to sum 1, so the walk starts from the
        chunks the question is about as well as from the entities it names. B̃ is dense (semantic links join all chunk
        pairs): the queries of a batch, in groups of similar graph size (``_size_groups``),
        are built as one padded stack a group (``chunk_graphs``) and solved together by the
        Neumann series
        y = β Σ_t ((1−β)B̃)ᵗ y⁽⁰⁾ (B̃ column-stochastic: the error after t terms is at most
        (1−β)ᵗ of the total mass; iterated to 1e-15 of it, the LU solve's precision) — batched
        matrix–vector products instead of one LU factorisation per query."""
        config = config or self.config
        beta, omega, sigma = config.beta, config.omega, config.sigma
        keep = config.keep_fraction
        xp = self.backend.xp
        nq = len(chunk_vectors)
        es = self.backend.asarray(entity_scores, F64).reshape(nq, -1)
        sizes = [int(np.asarray(d).size) for d in chunk_doc]
        terms = max(1, math.ceil(math.log(1e-15) / math.log(1 - beta)))
        res: list[tuple[np.ndarray, np.ndarray]] = [None] * nq  # type: ignore[list-item]
        cap = nq if self.device == "gpu" else CHUNK_GROUP  # _size_groups: launches vs padding
        for group in _size_groups(sizes, chunk_entity, cap):
            pick = [chunk_vectors[q] for q in group], [chunk_doc[q] for q in group]
            bt, local, lc = self.chunk_graphs(*pick, [chunk_entity[q] for q in group], omega, sigma)
            y0 = xp.zeros(bt.shape[:2], dtype=F64)
            for g, ents in enumerate(local):
                y0[g, lc : lc + ents.size] = es[group[g], xp.asarray(ents)]
            if chunk_seeds is not None and seed_weight > 0:
                seeds = [chunk_seeds[q] for q in group]
                y0 = _seeded(xp, y0, seeds, [sizes[q] for q in group], seed_weight, self.backend)
            y, term = beta * y0, beta * y0
            for _ in range(terms):
                term = (1 - beta) * xp.matmul(bt, term[:, :, None])[:, :, 0]
                y += term
            y = _host(y)
            for g, q in enumerate(group):
                n_chunks = sizes[q]
                yc = y[g, :n_chunks]
                order = np.lexsort((np.arange(n_chunks), -yc))[: math.ceil(keep * n_chunks)]
                res[q] = (order, yc[order])
        return res

    # ---- generic batched personalised PageRank ----------------------------------------------
    def ppr_batch(
        self,
        adjacency: Any,
        seeds: Any,
        damping: float = 0.5,
        iterations: int = 100,
        tol: float = 1e-12,
    ) -> np.ndarray:
        """PPR of B seed rows at once (B×n out). adjacency[i, j] = weight of edge i→j; damping =
        probability of following an edge; dangling nodes jump to the seeds (both as igraph).
        Always in float64, whatever the engine's walk dtype."""
        b = replace(self.backend, dtype=F64)
        xp = b.xp
        a = sp.csr_matrix(_host(adjacency))
        out = np.asarray(a.sum(axis=1)).ravel()
        p = sp.coo_matrix((sp.diags(_inv(np, out)) @ a).T)
        trans = b.coo_csr(xp.asarray(p.data), xp.asarray(p.row), xp.asarray(p.col), a.shape)
        dangling = b.asarray(out == 0, dtype=bool)
        s0 = b.asarray(seeds).reshape(-1, a.shape[0]).T.copy()
        total = s0.sum(axis=0)
        if bool((total <= 0).any()):
            raise ValueError("every seed row needs a positive sum")
        x = s0 = s0 / total
        for _ in range(iterations):
            nx = damping * (trans @ x + s0 * x[dangling].sum(axis=0)) + (1 - damping) * s0
            delta, x = float(xp.abs(nx - x).sum(axis=0).max()), nx
            if delta < tol:
                break
        return _host(x.T)
