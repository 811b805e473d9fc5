"""Soak test of the Serve app with bad input mixed in, 127.0.0.1 only.

    python -m benchmarks.serve_soak --index DIR [--requests 10000] [--concurrency 64]
        [--malformed 0.05] [--methods dense,bm25,zoom] [--max-growth-mb 100] [--json OUT]

Starts a local Ray + Serve with the application of pipelines/serve_app.py (its bearer token
set in ``BOOKINDEX_SERVE_TOKEN`` before Ray starts, so the replicas read it), warms it up, then
sends a fixed, seeded mix: ``--requests`` requests of which a ``--malformed`` share are broken
in one of the ways listed in ``MALFORMED`` (bad JSON, bad fields, wrong types, wrong method or
path, oversized input, lone surrogates, NaN/Infinity, a body over the limit, a 100k-character
field name, no or a wrong token), at ``--concurrency`` concurrent connections. Valid requests
carry the token. Reports the count of each status class, latency p50/p99 (valid and malformed
requests apart), the largest error body, and the resident memory of the Serve processes
(replicas, proxy, controller) after the warm-up and at the end.

Checks (exit status 1 when one fails): no 5xx at all; every malformed request answered 4xx;
every valid request answered 200 (none failed by a poisonous neighbour in its batch); no error
body over 4 KiB (no echo); Serve memory grown by at most ``--max-growth-mb`` MiB over the
warmed-up figure.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import secrets
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass

import httpx
import numpy as np
import psutil

from benchmarks.serve_load import QUESTIONS, TOPICS

SERVE_PROCESSES = ("ServeReplica", "ProxyActor", "ServeController")


def serve_memory() -> dict[str, float]:
    """Resident MiB of each Serve process (replicas, proxy, controller) this run started: the
    descendants of this process (its local Ray), not another user's Serve on the machine."""
    found: dict[str, float] = {}
    for proc in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        role = next((r for r in SERVE_PROCESSES if r in cmdline), None)
        if role is None:
            continue
        name = cmdline.split()[0].removeprefix("ray::") if role == "ServeReplica" else role
        try:
            found[name] = found.get(name, 0.0) + proc.memory_info().rss / 2**20
        except psutil.Error:
            continue
    return {k: round(v, 1) for k, v in sorted(found.items())}


@dataclass(frozen=True)
class Call:
    kind: str  # "valid" or the malformed case's name
    http_method: str
    path: str
    body: bytes | None
    content_type: str = "application/json"
    token: str = "valid"  # "valid", "none" or "wrong"


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


