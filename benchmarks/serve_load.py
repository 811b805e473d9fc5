"""HTTP load on the Serve app, 127.0.0.1 only: throughput and latency at several concurrencies,
and the memory of the Serve processes before and after.

    python -m benchmarks.serve_load --index DIR [--method dense,zoom,query:ladrag] \
        [--requests 300] [--query-requests 64] [--concurrency 1,32,256] [--compare CHECKOUT]

Starts a local Ray + Serve with the application of pipelines/serve_app.py, sends a bounded
number of requests per concurrency level (distinct questions, so nothing is a cache hit for
BM25/dense; zoom caches chunk vectors per document), and prints requests/s, p50 and p99
latency, errors, and the resident memory of the Serve replicas and proxy. A method is one of
/retrieve (``zoom``, ``bm25``, ``dense``) or, as ``query:METHOD``, one of /query
(``query:all``: every /query method).

``--compare CHECKOUT`` measures another checkout of the code first (its Serve app, from a
process whose PYTHONPATH is that checkout) and then this one, the same requests on the same
index in one run, and prints the two side by side with the ratio of requests/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


async def load(url: str, method: str, n: int, concurrency: int, k: int, offset: int = 0) -> dict:
    """``n`` requests, questions ``offset`` .. ``offset + n - 1`` (distinct across calls that
    pass distinct offsets: no question is a cache hit of an earlier level or method)."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    errors = 0
    queue = list(range(n))
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:

        async def worker() -> None:
            nonlocal errors
            while queue:
                i = queue.pop() + offset
                question = QUESTIONS[i % len(QUESTIONS)].format(f"{TOPICS[i % len(TOPICS)]} {i}")
                started = time.perf_counter()
                if method.startswith("query:"):
                    body = {"question": question, "method": method[6:], "k": min(k, 5)}
                    reply = await client.post("/query", json=body)
                else:
                    body = {"query": question, "k": k, "method": method}
                    reply = await client.post("/retrieve", json=body)
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


QUERY_METHODS = ("auto", "bookrag", "deepread", "zoom", "ladrag", "dense", "bookrag_paper")


def methods_of(value: str) -> list[str]:
    out = []
    for method in (m.strip() for m in value.split(",") if m.strip()):
        out += [f"query:{m}" for m in QUERY_METHODS] if method == "query:all" else [method]
    return out


def measure(args: argparse.Namespace) -> dict:
    """Serve started here (this process's code), every method at every concurrency."""
    import ray
    from ray import serve

    from pipelines.serve_app import build_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # a Ray of its own: never a cluster another job on this machine started (``ray start``)
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    from operators.config import ServeConfig

    app_args: dict = {"index": args.index}
    if "auth" in ServeConfig.model_fields:  # a checkout with bearer tokens: 127.0.0.1 only
        app_args["serve"] = {"auth": "off"}
    serve.run(build_app(app_args), name="bookindex", route_prefix="/")
    url = f"http://127.0.0.1:{port}"
    methods = methods_of(args.method)
    for method in methods:
        asyncio.run(load(url, method, 8, 4, args.k))  # warm-up
    before = serve_memory_mb()
    rows, offset = [], 1_000_000  # the warm-up used questions 0..7
    for method in methods:
        n = args.query_requests if method.startswith("query:") else args.requests
        for c in args.concurrency.split(","):
            offset += n
            row = asyncio.run(load(url, method, n, int(c), args.k, offset=offset))
            rows.append(dict(row, method=method))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    after = serve_memory_mb()
    health = httpx.get(f"{url}/health").json()
    serve.shutdown()
    ray.shutdown()
    return {"rows": rows, "memory_before_mb": before, "memory_after_mb": after, "health": health}


def measure_elsewhere(checkout: str, args: argparse.Namespace) -> dict:
    """``measure`` in a process that imports the Serve app of ``checkout``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--index", args.index]
        command += ["--method", args.method, "--requests", str(args.requests)]
        command += ["--query-requests", str(args.query_requests), "--k", str(args.k)]
        command += ["--concurrency", args.concurrency, "--json-out", str(out)]
        env = dict(os.environ, PYTHONPATH=str(Path(checkout).resolve()))
        subprocess.run(command, cwd=checkout, env=env, check=True)
        return json.loads(out.read_text())


def report(sides: dict[str, dict]) -> None:
    names = list(sides)
    first = sides[names[0]]
    print(f"documents={first['health']['documents']} load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")  # fmt: skip
    header = f"{'method':>20}{'conc.':>6}"
    for name in names:
        header += f"{name + ' req/s':>16}{'p50 ms':>9}{'p99 ms':>9}{'err':>5}"
    if len(names) == 2:
        header += f"{'ratio':>7}"
    print(header)
    for i, row in enumerate(first["rows"]):
        line = f"{row['method']:>20}{row['concurrency']:>6}"
        for name in names:
            r = sides[name]["rows"][i]
            line += f"{r['rps']:>16.1f}{r['p50_ms']:>9.0f}{r['p99_ms']:>9.0f}{r['errors']:>5}"
        if len(names) == 2:
            line += f"{sides[names[1]]['rows'][i]['rps'] / max(row['rps'], 1e-9):>7.2f}"
        print(line)
    for name in names:
        side = sides[name]
        print(
            f"{name}: serve processes RSS before {side['memory_before_mb']:.0f} MiB, after "
            f"{side['memory_after_mb']:.0f} MiB; largest /retrieve batch "
            f"{side['health'].get('max_batch')}, largest /query batch "
            f"{side['health'].get('max_query_batch', 'not batched')}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index", required=True)
    parser.add_argument("--method", default="dense", help="comma-separated (module docstring)")
    parser.add_argument("--requests", type=int, default=300, help="per concurrency level")
    parser.add_argument("--query-requests", type=int, default=64, help="per level, /query")
    parser.add_argument("--concurrency", default="1,32,256")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--compare", help="another checkout, measured first (before)")
    parser.add_argument("--json-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.index = str(Path(args.index).resolve())
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(measure(args)))
        return
    sides = {}
    if args.compare:
        sides["before"] = measure_elsewhere(args.compare, args)
        sides["after"] = measure_elsewhere(str(Path(__file__).resolve().parents[1]), args)
    else:
        sides["this"] = measure(args)
    report(sides)


if __name__ == "__main__":
    main()
