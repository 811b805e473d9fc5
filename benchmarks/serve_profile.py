"""Where a /retrieve request's CPU goes, without HTTP: the engine a Serve replica holds, called
the way the replica calls it (one ``Retrieval.retrieve`` per batch, then the answer's dicts and
JSON), under cProfile.

    python -m benchmarks.serve_profile --index DIR [--method dense,zoom] [--batch 1,32]
        [--requests 256] [--top 0] [--config FILE] [--set SECTION.FIELD=VALUE ...]

``OMP_NUM_THREADS`` is 1 unless set (what Ray gives a replica of one CPU). Another checkout
beside this one: run it from that checkout's root (``cd CHECKOUT && PYTHONPATH=. python -m
benchmarks.serve_profile ...``): ``python -m`` puts the working directory on ``sys.path`` before
``PYTHONPATH``, so a PYTHONPATH alone does not change which code runs.

First printed: the replica's start (the index opened and warmed up), how its walk graph and
title links were had, and how each BM25 index was had ("read" from the index directory or
"built"). Questions are ``benchmarks.serve_load``'s (distinct, none repeated across batches). Printed
per method and batch size: wall and CPU milliseconds per request, and the CPU milliseconds
(the process's, every thread: ``time.process_time``) per request in each part (the question's
embedding; Doc-Zoom's entity linking, its two walks and the rest of it; Chunk-Zoom's chunk
loading, its graph building, its solve and the rest; dense top-k; the hits' objects; the answer
as dicts and as JSON), each part the cumulative time of its functions; ``--top N`` also prints
the N functions of most own time.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import time
from dataclasses import asdict

import numpy as np
import psutil

from benchmarks.serve_load import question
from bookindex.operators.config import add_config_arguments, config_from_args
from bookindex.operators.walks.topk import host

# part -> (file suffix, function name) whose cumulative time is that part
PARTS = {
    "embed": [("models/offline.py", "embed")],
    "link entities": [("query/zoom.py", "link_entities")],
    "walks": [("walks/engine.py", "walk")],
    "doc-zoom total": [("query/zoom.py", "doc_zoom_scores")],
    "chunk load": [("query/zoom.py", "_load_chunks")],
    "chunk graphs": [("walks/engine.py", "chunk_graphs")],
    "chunk-zoom engine": [("walks/engine.py", "chunk_zoom")],
    "chunk-zoom total": [("query/zoom.py", "chunk_zoom")],
    "dense top-k": [("query/retrieval.py", "dense_top_k")],
    "hits": [("query/zoom.py", "hits")],
}


def cumulative(stats: pstats.Stats, targets: list[tuple[str, str]]) -> float:
    """Seconds of cumulative time of the functions named (outermost calls only: cProfile
    already counts a recursive function's time once)."""
    total = 0.0
    for (path, _, name), (_, _, _, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        if any(path.endswith(suffix) and name == fn for suffix, fn in targets):
            total += ct
    return total


def run(engine, method: str, batch: int, requests: int, offset: int, top: int) -> dict:
    retrieval = engine.retrieval
    profile = cProfile.Profile(time.process_time)  # CPU time, every thread of the process
    dicts_s = json_s = 0.0
    started = time.perf_counter()
    cpu = time.process_time()
    for lo in range(0, requests, batch):
        queries = [question(offset + i) for i in range(lo, min(lo + batch, requests))]
        profile.enable()
        hits = retrieval.retrieve(queries, method, 10)
        profile.disable()
        t0 = time.process_time()
        answers = [
            {"query": q, "documents": [asdict(h) for h in found], "batch_size": len(queries)}
            for q, found in zip(queries, hits, strict=True)
        ]
        t1 = time.process_time()
        for answer in answers:  # one response per request, as the replica sends them
            json.dumps({"method": method, "k": 10, "results": [answer]}).encode()
        t2 = time.process_time()
        dicts_s += t1 - t0
        json_s += t2 - t1
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    stats = pstats.Stats(profile)
    row = {"method": method, "batch": batch, "requests": requests}
    row["wall ms/req"] = wall * 1000 / requests
    row["cpu ms/req"] = cpu * 1000 / requests
    for part, targets in PARTS.items():
        row[part] = cumulative(stats, targets) * 1000 / requests
    row["answer dicts"] = dicts_s * 1000 / requests
    row["JSON"] = json_s * 1000 / requests
    if top:
        stats.sort_stats("tottime").print_stats(top)
    return row


def walk_graph_line(zoom) -> str:
    """The Doc-Zoom graph the replica holds: its nodes and links, the document links a
    document keeps (the walk's cost and memory grow with them), how and in how long it was had
    (read from the index directory, grown there or built), how its title links were had, and
    the process's resident memory."""
    walk = zoom.engine
    dd = host(walk.S)[: walk.n_d, : walk.n_d].tocsr()
    per_doc = np.diff(dd.indptr)  # row i: the documents whose similarity to i passed τ_i
    rss_mb = psutil.Process().memory_info().rss / 2**20
    return (
        f"walk graph: {walk.n_d:,} documents, {walk.n_e:,} entities, {walk.S.nnz:,} links "
        f"({walk.dd_nnz:,} document-document; a document keeps {per_doc.mean():.1f} on average, "
        f"at most {per_doc.max()}), {zoom.engine_source} in "
        f"{zoom.timings.get('engine_build_s', 0):.1f} s, title links "
        f"{zoom.view.title_links_source}; resident memory {rss_mb:,.0f} MB"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index", required=True)
    parser.add_argument("--method", default="dense,zoom")
    parser.add_argument("--batch", default="1,32")
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--top", type=int, default=0)
    add_config_arguments(parser)  # --set walk.max_doc_links=0: the engine as configured
    args = parser.parse_args(argv)
    # one thread for the embedder and BLAS, as in a Serve replica (num_cpus 1: Ray sets it)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from bookindex.pipelines.store.reader import open_engine

    started = time.perf_counter()
    engine = open_engine(args.index, config_from_args(args))
    engine.warm_up()
    print(
        f"index {args.index}: {engine.zoom.view.n_docs} documents, opened and warmed up in "
        f"{time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.1f}"
    )
    print(walk_graph_line(engine.zoom))
    sources = engine.bm25_sources().items()
    print("BM25 indexes: " + ", ".join(f"{name} {how}" for name, how in sources))
    offset, rows = 2_000_000, []
    for method in args.method.split(","):
        engine.retrieval.retrieve([question(i) for i in range(8)], method, 10)  # warm-up
        for batch in (int(b) for b in args.batch.split(",")):
            rows.append(run(engine, method, batch, args.requests, offset, args.top))
            offset += args.requests
    columns = [c for c in rows[0] if c not in ("method", "batch", "requests")]
    print(f"{'method':>7}{'batch':>6} " + "".join(f"{c[:12]:>13}" for c in columns))
    for row in rows:
        line = f"{row['method']:>7}{row['batch']:>6} "
        print(line + "".join(f"{row[c]:>13.2f}" for c in columns))
    print("(ms per request; parts are cumulative times and nest: walks and link entities are "
          "inside doc-zoom total, chunk graphs inside chunk-zoom engine inside chunk-zoom total)")  # fmt: skip


if __name__ == "__main__":
    main()