# Each broken in one way; every one must get a 4xx and leave the server serving.
MALFORMED: dict[str, tuple[str, str, bytes | None, str]] = {
    "invalid_json": ("POST", "/retrieve", b'{"query": "unterminated', "application/json"),
    "not_utf8": ("POST", "/retrieve", b'{"query": "\xff\xfe"}', "application/json"),
    "empty_body": ("POST", "/retrieve", b"", "application/json"),
    "json_list": ("POST", "/retrieve", _json(["a", "b"]), "application/json"),
    "empty_query": ("POST", "/retrieve", _json({"query": "   "}), "application/json"),
    "long_query": ("POST", "/retrieve", _json({"query": "x" * 5000}), "application/json"),
    "query_not_string": ("POST", "/retrieve", _json({"query": 42}), "application/json"),
    "k_zero": ("POST", "/retrieve", _json({"query": "q", "k": 0}), "application/json"),
    "k_huge": ("POST", "/retrieve", _json({"query": "q", "k": 10**6}), "application/json"),
    "k_text": ("POST", "/retrieve", _json({"query": "q", "k": "ten"}), "application/json"),
    "bad_method": ("POST", "/retrieve", _json({"query": "q", "method": "x"}), "application/json"),
    "both": ("POST", "/retrieve", _json({"query": "q", "queries": ["r"]}), "application/json"),
    "neither": ("POST", "/retrieve", _json({}), "application/json"),
    "no_queries": ("POST", "/retrieve", _json({"queries": []}), "application/json"),
    "too_many": ("POST", "/retrieve", _json({"queries": ["q"] * 300}), "application/json"),
    "extra_field": ("POST", "/retrieve", _json({"query": "q", "x": 1}), "application/json"),
    "text_plain": ("POST", "/retrieve", _json({"query": "q"}), "text/plain"),
    "get_retrieve": ("GET", "/retrieve", None, "application/json"),
    "unknown_path": ("POST", "/nowhere", _json({"query": "q"}), "application/json"),
    # issue 19: each of these gave a 500 (and failed its batch neighbours) or a full echo
    "surrogate_dense": (
        "POST",
        "/retrieve",
        b'{"query": "film \\ud800 directors", "method": "dense"}',
        "application/json",
    ),
    "surrogate_question": ("POST", "/query", b'{"question": "a \\ud800 b"}', "application/json"),
    "surrogate_doc": (
        "POST",
        "/query",
        b'{"question": "q", "doc": "\\udfff.pdf"}',
        "application/json",
    ),
    "k_nan": ("POST", "/retrieve", b'{"query": "q", "k": NaN}', "application/json"),
    "k_infinity": ("POST", "/retrieve", b'{"query": "q", "k": Infinity}', "application/json"),
    "body_5mb": ("POST", "/retrieve", _json({"query": "x" * 5 * 2**20}), "application/json"),
    "long_field_name": (
        "POST",
        "/retrieve",
        _json({"query": "q", "f" * 100_000: 1}),
        "application/json",
    ),
    "deep_nesting": ("POST", "/retrieve", b"[" * 100_000, "application/json"),
}
# Valid bodies without the right token: 401.
NO_TOKEN = {"no_token": "none", "wrong_token": "wrong"}


def plan(n: int, malformed: float, methods: list[str], k: int, seed: int) -> list[Call]:
    """The request mix, the same for the same arguments."""
    rng = random.Random(seed)
    bad = set(rng.sample(range(n), round(n * malformed)))
    names = sorted(MALFORMED) + sorted(NO_TOKEN)
    calls = []
    for i in range(n):
        if i in bad:
            name = names[rng.randrange(len(names))]
            if name in NO_TOKEN:
                body = _json({"query": QUESTIONS[0].format(i), "k": k, "method": methods[0]})
                calls.append(Call(name, "POST", "/retrieve", body, token=NO_TOKEN[name]))
            else:
                calls.append(Call(name, *MALFORMED[name]))
            continue
        question = QUESTIONS[i % len(QUESTIONS)].format(f"{TOPICS[i % len(TOPICS)]} {i}")
        body = {"query": question, "k": k, "method": methods[i % len(methods)]}
        calls.append(Call("valid", "POST", "/retrieve", _json(body)))
    return calls


