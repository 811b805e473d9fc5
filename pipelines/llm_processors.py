"""Ray Data LLM processors (``ray.data.llm``, Ray 2.60) for batch model stages.

The Ray side of the ``vllm`` backend (``operators.models.vllm_local`` is the in-process engine):
a processor runs vLLM engines on GPU workers and maps a dataset of chat requests to answers.
Untested on the development machine (no GPU, no vllm); ``ray.data.llm`` is imported lazily.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from operators.config import BookindexConfig
from operators.models import ModelError, parse_json_answer
from operators.models.vllm_local import DEFAULT_MAX_TOKENS, NEEDS_VLLM


def build_ray_processor(
    bookindex: BookindexConfig,
    schema: dict | None = None,
    vision: bool = False,
    batch_size: int = 16,
    preprocess: Callable[[dict], dict] | None = None,
    postprocess: Callable[[dict], dict] | None = None,
) -> Any:
    """A Ray Data LLM processor (``ray.data.llm``, Ray 2.60) over the models section's
    ``vllm_model_path``, with ``index.enrich_workers`` engines (None: 1).

    Untested on the development machine (no GPU, no vllm). Rows in must carry ``messages``
    (OpenAI chat format; with ``vision``, image parts as ``image_url`` data URIs) unless a
    ``preprocess`` builds them; rows out carry ``generated_text`` (and, with a schema,
    ``answer_json``: the repaired JSON text, "" when it does not parse; a string keeps the
    Arrow schema stable across rows). Apply it as ``processor(dataset)``.
    """
    config = bookindex.models
    concurrency = bookindex.index.enrich_workers or 1
    if not config.vllm_model_path:
        raise ModelError("build_ray_processor needs ModelConfig.vllm_model_path (a local dir)")
    try:
        from ray.data.llm import build_processor, vLLMEngineProcessorConfig
    except ImportError as e:
        raise ModelError(NEEDS_VLLM) from e
    options = dict(config.vllm_options)
    max_tokens = int(options.pop("max_tokens", DEFAULT_MAX_TOKENS))
    sampling: dict[str, Any] = {
        "temperature": config.temperature,
        "max_tokens": max_tokens,
        "seed": config.seed,
    }
    if schema is not None:
        # Ray 2.60's vLLM stage turns this dict into vllm StructuredOutputsParams(**it).
        sampling["structured_outputs"] = {"json": schema}
    processor_config = vLLMEngineProcessorConfig(
        model_source=config.vllm_model_path,
        engine_kwargs={"seed": config.seed, **options},
        concurrency=concurrency,
        batch_size=batch_size,
        # Ray 2.60 replaced has_image=True with the prepare-multimodal stage.
        prepare_multimodal_stage=(
            {"enabled": True, "chat_template_content_format": "openai"} if vision else False
        ),
    )

    def _pre(row: dict) -> dict:
        row = preprocess(row) if preprocess else dict(row)
        return {**row, "sampling_params": dict(sampling)}

    def _post(row: dict) -> dict:
        row = dict(row)
        if schema is not None:
            try:
                row["answer_json"] = json.dumps(parse_json_answer(row.get("generated_text") or ""))
            except ValueError:
                row["answer_json"] = ""
        return postprocess(row) if postprocess else row

    return build_processor(processor_config, preprocess=_pre, postprocess=_post)
