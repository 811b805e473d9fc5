"""pipelines/serve_guard.py on a small FastAPI app (no Ray): the token check, loopback-only
without auth, the body limit read by counting, and bounded error bodies."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict

from bookindex.pipelines.serve_guard import (
    TOKEN_ENV,
    GuardSettings,
    RequestGuard,
    TokenError,
    bounded_errors,
    install_error_handlers,
    read_token,
)

TOKEN = "t0k3n-" + "x" * 20


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    k: int


def _app(settings: GuardSettings | None) -> FastAPI:
    app = FastAPI()
    app.add_middleware(RequestGuard, settings=lambda: settings)
    install_error_handlers(app)

    @app.post("/echo")
    async def echo(body: Body) -> dict:
        return {"k": body.k}

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    return app


def test_the_token_is_needed_everywhere_but_health():
    client = TestClient(_app(GuardSettings("token", TOKEN, 1024)))
    assert client.get("/health").status_code == 200
    assert client.post("/echo", json={"k": 1}).status_code == 401
    wrong = client.post("/echo", json={"k": 1}, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json() == {"detail": "wrong bearer token"}
    basic = client.post("/echo", json={"k": 1}, headers={"Authorization": f"Basic {TOKEN}"})
    assert basic.status_code == 401
    good = client.post("/echo", json={"k": 1}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert good.status_code == 200 and good.json() == {"k": 1}
    assert client.get("/nowhere").status_code == 401  # unknown paths too: nothing to probe


def test_without_auth_only_loopback_clients_are_served():
    off = GuardSettings("off", "", 1024)
    assert TestClient(_app(off), client=("127.0.0.1", 5000)).post("/echo", json={"k": 2}).json()
    outside = TestClient(_app(off), client=("203.0.113.9", 5000)).post("/echo", json={"k": 2})
    assert outside.status_code == 403
    assert TestClient(_app(None)).post("/echo", json={"k": 2}).status_code == 503  # not started


def test_bodies_over_the_limit_are_refused_unread():
    client = TestClient(_app(GuardSettings("token", TOKEN, 1024)))
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    assert client.post("/echo", content=b'{"k": 1}' + b" " * 1000, headers=auth).status_code == 200
    big = client.post("/echo", content=b'{"k": 1}' + b" " * 1100, headers=auth)
    assert big.status_code == 413 and len(big.content) < 100

    def chunks():  # no Content-Length: counted while read
        for _ in range(20):
            yield b" " * 100

    streamed = client.post("/echo", content=chunks(), headers=auth)
    assert streamed.status_code == 413


def test_validation_errors_name_the_field_and_never_echo_the_input():
    client = TestClient(_app(GuardSettings("token", TOKEN, 10**6)))
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    for raw in (b'{"k": NaN}', b'{"k": Infinity}', b'{"k": "\\ud800"}'):
        reply = client.post("/echo", content=raw, headers=auth)
        assert reply.status_code == 422, reply.text
        assert reply.json()["detail"][0]["loc"] == ["body", "k"]
    for key, loc in [
        ("q" * 50_000, ["body", "q" * 64 + "..."]),  # a field name: cut to 64 characters
        ("\ud800" + "q" * 50_000, ["body"]),  # not even a string: named as the body
    ]:
        raw = json.dumps({"k": 1, key: 1}).encode()  # the surrogate as \ud800
        reply = client.post("/echo", content=raw, headers=auth)
        assert reply.status_code == 422 and len(reply.content) < 400
        assert reply.json()["detail"][0]["loc"] == loc


def test_bounded_errors_keeps_at_most_a_few_short_problems():
    errors = [{"loc": ("body", "x" * 500), "msg": "m" * 900, "type": "t", "input": "i"}] * 20
    out = bounded_errors(errors)
    assert len(out) == 9 and out[-1]["msg"] == "and 12 more"
    assert all("input" not in e for e in out) and len(out[0]["msg"]) <= 203


def test_the_token_comes_from_a_file_or_the_environment(tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN + "\nignored\n", encoding="utf-8")
    assert read_token(str(path), env={}) == TOKEN
    assert read_token("", env={TOKEN_ENV: f" {TOKEN} "}) == TOKEN
    with pytest.raises(TokenError, match="holds no token"):
        read_token("", env={})
    with pytest.raises(TokenError, match="shorter than 16"):
        read_token("", env={TOKEN_ENV: "short"})
    with pytest.raises(TokenError, match="token_file"):
        read_token(str(tmp_path / "missing"), env={TOKEN_ENV: TOKEN})


def test_jobs_serve_refuses_to_start_without_a_token_or_open_without_one(
    tmp_path, monkeypatch, capsys
):
    from bookindex.jobs.serve import main

    (tmp_path / "documents.lance").mkdir()  # looks like an index: the checks come first
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert main(["--index", str(tmp_path)]) == 2
    assert "holds no token" in capsys.readouterr().err
    assert main(["--index", str(tmp_path), "--host", "0.0.0.0", "--no-auth"]) == 2
    assert "only on a loopback host" in capsys.readouterr().err
    monkeypatch.setenv(TOKEN_ENV, "short")
    assert main(["--index", str(tmp_path)]) == 2
    assert "shorter than 16" in capsys.readouterr().err
