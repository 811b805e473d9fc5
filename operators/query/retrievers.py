"""The baseline retrievers over documents: BM25 (the ``bm25s`` package) and dense top-k over
the index's own document vectors. Both answer a batch of queries at once and return, per
query, (document positions, scores) best first."""

from __future__ import annotations

import numpy as np


class Bm25Retriever:
    def __init__(self, texts: list[str]) -> None:
        import bm25s

        self._bm25s = bm25s
        self.n = len(texts)
        self.index = bm25s.BM25()
        self.index.index(self._tokenize(texts), show_progress=False)

    def _tokenize(self, texts: list[str]):
        return self._bm25s.tokenize(texts, stopwords="en", show_progress=False)

    def search(self, queries: list[str], k: int) -> list[tuple[list[int], list[float]]]:
        k = min(k, self.n)
        if not queries or k == 0:
            return [([], []) for _ in queries]
        ids, scores = self.index.retrieve(self._tokenize(queries), k=k, show_progress=False)
        return [(list(map(int, i)), list(map(float, s))) for i, s in zip(ids, scores, strict=True)]

    def scores(self, queries: list[str]) -> np.ndarray:
        """Every document's BM25 score for each query, (n_queries, n_docs)."""
        out = np.zeros((len(queries), self.n), np.float32)
        for q, (ids, scores) in enumerate(self.search(queries, self.n)):
            out[q, ids] = scores
        return out


class DenseRetriever:
    def __init__(self, doc_vectors: np.ndarray) -> None:
        self.doc_vectors = np.ascontiguousarray(doc_vectors, np.float32)

    def search(self, query_vectors: np.ndarray, k: int) -> list[tuple[list[int], list[float]]]:
        sims = np.asarray(query_vectors, np.float32) @ self.doc_vectors.T
        k = min(k, sims.shape[1])
        out = []
        for row in sims:
            top = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
            top = top[np.lexsort((top, -row[top]))]
            out.append((top.tolist(), row[top].tolist()))
        return out
