"""CSR × dense product for the CPU walk: out = A @ x, compiled at run time by LLVM (llvmlite).

The batched walk multiplies one sparse matrix A (n × m, CSR) by a dense state x (m × w, one
column per query, C-ordered) every step. Library kernels (SciPy's ``csr_matvecs``, MKL through
torch) keep the output row in memory and load, add and store it for every nonzero; measured on
the walk's graphs they reach 2-4 G multiply-adds/s on one core. This kernel is generated for a
fixed row width ``w`` (a multiple of one 64-byte vector) and keeps the whole output row in
vector registers while it runs over the row's nonzeros:

* per row i: acc[0..w) = 0; for each nonzero (j, v): acc += v · x[j, :] (one fused multiply-add
  per 64-byte vector, in CSR order, so every column is summed in the same order as a plain
  loop over the row); then the row is stored once;
* the state row of the nonzero ``prefetch`` places ahead is prefetched (random gathers are the
  cost on these graphs; the look-ahead reads a padded copy of the indices, so it stays in
  bounds);
* stores are streaming (non-temporal) when the output is 64-byte aligned and larger than a
  share of the last-level cache: it is written once and read only at the next step, so it need
  not displace the state rows being gathered.

Columns never mix: each output column depends only on the same column of x, so a batch of
queries multiplied together gives each query exactly what it would get alone (and the same
bits whatever the width of the chunks the state is cut into).

``CsrKernel.masked`` is the same product over a listed set of rows, reading a state row only
where a mark says it may be nonzero (elsewhere a row of zeros, so each output row is bit for bit
the plain product's), and marking the rows it reached: the walk's first steps, whose state
covers a small part of the graph. ``CsrKernel`` is the interface; ``kernel_or_reason`` returns None (and why) where llvmlite is
missing or cannot compile for this CPU, and the walk then uses SciPy. The generated code uses
only generic LLVM vector operations, so LLVM lowers it for whatever the host has (AVX-512,
AVX2, NEON). Compiled functions are cached per (value type, index type, width, options) for the
life of the process; a call releases the GIL (ctypes), so threads can run products side by side.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

import numpy as np
import scipy.sparse as sp

VECTOR_BYTES = 64  # one AVX-512 register, or two AVX2 / four NEON ones after LLVM's lowering
PREFETCH = 8  # nonzeros of look-ahead for the state-row prefetch (measured: 4-8 best)
STREAM_MIN_BYTES = 8 << 20  # smaller outputs stay in cache for the next step: plain stores
_lock = threading.Lock()
_compiled: dict[tuple, Any] = {}  # (value, index, width, prefetch, streaming) -> C function
_engines: list[Any] = []  # LLVM execution engines, alive as long as their functions
_target: Any = None


def aligned_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised C-ordered array whose data starts on a 64-byte boundary."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    raw = np.empty(n * dtype.itemsize + VECTOR_BYTES, dtype=np.uint8)
    start = -raw.ctypes.data % VECTOR_BYTES
    return raw[start : start + n * dtype.itemsize].view(dtype).reshape(shape)


class StatePool:
    """Reusable 64-byte aligned buffers for walk states. A fresh buffer of tens of MB costs its
    page faults at first touch (on the walk benchmark's graph, about as much again as the
    product written into it), so buffers are handed out again once nothing refers to them:
    an array handed out is a view of a pooled block, and a block is free when the pool holds
    the only reference to it (CPython's reference count). Thread-safe; keeps at most
    ``max_blocks`` blocks: a new block takes the place of a free one of another size, and is
    not kept when all are in use (it is freed with its last view)."""

    def __init__(self, max_blocks: int = 4) -> None:
        self.max_blocks = max_blocks
        self._blocks: list[tuple[np.ndarray, int, int]] = []  # (owner, aligned start, bytes)
        self._lock = threading.Lock()

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """An uninitialised aligned array of ``shape``, reused when a free block fits."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        with self._lock:
            free = []
            for k, (owner, start, size) in enumerate(self._blocks):
                # references: the pool's tuple, this loop's name and getrefcount's argument
                if sys.getrefcount(owner) <= 3:
                    if size == nbytes:
                        return owner[start : start + size].view(dtype).reshape(shape)
                    free.append(k)
            out = aligned_empty(shape, dtype)
            block = (out.base, out.ctypes.data - out.base.ctypes.data, nbytes)
            if len(self._blocks) < self.max_blocks:
                self._blocks.append(block)
            elif free:  # a free block of another size makes room (batch sizes change)
                self._blocks[free[0]] = block
            return out


def _llvm() -> Any:
    """The host target machine (initialised once)."""
    global _target
    if _target is None:
        from llvmlite import binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        _target = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
        )
    return _target


