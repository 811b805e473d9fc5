"""Which backend a ``ModelConfig`` names: loaded (``load_backend``, in the stage that owns it), or
only checked (``check_config``, ``embedding_width``: what a driver may ask without loading a
model). docs/architecture.md, "Models".
"""

from __future__ import annotations

from operators.config import BACKENDS, ModelConfig
from operators.models.base import ModelBackend


def backend_class(backend: str) -> type:
    """The class of a backend (imported here, lazily: each pulls its own dependencies)."""
    if backend == "offline":
        from operators.models.offline import OfflineBackend

        return OfflineBackend
    if backend == "openai":
        from operators.models.openai_compatible import OpenAIBackend

        return OpenAIBackend
    if backend == "vllm":
        from operators.models.vllm_local import VLLMBackend

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


def embedding_width(config: ModelConfig) -> int | None:
    """The width of the configured embedder's vectors, known without loading it; None when only
    the model can tell (an endpoint embedding model without ``embed_dim``)."""
    return backend_class(config.backend).embedding_width(config)
