"""The Ray Serve application over HTTP on 127.0.0.1: retrieval results, request batching, and
clear 4xx answers to malformed requests while the server keeps serving."""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bookindex.pipelines.ports import free_port

QUESTION = "Are Christopher Nolan and Sathish Kalathil both film directors?"


@pytest.fixture(scope="module")
def server(hotpot_questions_index, tmp_path_factory):
    from ray import serve

    from bookindex.pipelines.serve_app import build_app

    root = tmp_path_factory.mktemp("serve")
    index, questions = hotpot_questions_index  # 25 passages, the questions' gold among them
    token = secrets.token_urlsafe(24)
    (root / "token").write_text(token, encoding="utf-8")
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    app = build_app({"index": str(index), "serve": {"token_file": str(root / "token")}})
    serve.run(app, name="bookindex", route_prefix="/")
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120, headers=auth) as client:
        yield client, questions
    serve.shutdown()


def test_health_and_openapi(server):
    client, _ = server
    health = client.get("/health")
    assert health.status_code == 200
    assert health.json()["status"] == "ok" and health.json()["documents"] >= 24
    assert "/retrieve" in client.get("/openapi.json").json()["paths"]


def test_retrieve_ranks_documents_with_chunk_evidence(server):
    client, questions = server
    nolan = next(q for q in questions if q["question"] == QUESTION)
    for method, k in (("zoom", 10), ("bm25", 5), ("dense", 5)):
        reply = client.post("/retrieve", json={"query": QUESTION, "k": k, "method": method})
        assert reply.status_code == 200, reply.text
        documents = reply.json()["results"][0]["documents"]
        assert len(documents) == k
        scores = [d["score"] for d in documents]
        assert scores == sorted(scores, reverse=True)
        assert {str(g) for g in nolan["gold_ids"]} <= {d["id"] for d in documents}, method
    zoom = client.post("/retrieve", json={"query": QUESTION, "k": 3}).json()
    chunks = [c for d in zoom["results"][0]["documents"] for c in d["chunks"]]
    assert chunks and all(
        {"text", "score", "node_id", "sec_id", "para_idx"} <= set(c) for c in chunks
    )
    many = client.post("/retrieve", json={"queries": [q["question"] for q in questions], "k": 2})
    assert [r["query"] for r in many.json()["results"]] == [q["question"] for q in questions]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("{not json", "json"),
        ({"query": "   "}, "empty"),
        ({"query": "x" * 5000}, "at most"),
        ({"query": "q", "k": 0}, "greater than"),
        ({"query": "q", "k": 1000}, "less than"),
        ({"query": "q", "method": "magic"}, "zoom"),
        ({"query": "q", "queries": ["r"]}, "exactly one"),
        ({}, "exactly one"),
        ({"queries": []}, "1 to"),
        ({"query": "q", "extra": 1}, "extra"),
    ],
)
def test_malformed_requests_get_a_clear_4xx_and_the_server_keeps_serving(server, body, needle):
    client, _ = server
    if isinstance(body, str):
        reply = client.post("/retrieve", content=body, headers={"Content-Type": "application/json"})
    else:
        reply = client.post("/retrieve", json=body)
    assert 400 <= reply.status_code < 500
    assert needle in reply.text.lower()
    assert client.post("/retrieve", json={"query": QUESTION, "k": 1}).status_code == 200


def test_concurrent_requests_share_one_step(server):
    client, _ = server

    def ask(i: int) -> int:
        reply = client.post("/retrieve", json={"query": f"{QUESTION} {i}", "method": "dense"})
        assert reply.status_code == 200
        return reply.json()["results"][0]["batch_size"]

    with ThreadPoolExecutor(16) as pool:
        sizes = list(pool.map(ask, range(32)))
    assert max(sizes) > 1
    assert client.get("/health").json()["max_batch"] > 1


def test_query_answers_with_evidence_and_rejects_bad_requests(server):
    client, questions = server
    nolan = next(q for q in questions if q["question"] == QUESTION)
    gold = {str(g) for g in nolan["gold_ids"]}
    for method in ("auto", "bookrag", "deepread", "ladrag", "zoom"):
        reply = client.post("/query", json={"question": QUESTION, "method": method, "k": 5})
        assert reply.status_code == 200, reply.text
        result = reply.json()
        assert result["error"] is None and result["plan"] and result["timings"]["total_s"] > 0
        assert gold & {e["doc"] for e in result["evidence"]}, method
        assert all(
            {"page", "sec_id", "para_idx", "text", "score"} <= set(e) for e in result["evidence"]
        )
    one = sorted(gold)[0]
    inside = client.post("/query", json={"question": QUESTION, "doc": one, "method": "deepread"})
    assert {e["doc"] for e in inside.json()["evidence"]} == {one}
    missing = client.post("/query", json={"question": QUESTION, "doc": "no-such-doc"})
    assert missing.status_code == 404 and "no document" in missing.json()["error"]
    for body, needle in [
        ({"question": "  "}, "empty"),
        ({"question": "q", "method": "magic"}, "bookrag"),
        ({"question": "q", "k": 0}, "greater than"),
        ({"question": "q", "code": "1"}, "extra"),
    ]:
        reply = client.post("/query", json=body)
        assert reply.status_code == 422 and needle in reply.text.lower(), (body, reply.text)


def test_concurrent_query_requests_are_answered_as_one_batch(server):
    """/query is batched like /retrieve: concurrent questions, dense and zoom among them, are
    answered in one engine step each, each as it is alone."""
    client, _ = server
    alone = client.post("/query", json={"question": QUESTION, "method": "zoom", "k": 3}).json()

    def ask(i: int) -> dict:
        method = ("zoom", "dense", "ladrag")[i % 3]
        question = QUESTION if i == 0 else f"{QUESTION} {i}"
        reply = client.post("/query", json={"question": question, "method": method, "k": 3})
        assert reply.status_code == 200, reply.text
        return reply.json()

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(ask, range(24)))
    assert all(r["error"] is None and r["evidence"] for r in results)
    assert [e["node_id"] for e in results[0]["evidence"]] == [
        e["node_id"] for e in alone["evidence"]
    ]
    assert client.get("/health").json()["max_query_batch"] > 1
