"""What a model stage's answer costs between its child and its actor (pipelines/model_host.py),
side by side in one run, on batches shaped like the enrich stage's output rows (per document:
its nodes as JSON, float32 node and sentence vectors as bytes, entity JSON).

    before: the table pickled over the socket both ways, then ``to_pylist`` in the actor and
            ``pa.Table.from_pylist`` by the stage (the happy path until now)
    after:  Arrow IPC streams both ways (``to_ipc`` / ``from_ipc``), the child's table handed on

Both are measured in this process on the same tables (the socket's copy is the same for both:
the bytes of one buffer), and ``after`` once more end to end through a ``ModelHost`` child that
echoes its batch. ``python -m benchmarks.model_host_ipc [--docs 16] [--nodes 300] [--runs 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import time

import numpy as np
import pyarrow as pa

from bookindex.pipelines.model_host import ModelHost, from_ipc, to_ipc

WIDTH = 384


class Echo:
    """A model worker that answers with the batch it was sent."""

    def __call__(self, batch: pa.Table) -> pa.Table:
        return batch


def enrich_like(docs: int, nodes: int, seed: int = 0) -> pa.Table:
    """``docs`` rows with the heavy columns of enriched documents of ``nodes`` nodes each."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(docs):
        node_list = [
            {"node_id": f"d{d}n{i}", "kind": "text", "text": "word " * 60, "page_start": i // 8}
            for i in range(nodes)
        ]
        vectors = rng.standard_normal((nodes, WIDTH), dtype=np.float32)
        sentences = rng.standard_normal((nodes * 3, WIDTH), dtype=np.float32)
        entities = [{"name": f"Entity {i}", "type": "ORG"} for i in range(nodes // 3)]
        rows.append(
            {
                "doc_id": f"doc{d}",
                "status": "ok",
                "n_nodes": nodes,
                "nodes": json.dumps(node_list),
                "node_vectors": vectors.tobytes(),
                "sentence_vectors": sentences.tobytes(),
                "entities": json.dumps(entities),
                "vector_width": WIDTH,
            }
        )
    return pa.Table.from_pylist(rows)


def before(table: pa.Table) -> pa.Table:
    sent = pickle.loads(pickle.dumps(table, protocol=pickle.HIGHEST_PROTOCOL))
    answer = pickle.loads(pickle.dumps(sent, protocol=pickle.HIGHEST_PROTOCOL))
    return pa.Table.from_pylist(answer.to_pylist())


def after(table: pa.Table) -> pa.Table:
    return from_ipc(bytes(to_ipc(from_ipc(bytes(to_ipc(table))))))


def _best(fn, table: pa.Table, runs: int) -> tuple[float, pa.Table]:
    times, out = [], table
    for _ in range(runs):
        started = time.perf_counter()
        out = fn(table)
        times.append(time.perf_counter() - started)
    return min(times), out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    table = enrich_like(args.docs, args.nodes)
    mb = table.nbytes / 2**20
    old_s, old = _best(before, table, args.runs)
    new_s, new = _best(after, table, args.runs)
    assert new.equals(table) and old.num_rows == table.num_rows
    host = ModelHost("benchmarks.model_host_ipc:Echo", {}, timeout_s=600, retries=0)
    try:
        host_s, echoed = _best(lambda t: host.call_isolated(t, lambda r, e: r), table, args.runs)
    finally:
        host.close()
    assert echoed.equals(table)
    print(f"batch: {args.docs} documents x {args.nodes} nodes, {mb:.1f} MiB (Arrow)")
    print(f"before (pickle + Python rows): {old_s * 1000:8.1f} ms")
    print(f"after  (Arrow IPC):            {new_s * 1000:8.1f} ms   ({old_s / new_s:.1f}x)")
    print(f"after, end to end through a ModelHost child (echo): {host_s * 1000:.1f} ms")
    print(f"best of {args.runs}; load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
