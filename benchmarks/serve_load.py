"""HTTP load on the Serve app, 127.0.0.1 only: throughput and latency at several concurrencies,
and the memory of the Serve processes before and after.

    python -m benchmarks.serve_load --index DIR [--method dense] [--requests 300]
        [--concurrency 1,32,256]

Starts a local Ray + Serve with the application of pipelines/serve_app.py, sends a bounded
number of requests per concurrency level (distinct questions, so nothing is a cache hit for
BM25/dense; zoom caches chunk vectors per document), and prints requests/s, p50 and p99
latency, errors, and the resident memory of the Serve replicas and proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import time

import httpx
import numpy as np
import psutil

QUESTIONS = [
    "Who wrote the first novel about {}?",
    "Which country is {} located in?",
    "When was {} founded and by whom?",
    "What is {} known for?",
]
TOPICS = ["the river", "the band", "the university", "the film", "the magazine", "the airport"]


def serve_memory_mb() -> float:
    total = 0
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if "ServeReplica" in cmdline or "ProxyActor" in cmdline or "ServeController" in cmdline:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
    return total / 2**20


async def load(url: str, method: str, n: int, concurrency: int, k: int) -> dict:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    errors = 0
    queue = list(range(n))
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:

        async def worker() -> None:
            nonlocal errors
            while queue:
                i = queue.pop()
                question = QUESTIONS[i % len(QUESTIONS)].format(f"{TOPICS[i % len(TOPICS)]} {i}")
                started = time.perf_counter()
                reply = await client.post(
                    "/retrieve", json={"query": question, "k": k, "method": method}
                )
                latencies.append(time.perf_counter() - started)
                errors += reply.status_code != 200

        started = time.perf_counter()
        await asyncio.gather(*[worker() for _ in range(concurrency)])
        seconds = time.perf_counter() - started
    lat = np.asarray(latencies) * 1000
    return {
        "concurrency": concurrency,
        "requests": n,
        "rps": n / seconds,
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "errors": errors,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index", required=True)
    parser.add_argument("--method", default="dense", choices=["zoom", "bm25", "dense"])
    parser.add_argument("--requests", type=int, default=300, help="per concurrency level")
    parser.add_argument("--concurrency", default="1,32,256")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args(argv)

    import ray
    from ray import serve

    from pipelines.serve_app import build_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ray.init(include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    app = build_app({"index": args.index, "serve": {"auth": "off"}})  # 127.0.0.1 clients only
    serve.run(app, name="bookindex", route_prefix="/")
    url = f"http://127.0.0.1:{port}"
    asyncio.run(load(url, args.method, 20, 4, args.k))  # warm-up
    before = serve_memory_mb()
    rows = [
        asyncio.run(load(url, args.method, args.requests, int(c), args.k))
        for c in args.concurrency.split(",")
    ]
    after = serve_memory_mb()
    health = httpx.get(f"{url}/health").json()
    serve.shutdown()
    ray.shutdown()
    print(
        f"method={args.method} k={args.k} documents={health['documents']} "
        f"largest engine batch={health['max_batch']}"
    )
    print(f"{'concurrency':>11}{'requests':>9}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>7}")
    for r in rows:
        print(
            f"{r['concurrency']:>11}{r['requests']:>9}{r['rps']:>9.1f}{r['p50_ms']:>9.1f}"
            f"{r['p99_ms']:>9.1f}{r['errors']:>7}"
        )
    base = rows[0]["rps"]
    print(
        "throughput vs concurrency 1: "
        + ", ".join(f"c={r['concurrency']}: {r['rps'] / base:.1f}x" for r in rows)
    )
    print(
        f"serve processes RSS: before {before:.0f} MiB, after {after:.0f} MiB "
        f"({after - before:+.0f} MiB)"
    )


if __name__ == "__main__":
    main()
