"""Model backends behind one small interface (DESIGN.md §5), chosen by configuration.

    backend = load_backend(ModelConfig(backend="offline"))   # or "openai", "vllm"
    backend.embed(["text", ...])            -> float32 array (n, dim), rows L2-normalised
    backend.rerank("query", ["cand", ...])  -> float scores, higher is better
    backend.complete(messages, schema=...)  -> str, or the parsed JSON object when a schema is given
    backend.describe_image(png_bytes, prompt) -> str
    backend.extract_entities("text")        -> list[ExtractedEntity], list[ExtractedRelation]

Backends:
- ``offline`` (default): CPU, downloads nothing (operators.models.offline).
- ``openai``: any OpenAI-compatible endpoint (operators.models.openai_compatible).
- ``vllm``: in-process vLLM on a GPU worker, imported lazily (operators.models.vllm_local).

A backend that cannot generate raises ``NoGeneration`` from ``complete``/``describe_image``;
callers keep their non-model path (the layout section filter, the NER extraction).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from operators.config import GENERATIVE_BACKENDS


def is_generative(backend: object) -> bool:
    """Whether a loaded backend can generate (complete, describe images)."""
    return getattr(backend, "name", "offline") in GENERATIVE_BACKENDS


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


def parse_json_answer(text: str) -> Any:
    """JSON from a model answer, repairing the usual damage: code fences, prose around the
    object, trailing commas. Raises ValueError when nothing parseable is left."""
    text = (text or "").strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("\n") + 1 :] if "\n" in text else text
        text = text.rsplit("```", 1)[0]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise ValueError(f"no JSON in model answer: {text[:120]!r}")
    start = min(starts)
    end = max(text.rfind("}"), text.rfind("]"))
    candidate = text[start : end + 1]
    for attempt in (candidate, _drop_trailing_commas(candidate)):
        try:
            return json.loads(attempt)
        except json.JSONDecodeError:
            continue
    raise ValueError(f"invalid JSON in model answer: {text[:120]!r}")


def _drop_trailing_commas(text: str) -> str:
    import re

    return re.sub(r",\s*([}\]])", r"\1", text)


# The JSON schema every generative backend uses for ``extract_entities`` (BookRAG §4.3).
ENTITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "type": {"type": "string"},
                    "description": {"type": "string"},
                },
                "required": ["name", "type", "description"],
            },
        },
        "relations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "source": {"type": "string"},
                    "target": {"type": "string"},
                    "type": {"type": "string"},
                    "description": {"type": "string"},
                    "weight": {"type": "number"},
                },
                "required": ["source", "target", "type"],
            },
        },
    },
    "required": ["entities", "relations"],
}

ENTITY_PROMPT = (
    "Extract the named entities of the passage (people, organisations, places, works, laws, "
    "events, products, concepts that the passage defines) and the relations the passage states "
    "between them. Give each entity a type (one word, upper case) and a one-sentence "
    "description from the passage. Relations join two extracted entity names with a short "
    "relation type and a weight from 1 (weak) to 10 (strong). Answer with JSON only."
)


def entity_messages(text: str) -> list[dict]:
    return [
        {"role": "system", "content": ENTITY_PROMPT},
        {"role": "user", "content": text},
    ]


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
