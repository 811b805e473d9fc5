"""Nodes per second of the whole offline enrich stage, before and after, side by side in one run.

    python -m benchmarks.enrich_throughput [--corpus mmlongbench|hips] [--docs 3]
        [--workers 2] [--runtimes torch,onnx,onnx-int8]

Structures the first ``--docs`` PDFs in-process (probe, parse, section tree: not timed), then
runs ``pipelines.enrich.EnrichStage`` on Ray Data over those document rows, once per embedding
runtime (``models.embed_runtime``; ``torch`` is the stage as it was), each with ``--workers``
actors: node vectors, spaCy entities and relations, entity name vectors, resolution within each
document. Prints, per runtime, nodes/s over the stage's wall time (actors started and models
loaded inside it, as in a job) and over the time inside the stage's calls (``embed`` +
``entities`` timings of the rows, divided by the workers), and the cosine of each node vector
against the torch ones.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from operators.config import BookindexConfig
from pipelines.enrich import EnrichStage, enrich_args
from pipelines.rows import decode_vectors, from_json
from pipelines.structure_stage import index_documents, probe_document

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPORA = {"hips": SHARED / "hips" / "PDFs", "mmlongbench": SHARED / "mmlongbench" / "documents"}


def document_rows(pdfs: list[Path]) -> list[dict]:
    """The structure stage's rows for ``pdfs`` (whole documents, parsed in this process)."""
    import pyarrow as pa

    probed = [
        dict(probe_document({"doc_id": p.name, "uri": str(p), "size": p.stat().st_size}))
        for p in pdfs
    ]
    for row in probed:
        row.update(start=0, stop=row["n_pages"])
    return index_documents(pa.Table.from_pylist(probed), use_outline=True).to_pylist()


def run_stage(rows: list[dict], runtime: str, workers: int) -> dict:
    """One enrich run over ``rows`` on ``workers`` actors; wall and in-call seconds, vectors."""
    import ray

    config = BookindexConfig()
    config.models.embed_runtime = runtime
    config.index.enrich_workers = workers
    args = enrich_args(config, workers, 1, None)
    started = time.perf_counter()
    dataset = ray.data.from_items(rows, override_num_blocks=len(rows))
    out = dataset.map_batches(EnrichStage, **args).take_all()
    wall = time.perf_counter() - started
    inside = 0.0
    vectors = {}
    for row in out:
        timings = from_json(row["stage_timings"], {})
        inside += timings.get("embed", 0.0) + timings.get("entities", 0.0)
        vectors[row["doc_id"]] = decode_vectors(row["node_vectors"], row["n_nodes"], 384)
    return {"wall": wall, "inside": inside / workers, "vectors": vectors, "rows": out}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", default="mmlongbench", choices=sorted(CORPORA))
    parser.add_argument("--docs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runtimes", default="torch,onnx,onnx-int8")
    args = parser.parse_args(argv)
    import ray

    pdfs = sorted(CORPORA[args.corpus].glob("*.pdf"))[: args.docs]
    rows = document_rows(pdfs)
    n_nodes = sum(r["n_nodes"] for r in rows)
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    runtimes = args.runtimes.split(",")
    print(f"corpus={args.corpus} documents={len(pdfs)} nodes={n_nodes} workers={args.workers}")
    header = f"{'runtime':<11}{'wall s':>8}{'nodes/s':>9}{'in-call s':>11}{'nodes/s':>9}"
    print(f"{header}{'speed-up':>10}{'min cos':>9}{'entities':>10}", flush=True)
    base = None
    for runtime in runtimes:  # each printed when done
        result = run_stage(rows, runtime, args.workers)
        base = base or result
        cosines = np.concatenate(
            [(result["vectors"][d] * base["vectors"][d]).sum(axis=1) for d in base["vectors"]]
        )
        entities = sum(len(from_json(r["entities"], [])) for r in result["rows"])
        print(
            f"{runtime:<11}{result['wall']:>8.1f}{n_nodes / result['wall']:>9.1f}"
            f"{result['inside']:>11.1f}{n_nodes / result['inside']:>9.1f}"
            f"{base['wall'] / result['wall']:>9.2f}x{cosines.min():>9.4f}{entities:>10}",
            flush=True,
        )


if __name__ == "__main__":
    main()
