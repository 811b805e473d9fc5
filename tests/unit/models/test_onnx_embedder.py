"""The ONNX Runtime path of the offline embedder gives today's (torch) vectors: the same
packaged MiniLM, exported on first use into a cache directory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from operators.config import ModelConfig
from operators.models.offline import OfflineBackend

CORPUS = Path(__file__).resolve().parents[4] / "shared" / "data" / "multihop" / "hotpotqa"


@pytest.fixture(scope="module")
def texts() -> list[str]:
    out = []
    with open(CORPUS / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out.append(f"{row['title']} {row['text']}")
            if len(out) == 60:
                break
    # short entity names and an empty text too: every length the enrich stage embeds
    return [*out, "Paris", "", "Lester Smith"]


@pytest.fixture(scope="module")
def torch_vectors(texts: list[str]) -> np.ndarray:
    return OfflineBackend(ModelConfig(embed_runtime="torch")).embed(texts)


def test_onnx_vectors_are_the_torch_vectors(texts, torch_vectors, tmp_path_factory) -> None:
    cache = str(tmp_path_factory.mktemp("onnx"))
    backend = OfflineBackend(ModelConfig(embed_runtime="onnx", model_cache=cache))
    vectors = backend.embed(texts)
    assert vectors.shape == torch_vectors.shape == (len(texts), backend.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    cosines = (vectors * torch_vectors).sum(axis=1)
    assert cosines.min() > 0.9999
    assert list(Path(cache).glob("minilm-*.onnx")), "the export is kept for the next worker"


def test_int8_vectors_stay_within_cosine_099(texts, torch_vectors, tmp_path_factory) -> None:
    cache = str(tmp_path_factory.mktemp("onnx8"))
    vectors = OfflineBackend(ModelConfig(embed_runtime="onnx-int8", model_cache=cache)).embed(texts)
    cosines = (vectors * torch_vectors).sum(axis=1)
    assert cosines[:60].mean() > 0.99
    assert cosines[:60].min() > 0.985  # passages; a one-word name drops to about 0.97
    assert cosines.min() > 0.95
    # nearest neighbours among the passages are those of the float vectors
    passages = slice(0, 60)
    same = (vectors[passages] @ vectors[passages].T).argsort(axis=1)[:, -2]
    ref = (torch_vectors[passages] @ torch_vectors[passages].T).argsort(axis=1)[:, -2]
    assert (same == ref).mean() >= 0.95
