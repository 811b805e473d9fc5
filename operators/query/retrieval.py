"""Passage retrieval over a document view: ZoomRAG (``operators.query.zoom``) and the two
baselines, BM25 (``operators.query.bm25``) over each document's title and text and dense top-k
over the documents' own vectors; one call for a batch of queries.

    retrieval = engine.retrieval                  # operators.query.engine.QueryEngine
    results = retrieval.retrieve(["who ...?", ...], method="zoom", k=10)
    # per query: [DocHit (rank order), with .chunks (Chunk-Zoom evidence) for zoom]
"""

from __future__ import annotations

import numpy as np

from bookindex.operators.query.bm25 import Bm25
from bookindex.operators.query.bm25_store import bm25_from_store
from bookindex.operators.query.registry import PASSAGE_METHODS
from bookindex.operators.query.zoom import DocHit, Zoom


class Retrieval:
    def __init__(self, zoom: Zoom) -> None:
        self.zoom = zoom
        self.view = zoom.view
        self.backend = zoom.backend
        self._bm25: Bm25 | None = None
        self.bm25_source = ""  # how the documents' BM25 index was had: "read" | "built"
        self._has_vectors: bool | None = None  # any non-zero document vector (read once)

    @property
    def bm25(self) -> Bm25:
        if self._bm25 is None:  # kept beside the index where the walk graph is
            found, self.bm25_source = bm25_from_store(
                self.view.texts, self.zoom.graph_dir, "documents"
            )
            self._bm25 = found
        return self._bm25

    def retrieve(self, queries: list[str], method: str, k: int) -> list[list[DocHit]]:
        if method not in PASSAGE_METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {PASSAGE_METHODS}")
        if not queries:
            return []
        if method == "bm25":
            return [self.zoom.hits(ids, s) for ids, s in self.bm25.search(queries, k)]
        if self._has_vectors is None:  # a scan of every vector: not once per request
            self._has_vectors = bool(np.any(self.view.doc_vectors))
        if not self._has_vectors:
            raise ValueError(
                f"the index holds no vectors (built with --no-enrich), and {method} ranks by "
                "them: re-index without --no-enrich, or use bm25"
            )
        vectors = self.backend.embed(queries)
        if method == "dense":
            found = dense_top_k(self.view.doc_vectors, vectors, k)
            return [self.zoom.hits(ids, s) for ids, s in found]
        return self.zoom.search(queries, vectors, k)


def dense_top_k(
    doc_vectors: np.ndarray, query_vectors: np.ndarray, k: int
) -> list[tuple[list[int], list[float]]]:
    """Per query, the k documents of highest cosine (ties: smaller position), best first."""
    sims = np.asarray(query_vectors, np.float32) @ np.ascontiguousarray(doc_vectors, np.float32).T
    k = min(k, sims.shape[1])
    out = []
    for row in sims:
        top = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
        top = top[np.lexsort((top, -row[top]))]
        out.append((top.tolist(), row[top].tolist()))
    return out
