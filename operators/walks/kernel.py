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


class _Types:
    """The LLVM types, intrinsics and small pieces both kernels are built from: values of
    ``value``, indices of ``index``, state rows of ``width`` values in 64-byte vectors."""

    def __init__(self, mod: Any, value: np.dtype, index: np.dtype, width: int) -> None:
        from llvmlite import ir

        self.ir = ir
        self.val = ir.FloatType() if value == np.float32 else ir.DoubleType()
        self.idx = ir.IntType(8 * index.itemsize)
        self.i8, self.i32, self.i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        self.i8p = self.i8.as_pointer()
        self.lanes = VECTOR_BYTES // value.itemsize
        self.width, self.n_vec = width, width // self.lanes
        self.vec = ir.VectorType(self.val, self.lanes)
        self.zeros = ir.Constant(self.vec, [0.0] * self.lanes)
        self.lane_mask = ir.IntType(self.lanes)
        suffix = f"v{self.lanes}f{8 * value.itemsize}"
        vec3 = ir.FunctionType(self.vec, [self.vec] * 3)
        self.fma = ir.Function(mod, vec3, name=f"llvm.fma.{suffix}")
        self.fabs = ir.Function(
            mod, ir.FunctionType(self.vec, [self.vec]), name=f"llvm.fabs.{suffix}"
        )
        pf_t = ir.FunctionType(ir.VoidType(), [self.i8p, self.i32, self.i32, self.i32])
        self.prefetch = ir.Function(mod, pf_t, name="llvm.prefetch.p0i8")

    def splat(self, b: Any, value: Any) -> Any:
        """A vector of ``value`` in every lane."""
        ir = self.ir
        first = b.insert_element(ir.Constant(self.vec, ir.Undefined), value, self.i32(0))
        order = ir.Constant(ir.VectorType(self.i32, self.lanes), [0] * self.lanes)
        return b.shuffle_vector(first, ir.Constant(self.vec, ir.Undefined), order)

    def row_vectors(self, b: Any, base: Any, row: Any) -> list[Any]:
        """Pointers to the vectors of state row ``row`` (i64) of ``base``."""
        start = b.gep(base, [b.mul(row, self.i64(self.width))])
        ptr = self.vec.as_pointer()
        return [b.bitcast(b.gep(start, [self.i64(k * self.lanes)]), ptr) for k in range(self.n_vec)]

    def prefetch_row(self, b: Any, base: Any, row: Any, write: bool) -> None:
        """Prefetch state row ``row`` of ``base`` into every cache level."""
        for ptr in self.row_vectors(b, base, row):
            rw = self.i32(1 if write else 0)
            b.call(self.prefetch, [b.bitcast(ptr, self.i8p), rw, self.i32(3), self.i32(1)])

    def floored(self, b: Any, values: list[Any], floor: Any) -> tuple[list[Any], Any]:
        """``values`` with each entry under ``floor`` (a scalar) in magnitude set to zero, and
        whether any entry was kept (i8 0/1); a floor of 0 keeps every finite entry."""
        f = self.splat(b, floor)
        kept, out = self.ir.Constant(self.lane_mask, 0), []
        for a in values:
            keep = b.fcmp_ordered(">=", b.call(self.fabs, [a]), f)
            out.append(b.select(keep, a, self.zeros))
            kept = b.or_(kept, b.bitcast(keep, self.lane_mask))
        any_kept = b.icmp_unsigned("!=", kept, self.ir.Constant(self.lane_mask, 0))
        return out, b.zext(any_kept, self.i8)


