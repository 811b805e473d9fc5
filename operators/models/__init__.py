"""Model backends behind one interface (docs/architecture.md, "Models").

``base`` holds the interface and the errors, ``prompts`` every prompt and answer schema,
``structured`` the JSON repair and retries; ``factory.load_backend`` picks the backend a
``ModelConfig`` names: ``offline`` (CPU, packaged models), ``openai_compatible``
(any OpenAI-compatible endpoint) or ``vllm_local`` (in-process vLLM). Callers import from here.
"""

from bookindex.operators.config import BACKENDS, GENERATIVE_BACKENDS, ModelConfig
from bookindex.operators.models.base import (
    ExtractedEntity,
    ExtractedRelation,
    ModelBackend,
    ModelError,
    NoGeneration,
    entities_from_answer,
    entity_messages,
    is_generative,
)
from bookindex.operators.models.factory import (
    check_config,
    embedding_width,
    load_backend,
    load_reranker,
)
from bookindex.operators.models.structured import parse_json_answer

__all__ = [
    "BACKENDS",
    "GENERATIVE_BACKENDS",
    "ExtractedEntity",
    "ExtractedRelation",
    "ModelBackend",
    "ModelConfig",
    "ModelError",
    "NoGeneration",
    "check_config",
    "embedding_width",
    "entities_from_answer",
    "entity_messages",
    "is_generative",
    "load_backend",
    "load_reranker",
    "parse_json_answer",
]