def _ir(
    value: np.dtype, index: np.dtype, width: int, prefetch: int, streaming: bool, masked: bool
) -> str:
    """LLVM IR of ``void spmm(i64 n, idx* indptr, idx* indices, val* data, val* x, val* out)``,
    or with ``masked`` of ``void spmm(i64 n, idx* rows, idx* indptr, idx* indices, val* data,
    val* x, val* out, i8* mark, i8* mark_out, val* zero)``: only the ``n`` rows listed, each
    reading the state row of a nonzero only where ``mark`` is set (elsewhere the row ``zero``,
    all zeros and hot in cache: no branch, the same fused multiply-adds in the same order),
    and ``mark_out`` of a row set where any of its nonzeros was marked."""
    from llvmlite import ir

    val_t = ir.FloatType() if value == np.float32 else ir.DoubleType()
    idx_t = ir.IntType(8 * index.itemsize)
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    i8p = i8.as_pointer()
    lanes = VECTOR_BYTES // value.itemsize
    n_vec = width // lanes
    vec = ir.VectorType(val_t, lanes)
    mod = ir.Module(name="bookindex_spmm")
    ptr = [idx_t.as_pointer(), idx_t.as_pointer(), val_t.as_pointer()]
    args = [i64, *ptr, val_t.as_pointer(), val_t.as_pointer()]
    if masked:
        args = [i64, idx_t.as_pointer(), *args[1:], i8p, i8p, val_t.as_pointer()]
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), args), name="spmm")
    if masked:
        n, rows, indptr, indices, data, x, out, mark, mark_out, zero = fn.args
    else:
        n, indptr, indices, data, x, out = fn.args
    for arg in fn.args[1:]:
        arg.add_attribute("noalias")
    suffix = f"v{lanes}f{8 * value.itemsize}"
    fma = ir.Function(mod, ir.FunctionType(vec, [vec, vec, vec]), name=f"llvm.fma.{suffix}")
    pf_t = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    pf = ir.Function(mod, pf_t, name="llvm.prefetch.p0i8")

    def state_row(b: ir.IRBuilder, column: Any) -> tuple[Any, Any]:
        """The state row a nonzero of ``column`` reads, and its mark (masked: zero row where
        unmarked)."""
        j = b.sext(column, i64)
        row = b.gep(x, [b.mul(j, i64(width))])
        if not masked:
            return row, None
        m = b.load(b.gep(mark, [j]))
        return b.select(b.icmp_unsigned("!=", m, i8(0)), row, zero), m

    blocks = {k: fn.append_basic_block(k) for k in ("entry", "row", "head", "nz", "end", "done")}
    b = ir.IRBuilder(blocks["entry"])
    b.cbranch(b.icmp_signed(">", n, i64(0)), blocks["row"], blocks["done"])
    b.position_at_end(blocks["row"])  # t in [0, n): row i (masked: rows[t])
    t = b.phi(i64, "t")
    t.add_incoming(i64(0), blocks["entry"])
    i = b.sext(b.load(b.gep(rows, [t])), i64) if masked else t
    lo = b.sext(b.load(b.gep(indptr, [i])), i64)
    hi = b.sext(b.load(b.gep(indptr, [b.add(i, i64(1))])), i64)
    b.branch(blocks["head"])
    b.position_at_end(blocks["head"])  # jj in [lo, hi), accumulators in registers
    jj = b.phi(i64, "jj")
    jj.add_incoming(lo, blocks["row"])
    acc = [b.phi(vec, f"acc{k}") for k in range(n_vec)]
    for a in acc:
        a.add_incoming(ir.Constant(vec, [0.0] * lanes), blocks["row"])
    seen = None
    if masked:
        seen = b.phi(i8, "seen")
        seen.add_incoming(i8(0), blocks["row"])
    b.cbranch(b.icmp_signed("<", jj, hi), blocks["nz"], blocks["end"])

    b.position_at_end(blocks["nz"])
    if prefetch:
        row_ahead, _ = state_row(b, b.load(b.gep(indices, [b.add(jj, i64(prefetch))])))
        for k in range(0, width, lanes):  # read, keep in all cache levels, data
            line = b.bitcast(b.gep(row_ahead, [i64(k)]), i8p)
            b.call(pf, [line, i32(0), i32(3), i32(1)])
    xrow, m = state_row(b, b.load(b.gep(indices, [jj])))
    v = b.load(b.gep(data, [jj]))
    splat = b.insert_element(ir.Constant(vec, ir.Undefined), v, i32(0))
    splat = b.shuffle_vector(
        splat, ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
    )
    for k, a in enumerate(acc):
        xv = b.load(b.bitcast(b.gep(xrow, [i64(k * lanes)]), vec.as_pointer()), align=4)
        a.add_incoming(b.call(fma, [splat, xv, a]), blocks["nz"])
    if masked:
        seen.add_incoming(b.or_(seen, m), blocks["nz"])
    jj.add_incoming(b.add(jj, i64(1)), blocks["nz"])
    b.branch(blocks["head"])

    b.position_at_end(blocks["end"])  # store the row once
    orow = b.gep(out, [b.mul(i, i64(width))])
    for k, a in enumerate(acc):
        dst = b.bitcast(b.gep(orow, [i64(k * lanes)]), vec.as_pointer())
        store = b.store(a, dst, align=VECTOR_BYTES if streaming else 4)
        if streaming:
            store.set_metadata("nontemporal", mod.add_metadata([i32(1)]))
    if masked:
        b.store(seen, b.gep(mark_out, [i]))
    nxt = b.add(t, i64(1))
    t.add_incoming(nxt, blocks["end"])
    b.cbranch(b.icmp_signed("<", nxt, n), blocks["row"], blocks["done"])
    b.position_at_end(blocks["done"])
    b.ret_void()
    return str(mod)


