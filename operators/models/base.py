"""Model backends behind one small interface, chosen by configuration (docs/architecture.md).

    backend = load_backend(ModelConfig(backend="offline"))   # or "openai", "vllm"
    backend.embed(["text", ...])            -> float32 array (n, dim), rows L2-normalised
    backend.rerank("query", ["cand", ...])  -> float scores, higher is better
    backend.complete(messages, schema=...)  -> str, or the parsed JSON object when a schema is given
    backend.describe_image(png_bytes, prompt) -> str
    backend.extract_entities("text")        -> list[ExtractedEntity], list[ExtractedRelation]

Each backend class also answers two questions without loading a model (a driver asks them
through ``operators.models.factory``): ``check_config(config)`` (raises ``ModelError`` when the
configuration cannot work) and ``embedding_width(config)`` (its vectors' width, or None).

Backends:
- ``offline`` (default): CPU, downloads nothing (operators.models.offline).
- ``openai``: any OpenAI-compatible endpoint (operators.models.openai_compatible).
- ``vllm``: in-process vLLM on a GPU worker, imported lazily (operators.models.vllm_local).

A backend that cannot generate raises ``NoGeneration`` from ``complete``/``describe_image``;
callers keep their non-model path (the layout section filter, the NER extraction). Prompts and
answer schemas live in ``operators.models.prompts``, JSON repair and retries in
``operators.models.structured``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from bookindex.operators.config import GENERATIVE_BACKENDS
from bookindex.operators.models.prompts import ENTITY_PROMPT, chat


def is_generative(backend: object) -> bool:
    """Whether a loaded backend can generate (complete, describe images)."""
    return getattr(backend, "name", "offline") in GENERATIVE_BACKENDS


def image_message(prompt: str, image: bytes) -> dict:
    """One user chat message of a prompt and a PNG (as a ``data:`` URL image part), the form
    OpenAI-compatible endpoints and vLLM's chat both take."""
    url = "data:image/png;base64," + base64.b64encode(image).decode("ascii")
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": prompt},
            {"type": "image_url", "image_url": {"url": url}},
        ],
    }


class ModelError(RuntimeError):
    """A model call failed for good (after the bounded retries); the caller records it."""


class NoGeneration(ModelError):
    """The configured backend has no generative model (the offline default)."""


@dataclass
class ExtractedEntity:
    name: str
    type: str
    description: str = ""


@dataclass
class ExtractedRelation:
    source: str
    target: str
    type: str
    weight: float = 1.0
    description: str = ""


@runtime_checkable
class ModelBackend(Protocol):
    """The one interface every stage calls."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...

    def rerank(self, query: str, candidates: list[str]) -> list[float]: ...

    def complete(self, messages: list[dict], schema: dict | None = None) -> Any: ...

    def describe_image(self, image: bytes, prompt: str) -> str: ...

    def extract_entities(
        self, text: str
    ) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]: ...


def entity_messages(text: str) -> list[dict]:
    return chat(ENTITY_PROMPT, text)


def entities_from_answer(
    answer: Any,
) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
    """Validated entities and relations from a parsed answer (malformed items are dropped)."""
    if not isinstance(answer, dict):
        raise ValueError("entity answer is not a JSON object")
    entities = [
        ExtractedEntity(
            str(e["name"]).strip(),
            str(e.get("type") or "ENTITY").upper(),
            str(e.get("description") or ""),
        )
        for e in answer.get("entities") or []
        if isinstance(e, dict) and str(e.get("name") or "").strip()
    ]
    names = {e.name for e in entities}
    relations = []
    for r in answer.get("relations") or []:
        if not isinstance(r, dict) or r.get("source") not in names or r.get("target") not in names:
            continue
        try:
            weight = float(r.get("weight") or 1.0)
        except (TypeError, ValueError):
            weight = 1.0
        relations.append(
            ExtractedRelation(
                r["source"],
                r["target"],
                str(r.get("type") or "related_to"),
                weight,
                str(r.get("description") or ""),
            )
        )
    return entities, relations
