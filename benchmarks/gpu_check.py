"""CPU (SciPy) vs GPU (CuPy) walk engine on the same generated inputs: agreement and timings.

Standalone: imports only numpy, scipy, cupy (through ``operators/walks/engine.py``, which imports
cupy lazily) — no Ray. Run from the repo root on a machine with CuPy::

    python benchmarks/gpu_check.py [--docs 50000] [--entities 20000] [--queries 256]

Prints the build time per backend, the max abs difference of Doc-Zoom scores (all document and
entity scores of every query; walks pruned at ``--tolerance``, the configuration's by default,
may differ by one floor where an entry lies at it) and the top-10 agreement rate (mean |ids_cpu ∩ ids_gpu| / 10),
then seconds per batch and queries/s for batch sizes 1, 16, 64, 256 side by side with the
GPU/CPU ratio. Without a usable GPU the CPU side runs and the GPU side is reported as skipped.

With ``--index DIR --questions FILE`` it also measures ZoomRAG retrieval end to end on a real
index (``zoom_end_to_end``: the questions embedded, Doc-Zoom, Chunk-Zoom over the stored chunk
vectors — what ``jobs.evaluate`` times), engine on CPU (walks in SciPy, embedder on CPU) and on
GPU (walks in CuPy, embedder on CUDA) in the same run: s/query per batch size and the top-10
agreement of the two::

    python benchmarks/gpu_check.py --index idx_musique \
        --questions ../shared/data/multihop/musique/questions.jsonl --batches 1,16,64
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bookindex.operators.config import WalkConfig  # noqa: E402
from bookindex.operators.walks.engine import make_engine  # noqa: E402

DEVICES = {  # the walk engine's device and the offline embedder's, per side
    "cpu": {"walk": {"device": "cpu"}, "models": {"embed_device": "cpu"}},
    "gpu": {"walk": {"device": "gpu"}, "models": {"embed_device": "cuda"}},
}


def zoom_end_to_end(
    open_engine, questions: list[str], batches: list[int], k: int = 10
) -> dict[str, dict]:
    """ZoomRAG retrieval end to end on each device ``open_engine(device)`` opens an engine
    for (None: that device is missing, skipped): per device the warm-up seconds, s/query per
    batch size (each after the warm-up; the chunk cache cleared before every timed batch, so
    each batch reads its chunks as a cold query would), and the ranked ids of every question
    (for the agreement of the devices)."""
    out: dict[str, dict] = {}
    for device in DEVICES:
        engine = open_engine(device)
        if engine is None:
            continue
        started = time.perf_counter()
        engine.warm_up(["zoom"])
        row: dict = {"warm_up_s": time.perf_counter() - started, "s_per_query": {}}
        retrieval = engine.retrieval
        for batch in batches:
            seconds, n = 0.0, 0
            for lo in range(0, len(questions) - batch + 1, batch):
                engine.zoom._chunk_cache.clear()
                started = time.perf_counter()
                retrieval.retrieve(questions[lo : lo + batch], "zoom", k)
                engine.walk.backend.sync()
                seconds, n = seconds + time.perf_counter() - started, n + batch
            row["s_per_query"][batch] = seconds / max(n, 1)
        hits = retrieval.retrieve(questions, "zoom", k)
        row["ranked"] = [[h.id for h in found] for found in hits]
        out[device] = row
    return out


def print_end_to_end(results: dict[str, dict], batches: list[int]) -> None:
    for device, row in results.items():
        print(f"zoom end to end, {device}: warm-up {row['warm_up_s']:.1f} s")
    if "gpu" not in results:
        print("zoom end to end, gpu: skipped (no usable GPU)")
    else:
        cpu, gpu = results["cpu"]["ranked"], results["gpu"]["ranked"]
        agree = [len(set(a) & set(b)) / max(len(a), 1) for a, b in zip(cpu, gpu, strict=True)]
        print(f"zoom end to end: top-10 agreement {np.mean(agree):.4f} over {len(agree)} questions")
    print(f"{'batch':>6} " + " ".join(f"{d + ' s/query':>14}" for d in results))
    for batch in batches:
        cells = " ".join(f"{results[d]['s_per_query'][batch]:>14.4f}" for d in results)
        print(f"{batch:>6} {cells}", flush=True)


def _index_engines(index: str):
    """``open_engine(device)`` for ``zoom_end_to_end`` over an index on disk."""
    from bookindex.operators.config import load_config
    from bookindex.pipelines.store.reader import open_engine

    def opened(device: str):
        try:
            engine = open_engine(index, load_config(overrides=DEVICES[device]))
            engine.model.embed(["is the embedder on this device?"])
            return engine
        except Exception as exc:  # no CuPy, no CUDA: that side is skipped
            if device == "cpu":
                raise
            print(f"zoom end to end, gpu: skipped ({type(exc).__name__}: {exc})")
            return None

    return opened


def make_inputs(
    n_docs: int, n_entities: int, n_queries: int, dim: int = 128, seed: int = 0
) -> dict[str, object]:
    """Topic-clustered document vectors (about 5 documents per topic), ~6 entity mentions per
    document (70 % from the topic's pool, 30 % Zipf-popular), queries near random documents
    that mention 1–3 of that document's entities."""
    rng = np.random.default_rng(seed)
    n_topics = max(1, n_docs // 5)
    topics = rng.normal(size=(n_topics, dim))
    topic = rng.integers(0, n_topics, n_docs)
    docs = topics[topic] + rng.normal(size=(n_docs, dim))
    rows = np.repeat(np.arange(n_docs), rng.poisson(5, n_docs) + 1)
    local = (topic[rows] * 37 + rng.integers(0, 40, rows.size)) % n_entities
    popular = rng.zipf(1.6, rows.size) % n_entities
    cols = np.where(rng.random(rows.size) < 0.7, local, popular)
    doc_entity = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_docs, n_entities))
    doc_entity.data[:] = 1.0
    src = rng.integers(0, n_docs, n_queries)
    queries = docs[src] + 0.7 * rng.normal(size=(n_queries, dim))
    qr, qc = [], []
    for b, d in enumerate(src):
        ents = doc_entity.indices[doc_entity.indptr[d] : doc_entity.indptr[d + 1]]
        pick = rng.choice(ents, size=min(len(ents), int(rng.integers(1, 4))), replace=False)
        qr += [b] * len(pick)
        qc += pick.tolist()
    query_entity = sp.csr_matrix(
        (np.ones(len(qr)), (qr, qc)), shape=(n_queries, n_entities), dtype=np.float64
    )
    return {
        "docs": docs,
        "doc_entity": doc_entity,
        "queries": queries,
        "query_entity": query_entity,
    }


