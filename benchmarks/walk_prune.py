"""Pruned Doc-Zoom walks (``walk.tolerance``) against the exact walk, on an index, side by side
in one run: what each tolerance costs and what it changes.

    python -m benchmarks.walk_prune --index DIR [--tolerance 0,1e-6,1e-5] [--batch 1,32]
        [--requests 128] [--questions FILE ...] [--rounds 2]

The engine a Serve replica holds (``open_engine``, the walk graph read from the index
directory); one thread (``OMP_NUM_THREADS`` 1, as Ray gives a replica of one CPU). Questions:
``--questions`` JSONL files (their ``question`` field; e.g. the multi-hop questions
``benchmarks.grow_passages --questions-out`` writes), else ``benchmarks.serve_load``'s. Per
tolerance, printed:

* the CPU milliseconds a question of Doc-Zoom (entity linking, the query walk and the bridge
  walk, the fusion: ``Zoom.doc_zoom``) and of its two walks, at each batch size; tolerances are
  timed in turn within each of ``--rounds`` rounds (the machine's load falls on every one), the
  figure is the median over rounds;
* the nonzeros of the query walk's final state, as a share of the exact walk's (what a step
  reads follows them);
* against the exact walk (tolerance 0), per question: whether Doc-Zoom's documents (the
  ``top_docs`` Chunk-Zoom reads, in order) are the same, and their overlap as a set; and the
  largest difference of the entity scores Chunk-Zoom starts from.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np


def load_questions(paths: list[str], n: int) -> list[str]:
    from benchmarks.serve_load import question

    if not paths:
        return [question(2_000_000 + i) for i in range(n)]
    out: list[str] = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.append(json.loads(line)["question"])
    return out[:n] if n else out


def timed(zoom, queries, vectors, entities, batch: int) -> tuple[float, float, list]:
    """CPU ms a question of Doc-Zoom and of its walks, and Doc-Zoom's output per batch."""
    engine = zoom.engine
    walk, walk_s = engine.walk, [0.0]

    def counted(*args, **kwargs):
        t0 = time.process_time()
        try:
            return walk(*args, **kwargs)
        finally:
            walk_s[0] += time.process_time() - t0

    engine.walk = counted
    outputs = []
    t0 = time.process_time()
    try:
        for lo in range(0, len(queries), batch):
            hi = lo + batch
            outputs.append(zoom.doc_zoom_scores(vectors[lo:hi], entities[lo:hi]))
    finally:
        del engine.walk
    total = time.process_time() - t0
    return total * 1000 / len(queries), walk_s[0] * 1000 / len(queries), outputs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index", required=True)
    parser.add_argument("--tolerance", default="0,1e-6,1e-5")
    parser.add_argument("--batch", default="1,32")
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--questions", nargs="*", default=[])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from bookindex.operators.config import BookindexConfig
    from bookindex.pipelines.store.reader import open_engine

    tolerances = [float(t) for t in args.tolerance.split(",")]
    if tolerances[0] != 0:
        tolerances.insert(0, 0.0)  # the exact walk is the reference
    batches = [int(b) for b in args.batch.split(",")]
    started = time.perf_counter()
    engine = open_engine(args.index, BookindexConfig())
    zoom = engine.zoom
    walk = zoom.engine
    print(
        f"index {args.index}: {walk.n_d:,} documents, {walk.n_e:,} entities, {walk.S.nnz:,} "
        f"links; opened in {time.perf_counter() - started:.1f} s; load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    queries = load_questions(args.questions, args.requests)
    vectors = zoom.backend.embed(queries)
    entities = zoom.link_entities(queries)
    base = walk.config

    def use(tolerance: float) -> None:
        walk.config = base.model_copy(update={"tolerance": tolerance})

    use(0.0)
    zoom.doc_zoom_scores(vectors[:8], entities[:8])  # warm-up: the product and its kernels
    times: dict[tuple[float, int], list[tuple[float, float]]] = {}
    outputs: dict[float, list] = {}
    for _ in range(args.rounds):
        for tolerance in tolerances:
            use(tolerance)
            for batch in batches:
                total, walks, out = timed(zoom, queries, vectors, entities, batch)
                times.setdefault((tolerance, batch), []).append((total, walks))
                outputs[tolerance] = out
    use(0.0)
    exact_state = np.asarray(walk.walk(vectors, entities)[0])
    depth = zoom.config.top_docs
    exact_docs = np.concatenate([o[0] for o in outputs[0.0]])
    exact_entities = np.concatenate([o[1] for o in outputs[0.0]])
    print(
        f"{len(queries)} questions, {args.rounds} rounds; Doc-Zoom CPU ms a question "
        "(its two walks), median over rounds"
    )
    head = f"{'tolerance':>10}" + "".join(f"{'batch ' + str(b):>20}" for b in batches)
    head += f"{'state nnz':>11}{'same docs':>11}{'overlap':>9}{'entity diff':>13}"
    print(head)
    for tolerance in tolerances:
        line = f"{tolerance:>10g}"
        for batch in batches:
            runs = times[(tolerance, batch)]
            total = statistics.median(t for t, _ in runs)
            walks = statistics.median(w for _, w in runs)
            line += f"{f'{total:.2f} ({walks:.2f})':>20}"
        use(tolerance)
        state = np.asarray(walk.walk(vectors, entities)[0])
        nnz = np.count_nonzero(state) / max(np.count_nonzero(exact_state), 1)
        docs = np.concatenate([o[0] for o in outputs[tolerance]])
        ents = np.concatenate([o[1] for o in outputs[tolerance]])
        same = overlap = 0.0
        for a, b in zip(docs, exact_docs, strict=True):
            top_a = np.argsort(-a, kind="stable")[:depth]
            top_b = np.argsort(-b, kind="stable")[:depth]
            same += top_a.tolist() == top_b.tolist()
            overlap += len(set(top_a.tolist()) & set(top_b.tolist())) / depth
        diff = float(np.abs(ents - exact_entities).max()) if ents.size else 0.0
        n = len(queries)
        line += f"{nnz:>11.3f}{same / n:>11.3f}{overlap / n:>9.3f}{diff:>13.2e}"
        print(line)
    use(0.0)


if __name__ == "__main__":
    main()
