"""Which backend a ``ModelConfig`` names: loaded (``load_backend``, in the stage that owns it), or
only checked (``check_config``, ``embedding_width``: what a driver may ask without loading a
model). docs/architecture.md, "Models".
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from bookindex.operators.config import BACKENDS, ModelConfig
from bookindex.operators.models.base import ModelBackend, ModelError

Reranker = Callable[[str, list[str], np.ndarray], np.ndarray]


def backend_class(backend: str) -> type:
    """The class of a backend (imported here, lazily: each pulls its own dependencies)."""
    if backend == "offline":
        from bookindex.operators.models.offline import OfflineBackend

        return OfflineBackend
    if backend == "openai":
        from bookindex.operators.models.openai_compatible import OpenAIBackend

        return OpenAIBackend
    if backend == "vllm":
        from bookindex.operators.models.vllm_local import VLLMBackend

        return VLLMBackend
    raise ValueError(f"unknown model backend {backend!r}; choose one of {BACKENDS}")


def load_backend(config: ModelConfig | None = None) -> ModelBackend:
    """The configured backend. Fails at once, with one clear message, when it cannot run."""
    config = config or ModelConfig()
    return backend_class(config.backend)(config)


def check_config(config: ModelConfig) -> None:
    """Raise ``ModelError`` when the configuration cannot work (a missing endpoint, model name
    or model directory), without loading a model or calling one."""
    backend_class(config.backend).check_config(config)
    if config.rerank_model and not os.path.isfile(os.path.join(config.rerank_model, "config.json")):
        raise ModelError(
            f"models.rerank_model {config.rerank_model!r} is not a local model directory "
            "(no config.json): model hubs are not reachable from the workers"
        )


def load_reranker(config: ModelConfig) -> Reranker | None:
    """The entity-resolution reranker ``rerank(name, candidate_names, cosines) -> scores``
    (higher: more likely the same entity), loaded from ``config.rerank_model``; None when none
    is configured (the resolver then rescales the cosines)."""
    if not config.rerank_model:
        return None
    from bookindex.operators.models.reranker import CrossEncoderReranker

    return CrossEncoderReranker(config.rerank_model, config.torch_threads)


def embedding_width(config: ModelConfig) -> int | None:
    """The width of the configured embedder's vectors, known without loading it; None when only
    the model can tell (an endpoint embedding model without ``embed_dim``)."""
    return backend_class(config.backend).embedding_width(config)
