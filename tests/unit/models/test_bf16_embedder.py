"""The bf16 path of the offline embedder (opt-in, on CPUs with native bfloat16) gives
today's float32 vectors within rounding: the same packaged MiniLM, its linear layers in
bfloat16, everything else in float32."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bookindex.operators.config import ModelConfig
from bookindex.operators.models import offline
from bookindex.operators.models.bf16_embedder import Bf16Embedder
from bookindex.operators.models.offline import OfflineBackend, embedding_model_path
from tests.conftest import SHARED_DATA

CORPUS = SHARED_DATA / "multihop" / "musique"


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """What the enrich stage embeds for MuSiQue passages: "title text", the sentences of the
    text, short entity names, and an empty text (embedded as " ")."""
    out: list[str] = []
    with open(CORPUS / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out.append(f"{row['title']} {row['text']}")
            out += [s.strip() + "." for s in row["text"].split(". ")[:2] if s.strip()]
            if len(out) >= 90:
                break
    return [*out, "Paris", " ", "Lester Smith", "the United States Congress"]


@pytest.fixture(scope="module")
def float_vectors(texts: list[str]) -> np.ndarray:
    return OfflineBackend(ModelConfig(embed_runtime="torch")).embed(texts)


@pytest.fixture(scope="module")
def embedder() -> Bf16Embedder:
    return Bf16Embedder(embedding_model_path())


def test_bf16_vectors_are_the_float_vectors_within_rounding(texts, float_vectors, embedder):
    vectors = embedder.encode(texts, 16, 384)
    assert vectors.shape == float_vectors.shape == (len(texts), 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    cosines = (vectors * float_vectors).sum(axis=1)
    assert cosines.min() > 0.9998, cosines.min()
    assert cosines.mean() > 0.99995
    # every text's nearest other text is the float vectors' one
    same = (vectors @ vectors.T - 2 * np.eye(len(texts))).argmax(axis=1)
    ref = (float_vectors @ float_vectors.T - 2 * np.eye(len(texts))).argmax(axis=1)
    assert (same == ref).all()


def test_a_texts_vector_does_not_depend_on_its_batch(texts, embedder) -> None:
    """Sorted, padded batches: each text's vector is the one it gets alone (no padding)."""
    together = embedder.encode(texts, 16, 384)
    alone = np.concatenate([embedder.encode([t], 1) for t in texts])
    assert ((together * alone).sum(axis=1) > 0.9999).all()


def test_bf16_runs_only_where_the_cpu_multiplies_bf16(monkeypatch) -> None:
    import bookindex.operators.models.bf16_embedder as bf16

    assert ModelConfig().embed_runtime == "onnx"  # the default: float32
    for native, runs in ((True, "bf16"), (False, "onnx")):
        monkeypatch.setattr(bf16, "native_bf16", lambda native=native: native)
        assert OfflineBackend(ModelConfig(embed_runtime="bf16")).runtime == runs
        assert offline.cpu_runtime("onnx-int8") == "onnx-int8"  # the others as configured
    assert OfflineBackend(ModelConfig(embed_runtime="torch")).runtime == "torch"
