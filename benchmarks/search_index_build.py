"""The index job's last driver phase as the index grows: LanceDB's full-text index over the
nodes' text and its IVF-HNSW-SQ index over their vectors, built by
``pipelines/store/entity_tables.build_search_indexes`` (what the job runs on the head, after
the entity tables), over node tables of several sizes.

    python -m benchmarks.search_index_build [--rows 20000,100000,300000] [--corpus musique]

Each size is a fresh ``nodes`` table of two columns, ``text`` (the passages of a shared corpus,
repeated in turn) and ``vector`` (random 384-d unit vectors, seed 0: an IVF trains on them as
on any vectors; their clusters are not those of real text). Timed, in wall seconds and in this
process's CPU seconds (every thread: LanceDB builds on all cores): writing the table (one
Lance commit; the job writes its nodes as fragments in the workers and commits them on the
driver) and building the indexes. Printed per size: rows, both timings, and rows per second of
the index build, so that the growth from one size to the next can be read (docs/scaling.md).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from bookindex.pipelines.store.entity_tables import build_search_indexes
from bookindex.pipelines.store.schemas import NODES

SHARED = Path(
    os.environ.get("BOOKINDEX_SHARED_DATA")
    or Path(__file__).resolve().parents[2] / "shared" / "data"
)
DIM = 384


def texts_of(corpus: str) -> list[str]:
    path = SHARED / "multihop" / corpus / "corpus.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def node_table(rows: int, texts: list[str], seed: int = 0) -> pa.Table:
    vectors = np.random.default_rng(seed).standard_normal((rows, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DIM)
    text = pa.array([texts[i % len(texts)] for i in range(rows)])
    return pa.table({"text": text, "vector": column})


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="20000,100000,300000")
    ap.add_argument("--corpus", default="musique", help="multihop corpus whose texts are used")
    args = ap.parse_args(argv)
    import lancedb

    texts = texts_of(args.corpus)
    print(
        f"search indexes over synthetic node tables ({args.corpus} texts, random {DIM}-d "
        f"vectors); {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'rows':>9s} {'write s':>8s} {'CPU s':>7s} {'index s':>8s} {'CPU s':>8s} {'rows/s':>8s}"
    )
    for rows in [int(x) for x in args.rows.split(",")]:
        table = node_table(rows, texts)
        with tempfile.TemporaryDirectory() as tmp:
            db = lancedb.connect(tmp)
            write_s, write_cpu = timed(lambda: db.create_table(NODES, table))  # noqa: B023
            built: list[str] = []
            index_s, index_cpu = timed(lambda: built.extend(build_search_indexes(tmp)))  # noqa: B023
        print(
            f"{rows:9d} {write_s:8.1f} {write_cpu:7.1f} {index_s:8.1f} {index_cpu:8.1f} "
            f"{rows / index_s:8.0f}  built {', '.join(built)}",
            flush=True,
        )
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
