"""BM25 (the ``bm25s`` package) over a list of texts, built once: every text's score for one
query (the lexical half of the query API's hybrid relevance, over the nodes of an index) and
the top-k texts for a batch of queries (the ``bm25`` passage-retrieval baseline, over the
documents). Texts and queries are tokenised alike (English stopwords removed)."""

from __future__ import annotations

import time

import numpy as np


class Bm25:
    def __init__(self, texts: list[str]) -> None:
        import bm25s

        started = time.perf_counter()
        self._bm25s = bm25s
        self.n = len(texts)
        self.index = bm25s.BM25()
        self.index.index(self.tokenize(texts), show_progress=False)
        self.build_s = time.perf_counter() - started

    def tokenize(self, texts: list[str]) -> list[list[str]]:
        return self._bm25s.tokenize(texts, stopwords="en", show_progress=False, return_ids=False)

    def scores(self, query: str) -> np.ndarray:
        """Every text's score for ``query`` (float32, zeros when no word of it is indexed)."""
        tokens = self.tokenize([query])[0]
        if not tokens:
            return np.zeros(self.n, np.float32)
        return np.asarray(self.index.get_scores(tokens), np.float32)

    def search(self, queries: list[str], k: int) -> list[tuple[list[int], list[float]]]:
        """Per query, the top-k texts (positions, scores), best first."""
        k = min(k, self.n)
        if not queries or k == 0:
            return [([], []) for _ in queries]
        ids, scores = self.index.retrieve(self.tokenize(queries), k=k, show_progress=False)
        return [(list(map(int, i)), list(map(float, s))) for i, s in zip(ids, scores, strict=True)]