def time_doc_zoom(engine, queries, query_entity, batch: int, n_queries: int) -> float:
    """Seconds per batch of ``batch`` queries (doc_zoom end to end, after one warm-up batch)."""
    engine.doc_zoom(queries[:batch], query_entity[:batch])
    engine.backend.sync()
    n_batches = max(1, n_queries // batch)
    start = time.perf_counter()
    for i in range(n_batches):
        lo = (i * batch) % max(1, len(queries) - batch + 1)
        engine.doc_zoom(queries[lo : lo + batch], query_entity[lo : lo + batch])
    engine.backend.sync()
    return (time.perf_counter() - start) / n_batches


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=50_000)
    ap.add_argument("--entities", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=256)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--chunks", type=int, default=200, help="Chunk-Zoom: chunks per query")
    ap.add_argument("--timed-queries", type=int, default=32, help="min queries timed per size")
    ap.add_argument("--index", help="an index: also time ZoomRAG retrieval end to end on it")
    ap.add_argument("--questions", help="with --index: questions (JSONL, 'question' field)")
    ap.add_argument(
        "--tolerance",
        type=float,
        default=WalkConfig().tolerance,
        help="walk.tolerance of both engines (default: the configuration's; 0: exact walks)",
    )
    args = ap.parse_args(argv)
    if args.index:
        import json

        with open(args.questions, encoding="utf-8") as handle:
            questions = [json.loads(line)["question"] for line in handle if line.strip()]
        end_batches = [b for b in (int(x) for x in args.batches.split(",")) if b <= len(questions)]
        print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        results = zoom_end_to_end(_index_engines(args.index), questions, end_batches)
        print_end_to_end(results, end_batches)
    batches = [int(b) for b in args.batches.split(",")]
    args.queries = max(args.queries, *batches)  # every timed batch is full
    data = make_inputs(args.docs, args.entities, args.queries, args.dim)
    q, qe = data["queries"], data["query_entity"]
    print(
        f"inputs: {args.docs} docs, {args.entities} entities, {args.queries} queries, dim "
        f"{args.dim}; walk.tolerance {args.tolerance:g}"
    )
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")

    engines = {}
    for device in ("cpu", "gpu"):
        try:
            engine = make_engine(
                WalkConfig(tolerance=args.tolerance), device=device, dtype=np.float64
            )
        except RuntimeError as exc:
            print(f"GPU side skipped: {exc}")
            continue
        start = time.perf_counter()
        engine.fit(data["docs"], data["doc_entity"])
        engine.backend.sync()
        print(
            f"{device}: build {time.perf_counter() - start:.1f} s; S: {engine.N} nodes, "
            f"{engine.S.nnz} nonzeros ({engine.dd_nnz} doc–doc, {2 * data['doc_entity'].nnz} "
            f"doc–entity both ways)"
        )
        engines[device] = engine

    if "gpu" in engines:
        cpu, gpu = engines["cpu"], engines["gpu"]
        max_diff, agree = 0.0, []
        for lo in range(0, len(q), 256):
            sl = slice(lo, lo + 256)
            rc, rg = cpu.walk(q[sl], qe[sl])[0], gpu.walk(q[sl], qe[sl])[0].get()
            max_diff = max(max_diff, float(np.abs(rc - rg).max()))
            ic, ig = cpu.doc_zoom(q[sl], qe[sl])[0], gpu.doc_zoom(q[sl], qe[sl])[0]
            agree += [len(set(a) & set(b)) / a.size for a, b in zip(ic, ig, strict=True)]
        print(f"max abs score difference (all nodes, all queries): {max_diff:.3e}")
        print(f"top-10 agreement rate: {np.mean(agree):.4f} over {len(agree)} queries")

    header = f"{'batch':>6} {'cpu s/batch':>12} {'cpu q/s':>9} {'gpu s/batch':>12} {'gpu q/s':>9}"
    print("Doc-Zoom (batched walk over the query-document-entity graph)")
    print(header + f" {'gpu/cpu q/s':>11}")
    for batch in batches:
        n_timed = max(batch, args.timed_queries)
        row = {d: time_doc_zoom(e, q, qe, batch, n_timed) for d, e in engines.items()}
        cpu_s = row["cpu"]
        line = f"{batch:>6} {cpu_s:>12.4f} {batch / cpu_s:>9.1f}"
        if "gpu" in row:
            line += f" {row['gpu']:>12.4f} {batch / row['gpu']:>9.1f} {cpu_s / row['gpu']:>11.1f}"
        else:
            line += f" {'skipped':>12} {'-':>9} {'-':>11}"
        print(line, flush=True)
    chunk_zoom_check(engines, data, batches, args.chunks, args.dim)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


