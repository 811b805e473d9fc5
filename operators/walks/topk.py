"""Top-k per row or per column of a score matrix (NumPy or CuPy), read in place: what the walk
engine and ZoomRAG rank documents with."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

TOPK_BLOCK = 64  # rows per block whose maxima bound the top-k threshold


def host(a: Any) -> Any:
    """A NumPy array of ``a`` (a CuPy array is copied to the host)."""
    return a.get() if type(a).__module__.startswith("cupy") else a


def top_k_rows(scores: Any, k: int, xp: ModuleType = np) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``scores`` (B × n, NumPy or CuPy), the ``min(k, n)`` best columns, best
    first, ties at equal score by smaller column: (ids int64, scores) on the host."""
    return top_k_columns(scores.T, k, xp)


def top_k_columns(scores: Any, k: int, xp: ModuleType = np) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``scores`` (n × B, NumPy or CuPy, any strides: read in place), the
    ``min(k, n)`` best rows, best first, ties at equal score by smaller row: (ids B × k int64,
    scores B × k) on the host. The k-th largest maximum of blocks of ``TOPK_BLOCK`` rows is a
    threshold that at least k entries of the column reach, so only entries at or above it are
    sorted."""
    n, nq = scores.shape
    k = min(k, n)
    if k == 0 or nq == 0:
        return np.zeros((nq, k), dtype=np.int64), np.zeros((nq, k), dtype=str(scores.dtype))
    nb = n // TOPK_BLOCK
    maxima = [] if nb == 0 else [scores[: nb * TOPK_BLOCK].reshape(nb, TOPK_BLOCK, nq).max(1)]
    if n % TOPK_BLOCK:
        maxima.append(scores[nb * TOPK_BLOCK :].max(axis=0, keepdims=True))
    maxima = xp.concatenate(maxima)
    if maxima.shape[0] >= k:
        floor = -xp.partition(-maxima, k - 1, axis=0)[k - 1]
    else:  # fewer blocks than k: every entry is a candidate
        floor = scores.min(axis=0)
    rows, cols = xp.nonzero(scores >= floor[None, :])
    vals, rows, cols = host(scores[rows, cols]), host(rows), host(cols)
    order = np.lexsort((rows, -vals, cols))  # by column, best first, ties by smaller row
    starts = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=nq))[:-1]])
    take = order[(starts[:, None] + np.arange(k)).ravel()]
    return rows[take].reshape(nq, k).astype(np.int64), vals[take].reshape(nq, k)
