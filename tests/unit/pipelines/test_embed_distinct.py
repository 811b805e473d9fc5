"""The enrich stage embeds each distinct text of a batch once (node texts, sentences and entity
names together) and gets the vectors a call over every text gives."""

from __future__ import annotations

import numpy as np

from bookindex.operators.config import ModelConfig
from bookindex.operators.models.offline import OfflineBackend
from bookindex.operators.structure.passages import read_passages
from bookindex.pipelines.enrich_worker import _split, embed_distinct
from tests.unit.graph.test_extract_documents import CORPUS


class Counted:
    def __init__(self, backend: OfflineBackend) -> None:
        self.backend, self.calls = backend, []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.backend.embed(texts)


def test_each_distinct_text_is_embedded_once() -> None:
    passages = read_passages(str(CORPUS / "corpus.jsonl"))[:20]
    titles = [p.title for p in passages]
    texts = [f"{p.title} {p.text}" for p in passages] + titles + titles[:5] + [""]
    # fp32: its vector of a text does not depend on the batch (int8's activations are
    # quantized per run, so its vectors move with their batch mates, within cosine 0.99)
    backend = Counted(OfflineBackend(ModelConfig(embed_runtime="onnx")))
    vectors = embed_distinct(backend, texts)
    assert len(backend.calls) == 1 and backend.calls[0] == list(dict.fromkeys(texts))
    assert len(backend.calls[0]) < len(texts)
    every = backend.backend.embed(texts)
    assert vectors.shape == every.shape
    assert (vectors * every).sum(axis=1).min() > 0.9999
    assert np.array_equal(vectors[20:25], vectors[40:45])  # a recurring title: one vector
    first, second, third = _split(vectors, [20, 25, 1])
    assert first.shape[0] == 20 and second.shape[0] == 25 and third.shape[0] == 1
