"""``bookindex serve`` as a user starts it: its own local Ray, Ray Serve's direct ingress
(the engine replica answers HTTP on serve.port itself), and the same guard as through the proxy:
the bearer token, the body limit, 422 on a bad field; /retrieve and /query answer."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bookindex.pipelines.serve_app import free_port

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Are Christopher Nolan and Sathish Kalathil both film directors?"


@pytest.fixture(scope="module")
def direct(hotpot_index):
    index = hotpot_index("serve_direct")
    root = index.parent
    token, port = secrets.token_urlsafe(24), free_port()
    env = dict(os.environ, BOOKINDEX_SERVE_TOKEN=token, PYTHONPATH=str(ROOT))
    env.pop("RAY_ADDRESS", None)
    # Ray Serve keeps a direct-ingress replica draining for 30 s at shutdown (time for a load
    # balancer to deregister it; none here): the fixture's stop took ~34 s, all of it waiting.
    env["RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"] = "0"
    command = [str(Path(sys.executable).with_name("bookindex")), "serve", "--index", str(index)]
    command += ["--port", str(port), "--set", "serve.max_body_bytes=2048"]
    log = (root / "serve.log").open("w")
    server = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        # Ctrl-C stops it even where pytest itself runs with SIGINT ignored (started in the
        # background: `cmd &`); there the stop below ran into its 60 s timeout and a kill
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 300
        while "serving" not in (root / "serve.log").read_text():
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    "bookindex serve did not start:\n" + (root / "serve.log").read_text()[-3000:]
                )
            time.sleep(1)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client, token, (root / "serve.log").read_text()
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


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