def _ir(
    value: np.dtype, index: np.dtype, width: int, prefetch: int, streaming: bool, masked: bool
) -> str:
    """LLVM IR of ``void spmm(i64 n, idx* indptr, idx* indices, val* data, val* x, val* out)``,
    or with ``masked`` of ``void spmm(i64 n, idx* rows, idx* indptr, idx* indices, val* data,
    val* x, val* out, i8* mark, i8* mark_out, val* zero, val* floor)``: only the ``n`` rows
    listed, each reading the state row of a nonzero only where ``mark`` is set (elsewhere the
    row ``zero``, all zeros and hot in cache: no branch, the same fused multiply-adds in the
    same order); an entry of output row i below ``floor[i]`` in magnitude is stored as zero
    (a floor of 0 keeps every finite entry), and ``mark_out`` of a row is set where any of its
    nonzeros was marked and any of its entries was kept."""
    from llvmlite import ir

    mod = ir.Module(name="bookindex_spmm")
    ty = _Types(mod, value, index, width)
    i8, i64 = ty.i8, ty.i64
    idx_p, val_p = ty.idx.as_pointer(), ty.val.as_pointer()
    args = [i64, idx_p, idx_p, val_p, val_p, val_p]
    if masked:
        args = [i64, idx_p, *args[1:], ty.i8p, ty.i8p, val_p, val_p]
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), args), name="spmm")
    if masked:
        n, rows, indptr, indices, data, x, out, mark, mark_out, zero, floor = fn.args
    else:
        n, indptr, indices, data, x, out = fn.args
    for arg in fn.args[1:]:
        arg.add_attribute("noalias")

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
    acc = [b.phi(ty.vec, f"acc{k}") for k in range(ty.n_vec)]
    for a in acc:
        a.add_incoming(ty.zeros, blocks["row"])
    seen = None
    if masked:
        seen = b.phi(i8, "seen")
        seen.add_incoming(i8(0), blocks["row"])
    b.cbranch(b.icmp_signed("<", jj, hi), blocks["nz"], blocks["end"])

    b.position_at_end(blocks["nz"])
    if prefetch:  # read, keep in all cache levels, data
        row_ahead, _ = state_row(b, b.load(b.gep(indices, [b.add(jj, i64(prefetch))])))
        ty.prefetch_row(b, row_ahead, i64(0), write=False)
    xrow, m = state_row(b, b.load(b.gep(indices, [jj])))
    splat = ty.splat(b, b.load(b.gep(data, [jj])))
    for a, ptr in zip(acc, ty.row_vectors(b, xrow, i64(0)), strict=True):
        a.add_incoming(b.call(ty.fma, [splat, b.load(ptr, align=4), a]), blocks["nz"])
    if masked:
        seen.add_incoming(b.or_(seen, m), blocks["nz"])
    jj.add_incoming(b.add(jj, i64(1)), blocks["nz"])
    b.branch(blocks["head"])

    b.position_at_end(blocks["end"])  # store the row once
    if masked:  # entries under the row's floor are stored as zero; marked if any was kept
        acc, any_kept = ty.floored(b, acc, b.load(b.gep(floor, [i])))
        seen = b.and_(seen, any_kept)
    for a, dst in zip(acc, ty.row_vectors(b, out, i), strict=True):
        store = b.store(a, dst, align=VECTOR_BYTES if streaming else 4)
        if streaming:
            store.set_metadata("nontemporal", mod.add_metadata([ty.i32(1)]))
    if masked:
        b.store(seen, b.gep(mark_out, [i]))
    nxt = b.add(t, i64(1))
    t.add_incoming(nxt, blocks["end"])
    b.cbranch(b.icmp_signed("<", nxt, n), blocks["row"], blocks["done"])
    b.position_at_end(blocks["done"])
    b.ret_void()
    return str(mod)


