"""BM25 (the ``bm25s`` package) over a list of texts, built once: every text's score for one
query (the lexical half of the query API's hybrid relevance, over the nodes of an index) and
the top-k texts for a batch of queries (the ``bm25`` passage-retrieval baseline, over the
documents). Texts and queries are tokenised alike (English stopwords removed). An index is
saved and loaded whole (``bm25s``'s own files: ``operators.query.bm25_store`` keeps them beside
the index)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

STOPWORDS = "en"
DEFAULT_B = 0.75  # length normalisation b of bm25s (and Lucene): 0, none; 1, full


class Bm25:
    def __init__(self, texts: list[str], b: float = DEFAULT_B) -> None:
        """``b``: how much a text's length discounts its term frequencies (short texts score
        higher the larger it is)."""
        import bm25s

        started = time.perf_counter()
        self._bm25s = bm25s
        self.n = len(texts)
        self.index = bm25s.BM25(b=b)
        self.index.index(self.tokenize(texts), show_progress=False)
        self.build_s = time.perf_counter() - started

    def tokenize(self, texts: list[str]) -> list[list[str]]:
        return self._bm25s.tokenize(
            texts, stopwords=STOPWORDS, show_progress=False, return_ids=False
        )

    def save(self, directory: Path) -> None:
        """The index's files in ``directory`` (``bm25s``'s save)."""
        self.index.save(str(directory))

    @classmethod
    def load(cls, directory: Path) -> Bm25:
        """An index ``save`` wrote (``build_s``: the seconds it took to read)."""
        import bm25s

        started = time.perf_counter()
        index = bm25s.BM25.load(str(directory), show_progress=False)
        bm25 = cls.__new__(cls)
        bm25._bm25s, bm25.index = bm25s, index
        bm25.n = len(index.get_scores([" "]))  # the texts it holds (a word none has)
        bm25.build_s = time.perf_counter() - started
        return bm25

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
