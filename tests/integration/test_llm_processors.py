"""The ray.data.llm processors built from configuration, without running a model: the vLLM one
(vllm is not installed here: it is built and validated, its engine stage asks for a GPU) and
the HTTP one; one prompt/schema set and one answer check serve both."""

from __future__ import annotations

import json

import pytest

from bookindex.operators.config import BookindexConfig
from bookindex.operators.models import ModelError
from bookindex.operators.models.prompts import ENTITY_SCHEMA, SECTION_SCHEMA, SELECT_SCHEMA
from bookindex.pipelines.llm_processors import (
    ATTEMPTS_KEY,
    ERROR_KEY,
    EndpointSession,
    _Requests,
    build_ray_processor,
    processor_config,
    settled,
)
from tests.fakes import FakeOpenAI


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
    # a failed generation is an error row, not a failed dataset
    assert vision.should_continue_on_error
    # every generative task of the index job: entities, section refiner, ER selection
    for schema in (ENTITY_SCHEMA, SECTION_SCHEMA, SELECT_SCHEMA):
        processor = build_ray_processor(config, schema, vision=False)
        assert list(processor.stages) == [
            "ChatTemplateStage",
            "TokenizeStage",
            "vLLMEngineStage",
            "DetokenizeStage",
        ]
        engine = processor.stages["vLLMEngineStage"]
        assert engine.map_batches_kwargs["num_gpus"] == 1
        assert engine.fn_constructor_kwargs["model"] == "/models/qwen2.5-vl-3b"
        assert engine.fn_constructor_kwargs["should_continue_on_error"] is True


