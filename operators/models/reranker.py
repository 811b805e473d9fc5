"""The entity-resolution reranker (BookRAG Alg. 1's rerank step): a sentence-transformers
cross-encoder from a local directory (``ModelConfig.rerank_model``) scores each (new name,
candidate name) pair; the resolver's gradient rule then runs on those scores instead of the
rescaled cosines. Loaded once per worker by the stage that resolves (pipelines/enrich_worker.py,
pipelines/entity_graph.py)."""

from __future__ import annotations

import os

import numpy as np


class CrossEncoderReranker:
    """``rerank(name, candidate_names, cosines) -> scores`` in [0, 1] (sigmoid of the
    cross-encoder's logit; the cosines are not used)."""

    def __init__(self, path: str, threads: int = 0) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import CrossEncoder

        if threads:
            torch.set_num_threads(threads)
        self.model = CrossEncoder(path, device="cpu")
        self.path = path

    def __call__(self, name: str, candidates: list[str], cosines: np.ndarray) -> np.ndarray:
        if not candidates:
            return np.zeros(0, np.float32)
        logits = np.asarray(
            self.model.predict([(name, c) for c in candidates], show_progress_bar=False),
            np.float32,
        ).reshape(len(candidates), -1)[:, 0]
        return (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)
