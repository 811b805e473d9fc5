"""The ``openai`` backend: any OpenAI-compatible endpoint (OpenAI, vLLM serve, llama.cpp, ...).

- ``complete``: chat completions; with a schema the request carries a strict ``json_schema``
  response format, and the answer is repaired, checked and asked for again at most
  ``config.max_retries`` more times (``operators.models.structured.complete_json``), then
  ``ModelError``. Transport failures (after the
  client's own retries) are ``ModelError`` too: callers only ever see ``ModelError``.
- ``embed``: the endpoint's embeddings when ``config.embed_model`` is set (its width:
  ``config.embed_dim``, or its first answer), else the offline embedder; rows are
  L2-normalised float32. ``rerank``: the embedding cosine over ``embed`` (no reranking model).
- ``describe_image``: a chat message with the PNG as a base64 data URI.
- ``usage``: tokens used so far (prompt/completion/embedding) and the number of requests, from
  each response's ``usage``; ``tally`` counts them thread-safely and meters one thread's calls
  (``operators.models.usage``: the query API's per-question ``usage``).
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from typing import Any

import numpy as np

from bookindex.operators.config import ModelConfig
from bookindex.operators.models.base import (
    ExtractedEntity,
    ExtractedRelation,
    ModelError,
    entities_from_answer,
    entity_messages,
    image_message,
)
from bookindex.operators.models.prompts import ENTITY_SCHEMA, SCHEMA_PROMPT
from bookindex.operators.models.structured import complete_json
from bookindex.operators.models.usage import UsageTally


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class OpenAIBackend:
    """A ``ModelBackend`` over an OpenAI-compatible HTTP endpoint (its usage tally is
    thread-safe; the schema fallback flag is not)."""

    name = "openai"

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.check_config(config)
        self.base_url = config.base_url or os.environ.get("OPENAI_BASE_URL", "")
        try:
            import openai
        except ImportError as e:  # a dependency of the project; still, say so clearly
            raise ModelError("backend 'openai' needs the openai package: pip install openai") from e
        api_key = config.api_key or os.environ.get("OPENAI_API_KEY", "") or "EMPTY"
        self.client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key,
            timeout=config.timeout_s,
            max_retries=max(0, config.max_retries),
        )
        self.tally = UsageTally("embedding_tokens")
        self.usage: dict[str, int] = self.tally.totals
        self._json_schema_ok = True  # cleared when the endpoint rejects response_format
        self._dim = config.embed_dim if config.embed_model else self._offline.dim

    @staticmethod
    def check_config(config: ModelConfig) -> None:
        """An endpoint and a model name (nothing is requested)."""
        if not (config.base_url or os.environ.get("OPENAI_BASE_URL", "")):
            raise ModelError(
                "backend 'openai' needs an endpoint: set ModelConfig.base_url "
                "(BOOKINDEX_BASE_URL) or OPENAI_BASE_URL, e.g. http://localhost:8000/v1"
            )
        if not config.model:
            raise ModelError(
                "backend 'openai' needs a model name: set ModelConfig.model (BOOKINDEX_MODEL)"
            )

    @staticmethod
    def embedding_width(config: ModelConfig) -> int | None:
        """The offline embedder's, or ``embed_dim`` for an endpoint model (None: unknown)."""
        if config.embed_model:
            return config.embed_dim or None
        from bookindex.operators.models.offline import embedding_dim

        return embedding_dim()

    # ------------------------------------------------------------------ generation

    def complete(self, messages: list[dict], schema: dict | None = None) -> Any:
        """The answer text; with ``schema``, the parsed and checked JSON object."""
        if schema is None:
            return self._chat(messages, self.config.model)
        return complete_json(
            lambda conversation: self._chat_json(conversation, schema),
            messages,
            schema,
            self.config.max_retries,
        )

    def describe_image(self, image: bytes, prompt: str) -> str:
        messages = [image_message(prompt, image)]
        return self._chat(messages, self.config.vision_model or self.config.model)

    def extract_entities(self, text: str) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
        answer = self.complete(entity_messages(text), ENTITY_SCHEMA)
        try:
            return entities_from_answer(answer)
        except ValueError as e:
            raise ModelError(f"entity answer unusable: {e}") from e

    def extract_entities_batch(
        self, texts: list[str]
    ) -> list[tuple[list[ExtractedEntity], list[ExtractedRelation]]]:
        """One request per text (raises ``ModelError`` on the first text that fails)."""
        return [self.extract_entities(t) for t in texts]

    def _chat_json(self, messages: list[dict], schema: dict) -> str:
        """One schema-constrained request; falls back to a prompt-only schema (for good) when
        the endpoint rejects ``response_format`` with a 400/422."""
        if self._json_schema_ok:
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": True},
            }
            try:
                return self._chat(messages, self.config.model, response_format, fallible=True)
            except _Rejected as rejected:
                first_error = rejected.error
            self._json_schema_ok = False
            try:
                return self._chat(_with_schema_prompt(messages, schema), self.config.model)
            except ModelError:
                self._json_schema_ok = True  # the fallback failed too: the schema was not it
                raise ModelError(f"request rejected: {first_error}") from first_error
        return self._chat(_with_schema_prompt(messages, schema), self.config.model)

    def _chat(
        self,
        messages: list[dict],
        model: str,
        response_format: dict | None = None,
        fallible: bool = False,
    ) -> str:
        import openai

        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": self.config.temperature,
            "seed": self.config.seed,
        }
        if response_format is not None:
            kwargs["response_format"] = response_format
        self.tally.add(requests=1)
        try:
            response = self.client.chat.completions.create(**kwargs)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as e:
            if fallible:
                raise _Rejected(e) from e
            raise ModelError(f"request rejected by {self.base_url}: {e}") from e
        except Exception as e:  # transport errors, 5xx after the client's retries, bad bodies
            raise ModelError(f"chat request to {self.base_url} failed: {e}") from e
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.tally.add(
                prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            )
        try:
            return response.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError):
            return ""

    # ------------------------------------------------------------------ embeddings

    @cached_property
    def _offline(self):
        from bookindex.operators.models.offline import OfflineBackend

        return OfflineBackend(self.config)

    @property
    def dim(self) -> int:
        """Embedding width (probes the endpoint once when it uses an endpoint model)."""
        if not self._dim:
            self.embed(["dimension probe"])
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.config.embed_model:
            return self._offline.embed(texts)
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        rows: list[list[float]] = []
        step = max(1, self.config.embed_batch_size)
        for start in range(0, len(texts), step):
            batch = [t or " " for t in texts[start : start + step]]
            rows.extend(self._embed_batch(batch))
        vectors = _normalise(np.asarray(rows, dtype=np.float32))
        if self.config.embed_dim and vectors.shape[1] != self.config.embed_dim:
            raise ModelError(
                f"{self.config.embed_model} returned {vectors.shape[1]}-d vectors, "
                f"ModelConfig.embed_dim says {self.config.embed_dim}"
            )
        self._dim = int(vectors.shape[1])
        return vectors

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        self.tally.add(requests=1)
        try:
            response = self.client.embeddings.create(
                model=self.config.embed_model, input=batch, encoding_format="float"
            )
            data = sorted(response.data, key=lambda d: d.index)
            rows = [list(d.embedding) for d in data]
        except Exception as e:
            raise ModelError(f"embedding request to {self.base_url} failed: {e}") from e
        if len(rows) != len(batch):
            raise ModelError(f"embedding endpoint returned {len(rows)} rows for {len(batch)}")
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.tally.add(embedding_tokens=getattr(usage, "prompt_tokens", 0) or 0)
        return rows

    def rerank(self, query: str, candidates: list[str]) -> list[float]:
        """The embedding cosine of each candidate to the query (not a reranking model)."""
        if not candidates:
            return []
        vectors = self.embed([query, *candidates])
        return [float(s) for s in vectors[1:] @ vectors[0]]


class _Rejected(Exception):
    """A 400/422 answer to a request that has a fallback."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _with_schema_prompt(messages: list[dict], schema: dict) -> list[dict]:
    note = {"role": "system", "content": SCHEMA_PROMPT.format(schema=json.dumps(schema))}
    return [note, *messages]