def _push_ir(value: np.dtype, index: np.dtype, width: int, prefetch: int) -> str:
    """LLVM IR of ``i64 spmm(i64 n, idx* cols, idx* indptr, idx* indices, val* data, val* x,
    val* out, i8* mark_out, idx* rows, val* floor)``: A @ x by columns (A in CSC: ``indptr``,
    row ``indices`` sorted in each column, ``data``) over the ``n`` columns listed (ascending),
    the rows of x elsewhere taken as zero. For each listed column j its state row is loaded
    once and each nonzero (i, v) adds v · x[j, :] to out[i, :] (one fused multiply-add a
    vector, read and written back); a row reached the first time (``mark_out[i]`` 0) is
    appended to ``rows``. Then each row reached: entries under ``floor[i]`` in magnitude set to
    zero and ``mark_out[i]`` = whether any entry was kept. Returns the number of rows reached.
    With the columns ascending each output row receives its terms in CSR order, the order
    ``_ir``'s row kernel sums them in, so on an ``out`` that starts at zero every row is bit
    for bit the masked product's."""
    from llvmlite import ir

    mod = ir.Module(name="bookindex_push")
    ty = _Types(mod, value, index, width)
    i8, i64 = ty.i8, ty.i64
    idx_p, val_p = ty.idx.as_pointer(), ty.val.as_pointer()
    args = [i64, idx_p, idx_p, idx_p, val_p, val_p, val_p, ty.i8p, idx_p, val_p]
    fn = ir.Function(mod, ir.FunctionType(i64, args), name="spmm")
    n, cols, indptr, indices, data, x, out, mark_out, rows, floor = fn.args
    for arg in fn.args[1:]:
        arg.add_attribute("noalias")
    names = ("entry", "col", "head", "nz", "end", "floor", "row", "done")
    blocks = {k: fn.append_basic_block(k) for k in names}
    b = ir.IRBuilder(blocks["entry"])
    count = b.alloca(i64, name="count")  # rows reached so far (promoted to a register)
    b.store(i64(0), count)
    b.cbranch(b.icmp_signed(">", n, i64(0)), blocks["col"], blocks["floor"])
    b.position_at_end(blocks["col"])  # t in [0, n): column j = cols[t]
    t = b.phi(i64, "t")
    t.add_incoming(i64(0), blocks["entry"])
    j = b.sext(b.load(b.gep(cols, [t])), i64)
    xv = [b.load(ptr, align=4) for ptr in ty.row_vectors(b, x, j)]
    lo = b.sext(b.load(b.gep(indptr, [j])), i64)
    hi = b.sext(b.load(b.gep(indptr, [b.add(j, i64(1))])), i64)
    b.branch(blocks["head"])
    b.position_at_end(blocks["head"])
    jj = b.phi(i64, "jj")
    jj.add_incoming(lo, blocks["col"])
    b.cbranch(b.icmp_signed("<", jj, hi), blocks["nz"], blocks["end"])
    b.position_at_end(blocks["nz"])
    if prefetch:  # the output row of the nonzero ``prefetch`` places ahead, for writing
        ahead = b.sext(b.load(b.gep(indices, [b.add(jj, i64(prefetch))])), i64)
        ty.prefetch_row(b, out, ahead, write=True)
    i_idx = b.load(b.gep(indices, [jj]))
    i = b.sext(i_idx, i64)
    splat = ty.splat(b, b.load(b.gep(data, [jj])))
    for k, dst in enumerate(ty.row_vectors(b, out, i)):
        b.store(b.call(ty.fma, [splat, xv[k], b.load(dst, align=4)]), dst, align=4)
    # a row seen the first time is listed (branch-free: the slot is written either way and
    # the count moves only for a new row)
    seen_at = b.gep(mark_out, [i])
    new = b.zext(b.icmp_unsigned("==", b.load(seen_at), i8(0)), i64)
    c = b.load(count)
    b.store(i_idx, b.gep(rows, [c]))
    b.store(b.add(c, new), count)
    b.store(i8(1), seen_at)
    jj.add_incoming(b.add(jj, i64(1)), blocks["nz"])
    b.branch(blocks["head"])
    b.position_at_end(blocks["end"])
    nxt = b.add(t, i64(1))
    t.add_incoming(nxt, blocks["end"])
    b.cbranch(b.icmp_signed("<", nxt, n), blocks["col"], blocks["floor"])

    b.position_at_end(blocks["floor"])  # each row reached: its floor, and whether it kept any
    total = b.load(count)
    b.cbranch(b.icmp_signed(">", total, i64(0)), blocks["row"], blocks["done"])
    b.position_at_end(blocks["row"])
    u = b.phi(i64, "u")
    u.add_incoming(i64(0), blocks["floor"])
    i = b.sext(b.load(b.gep(rows, [u])), i64)
    ptrs = ty.row_vectors(b, out, i)
    values, any_kept = ty.floored(b, [b.load(p, align=4) for p in ptrs], b.load(b.gep(floor, [i])))
    for v, dst in zip(values, ptrs, strict=True):
        b.store(v, dst, align=4)
    b.store(any_kept, b.gep(mark_out, [i]))
    nxt = b.add(u, i64(1))
    u.add_incoming(nxt, blocks["row"])
    b.cbranch(b.icmp_signed("<", nxt, total), blocks["row"], blocks["done"])
    b.position_at_end(blocks["done"])
    b.ret(b.load(count))
    return str(mod)


