"""HTTP load on the Serve app, 127.0.0.1 only: throughput and latency at several concurrencies,
the CPU the Serve processes and the load generator spend per request, and the memory of the
Serve processes before and after.

    python -m benchmarks.serve_load --index DIR [--method dense,zoom,query:ladrag] \
        [--requests 600] [--requests-at-1 100] [--query-requests 64] [--concurrency 1,32,256] \
        [--compare CHECKOUT] [--ingress direct,proxy]

Starts a local Ray + Serve with the application of pipelines/serve_app.py, sends a bounded
number of requests per concurrency level (distinct questions, so nothing is a cache hit for
BM25/dense; zoom caches chunk vectors per document), and prints requests/s, p50 and p99
latency, errors, and the resident memory of the Serve replicas and proxy. A method is one of
/retrieve (``zoom``, ``bm25``, ``dense``) or, as ``query:METHOD``, one of /query
(``query:all``: every /query method).

The load generator is a separate process (aiohttp on uvloop, one connection per concurrent
client, keep-alive), so its CPU is not the Serve driver's; it reports its own CPU time during
each level (``client ms/req``), and the Serve processes' CPU time (replicas, proxy,
controller) is read from /proc before and after each level (``serve ms/req``). On a 2-core
machine the two together bound the requests/s.

``--ingress``: how the code is served, one side each: ``direct`` (Ray Serve's direct
ingress: the engine replica answers HTTP itself, ``serve_app.direct_ingress_env``; what
``jobs.serve`` does) and/or ``proxy`` (through Serve's HTTP proxy actor).
``--compare CHECKOUT`` measures another checkout of the code (from a process whose PYTHONPATH
is that checkout) beside this one, like with like: the same requests on the same index through
the same ingress (a checkout without direct ingress is compared through the proxy only; a side
that could not be served the asked way is reported and not compared). ``--repeats N`` runs
every comparison N times and alternates which side goes first (the first run of a machine is
often the slower one), prints each repetition with its order, then per row the ratio of
requests/s of every repetition and their median. A side whose process fails (on a loaded
machine a fresh Ray's raylet can miss Ray's 30 s start-up limit) is started again, up to
``START_ATTEMPTS`` times.

At corpus scale: ``benchmarks.grow_passages`` writes a passage corpus of 1,000 or 10,000
passages to index (docs/results.md, Serving).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import psutil

QUESTIONS = [
    "Who wrote the first novel about {}?",
    "Which country is {} located in?",
    "When was {} founded and by whom?",
    "What is {} known for?",
]
START_ATTEMPTS = 3  # tries of one side's measuring process (measure_elsewhere)
TOPICS = ["the river", "the band", "the university", "the film", "the magazine", "the airport"]


def serve_memory_mb() -> float:
    total = 0
    for proc in serve_processes():
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def question(i: int) -> str:
    return QUESTIONS[i % len(QUESTIONS)].format(f"{TOPICS[i % len(TOPICS)]} {i}")


async def _load(url: str, method: str, n: int, concurrency: int, k: int, offset: int) -> dict:
    """``n`` requests, questions ``offset`` .. ``offset + n - 1`` (distinct across calls that
    pass distinct offsets: no question is a cache hit of an earlier level or method)."""
    import resource

    import aiohttp

    latencies: list[float] = []
    errors = 0
    queue = list(range(n))
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=300)
    path = "/query" if method.startswith("query:") else "/retrieve"
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as client:

        async def worker() -> None:
            nonlocal errors
            while queue:
                text = question(queue.pop() + offset)
                if method.startswith("query:"):
                    body = {"question": text, "method": method[6:], "k": min(k, 5)}
                else:
                    body = {"query": text, "k": k, "method": method}
                started = time.perf_counter()
                async with client.post(path, json=body) as reply:
                    await reply.read()
                    errors += reply.status != 200
                latencies.append(time.perf_counter() - started)

        usage = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        await asyncio.gather(*[worker() for _ in range(concurrency)])
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    lat = np.asarray(latencies) * 1000
    return {
        "concurrency": concurrency,
        "requests": n,
        "rps": n / seconds,
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "errors": errors,
        "client_ms_per_request": cpu * 1000 / n,
    }


def load(url: str, method: str, n: int, concurrency: int, k: int, offset: int = 0) -> dict:
    """``_load`` in a process of its own (the load generator's CPU is not the driver's)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--client", url, "--method", method]
    command += ["--requests", str(n), "--concurrency", str(concurrency), "--k", str(k)]
    command += ["--offset", str(offset)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def serve_processes() -> list[psutil.Process]:
    """The Serve replicas, proxy and controller of the Ray this process started (its
    descendants: never another job's Serve on the same machine)."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if "ServeReplica" in cmdline or "ProxyActor" in cmdline or "ServeController" in cmdline:
            found.append(proc)
    return found


def cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for proc in processes:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            continue
    return total


QUERY_METHODS = ("auto", "bookrag", "deepread", "zoom", "ladrag", "dense", "bookrag_paper")


def methods_of(value: str) -> list[str]:
    out = []
    for method in (m.strip() for m in value.split(",") if m.strip()):
        out += [f"query:{m}" for m in QUERY_METHODS] if method == "query:all" else [method]
    return out


def measure(args: argparse.Namespace) -> dict:
    """Serve started here (this process's code), every method at every concurrency; with
    ``args.ingress == "direct"`` (and a checkout that has it) through Serve's direct ingress."""
    # the tree's own code: a tree from before the package has no bookindex/ (benchmarks/trees.py;
    # not imported, since the tree in the working directory may predate it)
    prefix = "bookindex." if Path("bookindex/__init__.py").is_file() else ""
    serve_app = importlib.import_module(prefix + "pipelines.serve_app")
    direct = args.ingress == "direct" and hasattr(serve_app, "direct_ingress_env")
    port = free_port()
    proxy_port = free_port() if direct else port
    if direct:  # read by Ray's processes when they start
        os.environ.update(serve_app.direct_ingress_env(port))
    import ray
    from ray import serve

    # a Ray of its own: never a cluster another job on this machine started (``ray start``)
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": proxy_port})
    serve_config = importlib.import_module(prefix + "operators.config").ServeConfig

    app_args: dict = {"index": args.index}
    if "auth" in serve_config.model_fields:  # a checkout with bearer tokens: 127.0.0.1 only
        app_args["serve"] = {"auth": "off"}
    serve.run(serve_app.build_app(app_args), name="bookindex", route_prefix="/")
    url = f"http://127.0.0.1:{port}"
    methods = methods_of(args.method)
    for method in methods:
        load(url, method, 8, 4, args.k)  # warm-up
    before = serve_memory_mb()
    rows, offset = [], 1_000_000  # the warm-up used questions 0..7
    for method in methods:
        for c in (int(c) for c in args.concurrency.split(",")):
            n = args.query_requests if method.startswith("query:") else args.requests
            n = min(n, args.requests_at_1) if c == 1 else n
            offset += n
            processes = serve_processes()
            cpu = cpu_seconds(processes)
            row = load(url, method, n, c, args.k, offset=offset)
            row["serve_ms_per_request"] = (cpu_seconds(processes) - cpu) * 1000 / n
            rows.append(dict(row, method=method, load_average=os.getloadavg()[0]))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    after = serve_memory_mb()
    health = json.loads(urllib.request.urlopen(f"{url}/health", timeout=60).read())
    serve.shutdown()
    ray.shutdown()
    return {
        "rows": rows,
        "memory_before_mb": before,
        "memory_after_mb": after,
        "health": health,
        "ingress": "direct" if direct else "proxy",
    }


def free_port() -> int:
    """A free port on 127.0.0.1. Not ``pipelines.ports.free_port``: ``measure`` also runs against
    ``--compare`` checkouts older than it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure_elsewhere(checkout: str, args: argparse.Namespace, ingress: str) -> dict:
    """``measure`` in a process that imports the Serve app of ``checkout``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--index", args.index]
        command += ["--method", args.method, "--requests", str(args.requests)]
        command += ["--requests-at-1", str(args.requests_at_1)]
        command += ["--query-requests", str(args.query_requests), "--k", str(args.k)]
        command += ["--concurrency", args.concurrency, "--json-out", str(out)]
        command += ["--ingress", ingress]
        env = dict(os.environ, PYTHONPATH=str(Path(checkout).resolve()))
        for attempt in range(1, START_ATTEMPTS + 1):
            # a loaded machine can keep a fresh Ray's raylet from registering within Ray's
            # 30 s ("node timed out during startup"): the side is started again, not compared
            # half-measured
            done = subprocess.run(command, cwd=checkout, env=env)
            if done.returncode == 0:
                return json.loads(out.read_text())
            print(f"{checkout}: measuring process failed (attempt {attempt})", file=sys.stderr)
        raise RuntimeError(f"{checkout}: measuring failed {START_ATTEMPTS} times")


def report(sides: dict[str, dict]) -> None:
    names = list(sides)
    first = sides[names[0]]
    print(f"documents={first['health']['documents']} load average {os.getloadavg()[0]:.1f} "
          f"(1 min) on {os.cpu_count()} CPUs; serve/client: CPU ms per request of the Serve "
          f"processes / of the load generator")  # fmt: skip
    header = f"{'method':>20}{'conc.':>6}"
    for name in names:
        header += f" | {name + ' req/s':>14}{'p50':>6}{'p99':>6}{'err':>4}{'serve':>6}{'cli':>5}"
    for name in names[1:]:
        header += f"{name[:9] + '/' + names[0][:6]:>17}"
    print(header + f"{'load':>6}")
    for i, row in enumerate(first["rows"]):
        line = f"{row['method']:>20}{row['concurrency']:>6}"
        for name in names:
            r = sides[name]["rows"][i]
            line += f" | {r['rps']:>14.1f}{r['p50_ms']:>6.0f}{r['p99_ms']:>6.0f}{r['errors']:>4}"
            line += f"{r.get('serve_ms_per_request', 0):>6.1f}"
            line += f"{r.get('client_ms_per_request', 0):>5.1f}"
        for name in names[1:]:
            line += f"{sides[name]['rows'][i]['rps'] / max(row['rps'], 1e-9):>17.2f}"
        loads = [sides[name]["rows"][i].get("load_average", 0) for name in names]
        print(line + f"{max(loads):>6.1f}")
    for name in names:
        side = sides[name]
        print(
            f"{name} ({side.get('ingress', 'proxy')}): serve processes RSS before "
            f"{side['memory_before_mb']:.0f} MiB, after {side['memory_after_mb']:.0f} MiB; "
            f"largest /retrieve batch {side['health'].get('max_batch')}, largest /query batch "
            f"{side['health'].get('max_query_batch', 'not batched')}; index opened in "
            f"{side['health'].get('load_s')} s, walk graph {_graph(side['health'])}"
        )


def _graph(health: dict) -> str:
    """How the replica had its walk graph (/health's walk_graph; not in older checkouts)."""
    graph = health.get("walk_graph")
    return f"{graph['from']} in {graph['s']} s" if graph else "(not reported)"


def compared(first: dict, second: dict) -> bool:
    """Whether two sides were served the same way (a checkout without direct ingress is served
    through the proxy whatever was asked: then it is no comparison with a direct side)."""
    return first.get("ingress", "proxy") == second.get("ingress", "proxy")


def ratio_summary(pairs: list[tuple[dict, dict]]) -> list[str]:
    """Per row (method, concurrency): after ÷ before requests/s of every repetition, and their
    median."""
    lines = [f"{'method':>20}{'conc.':>6}  after/before req/s per repetition, median"]
    for i, row in enumerate(pairs[0][0]["rows"]):
        ratios = [a["rows"][i]["rps"] / max(b["rows"][i]["rps"], 1e-9) for b, a in pairs]
        shown = " ".join(f"{r:.2f}" for r in ratios)
        lines.append(
            f"{row['method']:>20}{row['concurrency']:>6}  {shown}  median {np.median(ratios):.2f}"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index")
    parser.add_argument("--method", default="dense", help="comma-separated (module docstring)")
    parser.add_argument("--requests", type=int, default=600, help="per concurrency level")
    parser.add_argument("--requests-at-1", type=int, default=100, help="at concurrency 1")
    parser.add_argument("--query-requests", type=int, default=64, help="per level, /query")
    parser.add_argument("--concurrency", default="1,32,256")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--compare", help="another checkout, measured beside this one (before)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="repetitions (default 2 with --compare, the side measured first alternating; else 1)",
    )
    parser.add_argument("--ingress", default="direct", help="direct and/or proxy (docstring)")
    parser.add_argument("--json-out", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)  # the load generator's process
    parser.add_argument("--offset", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
        row = asyncio.run(
            _load(
                args.client, args.method, args.requests, int(args.concurrency), args.k, args.offset
            )
        )
        print(json.dumps(row))
        return
    if not args.index:
        parser.error("--index is required")
    args.index = str(Path(args.index).resolve())
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(measure(args)))
        return
    here = str(Path(__file__).resolve().parents[1])
    ingresses = [i.strip() for i in args.ingress.split(",") if i.strip()]
    args.repeats = args.repeats or (2 if args.compare else 1)
    if not args.compare:
        for rep in range(args.repeats):
            if args.repeats > 1:
                print(f"\nrepetition {rep + 1}")
            report({ingress: measure_elsewhere(here, args, ingress) for ingress in ingresses})
        return
    for ingress in ingresses:
        pairs = []
        for rep in range(args.repeats):
            order = [("before", args.compare), ("after", here)]
            if rep % 2:  # alternate which side runs first
                order.reverse()
            sides = {name: measure_elsewhere(checkout, args, ingress) for name, checkout in order}
            print(f"\n{ingress}, repetition {rep + 1} ({order[0][0]} first)")
            if not compared(sides["before"], sides["after"]):
                print(
                    f"not compared: before was served through {sides['before'].get('ingress')}, "
                    f"after through {sides['after'].get('ingress')}"
                )
                break
            report({"before": sides["before"], "after": sides["after"]})
            pairs.append((sides["before"], sides["after"]))
        if pairs:
            print(f"\n{ingress}: after ÷ before, {len(pairs)} repetition(s)")
            print("\n".join(ratio_summary(pairs)))


if __name__ == "__main__":
    main()
