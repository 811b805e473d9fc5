"""pipelines/viewer/routes.py on a small FastAPI app behind the guard (no Ray): the page and its
assets are open and come from the package with a Content-Security-Policy; the data routes need
the token; with the viewer off they answer 404; paths and numbers out of range are refused
before any lookup, without echoing them."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from bookindex.pipelines.serve_guard import GuardSettings, RequestGuard, install_error_handlers
from bookindex.pipelines.viewer.routes import ASSETS, install_viewer

TOKEN = "v13w3r-" + "x" * 20


def _client() -> TestClient:
    app = FastAPI()
    app.add_middleware(RequestGuard, settings=lambda: GuardSettings("token", TOKEN, 4096))
    install_error_handlers(app)
    install_viewer(app, lambda: None)  # the viewer off
    return TestClient(app)


def test_the_page_and_its_assets_are_open_and_run_only_their_own_code():
    client = _client()
    for path in ASSETS:
        answer = client.get(path)
        assert answer.status_code == 200, path
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "connect-src 'self'" in policy
        assert answer.headers["x-content-type-options"] == "nosniff"
    page = client.get("/viewer").text
    assert '<script src="/viewer/viewer.js"' in page and "http" not in page.replace(
        "http-equiv", ""
    )
    script = client.get("/viewer/viewer.js").text
    assert "sessionStorage" in script and "Authorization" in script and "innerHTML" not in script


def test_the_data_needs_the_token_and_answers_404_with_the_viewer_off():
    client = _client()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for path in ("/viewer/api/corpus", "/viewer/api/docs/abc/pages/1/image"):
        assert client.get(path).status_code == 401
        off = client.get(path, headers=auth)
        assert off.status_code == 404 and "viewer is off" in off.json()["error"]
    marker = "M4RK3R" * 3
    for path in (f"/viewer/api/docs/abc/pages/{marker}", "/viewer/api/docs/abc/pages/0"):
        refused = client.get(path, headers=auth)
        assert refused.status_code == 422 and marker not in refused.text
