"""The ``vllm`` backend: an in-process vLLM engine on a GPU worker (the Ray Data LLM processor
for batch stages is built in ``pipelines.llm_processors``).

Untested on the development machine (no GPU, no vllm): written against vLLM's
``LLM.chat`` / ``SamplingParams`` API and Ray 2.60's ``ray.data.llm`` source. vllm and
``ray.data.llm`` are imported lazily, so importing this module needs neither.

- ``complete``: greedy-by-default chat generation; with a schema, structured decoding by JSON
  schema (``StructuredOutputsParams(json=...)`` in current vLLM, ``GuidedDecodingParams`` in
  older releases, found by feature detection), then the same repair / check / bounded retry as
  the openai backend (``operators.models.structured``).
- ``embed`` / ``rerank``: the offline embedder (``rerank``: its cosine, not a reranking model).
- ``config.vllm_options`` go to ``vllm.LLM(...)``, except ``max_tokens`` (default 2048), which
  bounds each answer.
"""

from __future__ import annotations

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
from bookindex.operators.models.prompts import ENTITY_SCHEMA
from bookindex.operators.models.structured import checked_answer, complete_json
from bookindex.operators.models.usage import UsageTally

DEFAULT_MAX_TOKENS = 2048
NEEDS_VLLM = (
    "backend 'vllm' needs the vllm package on a GPU worker: pip install '.[gpu]' "
    "(ray[llm] brings vllm), or use backend 'openai' against a vLLM server"
)


def _structured_kwargs(schema: dict) -> dict[str, Any]:
    """SamplingParams keyword for JSON-schema decoding, for the installed vLLM."""
    import vllm.sampling_params as sp

    if hasattr(sp, "StructuredOutputsParams"):  # vLLM >= 0.10.2 (guided_* removed in 0.12)
        return {"structured_outputs": sp.StructuredOutputsParams(json=schema)}
    if hasattr(sp, "GuidedDecodingParams"):  # older releases
        return {"guided_decoding": sp.GuidedDecodingParams(json=schema)}
    raise ModelError("this vllm has neither StructuredOutputsParams nor GuidedDecodingParams")


class VLLMBackend:
    """In-process vLLM (one engine per process; build it once per Ray actor)."""

    name = "vllm"

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        try:
            import vllm
        except ImportError as e:
            raise ModelError(NEEDS_VLLM) from e
        self.check_config(config)
        import torch

        if not torch.cuda.is_available():
            raise ModelError("backend 'vllm' needs a CUDA GPU, and none is visible here")
        options = dict(config.vllm_options)
        self.max_tokens = int(options.pop("max_tokens", DEFAULT_MAX_TOKENS))
        self._vllm = vllm
        try:
            self.llm = vllm.LLM(model=config.vllm_model_path, seed=config.seed, **options)
        except Exception as e:
            raise ModelError(f"vLLM could not load {config.vllm_model_path}: {e}") from e
        self.tally = UsageTally()
        self.usage: dict[str, int] = self.tally.totals

    @staticmethod
    def check_config(config: ModelConfig) -> None:
        """A local model directory (vllm and the GPU are checked where the engine starts)."""
        if not config.vllm_model_path:
            raise ModelError(
                "backend 'vllm' needs a local model directory in ModelConfig.vllm_model_path "
                "(BOOKINDEX_VLLM_MODEL_PATH): model hubs are not reachable from the workers"
            )

    @staticmethod
    def embedding_width(config: ModelConfig) -> int:
        from bookindex.operators.models.offline import embedding_dim

        return embedding_dim()

    # ------------------------------------------------------------------ generation

    def _generate(self, conversations: list[list[dict]], schema: dict | None = None) -> list[str]:
        kwargs: dict[str, Any] = {
            "temperature": self.config.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.config.seed,
        }
        if schema is not None:
            kwargs.update(_structured_kwargs(schema))
        try:
            params = self._vllm.SamplingParams(**kwargs)
            outputs = self.llm.chat(conversations, sampling_params=params, use_tqdm=False)
        except ModelError:
            raise
        except Exception as e:
            raise ModelError(f"vLLM generation failed: {e}") from e
        texts = []
        for out in outputs:
            self.tally.add(
                requests=1,
                prompt_tokens=len(out.prompt_token_ids or []),
                completion_tokens=len(out.outputs[0].token_ids or []),
            )
            texts.append(out.outputs[0].text)
        return texts

    def complete(self, messages: list[dict], schema: dict | None = None) -> Any:
        if schema is None:
            return self._generate([messages])[0]
        return complete_json(
            lambda conversation: self._generate([conversation], schema)[0],
            messages,
            schema,
            self.config.max_retries,
        )

    def describe_image(self, image: bytes, prompt: str) -> str:
        """Needs a vision-language model at ``vllm_model_path``."""
        return self._generate([[image_message(prompt, image)]])[0]

    def extract_entities(self, text: str) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
        return self.extract_entities_batch([text])[0]

    def extract_entities_batch(
        self, texts: list[str]
    ) -> list[tuple[list[ExtractedEntity], list[ExtractedRelation]]]:
        """One batched generation; answers that do not parse are retried one by one."""
        answers = self._generate([entity_messages(t) for t in texts], ENTITY_SCHEMA)
        results = []
        for text, answer in zip(texts, answers, strict=True):
            try:
                parsed = checked_answer(answer, ENTITY_SCHEMA)
            except ValueError:
                parsed = self.complete(entity_messages(text), ENTITY_SCHEMA)
            results.append(entities_from_answer(parsed))
        return results

    # ------------------------------------------------------------------ embeddings

    @cached_property
    def _offline(self):
        from bookindex.operators.models.offline import OfflineBackend

        return OfflineBackend(self.config)

    @property
    def dim(self) -> int:
        return self._offline.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._offline.embed(texts)

    def rerank(self, query: str, candidates: list[str]) -> list[float]:
        return self._offline.rerank(query, candidates)
