"""Ray Data LLM processors (``ray.data.llm.build_processor``, Ray 2.60) for the index job's batch
model work: one processor per task, over a dataset of request rows.

    --models openai → HttpRequestProcessorConfig (any OpenAI-compatible endpoint: a vLLM
                      server, a hosted API): an actor pool posting chat completions
    --models vllm   → vLLMEngineProcessorConfig (vLLM engines on GPU workers, structured
                      JSON output through vLLM's guided decoding)

A request row carries ``messages`` (JSON text of the OpenAI chat messages; image parts as
``data:`` URLs) and whatever the caller keeps (``doc_id``, ``node_id``...). The processor adds
``answer`` (the model's text) and ``answer_error`` ("" when usable). With a ``schema``, the
answer is repaired and checked (``operators.models.structured.checked_answer``) and ``answer``
holds the parsed JSON as text. The prompts and schemas are those of ``operators.models.prompts``,
one set for both backends. Retries of unusable answers: ``pipelines.model_requests``.

Nothing here loads a model on the driver: building a processor only builds configuration; the
engines start in the processor's workers.
"""

from __future__ import annotations

import json
import os
from typing import Any

from operators.config import BookindexConfig
from operators.models import ModelError
from operators.models.structured import checked_answer
from operators.models.vllm_local import DEFAULT_MAX_TOKENS, NEEDS_VLLM


def processor_config(bookindex: BookindexConfig, vision: bool = False, batch_size: int = 16):
    """The ``ray.data.llm`` processor configuration of the configured generative backend:
    ``index.enrich_workers`` workers (None: 1 engine for vllm, ``parse_workers`` or 4
    concurrent posters for openai), ``batch_size`` requests per batch. Raises ``ModelError``
    for a backend without generation, or one that is not configured."""
    import ray.data.llm as llm

    models, index = bookindex.models, bookindex.index
    if models.backend == "vllm":
        if not models.vllm_model_path:
            raise ModelError("the vllm processor needs ModelConfig.vllm_model_path (a local dir)")
        options = dict(models.vllm_options)
        options.pop("max_tokens", None)
        return llm.vLLMEngineProcessorConfig(
            model_source=models.vllm_model_path,
            engine_kwargs={"seed": models.seed, **options},
            concurrency=index.enrich_workers or 1,
            batch_size=batch_size,
            accelerator_type=None,
            # Ray 2.60 replaced has_image=True with the prepare-multimodal stage.
            prepare_multimodal_stage=(
                {"enabled": True, "chat_template_content_format": "openai"} if vision else False
            ),
        )
    if models.backend == "openai":
        base_url = (models.base_url or os.environ.get("OPENAI_BASE_URL", "")).rstrip("/")
        if not base_url or not models.model:
            raise ModelError("the openai processor needs ModelConfig.base_url and model")
        key = models.api_key or os.environ.get("OPENAI_API_KEY", "") or "EMPTY"
        return llm.HttpRequestProcessorConfig(
            url=f"{base_url}/chat/completions",
            headers={"Authorization": f"Bearer {key}"},
            concurrency=index.enrich_workers or index.parse_workers or 4,
            batch_size=batch_size,
            max_retries=models.max_retries,  # transport retries (429, 5xx, timeouts)
            base_retry_wait_time_in_s=0.5,
        )
    raise ModelError(f"backend {models.backend!r} has no generative model")


class _Requests:
    """The preprocess and postprocess of one task (plain callables: they travel to workers)."""

    def __init__(self, bookindex: BookindexConfig, schema: dict | None, vision: bool) -> None:
        models = bookindex.models
        self.backend = models.backend
        self.schema = schema
        self.model = (models.vision_model or models.model) if vision else models.model
        self.max_tokens = int(models.vllm_options.get("max_tokens", DEFAULT_MAX_TOKENS))
        self.sampling: dict[str, Any] = {
            "temperature": models.temperature,
            "max_tokens": self.max_tokens,
            "seed": models.seed,
        }

    def pre(self, row: dict) -> dict:
        messages = json.loads(row["messages"])
        if self.backend == "vllm":
            sampling = dict(self.sampling)
            if self.schema is not None:
                # Ray 2.60's vLLM stage turns this into vllm StructuredOutputsParams(json=...)
                sampling["structured_outputs"] = {"json": json.dumps(self.schema)}
            return {**row, "messages": messages, "sampling_params": sampling}
        payload: dict[str, Any] = {"model": self.model, "messages": messages, **self.sampling}
        if self.schema is not None:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": self.schema, "strict": True},
            }
        # (Ray Data holds the payload as an Arrow struct: the content parts of an image message
        # reach the endpoint with the other part type's key as null, which OpenAI-compatible
        # servers ignore)
        return {**row, "payload": payload}

    def post(self, row: dict) -> dict:
        keep = {
            k: v
            for k, v in row.items()
            if k not in ("payload", "http_response", "sampling_params", "generated_text")
            and not k.startswith(("prompt", "num_", "generated_", "request_", "time_"))
        }
        if isinstance(keep.get("messages"), list | tuple):
            keep["messages"] = json.dumps(list(keep["messages"]))
        text, error = _answer_text(row)
        keep["invalid_answer"] = ""
        if not error and self.schema is not None:
            try:
                text = json.dumps(checked_answer(text, self.schema))
            except ValueError as exc:
                error = f"invalid JSON answer: {exc}"[:300]
                keep["invalid_answer"] = text[:2000]
        if not error and not text.strip():
            error = "empty answer"
        return {**keep, "answer": text if not error else "", "answer_error": error}


def _answer_text(row: dict) -> tuple[str, str]:
    """The answer text of an http or vLLM row, or the error the endpoint gave."""
    if "generated_text" in row:
        return str(row.get("generated_text") or ""), ""
    response = row.get("http_response")
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except json.JSONDecodeError:
            return "", f"unreadable response: {response[:200]}"
    try:
        return str(response["choices"][0]["message"]["content"] or ""), ""
    except (KeyError, IndexError, TypeError):
        return "", f"no answer in response: {str(response)[:200]}"


def build_ray_processor(
    bookindex: BookindexConfig,
    schema: dict | None = None,
    vision: bool = False,
    batch_size: int = 16,
) -> Any:
    """A ``ray.data.llm`` processor for one task: rows with ``messages`` (JSON text) in, the
    same rows with ``answer`` / ``answer_error`` out. Apply it as ``processor(dataset)``."""
    try:
        from ray.data.llm import build_processor
    except ImportError as e:  # ray[llm] extras missing
        raise ModelError(NEEDS_VLLM) from e
    config = processor_config(bookindex, vision, batch_size)
    requests = _Requests(bookindex, schema, vision)
    return build_processor(config, preprocess=requests.pre, postprocess=requests.post)
