"""The openai backend against a fake OpenAI-compatible server on 127.0.0.1 (``tests.fakes``),
and the vllm backend's failure here, where vllm is not installed."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import numpy as np
import pytest

from bookindex.operators.models import ModelConfig, ModelError, load_backend
from bookindex.operators.models.openai_compatible import OpenAIBackend
from bookindex.operators.models.prompts import ENTITY_SCHEMA
from tests.fakes import FakeOpenAI, Reply, word_tokens


def scripted(*answers: str) -> Callable[[dict], str]:
    """Answers in order; the last one repeats."""
    queue = list(answers)

    def chat(body: dict) -> str:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return chat


@pytest.fixture
def fake():
    servers: list[FakeOpenAI] = []

    def start(chat: Callable[[dict], Reply]) -> FakeOpenAI:
        servers.append(FakeOpenAI(chat))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def backend_for(server: FakeOpenAI, **overrides) -> OpenAIBackend:
    config = ModelConfig(backend="openai", base_url=server.url, model="fake-model", **overrides)
    return OpenAIBackend(config)


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
}


def test_complete_with_schema_sends_json_schema_and_parses(fake):
    server = fake(scripted('{"answer": 42}'))
    backend = backend_for(server)
    assert backend.complete([{"role": "user", "content": "6*7?"}], SCHEMA) == {"answer": 42}
    body = server.chats[0]
    assert body["model"] == "fake-model"
    assert body["messages"] == [{"role": "user", "content": "6*7?"}]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"] == SCHEMA
    assert fmt["json_schema"]["strict"] is True
    assert backend.usage["prompt_tokens"] == 7 and backend.usage["completion_tokens"] == 3


def test_a_meter_reads_the_endpoints_usage_of_its_own_requests(fake):
    """The tokens the server reports (word counts here), retries included, per meter."""
    server = FakeOpenAI(scripted("hello", "not json", '{"answer": 42}'), tokens=word_tokens)
    try:
        backend = backend_for(server, max_retries=1)
        backend.complete([{"role": "user", "content": "warm up"}])
        before = dict(server.served)
        with backend.tally.meter() as used:
            backend.complete([{"role": "user", "content": "six times seven?"}], SCHEMA)
        served = {k: server.served[k] - before[k] for k in before}
        assert used == served and served["requests"] == 2  # one retry after "not json"
        assert used["completion_tokens"] == 2 + 2  # "not json", then '{"answer": 42}'
        assert backend.usage["requests"] == 3 == server.served["requests"]
    finally:
        server.close()


def test_complete_without_schema_returns_text(fake):
    server = fake(scripted("plain words"))
    backend = backend_for(server)
    assert backend.complete([{"role": "user", "content": "hi"}]) == "plain words"
    assert "response_format" not in server.chats[0]


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{"answer": 42}\n```',
        'Sure! Here it is: {"answer": 42,} Hope that helps.',
    ],
)
def test_fenced_or_trailing_comma_answers_are_repaired(fake, answer):
    server = fake(scripted(answer))
    assert backend_for(server).complete([{"role": "user", "content": "q"}], SCHEMA) == {
        "answer": 42
    }
    assert len(server.chats) == 1


def test_invalid_then_valid_answer_takes_two_requests(fake):
    server = fake(scripted("I think the answer is forty-two.", '{"answer": 42}'))
    backend = backend_for(server, max_retries=2)
    assert backend.complete([{"role": "user", "content": "q"}], SCHEMA) == {"answer": 42}
    assert len(server.chats) == 2
    retry = server.chats[1]["messages"]
    assert retry[0] == {"role": "user", "content": "q"}
    assert retry[-1]["role"] == "user" and "not valid JSON" in retry[-1]["content"]


def test_missing_required_key_counts_as_invalid(fake):
    server = fake(scripted('{"other": 1}', '{"answer": 1}'))
    assert backend_for(server).complete([{"role": "user", "content": "q"}], SCHEMA) == {"answer": 1}
    assert len(server.chats) == 2


@pytest.mark.parametrize("max_retries", [0, 2])
def test_always_invalid_raises_model_error_after_bounded_retries(fake, max_retries):
    server = fake(scripted("no json here"))
    backend = backend_for(server, max_retries=max_retries)
    with pytest.raises(ModelError, match="no valid JSON"):
        backend.complete([{"role": "user", "content": "q"}], SCHEMA)
    assert len(server.chats) == max_retries + 1


def test_server_errors_become_model_error(fake):
    server = fake(lambda body: (500, {"error": {"message": "boom"}}))
    backend = backend_for(server, max_retries=0)
    with pytest.raises(ModelError, match="failed"):
        backend.complete([{"role": "user", "content": "q"}], SCHEMA)
    assert len(server.chats) == 1


def test_rejected_response_format_falls_back_to_prompted_schema(fake):
    def chat(body: dict) -> Reply:
        if "response_format" in body:
            return 400, {"error": {"message": "response_format json_schema not supported"}}
        return '{"answer": 5}'

    server = fake(chat)
    backend = backend_for(server)
    assert backend.complete([{"role": "user", "content": "q"}], SCHEMA) == {"answer": 5}
    assert backend.complete([{"role": "user", "content": "q"}], SCHEMA) == {"answer": 5}
    # One rejected request, then prompt-only requests that carry the schema.
    assert [("response_format" in b) for b in server.chats] == [True, False, False]
    assert '"answer"' in server.chats[1]["messages"][0]["content"]


def test_extract_entities_drops_relations_to_unknown_entities(fake):
    answer = {
        "entities": [
            {"name": "Ada Lovelace", "type": "person", "description": "A mathematician."},
            {"name": "Analytical Engine", "type": "product", "description": "A machine."},
        ],
        "relations": [
            {"source": "Ada Lovelace", "target": "Analytical Engine", "type": "wrote_about"},
            {"source": "Ada Lovelace", "target": "Charles Babbage", "type": "knew"},
        ],
    }
    server = fake(scripted(json.dumps(answer)))
    backend = backend_for(server)
    entities, relations = backend.extract_entities("Ada Lovelace wrote about the engine.")
    assert [(e.name, e.type) for e in entities] == [
        ("Ada Lovelace", "PERSON"),
        ("Analytical Engine", "PRODUCT"),
    ]
    assert [(r.source, r.target, r.type) for r in relations] == [
        ("Ada Lovelace", "Analytical Engine", "wrote_about")
    ]
    body = server.chats[0]
    assert body["response_format"]["json_schema"]["schema"] == ENTITY_SCHEMA
    assert body["messages"][-1]["content"] == "Ada Lovelace wrote about the engine."
    batch = backend.extract_entities_batch(["one", "two"])
    assert len(batch) == 2 and len(server.chats) == 3


def test_describe_image_sends_png_data_uri(fake):
    server = fake(scripted("A bar chart."))
    backend = backend_for(server, vision_model="fake-vlm")
    png = b"\x89PNG\r\n\x1a\nfake"
    assert backend.describe_image(png, "Describe the figure.") == "A bar chart."
    body = server.chats[0]
    assert body["model"] == "fake-vlm"
    parts = body["messages"][0]["content"]
    assert {"type": "text", "text": "Describe the figure."} in parts
    url = next(p["image_url"]["url"] for p in parts if p["type"] == "image_url")
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix) and base64.b64decode(url[len(prefix) :]) == png


def test_endpoint_embeddings_are_normalised_float32(fake):
    server = fake(scripted("unused"))
    backend = backend_for(server, embed_model="fake-embed", embed_batch_size=2)
    vectors = backend.embed(["aab", "c", "abc"])
    assert vectors.dtype == np.float32 and vectors.shape == (3, 4)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    expected = np.array([2, 1, 0, 1], dtype=np.float32)
    np.testing.assert_allclose(vectors[0], expected / np.linalg.norm(expected), rtol=1e-6)
    assert backend.dim == 4
    assert len([p for p, _ in server.requests if p.endswith("/embeddings")]) == 2  # batches of 2
    scores = backend.rerank("aaa", ["aaa", "ccc"])
    assert scores[0] > scores[1]


def test_offline_embedder_without_embed_model(fake):
    server = fake(scripted("unused"))
    assert backend_for(server).dim == 384
    assert server.requests == []


def test_missing_base_url_or_model_fails_at_construction(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelError, match="base_url"):
        OpenAIBackend(ModelConfig(backend="openai", model="m"))
    with pytest.raises(ModelError, match="model name"):
        OpenAIBackend(ModelConfig(backend="openai", base_url="http://127.0.0.1:9/v1"))


def test_base_url_from_environment(fake, monkeypatch):
    server = fake(scripted("ok"))
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    backend = load_backend(ModelConfig(backend="openai", model="fake-model"))
    assert backend.complete([{"role": "user", "content": "hi"}]) == "ok"


def test_vllm_backend_fails_clearly_without_vllm():
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed here")
    with pytest.raises(ModelError, match=r"needs the vllm package on a GPU worker"):
        load_backend(ModelConfig(backend="vllm"))