def _function(
    value: np.dtype,
    index: np.dtype,
    width: int,
    prefetch: int,
    streaming: bool,
    masked: bool,
    push: bool = False,
):
    key = (value.str, index.str, width, prefetch, streaming, masked, push)
    with _lock:
        if key not in _compiled:
            from llvmlite import binding as llvm

            machine = _llvm()
            if push:
                text = _push_ir(value, index, width, prefetch)
            else:
                text = _ir(value, index, width, prefetch, streaming, masked)
            module = llvm.parse_assembly(text)
            module.verify()
            engine = llvm.create_mcjit_compiler(module, machine)
            engine.finalize_object()
            _engines.append(engine)
            address = engine.get_function_address("spmm")
            p = ctypes.c_void_p
            args = (p,) * (9 if push else 10 if masked else 5)
            result = ctypes.c_int64 if push else None
            _compiled[key] = ctypes.CFUNCTYPE(result, ctypes.c_int64, *args)(address)
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
        self._no_floor: np.ndarray | None = None  # masked products' default floor: zeros

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
        floor: np.ndarray | None = None,
    ) -> np.ndarray:
        """The rows ``rows`` (sorted; default every row) of A @ x written into ``out``, reading
        a row j of ``x`` only where ``mark[j]`` (uint8) is set: where every unmarked row of x
        is zero, each row written is bit for bit the plain product's (the same fused
        multiply-adds in the same order, the unmarked ones on a row of zeros). ``floor``
        (one value a row of A, A's dtype; default zeros): an entry of row i whose magnitude is
        under ``floor[i]`` is written as zero (each entry on its own, so a column's result
        never depends on the other columns). ``mark_out[i]`` (uint8) of each row written: 1
        where a nonzero of row i lies in a marked column and an entry of the row was kept,
        else 0. Rows not listed are left as they are, in ``out`` and in ``mark_out``."""
        w, streaming = self._check(x, out, streaming)
        n, _ = self.shape
        floor = self._marks_and_floor(mark, mark_out, floor)
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
            floor.ctypes.data,
        )
        return out

    def _marks_and_floor(
        self, mark: np.ndarray, mark_out: np.ndarray, floor: np.ndarray | None
    ) -> np.ndarray:
        """Checks a masked product's marks and floor; the floor (zeros when None)."""
        n, m = self.shape
        for name, a, size in (("mark", mark, m), ("mark_out", mark_out, n)):
            if a.dtype != np.uint8 or a.shape != (size,) or not a.flags.c_contiguous:
                raise ValueError(f"CsrKernel: {name} must be {size} contiguous uint8")
        if floor is None:
            if self._no_floor is None:
                self._no_floor = np.zeros(n, self.dtype)
            return self._no_floor
        if floor.dtype != self.dtype or floor.shape != (n,) or not floor.flags.c_contiguous:
            raise ValueError(f"CsrKernel: floor must be {n} contiguous {self.dtype}")
        return floor

    def marked_nnz(self, mark: np.ndarray) -> int:
        """The number of nonzeros of A in the columns ``mark`` sets."""
        return int(self._structure()[3][mark.view(bool)].sum())

    def _structure(self) -> tuple[np.ndarray, ...]:
        """A by column, built at the first call: CSC indptr and row indices (sorted in each
        column, padded for the push's look-ahead; the kernel's index type), the values, and the
        nonzeros per column."""
        if self._columns is None:
            csc = sp.csr_matrix(
                (self.data, self.indices[: self.nnz], self.indptr), shape=self.shape
            ).tocsc()
            csc.sort_indices()
            index = self.indptr.dtype
            rows = np.zeros(csc.nnz + max(self.prefetch, 1), dtype=index)  # padded: look-ahead
            rows[: csc.nnz] = csc.indices
            self._columns = (
                np.ascontiguousarray(csc.indptr, dtype=index),
                rows,
                np.ascontiguousarray(csc.data, dtype=self.dtype),
                np.diff(csc.indptr.astype(np.int64)),
            )
        return self._columns

    def push(
        self,
        x: np.ndarray,
        out: np.ndarray,
        mark: np.ndarray,
        mark_out: np.ndarray,
        floor: np.ndarray | None = None,
    ) -> np.ndarray:
        """A @ x by the marked columns alone (a push: the work is the marked columns' nonzeros,
        not the rows they reach), written into ``out``, which must be zero on every row a
        marked column reaches; with ``mark`` and ``floor`` as in ``masked``, the rows reached
        are bit for bit ``masked``'s (the floor applied in the same call), rows not reached are
        left as they are, and ``mark_out`` is what ``masked`` over every row sets. Returns the
        rows reached, in the order first reached."""
        w, _ = self._check(x, out, False)
        n, _ = self.shape
        floor = self._marks_and_floor(mark, mark_out, floor)
        indptr, indices, data, _ = self._structure()
        cols = np.flatnonzero(mark).astype(indptr.dtype)
        listed = np.empty(n + 1, indptr.dtype)  # one slot more: the branch-free append
        mark_out[:] = 0  # the kernel lists a row where its mark is still 0
        fn = _function(self.dtype, indptr.dtype, w, self.prefetch, False, False, push=True)
        count = fn(
            cols.size,
            cols.ctypes.data,
            indptr.ctypes.data,
            indices.ctypes.data,
            data.ctypes.data,
            x.ctypes.data,
            out.ctypes.data,
            mark_out.ctypes.data,
            listed.ctypes.data,
            floor.ctypes.data,
        )
        return listed[:count]

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