async def send(
    url: str, calls: list[Call], concurrency: int, token: str
) -> list[tuple[str, int, float, int]]:
    """(kind, status, seconds, body bytes) per call; a transport failure counts as status 0."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    results: list[tuple[str, int, float, int]] = []
    tokens = {"valid": token, "wrong": secrets.token_urlsafe(24)}
    queue = list(reversed(calls))
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:

        async def worker() -> None:
            while queue:
                call = queue.pop()
                headers = {"Content-Type": call.content_type}
                if call.token in tokens:
                    headers["Authorization"] = f"Bearer {tokens[call.token]}"
                started = time.perf_counter()
                try:
                    reply = await client.request(
                        call.http_method, call.path, content=call.body, headers=headers
                    )
                    status, size = reply.status_code, len(reply.content)
                except httpx.HTTPError:
                    status, size = 0, 0
                results.append((call.kind, status, time.perf_counter() - started, size))

        await asyncio.gather(*[worker() for _ in range(concurrency)])
    return results


def report(results: list[tuple[str, int, float, int]], seconds: float) -> dict:
    classes = Counter(f"{s // 100}xx" if s else "failed" for _, s, _, _ in results)
    valid = [(s, t) for kind, s, t, _ in results if kind == "valid"]
    bad = [(kind, s, t) for kind, s, t, _ in results if kind != "valid"]
    by_kind: dict[str, Counter] = {}
    for kind, s, _ in bad:
        by_kind.setdefault(kind, Counter())[s] += 1

    def pct(values: list[float], q: float) -> float:
        return round(float(np.percentile(np.asarray(values) * 1000, q)), 1) if values else 0.0

    return {
        "requests": len(results),
        "seconds": round(seconds, 1),
        "rps": round(len(results) / seconds, 1),
        "status_classes": dict(sorted(classes.items())),
        "valid": len(valid),
        "valid_not_200": sum(s != 200 for s, _ in valid),
        "malformed": len(bad),
        "malformed_not_4xx": sorted({k for k, s, _ in bad if not 400 <= s < 500}),
        "malformed_statuses": dict(sorted(Counter(s for _, s, _ in bad).items())),
        "malformed_statuses_by_kind": {
            k: dict(sorted(c.items())) for k, c in sorted(by_kind.items())
        },
        "server_errors_5xx": sum(500 <= s < 600 for _, s, _, _ in results),
        "valid_5xx": sum(500 <= s < 600 for s, _ in valid),
        "largest_error_body_bytes": max((n for _, s, _, n in results if s >= 400), default=0),
        "valid_p50_ms": pct([t for _, t in valid], 50),
        "valid_p99_ms": pct([t for _, t in valid], 99),
        "malformed_p50_ms": pct([t for _, _, t in bad], 50),
        "malformed_p99_ms": pct([t for _, _, t in bad], 99),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_soak", description=__doc__)
    parser.add_argument("--index", required=True)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--malformed", type=float, default=0.05, help="share of bad requests")
    parser.add_argument("--methods", default="dense,bm25,zoom")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=300, help="valid requests before measuring")
    parser.add_argument("--max-growth-mb", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    methods = args.methods.split(",")

    import ray
    from ray import serve

    from bookindex.pipelines.serve_app import build_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_urlsafe(32)
    os.environ["BOOKINDEX_SERVE_TOKEN"] = token  # before Ray starts: the replicas inherit it
    ray.init(address="local", include_dashboard=False, log_to_driver=False)  # never a cluster
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(build_app({"index": args.index}), name="bookindex", route_prefix="/")
    url = f"http://127.0.0.1:{port}"
    try:
        warm = plan(args.warmup, 0.0, methods, args.k, seed=args.seed + 1)
        asyncio.run(send(url, warm, min(args.concurrency, 16), token))
        gc.collect()
        before = serve_memory()
        calls = plan(args.requests, args.malformed, methods, args.k, args.seed)
        started = time.perf_counter()
        results = asyncio.run(send(url, calls, args.concurrency, token))
        seconds = time.perf_counter() - started
        time.sleep(2)
        after = serve_memory()
        auth = {"Authorization": f"Bearer {token}"}  # the counters are behind the token
        health = httpx.get(f"{url}/health", headers=auth, timeout=60).json()
    finally:
        serve.shutdown()
        ray.shutdown()
    out = report(results, seconds)
    out.update(
        concurrency=args.concurrency,
        methods=methods,
        documents=health["documents"],
        largest_engine_batch=health["max_batch"],
        serve_rss_mb_before=before,
        serve_rss_mb_after=after,
        serve_rss_growth_mb=round(sum(after.values()) - sum(before.values()), 1),
        max_growth_mb=args.max_growth_mb,
    )
    checks = {
        "no 5xx": out["server_errors_5xx"] == 0,
        "every malformed request got a 4xx": not out["malformed_not_4xx"],
        "every valid request got 200 (none failed by a neighbour)": out["valid_not_200"] == 0,
        "no error body over 4 KiB (no echo)": out["largest_error_body_bytes"] <= 4096,
        f"memory growth <= {args.max_growth_mb:g} MiB": out["serve_rss_growth_mb"]
        <= args.max_growth_mb,
    }
    out["checks"] = checks
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    failed = [name for name, ok in checks.items() if not ok]
    print("FAILED: " + "; ".join(failed) if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
