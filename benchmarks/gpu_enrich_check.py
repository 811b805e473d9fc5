"""The enrich stage's own worker on CPU and on CUDA, on the same real nodes: nodes/s per device,
the agreement of the node vectors (cosine) and of the entities. No Ray, no Lance.

    python benchmarks/gpu_enrich_check.py [--corpus musique|hotpotqa|mmlongbench|hips]
        [--docs N] [--per-batch N] [--devices cpu,cuda] [--min-cosine 0.9999]

The documents are the structure stage's rows, made as ``benchmarks/enrich_throughput.py`` makes
them (passages: ``passage_document_row``; PDFs: probe, parse and section tree in this process,
not timed). Each device then builds ``pipelines.enrich_worker.EnrichWorker`` — the class the
enrich stage's model process builds (``pipelines.enrich.EnrichStage`` → ``pipelines.model_host``)
— with the configuration's models and one change, ``models.embed_device``: ``cpu`` (the CPU's
runtime, ONNX Runtime by default) or ``cuda`` (torch on the GPU: what ``enrich_args`` gives a
worker that reserves a GPU, ``index.model_gpus``). Its ``warm_up`` loads the models (not
timed); then the documents go through it in batches of ``--per-batch`` (default: the index
job's, ``index.passages_per_enrich_batch`` or ``index.pdfs_per_enrich_batch``), every batch
timed: node vectors, passage sentence vectors, spaCy entities and relations, entity name
vectors, resolution within each document.

Printed: per device, the runtime that ran, the nodes, the seconds and nodes/s (``gpu: skipped
(no CUDA: ...)`` where torch sees no GPU); with both, the minimum and mean cosine of every node
vector (and of the passage sentence vectors) GPU against CPU, and whether the entities and
relations of every document agree. Exit status 1 when the minimum node-vector cosine is under
``--min-cosine`` (0.9999), 0 otherwise (a skipped GPU included).

What it imports: the enrich worker (spaCy, ONNX Runtime; torch and sentence-transformers for
CUDA), the passage reader, for PDFs PyMuPDF and the structure stage's functions — never Ray or
Lance (``tests/unit/pipelines/test_gpu_enrich_check.py`` runs it and checks). On a GPU machine
it needs the project's dependencies without Ray, Lance or vLLM; docs/benchmarks.md says which,
and how the two model packages (MiniLM, en_core_web_sm) get there.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bookindex.operators.config import BookindexConfig  # noqa: E402
from bookindex.pipelines.rows import from_json  # noqa: E402

DEVICES = {"cpu": "cpu", "cuda": "gpu"}  # embed_device: the name printed
_GRAPH = ("entities", "relations")


def document_rows(corpus: str, docs: int) -> list[dict]:
    """The structure stage's rows of the first ``docs`` documents (enrich_throughput's); a
    ``.jsonl`` path: its passages (a copy of a shared corpus carried to a GPU machine)."""
    if corpus.endswith(".jsonl"):
        from bookindex.operators.structure.passages import read_passages
        from bookindex.pipelines.rows import passage_document_row

        return [passage_document_row(p) for p in read_passages(corpus)[:docs]]
    from benchmarks.enrich_throughput import document_rows as rows_of

    return rows_of(corpus, docs)


def cuda_missing() -> str:
    """Why the CUDA side cannot run ("" when it can)."""
    try:
        import torch
    except ImportError as exc:
        return f"no torch: {exc}"
    if not torch.cuda.is_available():
        return "torch sees no GPU"
    return ""


def run_device(rows: list[dict], config: BookindexConfig, device: str, per_batch: int) -> dict:
    """The enrich worker on ``device`` over ``rows`` in batches of ``per_batch``: the output
    rows, the seconds inside the calls and the worker's runtime record."""
    import pyarrow as pa

    from bookindex.pipelines.enrich_worker import EnrichWorker

    models = {**config.models.to_dict(), "embed_device": device}
    started = time.perf_counter()
    worker = EnrichWorker(models, config.resolver.model_dump(), node="")
    worker.warm_up()
    load_s = time.perf_counter() - started
    out, seconds = [], 0.0
    for lo in range(0, len(rows), per_batch):
        batch = pa.Table.from_pylist(rows[lo : lo + per_batch])
        started = time.perf_counter()
        done = worker(batch)
        seconds += time.perf_counter() - started
        out += done.to_pylist()
    return {"rows": out, "seconds": seconds, "load_s": load_s, "runtime": worker._runtime}


def stage_seconds(rows: list[dict]) -> str:
    """The worker's own stage times over ``rows`` (embed: every vector; entities: spaCy's
    entities and relations; resolve_document: resolution within each document), summed."""
    totals = {"embed": 0.0, "entities": 0.0, "resolve_document": 0.0}
    for row in rows:
        timings = from_json(row.get("stage_timings"), {})
        for stage in totals:
            totals[stage] += float(timings.get(stage, 0.0))
    return ", ".join(f"{stage} {seconds:.2f} s" for stage, seconds in totals.items())