def test_one_request_format_for_both_backends() -> None:
    row = {
        "doc_id": "d",
        "node_id": "n",
        "request": json.dumps([{"role": "user", "content": "x"}]),
        "attempts": 1,
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
    row = {"doc_id": "d", "node_id": "n", "request": '[{"role": "user", "content": "x"}]'}
    row.update(attempts=1, messages=[{"role": "user", "content": "x"}])
    fenced = '```json\n{"entities": [{"name": "Ray", "type": "X"},], "relations": []}\n```'
    ok = post({**row, "generated_text": fenced})
    assert ok["answer_error"] == "" and json.loads(ok["answer"])["entities"][0]["name"] == "Ray"
    assert isinstance(ok["request"], str) and "messages" not in ok  # JSON text, for a retry
    bad = post({**row, "generated_text": '{"entities": []}'})  # "relations" missing
    assert bad["answer"] == "" and "invalid JSON answer" in bad["answer_error"]
    assert bad["invalid_answer"] == '{"entities": []}'
    http = post({**row, "http_response": {"error": {"message": "overloaded"}}})
    assert "no answer" in http["answer_error"]
    gave_up = post({**row, "http_response": {ERROR_KEY: "failed after 3 attempt(s): HTTP 503"}})
    assert gave_up["answer_error"] == "request failed: failed after 3 attempt(s): HTTP 503"
    # a vLLM row whose generation failed skipped the postprocess: settled makes it an answer row
    failed = settled({**row, "__inference_error__": "prompt too long", "sampling_params": {}})
    assert failed == {
        "doc_id": "d",
        "node_id": "n",
        "request": row["request"],
        "attempts": 1,
        "answer": "",
        "answer_error": "inference failed: prompt too long",
        "invalid_answer": "",
    }
    assert settled({**ok, "__inference_error__": ""})["answer"] == ok["answer"]


def test_backends_without_generation_are_refused() -> None:
    with pytest.raises(ModelError, match="no generative model"):
        processor_config(BookindexConfig())
    config = _vllm_config()
    config.models.vllm_model_path = ""
    with pytest.raises(ModelError, match="vllm_model_path"):
        processor_config(config)


def test_the_http_session_retries_then_answers_with_the_error() -> None:
    """``EndpointSession`` sends a batch's requests together, retries 503 and refused
    connections a bounded number of times, and settles instead of raising."""
    import asyncio

    def reply(body: dict):
        if body["messages"][0]["content"] == "busy":
            return 503, {"error": {"message": "overloaded"}}
        return "fine"

    fake = FakeOpenAI(reply, delay_s=0.2)

    async def post_all(url: str, contents: list[str]) -> list:
        async with EndpointSession(attempts=2, base_wait_s=0.01, timeout_s=10) as session:
            pending = [
                session.post(
                    url,
                    {"Content-Type": "application/json"},
                    json.dumps({"model": "m", "messages": [{"role": "user", "content": c}]}),
                )
                for c in contents
            ]
            answers = []
            for request in pending:
                async with await request as response:
                    answers.append((response.status, await response.json()))
            return answers

    try:
        answers = asyncio.run(post_all(f"{fake.url}/chat/completions", ["a", "busy", "b", "c"]))
    finally:
        fake.close()
    assert [a[1].get("choices", [{}])[0].get("message", {}).get("content") for a in answers] == [
        "fine",
        None,
        "fine",
        "fine",
    ]
    assert answers[1][1][ERROR_KEY].startswith("failed after 2 attempt(s): HTTP 503")
    assert sum(b["messages"][0]["content"] == "busy" for b in fake.chats) == 2
    assert fake.max_in_flight >= 3  # sent together, not one after the other
    refused = asyncio.run(post_all("http://127.0.0.1:9/v1/chat/completions", ["a"]))
    assert "failed after 2 attempt(s): ClientConnectorError" in refused[0][1][ERROR_KEY]


def test_the_http_session_asks_again_where_an_answer_is_not_valid_json() -> None:
    """With a schema, ``EndpointSession`` asks again within the pass, the invalid answer shown,
    at most ``answer_attempts`` asks in all, and says how many it made; the processor's
    postprocess reads that into ``attempts`` and records the last invalid answer."""
    import asyncio

    config = BookindexConfig()
    config.models.backend = "openai"
    requests = _Requests(config, SELECT_SCHEMA, vision=False)

    def reply(body: dict):
        content, asked = body["messages"][0]["content"], len(body["messages"])
        if content == "never" or (content == "later" and asked == 1):
            return "the first one, I think"
        return json.dumps({"choice": 1})

    fake = FakeOpenAI(reply, delay_s=0.05)

    async def post_all(contents: list[str]) -> list[dict]:
        session = EndpointSession(
            attempts=1, base_wait_s=0.01, timeout_s=10, schema=SELECT_SCHEMA, answer_attempts=3
        )
        async with session:
            pending = [
                session.post(
                    f"{fake.url}/chat/completions",
                    {"Content-Type": "application/json"},
                    json.dumps({"model": "m", "messages": [{"role": "user", "content": c}]}),
                )
                for c in contents
            ]
            return [await (await request).json() for request in pending]

    try:
        bodies = asyncio.run(post_all(["now", "later", "never"]))
    finally:
        fake.close()
    rows = [
        requests.post(
            {
                "doc_id": "d",
                "node_id": str(i),
                "request": "[]",
                "attempts": 1,
                "http_response": body,
            }
        )
        for i, body in enumerate(bodies)
    ]
    assert [r["attempts"] for r in rows] == [1, 2, 3]
    assert [bool(r["answer"]) for r in rows] == [True, True, False]
    assert rows[2]["answer_error"].startswith("invalid JSON answer")
    assert rows[2]["invalid_answer"] == "the first one, I think"
    assert ATTEMPTS_KEY not in bodies[0]
    asked = [len(b["messages"]) for b in fake.chats if b["messages"][0]["content"] == "never"]
    assert sorted(asked) == [1, 3, 5]  # each ask shows the invalid answer and what was wrong


def test_a_pass_of_few_requests_starts_no_more_workers_than_its_batches() -> None:
    """Each worker is a process (with vllm, an engine on a GPU): the section windows of a small
    job or the retries of a few invalid answers get one worker, a full pass the configured
    number, never more."""
    vllm = _vllm_config()  # 2 engines configured
    assert processor_config(vllm, batch_size=8, requests=5).concurrency == 1
    assert processor_config(vllm, batch_size=8, requests=9).concurrency == 2
    assert processor_config(vllm, batch_size=8, requests=10_000).concurrency == 2
    assert processor_config(vllm, batch_size=8).concurrency == 2  # count unknown: as configured
    http = BookindexConfig()
    http.models.backend = "openai"
    http.models.base_url = "http://127.0.0.1:9/v1"
    http.models.model = "m"
    http.index.parse_workers = 4  # 4 posters when enrich_workers is unset
    assert processor_config(http, batch_size=16, requests=1).concurrency == 1
    assert processor_config(http, batch_size=16, requests=33).concurrency == 3
    assert processor_config(http, batch_size=16, requests=500).concurrency == 4
