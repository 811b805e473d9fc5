"""The compiled CSR × dense kernel of the CPU walk against SciPy's product."""

import numpy as np
import pytest
import scipy.sparse as sp

from bookindex.operators.walks.kernel import CsrKernel, StatePool, aligned_empty, kernel_or_reason


def _matrix(n: int, m: int, dtype, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    a = sp.random(n, m, density=0.05, format="csr", dtype=np.float64, random_state=rng)
    a = a.tolil()
    a[3, :] = 0  # an empty row
    a[:, 5] = 0  # an empty column
    a[7, : min(m, 40)] = rng.random(min(m, 40))  # a long row
    return sp.csr_matrix(a).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("aligned", [True, False])
def test_kernel_matches_scipy(dtype, index, aligned):
    a = _matrix(300, 250, dtype)
    kernel = CsrKernel(a, index=index)
    rng = np.random.default_rng(1)
    for width in (kernel.lanes, 3 * kernel.lanes, 256):
        x = rng.standard_normal((250, width)).astype(dtype)
        flat = aligned_empty((300 * width + 1,), dtype)  # shifted by one element: unaligned
        out = (flat[:-1] if aligned else flat[1:]).reshape(300, width)
        assert (out.ctypes.data % 64 == 0) == aligned  # streaming stores only when aligned
        got = kernel(x, out, streaming=aligned)
        assert got is out
        ref = a.astype(np.float64) @ x.astype(np.float64)
        tol = 1e-5 if dtype == np.float32 else 1e-13
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
        assert not got[3].any()  # the empty row is written as zeros


def test_columns_do_not_mix():
    """Each column of a batch gets exactly (bit for bit) what it gets alone, at any width."""
    a = _matrix(200, 200, np.float32, seed=2)
    kernel = CsrKernel(a)
    x = np.random.default_rng(3).random((200, 64), dtype=np.float32)
    batch = kernel(x, aligned_empty((200, 64), np.float32))
    for lo in range(0, 64, 16):
        alone = np.zeros((200, 16), np.float32)
        alone[:, 0] = x[:, lo]
        got = kernel(alone, aligned_empty((200, 16), np.float32))
        np.testing.assert_array_equal(got[:, 0], batch[:, lo])
        np.testing.assert_array_equal(got[:, 1:], 0)


def test_bad_shapes_and_types_are_refused():
    kernel = CsrKernel(_matrix(20, 30, np.float32))
    with pytest.raises(ValueError, match="multiple of 16"):
        kernel(np.zeros((30, 10), np.float32), np.zeros((20, 10), np.float32))
    with pytest.raises(ValueError, match="C-ordered float32"):
        kernel(np.zeros((30, 16), np.float64), np.zeros((20, 16), np.float32))
    with pytest.raises(ValueError, match="must be"):
        kernel(np.zeros((31, 16), np.float32), np.zeros((20, 16), np.float32))
    with pytest.raises(TypeError):
        CsrKernel(sp.csr_matrix(np.eye(3, dtype=np.int64)))


def test_streaming_stores_need_alignment():
    kernel = CsrKernel(_matrix(20, 30, np.float32))
    flat = aligned_empty((20 * 16 + 1,), np.float32)
    with pytest.raises(ValueError, match="aligned"):
        kernel(np.zeros((30, 16), np.float32), flat[1:].reshape(20, 16), streaming=True)


def test_kernel_or_reason_compiles_here():
    kernel, reason = kernel_or_reason(_matrix(10, 10, np.float64))
    assert kernel is not None, reason


def test_state_pool_reuses_only_free_blocks():
    pool = StatePool(max_blocks=2)
    a = pool.empty((100, 64), np.float32)
    address = a.ctypes.data
    assert address % 64 == 0
    b = pool.empty((100, 64), np.float32)
    assert not np.shares_memory(a, b)
    part = a[:, :8]  # a view keeps its block busy
    del a
    c = pool.empty((100, 64), np.float32)
    assert not np.shares_memory(c, part) and c.ctypes.data != address
    del part
    d = pool.empty((100, 64), np.float32)  # now the first block is free again
    assert d.ctypes.data == address and d.shape == (100, 64)
    e = pool.empty((64, 100), np.float32)  # same bytes, another shape
    assert e.shape == (64, 100) and not np.shares_memory(e, d)
    del d, e
    small = pool.empty((10, 16), np.float32)  # the pool is full: it replaces a free block
    del small
    again = pool.empty((10, 16), np.float32)
    assert len(pool._blocks) == 2 and any(again.base is owner for owner, _, _ in pool._blocks)


def test_walk_results_survive_later_walks():
    """Walk states come from the pool: a result still held is never handed out again."""
    from bookindex.operators.walks.engine import make_engine

    rng = np.random.default_rng(5)
    docs = rng.normal(size=(200, 16))
    doc_entity = sp.random(200, 300, density=0.02, format="csr", random_state=rng)
    engine = make_engine(device="cpu", dtype=np.float32).fit(docs, doc_entity)
    query_entity = sp.csr_matrix((40, 300))
    first, _ = engine.walk(rng.normal(size=(40, 16)), query_entity)
    kept = first.copy()
    for _ in range(3):
        engine.walk(rng.normal(size=(40, 16)), query_entity)
    np.testing.assert_array_equal(first, kept)
    assert kept.max() > 0


def test_unsorted_input_is_sorted_in_a_copy():
    a = sp.csr_matrix(
        (np.array([2.0, 1.0], np.float32), np.array([3, 0]), np.array([0, 2, 2])), shape=(2, 4)
    )
    assert not a.has_sorted_indices
    kernel = CsrKernel(a)
    np.testing.assert_array_equal(a.indices, [3, 0])  # the caller's matrix is untouched
    x = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)
    np.testing.assert_allclose(kernel(x, aligned_empty((2, 16), np.float32)), a @ x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_masked_product_is_the_plain_product_bit_for_bit(dtype):
    """A state zero outside its marked rows: the masked product over every row, and over the
    rows a marked column reaches (the others zero), give the plain product's bits; ``mark_out``
    is set exactly on the rows with a nonzero in a marked column."""
    a = _matrix(300, 300, dtype, seed=4)
    kernel = CsrKernel(a)
    rng = np.random.default_rng(5)
    for width in (kernel.lanes, 4 * kernel.lanes):
        for share in (0.01, 0.1, 0.5):
            mark = (rng.random(300) < share).astype(np.uint8)
            x = rng.random((300, width)).astype(dtype) * mark[:, None]
            plain = kernel(x, aligned_empty((300, width), dtype))
            expected = np.flatnonzero(abs(a) @ mark.astype(np.float64) > 0)
            out, mark_out = aligned_empty((300, width), dtype), np.full(300, 7, np.uint8)
            kernel.masked(x, out, mark, mark_out)
            np.testing.assert_array_equal(out.view(np.uint8), plain.view(np.uint8))
            assert np.flatnonzero(mark_out).tolist() == expected.tolist()
            assert set(mark_out.tolist()) <= {0, 1}
            rows = expected.astype(kernel.indptr.dtype)
            assert kernel.marked_nnz(mark) == int((a[:, mark > 0] != 0).sum())
            out = np.zeros((300, width), dtype)
            kernel.masked(x, out, mark, np.zeros(300, np.uint8), rows)
            np.testing.assert_array_equal(out.view(np.uint8), plain.view(np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        kernel.masked(x, out, mark.astype(bool), mark_out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_masked_product_with_a_floor_zeroes_each_small_entry_on_its_own(dtype):
    """A floor per row: every entry of the plain product under its row's floor (in magnitude)
    is written as zero, every other entry bit for bit as the plain product's; a row is marked
    only where it kept an entry. Each column is floored on its own, so a column multiplied
    alone gives the bits it gives beside others."""
    a = _matrix(300, 300, dtype, seed=6)
    kernel = CsrKernel(a)
    rng = np.random.default_rng(7)
    width = 2 * kernel.lanes
    mark = (rng.random(300) < 0.3).astype(np.uint8)
    x = (rng.random((300, width)) - 0.3).astype(dtype) * mark[:, None]
    plain = kernel(x, aligned_empty((300, width), dtype))
    floor = np.quantile(abs(plain), 0.6, axis=1).astype(dtype)  # drops about 60 % of each row
    floor[:5] = 0  # a floor of zero keeps the row as it is
    out, mark_out = aligned_empty((300, width), dtype), np.zeros(300, np.uint8)
    kernel.masked(x, out, mark, mark_out, floor=floor)
    kept = abs(plain) >= floor[:, None]
    assert 0.3 < kept.mean() < 0.5
    np.testing.assert_array_equal(out[kept].view(np.uint8), plain[kept].view(np.uint8))
    assert not out[~kept].any()
    reached = abs(a) @ mark.astype(np.float64) > 0
    assert np.flatnonzero(mark_out).tolist() == np.flatnonzero(reached & kept.any(1)).tolist()
    alone = aligned_empty((300, kernel.lanes), dtype)
    narrow = np.ascontiguousarray(x[:, kernel.lanes :])
    kernel.masked(narrow, alone, mark, np.zeros(300, np.uint8), floor=floor)
    np.testing.assert_array_equal(alone.view(np.uint8), out[:, kernel.lanes :].view(np.uint8))
    with pytest.raises(ValueError, match="floor"):
        kernel.masked(x, out, mark, mark_out, floor=floor.astype(np.float16))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_push_by_the_marked_columns_is_the_masked_product_bit_for_bit(dtype):
    """``push`` runs the product by the marked columns only: on an output that starts at zero,
    every row is bit for bit the masked product's (the same terms in the same order), with and
    without a floor, and it marks the same rows; rows no marked column reaches stay as they
    were."""
    a = _matrix(300, 300, dtype, seed=8)
    kernel = CsrKernel(a)
    rng = np.random.default_rng(9)
    for width in (kernel.lanes, 3 * kernel.lanes):
        for share in (0.01, 0.1, 0.6):
            mark = (rng.random(300) < share).astype(np.uint8)
            x = rng.random((300, width)).astype(dtype) * mark[:, None]
            masked = aligned_empty((300, width), dtype)
            floor = np.full(300, 0.05, dtype)
            for f in (None, floor):
                masked_marks, pushed_marks = np.zeros(300, np.uint8), np.zeros(300, np.uint8)
                kernel.masked(x, masked, mark, masked_marks, floor=f)
                pushed = np.zeros((300, width), dtype)
                rows = kernel.push(x, pushed, mark, pushed_marks, f)
                np.testing.assert_array_equal(pushed.view(np.uint8), masked.view(np.uint8))
                np.testing.assert_array_equal(pushed_marks, masked_marks)
                reached = np.flatnonzero(abs(a) @ mark.astype(np.float64) > 0)
                assert sorted(rows.tolist()) == reached.tolist()
    left = np.full((300, kernel.lanes), 7, dtype)
    mark = np.zeros(300, np.uint8)
    mark[3] = 1
    kernel.push(np.ones((300, kernel.lanes), dtype), left, mark, np.zeros(300, np.uint8))
    untouched = np.setdiff1d(np.arange(300), np.flatnonzero(a[:, 3].toarray()))
    assert (left[untouched] == 7).all()