def stacked(rows: list[dict], column: str, width: int) -> np.ndarray:
    """Every row's vectors of ``column`` (packed float32, ``width`` wide), one after another."""
    parts = [np.frombuffer(r[column] or b"", np.float32) for r in rows]
    return np.concatenate(parts).reshape(-1, width) if parts else np.zeros((0, width))


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two equally shaped vector sets."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return (a * b).sum(axis=1) / np.maximum(norms, 1e-12)


def graph_differences(cpu: list[dict], gpu: list[dict]) -> list[str]:
    """The documents whose entities or relations differ between the two runs."""
    return [
        a["doc_id"]
        for a, b in zip(cpu, gpu, strict=True)
        if any(json.loads(a[c] or "[]") != json.loads(b[c] or "[]") for c in _GRAPH)
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--corpus", default="musique", help="musique, hotpotqa, mmlongbench, hips or a .jsonl"
    )
    ap.add_argument("--docs", type=int, default=512, help="documents (passages or PDFs)")
    ap.add_argument("--per-batch", type=int, default=0, help="documents a call; 0: the job's")
    ap.add_argument("--devices", default="cpu,cuda", help="embed_device values, in order")
    ap.add_argument("--min-cosine", type=float, default=0.9999)
    ap.add_argument("--save-rows", help="write the documents' rows to this file and stop")
    ap.add_argument("--rows", help="read the documents' rows from --save-rows's file")
    ap.add_argument(
        "--cpu-runtime", default="", help="models.embed_runtime on CPU; empty: the default (onnx)"
    )
    args = ap.parse_args(argv)
    config = BookindexConfig()
    if args.cpu_runtime:  # a GPU runs torch whatever this says (operators/models/offline.py)
        config.models.embed_runtime = args.cpu_runtime
    started = time.perf_counter()
    if args.rows:  # made elsewhere: no shared data, no PyMuPDF needed here
        with open(args.rows, "rb") as f:
            rows = pickle.load(f)[: args.docs]  # noqa: S301 (written by --save-rows)
    else:
        rows = document_rows(args.corpus, args.docs)
    if args.save_rows:
        with open(args.save_rows, "wb") as f:
            pickle.dump(rows, f)
        print(f"wrote {len(rows)} {args.corpus} documents' rows to {args.save_rows}")
        return 0
    n_nodes = sum(r["n_nodes"] for r in rows)
    passages = all(r.get("source") == "passage" for r in rows)
    index = config.index
    per_batch = args.per_batch or (
        index.passages_per_enrich_batch if passages else index.pdfs_per_enrich_batch
    )
    print(
        f"inputs: {len(rows)} documents ({args.rows or args.corpus}), {n_nodes} nodes, "
        f"{per_batch} a batch "
        f"(made in {time.perf_counter() - started:.1f} s, not timed); "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    results: dict[str, dict] = {}
    for device in args.devices.split(","):
        name = DEVICES[device]
        missing = cuda_missing() if device == "cuda" else ""
        if missing:
            print(f"{name}: skipped (no CUDA: {missing})", flush=True)
            continue
        result = run_device(rows, config, device, per_batch)
        results[name] = result
        done = sum(r["n_nodes"] for r in result["rows"])
        print(
            f"{name}: {done} nodes in {result['seconds']:.2f} s: "
            f"{done / max(result['seconds'], 1e-9):.1f} nodes/s "
            f"(models loaded in {result['load_s']:.1f} s, not timed; runtime "
            f"{result['runtime'].get('embed_runtime')} on {result['runtime'].get('embed_device')})",
            flush=True,
        )
        print(f"{name} stages: {stage_seconds(result['rows'])}", flush=True)
    if "cpu" not in results or "gpu" not in results:
        print("agreement: not measured (one device ran)")
        return 0
    print(
        f"speed-up gpu/cpu: {results['cpu']['seconds'] / max(results['gpu']['seconds'], 1e-9):.1f}x"
    )
    return agreement(results["cpu"]["rows"], results["gpu"]["rows"], args.min_cosine)


def agreement(cpu: list[dict], gpu: list[dict], min_cosine: float) -> int:
    """Prints the agreement of the two devices' rows; 1 when the minimum node-vector cosine
    is under ``min_cosine``, else 0."""
    width = int(cpu[0]["vector_width"]) if cpu else 0
    node_cos = cosines(stacked(cpu, "node_vectors", width), stacked(gpu, "node_vectors", width))
    if not node_cos.size:
        print("agreement: not measured (no nodes)")
        return 0
    print(
        f"node vectors gpu vs cpu: min cosine {node_cos.min():.6f}, mean {node_cos.mean():.6f} "
        f"over {node_cos.size}"
    )
    sent_cos = cosines(
        stacked(cpu, "sentence_vectors", width), stacked(gpu, "sentence_vectors", width)
    )
    if sent_cos.size:
        print(
            f"sentence vectors gpu vs cpu: min cosine {sent_cos.min():.6f}, "
            f"mean {sent_cos.mean():.6f} over {sent_cos.size}"
        )
    differ = graph_differences(cpu, gpu)
    print(
        f"entities and relations: {'agree' if not differ else 'differ'} "
        f"({len(differ)} of {len(cpu)} documents differ{': ' + ', '.join(differ[:5]) if differ else ''})"
    )
    if node_cos.min() < min_cosine:
        print(f"FAIL: min node-vector cosine {node_cos.min():.6f} < {min_cosine}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