def _function(
    value: np.dtype, index: np.dtype, width: int, prefetch: int, streaming: bool, masked: bool
):
    key = (value.str, index.str, width, prefetch, streaming, masked)
    with _lock:
        if key not in _compiled:
            from llvmlite import binding as llvm

            machine = _llvm()
            module = llvm.parse_assembly(_ir(value, index, width, prefetch, streaming, masked))
            module.verify()
            engine = llvm.create_mcjit_compiler(module, machine)
            engine.finalize_object()
            _engines.append(engine)
            address = engine.get_function_address("spmm")
            p = ctypes.c_void_p
            args = (p,) * (9 if masked else 5)
            _compiled[key] = ctypes.CFUNCTYPE(None, ctypes.c_int64, *args)(address)
        return _compiled[key]


class CsrKernel:
    """out = A @ x for one CSR matrix A (float32 or float64) and row-major x of any width that
    is a multiple of ``lanes``."""

    def __init__(self, a: sp.csr_matrix, prefetch: int = PREFETCH, index: Any = None) -> None:
        """``index``: int32 or int64 indices (default: int32 when they fit)."""
        if a.dtype not in (np.float32, np.float64):
            raise TypeError(f"CsrKernel: float32 or float64 values, not {a.dtype}")
        a = sp.csr_matrix(a)
        if not a.has_sorted_indices:
            a = a.sorted_indices()  # a sorted copy: the caller's matrix stays as it is
        if index is None:
            index = np.int32 if max(a.nnz, a.shape[1]) < 2**31 - prefetch else np.int64
        self.shape, self.nnz, self.dtype = a.shape, a.nnz, a.dtype
        self.indptr = np.ascontiguousarray(a.indptr, dtype=index)
        # padded so the look-ahead load of the last nonzeros stays inside the array
        self.indices = np.zeros(a.nnz + max(prefetch, 1), dtype=index)
        self.indices[: a.nnz] = a.indices
        self.data = np.ascontiguousarray(a.data)
        self.prefetch = int(prefetch)
        self.lanes = VECTOR_BYTES // self.dtype.itemsize
        self._every_row = np.arange(self.shape[0], dtype=index)
        self._zeros: dict[int, np.ndarray] = {}  # width -> a row of zeros (masked products)
        self._columns: tuple[np.ndarray, ...] | None = None  # by column (_structure)

    def __call__(self, x: np.ndarray, out: np.ndarray, streaming: bool | None = None) -> np.ndarray:
        """Writes A @ x into ``out`` (n × w, C-ordered) and returns it. ``streaming``: store
        with non-temporal writes (needs a 64-byte aligned ``out``); default: when ``out`` is
        aligned and at least ``STREAM_MIN_BYTES``."""
        w, streaming = self._check(x, out, streaming)
        if self.shape[0] == 0:
            return out
        fn = _function(self.dtype, self.indptr.dtype, w, self.prefetch, streaming, False)
        fn(
            self.shape[0],
            self.indptr.ctypes.data,
            self.indices.ctypes.data,
            self.data.ctypes.data,
            x.ctypes.data,
            out.ctypes.data,
        )
        return out

    def masked(
        self,
        x: np.ndarray,
        out: np.ndarray,
        mark: np.ndarray,
        mark_out: np.ndarray,
        rows: np.ndarray | None = None,
        streaming: bool | None = None,
    ) -> np.ndarray:
        """The rows ``rows`` (sorted; default every row) of A @ x written into ``out``, reading
        a row j of ``x`` only where ``mark[j]`` (uint8) is set: where every unmarked row of x
        is zero, each row written is bit for bit the plain product's (the same fused
        multiply-adds in the same order, the unmarked ones on a row of zeros). ``mark_out[i]``
        (uint8) of each row written: 1 where a nonzero of row i lies in a marked column, else
        0. Rows not listed are left as they are, in ``out`` and in ``mark_out``."""
        w, streaming = self._check(x, out, streaming)
        n, m = self.shape
        for name, a, size in (("mark", mark, m), ("mark_out", mark_out, n)):
            if a.dtype != np.uint8 or a.shape != (size,) or not a.flags.c_contiguous:
                raise ValueError(f"CsrKernel: {name} must be {size} contiguous uint8")
        if rows is None:
            rows = self._every_row
        elif rows.dtype != self.indptr.dtype or not rows.flags.c_contiguous:
            rows = np.ascontiguousarray(rows, dtype=self.indptr.dtype)
        if rows.size and (rows[0] < 0 or rows[-1] >= n):
            raise ValueError(f"CsrKernel: rows must lie in [0, {n})")
        zero = self._zeros.get(w)
        if zero is None:
            zero = self._zeros[w] = aligned_empty((w,), self.dtype)
            zero[:] = 0
        fn = _function(self.dtype, self.indptr.dtype, w, self.prefetch, streaming, True)
        fn(
            rows.size,
            rows.ctypes.data,
            self.indptr.ctypes.data,
            self.indices.ctypes.data,
            self.data.ctypes.data,
            x.ctypes.data,
            out.ctypes.data,
            mark.ctypes.data,
            mark_out.ctypes.data,
            zero.ctypes.data,
        )
        return out

    def marked_nnz(self, mark: np.ndarray) -> int:
        """The number of nonzeros of A in the columns ``mark`` sets."""
        return int(self._structure()[2][mark.view(bool)].sum())

    def _structure(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A's structure by column (CSC indptr, indices) and the nonzeros per column, built at
        the first call."""
        if self._columns is None:
            csc = sp.csr_matrix(
                (np.ones(self.nnz, np.int8), self.indices[: self.nnz], self.indptr),
                shape=self.shape,
            ).tocsc()
            indptr = csc.indptr.astype(np.int64)
            self._columns = (indptr, csc.indices, np.diff(indptr))
        return self._columns

    def reached(self, mark: np.ndarray) -> tuple[np.ndarray, int]:
        """The rows of A with a nonzero in a marked column (sorted, the kernel's index type)
        and the number of nonzeros in the marked columns (the work of finding them)."""
        indptr, indices, _ = self._structure()
        cols = np.flatnonzero(mark)
        starts, stops = indptr[cols], indptr[cols + 1]
        lengths = stops - starts
        total = int(lengths.sum())
        flat = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
        hit = np.zeros(self.shape[0], bool)
        hit[indices[flat]] = True
        return np.flatnonzero(hit).astype(self.indptr.dtype), total

    def _check(self, x: np.ndarray, out: np.ndarray, streaming: bool | None) -> tuple[int, bool]:
        """The width of a product's x and out (checked), and whether its stores stream."""
        n, m = self.shape
        w = x.shape[1] if x.ndim == 2 else -1
        if x.shape != (m, w) or out.shape != (n, w) or w % self.lanes or w <= 0:
            raise ValueError(
                f"CsrKernel: x {x.shape} and out {out.shape} must be ({m}, w) and ({n}, w) with w "
                f"a positive multiple of {self.lanes}"
            )
        for name, arr in (("x", x), ("out", out)):
            if arr.dtype != self.dtype or not arr.flags.c_contiguous:
                raise ValueError(f"CsrKernel: {name} must be C-ordered {self.dtype}")
        aligned = out.ctypes.data % VECTOR_BYTES == 0
        if streaming is None:
            streaming = aligned and out.nbytes >= STREAM_MIN_BYTES
        elif streaming and not aligned:
            raise ValueError("CsrKernel: streaming stores need a 64-byte aligned out")
        return w, bool(streaming)


def kernel_or_reason(a: sp.csr_matrix) -> tuple[CsrKernel | None, str]:
    """A compiled kernel for ``a`` (checked on a small product), or None and the reason."""
    try:
        kernel = CsrKernel(a)
        probe = sp.random(3, 5, density=0.6, format="csr", dtype=a.dtype, random_state=0)
        check = CsrKernel(probe)
        x = np.arange(5 * check.lanes, dtype=a.dtype).reshape(5, check.lanes)
        got = check(x, aligned_empty((3, check.lanes), a.dtype))
        if not np.allclose(got, probe @ x, rtol=1e-5):
            return None, "the compiled kernel disagreed with SciPy on a probe product"
        return kernel, ""
    except ImportError as exc:
        return None, f"llvmlite is not installed ({exc})"
    except Exception as exc:  # LLVM cannot target this CPU, or similar
        return None, f"kernel compilation failed ({type(exc).__name__}: {exc})"
