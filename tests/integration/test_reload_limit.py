"""The /admin/reload rate limit holds for the whole application, not per replica: two engine
replicas (each its own HTTP ingress), reloads asked at once and one after another — one reload per
``serve.reload_min_interval_s`` in all (``ReloadGate``), every other ask a 429 with Retry-After.
(With the limit kept in each engine replica, two engine replicas took two reloads per
interval.)"""

from __future__ import annotations

import asyncio
import secrets
import socket
import time

import httpx
import pytest

TOKEN = secrets.token_urlsafe(24)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GAP_S = 10.0  # the asks below take ~1 s under load 24: 10 s leaves a tenfold margin
APP = "reload_limit"


@pytest.fixture(scope="module")
def served(hotpot_index):
    from ray import serve

    from bookindex.pipelines.serve_app import (
        ReloadGate,
        RetrievalEngine,
        app_config,
        build_app,
        portable,
    )

    root = hotpot_index("reload_limit").parent  # 12 HotpotQA passages
    (root / "token").write_text(TOKEN + "\n", encoding="utf-8")
    args = {"index": str(root / "index"), "device": "cpu"}
    args["serve"] = {"token_file": str(root / "token"), "reload_min_interval_s": GAP_S}
    # build_app wires the gate into the engine; here the same graph with two engine replicas
    assert build_app(args)._bound_deployment.init_args[4] is not None
    config = portable(app_config(args))
    two = {"num_replicas": 2, "ray_actor_options": {"num_cpus": 0}}
    app = RetrievalEngine.options(**two).bind(
        args["index"], "cpu", 0, config, ReloadGate.bind(GAP_S)
    )
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(app, name=APP, route_prefix="/")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
        yield client
    serve.shutdown()


def _replicas(name: str) -> int:
    from ray import serve

    status = serve.status().applications[APP].deployments[name]
    return status.replica_states.get("RUNNING", 0)


async def _at_once(base_url: str, n: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        asks = [
            client.post("/admin/reload", params={"force": True}, headers=AUTH) for _ in range(n)
        ]
        return await asyncio.gather(*asks)


def test_one_reload_per_interval_across_two_engine_replicas(served):
    from ray import serve

    client = served
    assert _replicas("RetrievalEngine") == 2
    replies = asyncio.run(_at_once(str(client.base_url), 8))
    admitted_by = time.monotonic()  # the one admitted reload was admitted before its reply
    codes = sorted(r.status_code for r in replies)
    assert codes == [200] + [429] * 7, [r.text for r in replies]
    for reply in replies:
        if reply.status_code == 429:
            assert 1 <= int(reply.headers["retry-after"]) <= GAP_S + 1
    # one after another (each ask may land on either engine replica)
    later = [client.post("/admin/reload", params={"force": True}, headers=AUTH) for _ in range(6)]
    assert [r.status_code for r in later] == [429] * 6
    time.sleep(max(0.0, admitted_by + GAP_S + 0.5 - time.monotonic()))  # the interval is over
    after = [client.post("/admin/reload", params={"force": True}, headers=AUTH) for _ in range(4)]
    assert [r.status_code for r in after] == [200, 429, 429, 429], [r.text for r in after]
    gate = serve.get_deployment_handle("ReloadGate", app_name=APP)
    assert gate.counts.remote().result() == {"admitted": 2, "refused": 16}
