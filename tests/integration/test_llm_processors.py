"""The ray.data.llm processors built from configuration, without running a model: the vLLM one
(vllm is not installed here: it is built and validated, its engine stage asks for a GPU) and
the HTTP one; one prompt/schema set and one answer check serve both."""

from __future__ import annotations

import json

import pytest

from operators.config import BookindexConfig
from operators.models import ModelError
from operators.models.prompts import ENTITY_SCHEMA
from pipelines.llm_processors import _Requests, build_ray_processor, processor_config


def _vllm_config() -> BookindexConfig:
    config = BookindexConfig()
    config.models.backend = "vllm"
    config.models.vllm_model_path = "/models/qwen2.5-vl-3b"  # a local directory on GPU workers
    config.models.vllm_options = {"max_tokens": 256, "max_model_len": 8192}
    config.index.enrich_workers = 2
    return config


def test_vllm_processor_is_built_and_asks_for_gpus(ray_session) -> None:
    from ray.data.llm import vLLMEngineProcessorConfig

    config = _vllm_config()
    vision = processor_config(config, vision=True, batch_size=8)
    assert isinstance(vision, vLLMEngineProcessorConfig)
    assert vision.model_source == "/models/qwen2.5-vl-3b"
    assert vision.concurrency == 2 and vision.batch_size == 8
    # max_tokens goes to the sampling parameters, the rest to the engine
    assert vision.engine_kwargs["seed"] == 0 and vision.engine_kwargs["max_model_len"] == 8192
    assert "max_tokens" not in vision.engine_kwargs
    assert vision.prepare_multimodal_stage["enabled"]  # images in the chat messages
    processor = build_ray_processor(config, ENTITY_SCHEMA, vision=False)
    assert list(processor.stages) == [
        "ChatTemplateStage",
        "TokenizeStage",
        "vLLMEngineStage",
        "DetokenizeStage",
    ]
    engine = processor.stages["vLLMEngineStage"]
    assert engine.map_batches_kwargs["num_gpus"] == 1
    assert engine.fn_constructor_kwargs["model"] == "/models/qwen2.5-vl-3b"


def test_one_request_format_for_both_backends() -> None:
    row = {
        "doc_id": "d",
        "node_id": "n",
        "messages": json.dumps([{"role": "user", "content": "x"}]),
    }
    vllm = _Requests(_vllm_config(), ENTITY_SCHEMA, vision=False).pre(row)
    assert vllm["messages"] == [{"role": "user", "content": "x"}]
    assert json.loads(vllm["sampling_params"]["structured_outputs"]["json"]) == ENTITY_SCHEMA
    assert vllm["sampling_params"]["max_tokens"] == 256
    http_config = BookindexConfig()
    http_config.models.backend = "openai"
    http_config.models.base_url = "http://127.0.0.1:9/v1"
    http_config.models.model = "m"
    http = _Requests(http_config, ENTITY_SCHEMA, vision=False).pre(row)
    assert http["payload"]["messages"] == vllm["messages"]
    assert http["payload"]["response_format"]["json_schema"]["schema"] == ENTITY_SCHEMA
    config = processor_config(http_config, batch_size=4)
    assert config.url == "http://127.0.0.1:9/v1/chat/completions"


def test_answers_are_repaired_checked_or_recorded() -> None:
    post = _Requests(_vllm_config(), ENTITY_SCHEMA, vision=False).post
    row = {"doc_id": "d", "node_id": "n", "messages": [{"role": "user", "content": "x"}]}
    fenced = '```json\n{"entities": [{"name": "Ray", "type": "X"},], "relations": []}\n```'
    ok = post({**row, "generated_text": fenced})
    assert ok["answer_error"] == "" and json.loads(ok["answer"])["entities"][0]["name"] == "Ray"
    assert isinstance(ok["messages"], str)  # JSON text again, for a retry request
    bad = post({**row, "generated_text": '{"entities": []}'})  # "relations" missing
    assert bad["answer"] == "" and "invalid JSON answer" in bad["answer_error"]
    assert bad["invalid_answer"] == '{"entities": []}'
    http = post({**row, "http_response": {"error": {"message": "overloaded"}}})
    assert "no answer" in http["answer_error"]


def test_backends_without_generation_are_refused() -> None:
    with pytest.raises(ModelError, match="no generative model"):
        processor_config(BookindexConfig())
    config = _vllm_config()
    config.models.vllm_model_path = ""
    with pytest.raises(ModelError, match="vllm_model_path"):
        processor_config(config)
