"""The corpus entity resolution's LLM selection phase (pipelines/entity_graph.resolve_corpus)
at scale: what the second resolution costs, and what skipping it saves when every answer is
the rule's own choice. Side by side in one run, on benchmarks/er_scaling.py's synthetic name
vectors (planted aliases and near-miss topics), in documents of ``--per-doc`` entities:

    first:    the resolution that lets the rule stand and collects the questions
    second:   the resolution again with the answers (what every job with questions did)
    relabel:  the first run's decisions with the answered ones marked ``llm``
              (``relabel_answered``; used when ``SelectionPhase.changes`` is false)

The answers are the rule's own choice (0) for every question, so ``relabel`` must equal
``second`` exactly (checked); with an answer that picks another candidate the second run is
still made (``changes`` true). Plain Python (``CorpusEntities``, as the corpus actor runs
it, one CPU); the actor's start and the ``entities`` table read come on top of each run.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.er_selection_phase [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from benchmarks.er_scaling import DIM, synthetic
from bookindex.operators.config import ResolverConfig
from bookindex.operators.graph.entity_sets import CorpusEntities
from bookindex.operators.graph.resolution import SelectionPhase, relabel_answered


def documents(n: int, per_doc: int, seed: int) -> list[dict]:
    data = synthetic(n, seed)
    docs = []
    for start in range(0, n, per_doc):
        names = data.names[start : start + per_doc]
        entities = [{"name": m, "type": "ORG", "description": "", "aliases": []} for m in names]
        vectors = data.vectors[start : start + per_doc]
        docs.append(
            {"doc_id": f"doc{start // per_doc:06d}", "entities": entities, "vectors": vectors}
        )
    return docs


def resolve(docs: list[dict], phase: SelectionPhase) -> tuple[float, float, list[dict], tuple]:
    """(wall seconds, this process's CPU seconds, results, canonical rows)."""
    started, cpu = time.perf_counter(), time.process_time()
    entities = CorpusEntities(DIM, ResolverConfig(), phase)
    results = []
    for at in range(0, len(docs), 40):  # the actor's batches (about 2,000 entities)
        results += entities.resolve(docs[at : at + 40])
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return elapsed, cpu, results, entities.canonical_rows()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--per-doc", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(
        "entities  questions  first_s  first_cpu_s  second_s  relabel_s  same  second run's share"
    )
    for n in map(int, args.sizes.split(",")):
        docs = documents(n, args.per_doc, args.seed)
        phase = SelectionPhase({})
        first_s, first_cpu, first, (rows, vectors) = resolve(docs, phase)
        answers = dict.fromkeys(phase.asked, 0)
        assert not phase.changes(answers) and phase.changes({next(iter(phase.asked)): -1})
        second_s, _, second, (rows2, vectors2) = resolve(docs, SelectionPhase(answers))
        started = time.perf_counter()
        relabelled = [dict(r, decisions=relabel_answered(r["decisions"], answers)) for r in first]
        relabel_s = time.perf_counter() - started
        same = relabelled == second and rows == rows2 and np.array_equal(vectors, vectors2)
        share = second_s / (first_s + second_s)
        print(
            f"{n:8d}  {len(answers):9d}  {first_s:7.1f}  {first_cpu:11.1f}  {second_s:8.1f}  "
            f"{relabel_s:9.3f}  "
            f"{same!s:5}  {share:.0%}"
        )
    print(f"load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
