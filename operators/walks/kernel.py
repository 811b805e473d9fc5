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

``CsrKernel`` is the interface; ``kernel_or_reason`` returns None (and why) where llvmlite is
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


def _ir(value: np.dtype, index: np.dtype, width: int, prefetch: int, streaming: bool) -> str:
    """LLVM IR of ``void spmm(i64 n, idx* indptr, idx* indices, val* data, val* x, val* out)``."""
    from llvmlite import ir

    val_t = ir.FloatType() if value == np.float32 else ir.DoubleType()
    idx_t = ir.IntType(8 * index.itemsize)
    i32, i64, i8p = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
    lanes = VECTOR_BYTES // value.itemsize
    n_vec = width // lanes
    vec = ir.VectorType(val_t, lanes)
    mod = ir.Module(name="bookindex_spmm")
    ptr = [idx_t.as_pointer(), idx_t.as_pointer(), val_t.as_pointer()]
    fnty = ir.FunctionType(ir.VoidType(), [i64, *ptr, val_t.as_pointer(), val_t.as_pointer()])
    fn = ir.Function(mod, fnty, name="spmm")
    n, indptr, indices, data, x, out = fn.args
    for arg in fn.args[1:]:
        arg.add_attribute("noalias")
    suffix = f"v{lanes}f{8 * value.itemsize}"
    fma = ir.Function(mod, ir.FunctionType(vec, [vec, vec, vec]), name=f"llvm.fma.{suffix}")
    pf_t = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    pf = ir.Function(mod, pf_t, name="llvm.prefetch.p0i8")

    blocks = {k: fn.append_basic_block(k) for k in ("entry", "row", "head", "nz", "end", "done")}
    b = ir.IRBuilder(blocks["entry"])
    b.branch(blocks["row"])
    b.position_at_end(blocks["row"])  # i in [0, n)
    i = b.phi(i64, "i")
    i.add_incoming(i64(0), blocks["entry"])
    lo = b.sext(b.load(b.gep(indptr, [i])), i64)
    hi = b.sext(b.load(b.gep(indptr, [b.add(i, i64(1))])), i64)
    b.branch(blocks["head"])
    b.position_at_end(blocks["head"])  # jj in [lo, hi), accumulators in registers
    jj = b.phi(i64, "jj")
    jj.add_incoming(lo, blocks["row"])
    acc = [b.phi(vec, f"acc{k}") for k in range(n_vec)]
    for a in acc:
        a.add_incoming(ir.Constant(vec, [0.0] * lanes), blocks["row"])
    b.cbranch(b.icmp_signed("<", jj, hi), blocks["nz"], blocks["end"])

    b.position_at_end(blocks["nz"])
    if prefetch:
        ahead = b.sext(b.load(b.gep(indices, [b.add(jj, i64(prefetch))])), i64)
        row_ahead = b.gep(x, [b.mul(ahead, i64(width))])
        for k in range(0, width, lanes):  # read, keep in all cache levels, data
            line = b.bitcast(b.gep(row_ahead, [i64(k)]), i8p)
            b.call(pf, [line, i32(0), i32(3), i32(1)])
    j = b.sext(b.load(b.gep(indices, [jj])), i64)
    v = b.load(b.gep(data, [jj]))
    splat = b.insert_element(ir.Constant(vec, ir.Undefined), v, i32(0))
    splat = b.shuffle_vector(
        splat, ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
    )
    xrow = b.gep(x, [b.mul(j, i64(width))])
    for k, a in enumerate(acc):
        xv = b.load(b.bitcast(b.gep(xrow, [i64(k * lanes)]), vec.as_pointer()), align=4)
        a.add_incoming(b.call(fma, [splat, xv, a]), blocks["nz"])
    jj.add_incoming(b.add(jj, i64(1)), blocks["nz"])
    b.branch(blocks["head"])

    b.position_at_end(blocks["end"])  # store the row once
    orow = b.gep(out, [b.mul(i, i64(width))])
    for k, a in enumerate(acc):
        dst = b.bitcast(b.gep(orow, [i64(k * lanes)]), vec.as_pointer())
        store = b.store(a, dst, align=VECTOR_BYTES if streaming else 4)
        if streaming:
            store.set_metadata("nontemporal", mod.add_metadata([i32(1)]))
    nxt = b.add(i, i64(1))
    i.add_incoming(nxt, blocks["end"])
    b.cbranch(b.icmp_signed("<", nxt, n), blocks["row"], blocks["done"])
    b.position_at_end(blocks["done"])
    b.ret_void()
    return str(mod)


def _function(value: np.dtype, index: np.dtype, width: int, prefetch: int, streaming: bool):
    key = (value.str, index.str, width, prefetch, streaming)
    with _lock:
        if key not in _compiled:
            from llvmlite import binding as llvm

            machine = _llvm()
            module = llvm.parse_assembly(_ir(value, index, width, prefetch, streaming))
            module.verify()
            engine = llvm.create_mcjit_compiler(module, machine)
            engine.finalize_object()
            _engines.append(engine)
            address = engine.get_function_address("spmm")
            p = ctypes.c_void_p
            _compiled[key] = ctypes.CFUNCTYPE(None, ctypes.c_int64, p, p, p, p, p)(address)
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

    def __call__(self, x: np.ndarray, out: np.ndarray, streaming: bool | None = None) -> np.ndarray:
        """Writes A @ x into ``out`` (n × w, C-ordered) and returns it. ``streaming``: store
        with non-temporal writes (needs a 64-byte aligned ``out``); default: when ``out`` is
        aligned and at least ``STREAM_MIN_BYTES``."""
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
        if n == 0:
            return out
        aligned = out.ctypes.data % VECTOR_BYTES == 0
        if streaming is None:
            streaming = aligned and out.nbytes >= STREAM_MIN_BYTES
        elif streaming and not aligned:
            raise ValueError("CsrKernel: streaming stores need a 64-byte aligned out")
        fn = _function(self.dtype, self.indptr.dtype, w, self.prefetch, streaming)
        fn(
            n,
            self.indptr.ctypes.data,
            self.indices.ctypes.data,
            self.data.ctypes.data,
            x.ctypes.data,
            out.ctypes.data,
        )
        return out


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
