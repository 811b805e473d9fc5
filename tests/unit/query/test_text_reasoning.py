"""BookRAG's Text_Reasoning (``bookrag_ops.text_reasoning``) says what it scores by: the hybrid
dense + BM25 relevance with or without a generative backend (whose ``rerank`` is only the
embedding cosine), and a configured cross-encoder fused with it, BM25 kept."""

from __future__ import annotations

import numpy as np

from bookindex.operators.query.bookrag_ops import text_reasoning
from bookindex.operators.query.read_model import ReadModel
from bookindex.operators.query.scoring import minmax, text_scores
from tests.conftest import PAPER
from tests.unit.query.test_query_generative import ScriptedModel

QUESTION = "dataset statistics of the Amazon datasets"


class Reversing:
    """A cross-encoder double: scores each text by its length (records the calls)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, query: str, texts: list[str], cosines: np.ndarray) -> np.ndarray:
        self.calls.append((query, len(texts)))
        return np.asarray([len(t) for t in texts], np.float32)


def test_text_reasoning_keeps_bm25_with_a_model_and_fuses_a_cross_encoder(paper_tables, index):
    class NoRerank(ScriptedModel):
        def rerank(self, query, candidates):
            raise AssertionError("the embedding cosine is not a reranker")

    generative = ReadModel.from_tables(paper_tables, NoRerank({}))
    leaves = generative.leaves(generative.find_document(PAPER))
    vector = generative.embed([QUESTION])[0]
    hybrid = text_scores(index, QUESTION, leaves, vector)
    assert np.allclose(text_reasoning(generative, QUESTION, leaves, vector), hybrid)
    crossed = Reversing()
    fused = text_reasoning(generative, QUESTION, leaves, vector, crossed)
    lengths = np.asarray([len(generative.node_text(int(p))[:2000]) for p in leaves], np.float32)
    assert crossed.calls == [(QUESTION, len(leaves))]
    assert np.allclose(fused, 0.5 * minmax(lengths) + 0.5 * hybrid)
    assert not np.allclose(fused, hybrid)
