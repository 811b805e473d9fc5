"""The Serve application against hostile and careless callers, on 127.0.0.1: the bearer token on
every endpoint but /health, the reload rate limit, a poisonous query failing alone inside its
@serve.batch, /health telling the truth about a failed reload, the body limit, error bodies that
name the field without echoing the input, and property-based requests generated from the
application's own OpenAPI schema (hypothesis): never a 5xx, never an echo."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import socket
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TOKEN = secrets.token_urlsafe(24)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
QUESTION = "Are Christopher Nolan and Sathish Kalathil both film directors?"
RELOAD_GAP_S = 3.0
BODY_LIMIT = 300_000
# An error body names a field by its name, cut to 64 characters (pipelines/serve_guard.py); no
# 65 characters of any generated string may come back in one.
ECHO_BOUND = 65
ERROR_BODY_BOUND = 4096


def _start(index: Path, token_file: Path) -> str:
    """Serve the index on a free 127.0.0.1 port with the token file; the base URL."""
    from ray import serve

    from bookindex.pipelines.serve_app import build_app

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve_section = {
        "token_file": str(token_file),
        "reload_min_interval_s": RELOAD_GAP_S,
        "max_body_bytes": BODY_LIMIT,
        "health_cache_s": 0,
    }
    app = build_app({"index": str(index), "device": "cpu", "serve": serve_section})
    serve.run(app, name="bookindex", route_prefix="/")
    return f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def served(hotpot_index):
    """A 12-passage HotpotQA index served with a token."""
    from ray import serve

    root = hotpot_index("serve_security").parent
    (root / "token").write_text(TOKEN + "\n", encoding="utf-8")
    with httpx.Client(base_url=_start(root / "index", root / "token"), timeout=120) as client:
        yield client, root / "index"
    serve.shutdown()


def _paths(client: httpx.Client) -> list[tuple[str, str]]:
    schema = client.get("/openapi.json", headers=AUTH).json()
    found = [(m.upper(), p) for p, ops in schema["paths"].items() for m in ops]
    assert {("POST", "/retrieve"), ("POST", "/query"), ("POST", "/admin/reload")} <= set(found)
    return found + [("GET", "/openapi.json"), ("GET", "/docs"), ("POST", "/nowhere")]


OPEN = {"/health", "/docs", "/openapi.json"}  # serve_guard.OPEN_PATHS


def test_every_endpoint_but_health_and_the_docs_needs_the_bearer_token(served):
    client, _ = served
    wrong = secrets.token_urlsafe(24)
    for method, path in _paths(client):
        for headers in ({}, {"Authorization": f"Bearer {wrong}"}, {"Authorization": TOKEN}):
            reply = client.request(method, path, json={"query": QUESTION}, headers=headers)
            if path in OPEN:
                assert reply.status_code == 200, (method, path, reply.text)
                continue
            assert reply.status_code == 401, (method, path, headers, reply.status_code)
            assert reply.headers["www-authenticate"].startswith("Bearer")
            assert TOKEN not in reply.text and wrong not in reply.text
    ok = client.post("/retrieve", json={"query": QUESTION, "k": 2}, headers=AUTH)
    assert ok.status_code == 200 and len(ok.json()["results"][0]["documents"]) == 2
    lower = client.post(
        "/retrieve", json={"query": QUESTION}, headers={"authorization": f"bearer {TOKEN}"}
    )
    assert lower.status_code == 200
    # /docs in a browser: the page and its schema open, the bearer scheme declared on every
    # protected route (Swagger's Authorize button sends the token with each call)
    spec = client.get("/openapi.json").json()
    schemes = spec["components"]["securitySchemes"]
    assert [s["scheme"] for s in schemes.values()] == ["bearer"]
    for path in ("/retrieve", "/query", "/admin/reload"):
        assert spec["paths"][path]["post"]["security"] == [{name: []} for name in schemes]
    assert "swagger" in client.get("/docs").text.lower()


def test_reloads_are_rate_limited(served):
    client, _ = served
    time.sleep(RELOAD_GAP_S)
    first = client.post("/admin/reload", headers=AUTH)
    assert first.status_code == 200 and first.json()["reloaded"] is False, first.text
    second = client.post("/admin/reload", params={"force": True}, headers=AUTH)
    assert second.status_code == 429, second.text
    assert 1 <= int(second.headers["retry-after"]) <= RELOAD_GAP_S + 1
    time.sleep(RELOAD_GAP_S)
    third = client.post("/admin/reload", params={"force": True}, headers=AUTH)
    assert third.status_code == 200 and third.json()["reloaded"] is True, third.text


def test_a_poisoned_query_fails_alone_inside_its_batch(served):
    """A lone surrogate gets past no schema, so it is sent to the engine deployment directly:
    the batch it lands in is answered for every other query."""
    from ray import serve

    client, _ = served
    engine = serve.get_deployment_handle("RetrievalEngine", app_name="bookindex")
    valid = [f"{QUESTION} {i}" for i in range(15)]

    async def one_round() -> list[dict]:
        calls = [engine.retrieve.remote((q, "dense", 3)) for q in valid[:7]]
        calls.append(engine.retrieve.remote(("film \ud800 directors", "dense", 3)))
        calls += [engine.retrieve.remote((q, "dense", 3)) for q in valid[7:]]
        return list(await asyncio.gather(*calls))

    for _ in range(5):
        results = asyncio.run(one_round())
        poisoned = results.pop(7)
        assert "failed" in poisoned and "documents" not in poisoned, poisoned
        assert all(len(r["documents"]) == 3 for r in results), results
        if poisoned["batch_size"] > 1:  # it shared a batch with valid queries
            break
    else:
        pytest.fail("the poisoned query never shared a batch with valid ones")
    assert client.get("/health", headers=AUTH).json()["group_retries"] >= 1  # counted (and logged)
    raw = json.dumps({"query": "film \ud800"}).encode()
    headers = {**AUTH, "Content-Type": "application/json"}
    over_http = client.post("/retrieve", content=raw, headers=headers)
    assert over_http.status_code == 422 and "utf-8" in over_http.text.lower()


@pytest.mark.parametrize(
    ("path", "raw", "field"),
    [
        ("/retrieve", '{"query": "q", "k": NaN}', "k"),
        ("/retrieve", '{"query": "q", "k": Infinity}', "k"),
        ("/retrieve", '{"query": "q", "k": -Infinity}', "k"),
        ("/retrieve", '{"query": "a \\ud800 b"}', "query"),
        ("/retrieve", '{"queries": ["ok", "\\udfff"]}', "queries"),
        ("/query", '{"question": "a \\ud800 b"}', "question"),
        ("/query", '{"question": "q", "doc": "\\ud800.pdf"}', "doc"),
        ("/query", '{"question": "q", "k": NaN}', "k"),
    ],
)
def test_non_finite_and_non_utf8_inputs_get_a_422_naming_the_field(served, path, raw, field):
    client, _ = served
    headers = {**AUTH, "Content-Type": "application/json"}
    reply = client.post(path, content=raw.encode(), headers=headers)
    assert reply.status_code == 422, reply.text
    assert field in {str(p) for e in reply.json()["detail"] for p in e["loc"]}, reply.text


def test_bodies_are_bounded_and_errors_never_echo_the_input(served):
    client, _ = served
    big = "x" * (BODY_LIMIT + 1)
    reply = client.post("/retrieve", json={"query": big}, headers=AUTH)
    assert reply.status_code == 413 and len(reply.content) < 200
    long_key = "k" * 100_000
    for path, body in [
        ("/retrieve", {"query": "q", long_key: 1}),
        ("/retrieve", {"query": "y" * 100_000}),
        ("/query", {"question": "z" * 100_000}),
        ("/retrieve", [long_key]),
    ]:
        reply = client.post(path, json=body, headers=AUTH)
        assert reply.status_code == 422, reply.text[:300]
        assert len(reply.content) < 1000, len(reply.content)
        assert "k" * 100 not in reply.text and "y" * 100 not in reply.text
        assert reply.json()["detail"][0]["loc"]  # names where the problem is
    doc = "no-such-doc-" + "d" * 1500
    missing = client.post("/query", json={"question": QUESTION, "doc": doc}, headers=AUTH)
    assert missing.status_code == 404 and "no document" in missing.json()["error"]
    assert "d" * 100 not in missing.text and missing.json()["detail"][0]["loc"] == ["body", "doc"]


def test_health_without_the_token_says_ok_or_failing_and_nothing_else(served):
    client, index = served
    for headers in ({}, {"Authorization": "Bearer " + "w" * 24}):
        bare = client.get("/health", headers=headers)
        assert bare.status_code == 200 and bare.json() == {"status": "ok"}, bare.text
    full = client.get("/health", headers=AUTH).json()
    assert full["index"] == str(index) and set(full["components"]) >= {"index", "engine"}


def test_damaged_data_files_are_noticed_without_a_forced_reload(served):
    """A data file of the open index removed on disk: a non-forced reload (nothing new is
    committed) and /health both notice it; only the token shows which file."""
    client, index = served
    data = sorted((index / "nodes.lance" / "data").iterdir())[0]
    aside = index.parent / "nodes-data.aside"
    shutil.move(data, aside)
    missing = [f"nodes: {data.name} is missing"]
    try:
        time.sleep(RELOAD_GAP_S)
        reload = client.post("/admin/reload", headers=AUTH)
        assert reload.status_code == 200, reload.text
        assert reload.json()["reloaded"] is False and reload.json()["damaged"] == missing
        bare = client.get("/health")
        assert bare.status_code == 503 and bare.json() == {"status": "failing"}, bare.text
        detail = client.get("/health", headers=AUTH).json()["components"]["index"]
        assert detail["status"] == "failing" and detail["damaged"] == missing
    finally:
        shutil.move(aside, data)
    healed = client.get("/health")
    assert healed.status_code == 200 and healed.json() == {"status": "ok"}, healed.text


def test_health_reports_each_component_and_a_failed_reload(served):
    client, index = served
    health = client.get("/health", headers=AUTH)
    assert health.status_code == 200, health.text
    report = health.json()
    assert report["status"] == "ok"
    assert set(report["components"]) == {"index", "engine", "query_engine", "reload"}
    assert all(c["status"] == "ok" for c in report["components"].values())
    version = report["components"]["index"]["version"]
    assert version == report["components"]["index"]["committed_version"] > 0

    documents = index / "documents.lance"
    aside = index.parent / "documents.aside"
    shutil.move(documents, aside)
    documents.write_text("not a table")  # a damaged index: documents is no Lance dataset
    try:
        time.sleep(RELOAD_GAP_S)
        failed = client.post("/admin/reload", params={"force": True}, headers=AUTH)
        assert failed.status_code == 503 and failed.json()["error"], failed.text
        health = client.get("/health", headers=AUTH)
        assert health.status_code == 503, health.text
        report = health.json()
        assert client.get("/health").json() == {"status": "failing"}  # no error text, no path
        assert report["status"] == "failing"
        assert report["components"]["reload"]["status"] == "failing"
        assert report["components"]["index"]["status"] == "failing"
        # the open index keeps answering meanwhile
        ok = client.post("/retrieve", json={"query": QUESTION, "k": 1}, headers=AUTH)
        assert ok.status_code == 200
    finally:
        documents.unlink()
        shutil.move(aside, documents)
    time.sleep(RELOAD_GAP_S)
    again = client.post("/admin/reload", params={"force": True}, headers=AUTH)
    assert again.status_code == 200 and again.json()["reloaded"], again.text
    healed = client.get("/health")
    assert healed.status_code == 200 and healed.json()["status"] == "ok", healed.text


# ---- property-based: requests generated from the OpenAPI schema -------------------------------

TEXT = st.text(
    st.characters(exclude_categories=()) | st.sampled_from(["\ud800", "\udfff", "\x00", "\u202e"]),
    max_size=40,
) | st.builds(lambda c, n: c * n, st.sampled_from("xé\ud800"), st.integers(0, 30_000))
NUMBER = st.integers(-(10**30), 10**30) | st.floats(allow_nan=True, allow_infinity=True)
ANY_JSON = st.recursive(
    st.none() | st.booleans() | NUMBER | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=10,
)


def _resolve(schema: dict, spec: dict) -> dict:
    while "$ref" in schema:
        node = spec
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _values(schema: dict, spec: dict, hostile: bool = True) -> st.SearchStrategy:
    """Values of the type the field's schema declares (enums, integers near the bounds, strings,
    arrays); with ``hostile``, mixed with any JSON at all and strings of any code points."""
    schema = _resolve(schema, spec)
    options = [ANY_JSON] if hostile else []
    for part in schema.get("anyOf", []):
        if part.get("type") != "null" or hostile:
            options.append(_values(part, spec, hostile))
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"]))
    if "const" in schema:
        options.append(st.just(schema["const"]))
    kind = schema.get("type")
    if kind == "string":
        options.append(st.sampled_from([QUESTION, "film directors", "zoom"]))
        if hostile:
            options.append(TEXT)
    elif kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -5))
        options.append(st.integers(low - 2, low + 120) if hostile else st.integers(low, low + 9))
    elif kind == "array":
        items = _values(schema.get("items", {}), spec, hostile)
        options.append(st.lists(items, min_size=0 if hostile else 1, max_size=5))
    return st.one_of(options) if options else st.none()


def _bodies(spec: dict, path: str) -> st.SearchStrategy:
    body = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    properties = _resolve(body, spec).get("properties", {})
    required = set(_resolve(body, spec).get("required", []))

    def fields(hostile: bool) -> st.SearchStrategy:
        values = {name: _values(s, spec, hostile) for name, s in properties.items()}
        needed = {k: v for k, v in values.items() if k in required}
        optional = {k: v for k, v in values.items() if k not in required}
        return st.fixed_dictionaries(needed, optional=optional)

    extra = st.dictionaries(TEXT, ANY_JSON, min_size=1, max_size=2)
    return st.one_of(
        fields(hostile=False),  # mostly well-formed: the engines are reached
        fields(hostile=True),
        st.tuples(fields(hostile=True), extra).map(lambda pair: {**pair[1], **pair[0]}),
        ANY_JSON,
    )


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(k) + _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.parametrize("path", ["/retrieve", "/query"])
def test_generated_requests_never_get_a_5xx_or_an_echo(served, path):
    client, _ = served
    spec = client.get("/openapi.json", headers=AUTH).json()
    headers = {**AUTH, "Content-Type": "application/json"}
    seen: list[int] = []

    @settings(
        max_examples=60,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(body=_bodies(spec, path))
    def check(body: object) -> None:
        raw = json.dumps(body, allow_nan=True).encode()  # NaN, Infinity and \ud800 as sent
        reply = client.post(path, content=raw, headers=headers)
        seen.append(reply.status_code)
        assert reply.status_code < 500, (reply.status_code, reply.text[:300])
        if reply.status_code != 200:
            assert len(reply.content) <= ERROR_BODY_BOUND, len(reply.content)
            text = reply.content.decode("utf-8")
            for s in _strings(body):
                if len(s) >= ECHO_BOUND and s.strip():
                    assert s[:ECHO_BOUND] not in text, reply.text[:300]

    check()
    assert 200 in seen and 422 in seen, sorted(set(seen))  # both sides were exercised
