"""``bookindex serve`` as a user starts it: its own local Ray, Ray Serve's direct ingress
(the engine replica answers HTTP on serve.port itself), and the same guard as through the proxy:
the bearer token, the body limit, 422 on a bad field; /retrieve and /query answer."""

from __future__ import annotations

import json
import secrets

import httpx
import pytest

from bookindex.pipelines.serve_app import DIRECT_INGRESS_DRAIN_S, DRAIN_VARIABLE, direct_ingress_env
from tests.serving import bookindex_serve

QUESTION = "Are Christopher Nolan and Sathish Kalathil both film directors?"


@pytest.fixture(scope="module")
def direct(hotpot_index):
    index = hotpot_index("serve_direct")
    root = index.parent
    token = secrets.token_urlsafe(24)
    log = root / "serve.log"
    serving = bookindex_serve(index, log, token, "--set", "serve.max_body_bytes=2048")
    with serving as base, httpx.Client(base_url=base, timeout=120) as client:
        yield client, token, log.read_text()


def test_the_engine_replica_answers_on_the_port_with_the_guard(direct):
    client, token, log = direct
    assert "the engine replica; Serve's proxy at" in log
    auth = {"Authorization": f"Bearer {token}"}
    assert client.get("/health").json()["status"] == "ok"
    assert client.post("/retrieve", json={"query": QUESTION}).status_code == 401
    wrong = {"Authorization": "Bearer " + "w" * 24}
    assert client.post("/retrieve", json={"query": QUESTION}, headers=wrong).status_code == 401
    found = client.post("/retrieve", json={"query": QUESTION, "k": 3}, headers=auth)
    assert found.status_code == 200 and len(found.json()["results"][0]["documents"]) == 3
    big = json.dumps({"query": "x" * 5000})
    headers = {**auth, "Content-Type": "application/json"}
    assert client.post("/retrieve", content=big, headers=headers).status_code == 413
    bad = client.post("/retrieve", json={"query": QUESTION, "k": 0}, headers=auth)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "k"]
    answer = client.post("/query", json={"question": QUESTION, "method": "ladrag"}, headers=auth)
    assert answer.status_code == 200 and answer.json()["evidence"], answer.text


def test_a_stop_drains_for_seconds_not_for_a_load_balancer(monkeypatch):
    """Ray's 30 s drain of a direct-ingress replica (for a load balancer that one local server
    does not have) made Ctrl-C take over 30 s; the environment's own setting still wins."""
    monkeypatch.delenv(DRAIN_VARIABLE, raising=False)
    env = direct_ingress_env(8000)
    assert float(env[DRAIN_VARIABLE]) == DIRECT_INGRESS_DRAIN_S <= 5
    assert env["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"] == "8000"
    monkeypatch.setenv(DRAIN_VARIABLE, "30")
    assert direct_ingress_env(8000)[DRAIN_VARIABLE] == "30"
