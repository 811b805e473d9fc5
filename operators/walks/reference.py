"""References for the walk engine's tests: a Doc-Zoom walk of one query alone on its own graph,
built and iterated densely (independent of the batched engine's code), and the naive coupled
batch (every query an extra node of one graph), whose mass leaks between queries."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from bookindex.operators.config import WalkConfig
from bookindex.operators.walks.engine import F64, WalkEngine, _inv, unit_rows


def reference_doc_zoom_single(
    doc_vectors: np.ndarray,
    doc_entity: Any,
    query_vector: np.ndarray,
    query_entity: Any,
    config: WalkConfig | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense reference: one query alone on its own (1+n_d+n_e)-node graph, built and iterated
    densely. Returns (top-k ids, all doc scores, all entity scores). For tests only."""
    config = config or WalkConfig()
    T, alpha, n_std = config.steps, config.alpha, config.n_std
    x = unit_rows(np, np.asarray(doc_vectors, dtype=F64))
    q = unit_rows(np, np.asarray(query_vector, dtype=F64).ravel())
    nd = x.shape[0]
    m = (sp.csr_matrix(doc_entity).toarray() != 0).astype(F64)
    he = (sp.csr_matrix(query_entity).toarray().ravel() != 0).astype(F64)
    e = np.exp(x @ x.T)
    np.fill_diagonal(e, np.nan)
    thr = np.nanmean(e, axis=1) + n_std * np.nanstd(e, axis=1)
    d = np.where(e > thr[:, None], e, 0.0)  # NaN diagonal compares False
    if config.max_doc_links:  # each row keeps its max_doc_links largest, ties by smaller column
        for i in range(nd):
            ranked = sorted(np.flatnonzero(d[i]), key=lambda j, i=i: (-d[i, j], j))
            d[i, ranked[config.max_doc_links :]] = 0.0
    d = d / (d[d > 0].mean() if (d > 0).any() else 1)
    w = np.exp(x @ q)
    w = np.where(w > w.mean() + n_std * w.std(), w, 0.0)
    w = w / (w[w > 0].mean() if (w > 0).any() else 1)
    a = np.block([[np.zeros((1, 1)), w[None], he[None]], [w[:, None], d, m]])
    a = np.vstack([a, np.hstack([he[:, None], m.T, np.zeros((m.shape[1],) * 2)])])
    a = a * _inv(np, a.sum(axis=0))  # column-normalised
    r = r0 = np.eye(a.shape[0], 1).ravel()
    for _ in range(T):
        r = (1 - alpha) * (a @ r) + alpha * r0
    docs = r[1 : 1 + nd]
    return np.lexsort((np.arange(nd), -docs))[: config.top_docs], docs, r[1 + nd :]


def coupled_doc_zoom(
    engine: WalkEngine,
    query_vectors: Any,
    query_entity: Any,
    k: int | None = None,
    config: WalkConfig | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Naive baseline: all queries are extra nodes of one graph (mass leaks between them)."""
    config = config or engine.config
    T, alpha = config.steps, config.alpha
    b, xp = engine.backend, engine.backend.xp
    hb, hj, hv, nq = engine.query_links(query_vectors, query_entity)
    s = engine.S.tocoo()
    rows = xp.concatenate([s.row.astype(xp.int64) + nq, hb, hj + nq])
    cols = xp.concatenate([s.col.astype(xp.int64) + nq, hj + nq, hb])
    vals = xp.concatenate([s.data.astype(F64), hv, hv])
    colsum = xp.bincount(cols, vals, minlength=nq + engine.N)
    a = b.coo_csr(vals / colsum[cols], rows, cols, (nq + engine.N,) * 2)
    r = r0 = xp.eye(nq + engine.N, nq, dtype=b.dtype)
    for _ in range(T):
        r = (1 - alpha) * (a @ r) + alpha * r0
    return engine._finish(r[nq:], config.top_docs if k is None else k)