def make_chunk_inputs(
    data: dict[str, object], n_queries: int, n_chunks: int, dim: int, seed: int = 1
) -> tuple[list, list, list]:
    """Per query: ``n_chunks`` chunk vectors near the query (from ~4 documents, reading order
    within each), their document ids and chunk→entity links (~2 per chunk, from the query's
    entities and a local pool)."""
    rng = np.random.default_rng(seed)
    queries = np.asarray(data["queries"])
    n_entities = data["doc_entity"].shape[1]
    vecs, docs, ents = [], [], []
    for b in range(n_queries):
        vecs.append(queries[b % len(queries)] + rng.normal(size=(n_chunks, dim)))
        docs.append(np.sort(rng.integers(0, 4, n_chunks)) + 10 * b)
        rows = np.repeat(np.arange(n_chunks), 2)
        cols = rng.integers(0, n_entities, rows.size)
        ents.append(sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_chunks, n_entities)))
    return vecs, docs, ents


def chunk_zoom_check(engines: dict, data: dict, batches: list[int], n_chunks: int, dim: int):
    """Chunk-Zoom (closed-form stationary scores over each query's dense chunk graph, batched
    across queries) on both engines: the max abs score difference, the agreement of the kept
    chunk ids, and seconds per batch side by side."""
    n_q = max(batches)
    vecs, docs, ents = make_chunk_inputs(data, n_q, n_chunks, dim)
    q, qe = data["queries"][:n_q], data["query_entity"][:n_q]
    ent_scores = engines["cpu"].doc_zoom(q, qe)[2]
    ent_scores = np.asarray(ent_scores) + 1e-3  # every local entity seeds the walk
    print(f"Chunk-Zoom: {n_chunks} chunks per query, dim {dim}")
    if "gpu" in engines:
        rc = engines["cpu"].chunk_zoom(vecs, docs, ents, ent_scores)
        rg = engines["gpu"].chunk_zoom(vecs, docs, ents, ent_scores)
        diff = max(
            float(np.abs(np.sort(a[1]) - np.sort(b[1])).max()) for a, b in zip(rc, rg, strict=True)
        )
        same = np.mean([np.array_equal(a[0], b[0]) for a, b in zip(rc, rg, strict=True)])
        print(f"  max abs kept-score difference: {diff:.3e}; identical kept order: {same:.4f}")
    print(f"{'batch':>6} {'cpu s/batch':>12} {'gpu s/batch':>12} {'gpu/cpu':>8}")
    for batch in batches:
        row = {}
        for device, engine in engines.items():
            engine.chunk_zoom(vecs[:batch], docs[:batch], ents[:batch], ent_scores[:batch])
            start = time.perf_counter()
            engine.chunk_zoom(vecs[:batch], docs[:batch], ents[:batch], ent_scores[:batch])
            engine.backend.sync()
            row[device] = time.perf_counter() - start
        gpu = f"{row['gpu']:>12.4f} {row['cpu'] / row['gpu']:>8.1f}" if "gpu" in row else "skipped"
        print(f"{batch:>6} {row['cpu']:>12.4f} {gpu}", flush=True)


if __name__ == "__main__":
    main()
