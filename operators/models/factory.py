"""Which backend a ``ModelConfig`` names, loaded (docs/architecture.md, "Models")."""

from __future__ import annotations

from operators.config import BACKENDS, ModelConfig
from operators.models.base import ModelBackend


def load_backend(config: ModelConfig | None = None) -> ModelBackend:
    """The configured backend. Fails at once, with one clear message, when it cannot run."""
    config = config or ModelConfig()
    if config.backend == "offline":
        from operators.models.offline import OfflineBackend

        return OfflineBackend(config)
    if config.backend == "openai":
        from operators.models.openai_compatible import OpenAIBackend

        return OpenAIBackend(config)
    if config.backend == "vllm":
        from operators.models.vllm_local import VLLMBackend

        return VLLMBackend(config)
    raise ValueError(f"unknown model backend {config.backend!r}; choose one of {BACKENDS}")
