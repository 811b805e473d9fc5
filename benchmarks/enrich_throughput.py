"""Nodes per second of the whole offline enrich stage, before and after, side by side in one run.

    python -m benchmarks.enrich_throughput [--corpus musique|hotpotqa|mmlongbench|hips]
        [--docs N] [--workers 2] [--runs before,start,after,bf16,parser,int8]
        [--before a579496] [--start 27632bb]

The documents are structured once in this process (probe, parse, section tree for PDFs; the
passage rows for JSONL corpora: not timed). Each run then starts its own local Ray (``--workers``
CPUs) in a subprocess and runs ``pipelines.enrich.EnrichStage`` on Ray Data with ``--workers``
actors over those rows: node and sentence vectors, spaCy entities and relations, entity name
vectors, resolution within each document. The runs:

- ``before``: the stage as it was, from the source tree of commit ``--before`` (exported with
  ``git archive``), with its original configuration: ``models.embed_runtime=torch`` (batches of
  64);
- ``onnx``: the same old tree on ONNX Runtime (the default before this change);
- ``start``: the stage at ``--start`` (the beginning of the third round of this work, stop 5)
  with its defaults (ONNX fp32, spaCy's parser for sentence boundaries);
- ``after``: this tree with its defaults (ONNX fp32, spaCy's senter);
- ``bf16``: this tree with ``models.embed_runtime=bf16`` (bfloat16 matrix products, opt-in);
- ``parser``: this tree with ``models.spacy_sentences=parser`` (what the senter saves);
- ``int8``: this tree with ``models.embed_runtime=onnx-int8`` (smoothed int8, opt-in).

Printed per run: nodes/s over the stage's wall time (actors started and models loaded inside it,
as in a job: ``wall s``); the seconds until the first batch reached a started actor (``start
s``: actors, model child processes, models loaded) and nodes/s over the wall time after it (the
rate of bulk indexing, where start-up is paid once per job); nodes/s over the time inside the
stage's calls (the rows' ``embed`` +
``entities`` timings, divided by the workers: ``call s``); the CPU seconds of the calls
(``CPU s``, all workers, with the model child process where the stage has one) and ``nodes/s*`` = nodes per CPU-second × workers, the rate with a
core to each worker (on a shared machine the wall rates fall with the load; this one much
less); the speed-ups over the first run (wall, CPU); the load average at the run's end; the
minimum cosine of the node vectors against the first run's; entities, entity→node links and
relations, and the documents whose entities or relations (``diff``) or ER decisions (``dec``,
which hold float scores) differ from the first run's.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.trees import tree_module
from bookindex.operators.config import BookindexConfig

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
PDF_CORPORA = {
    "hips": SHARED / "hips" / "PDFs",
    "mmlongbench": SHARED / "mmlongbench" / "documents",
}
PASSAGE_CORPORA = ("musique", "hotpotqa")
BEFORE = "a579496"  # main before the enrich speed work (issue 18 point 5)
START = "27632bb"  # main at the start of the third round (stop 5): ONNX fp32, spaCy's parser
RUNS = {  # name: (tree, models overrides)
    "before": ("before", {"embed_runtime": "torch"}),
    "onnx": ("before", {"embed_runtime": "onnx"}),
    "start": ("start", {}),
    "after": ("here", {}),
    "bf16": ("here", {"embed_runtime": "bf16"}),
    "parser": ("here", {"spacy_sentences": "parser"}),
    "int8": ("here", {"embed_runtime": "onnx-int8"}),
}
_ENTITY_COLUMNS = ("entities", "relations", "er_decisions")
_GRAPH = ("entities", "relations")  # resolution's outcome (decisions also hold float scores)


def document_rows(corpus: str, docs: int) -> list[dict]:
    """The structure stage's rows of the first ``docs`` documents of ``corpus``."""
    if corpus in PASSAGE_CORPORA:
        from bookindex.operators.structure.passages import read_passages
        from bookindex.pipelines.rows import passage_document_row

        passages = read_passages(str(SHARED / "multihop" / corpus / "corpus.jsonl"))[:docs]
        return [passage_document_row(p) for p in passages]
    import pyarrow as pa

    from bookindex.pipelines.structure_stage import index_documents, probe_document

    pdfs = sorted(PDF_CORPORA[corpus].glob("*.pdf"))[:docs]
    probed = [
        dict(probe_document({"doc_id": p.name, "uri": str(p), "size": p.stat().st_size}))
        for p in pdfs
    ]
    for row in probed:
        row.update(start=0, stop=row["n_pages"])
    return index_documents(pa.Table.from_pylist(probed), use_outline=True).to_pylist()


def child(rows_path: str, out_path: str, workers: int, per_batch: int, overrides: str) -> None:
    """One run, in the process of its source tree (``PYTHONPATH``): the stage over the rows."""
    import ray

    BookindexConfig = tree_module("operators.config").BookindexConfig  # benchmarks/trees.py
    enrich = tree_module("pipelines.enrich")
    EnrichStage, enrich_args = enrich.EnrichStage, enrich.enrich_args
    rows_module = tree_module("pipelines.rows")
    decode_vectors, from_json = rows_module.decode_vectors, rows_module.from_json

    with open(rows_path, "rb") as f:
        rows = pickle.load(f)  # noqa: S301 (written by this benchmark's parent)
    config = BookindexConfig()
    for key, value in json.loads(overrides).items():
        setattr(config.models, key, value)
    config.index.enrich_workers = workers
    ray.init(address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False)
    args = enrich_args(config, workers, per_batch, None)

    class CpuTimed(EnrichStage):  # the stage, with the CPU seconds of each call in a column
        def _cpu(self) -> float:  # the actor's and, where the models run in one, its child's
            import psutil

            child = getattr(getattr(self, "host", None), "child", None)
            if child is None:
                return time.process_time()
            times = psutil.Process(child.pid).cpu_times()
            return time.process_time() + times.user + times.system

        def __call__(self, batch):
            cpu, began = self._cpu(), time.time()
            out = super().__call__(batch)
            cpu = self._cpu() - cpu
            nodes = out.column("n_nodes").to_pylist()  # shared by node count
            out = out.append_column("cpu_s", [[cpu * n / max(1, sum(nodes)) for n in nodes]])
            call = [began, time.time(), os.getpid()]  # the call's span, per actor
            return out.append_column("call", [[json.dumps(call)] * out.num_rows])

    started, since = time.perf_counter(), time.time()
    # blocks as the index job makes them (pipelines/index_pipeline.py: passages in
    # min(rows, workers x 4) blocks, a PDF a block)
    blocks = len(rows) if per_batch == 1 else min(len(rows), workers * 4)
    dataset = ray.data.from_items(rows, override_num_blocks=blocks)
    out = dataset.map_batches(CpuTimed, **args).take_all()
    wall = time.perf_counter() - started
    load = os.getloadavg()
    ray.shutdown()
    inside = cpu = 0.0
    calls = {tuple(json.loads(row["call"])) for row in out}
    first = min(c[0] for c in calls) - since  # actors and models started, first batch in
    busy = sum(c[1] - c[0] for c in calls) / workers
    result: dict = {"wall": wall, "load": load, "docs": {}, "first": first, "busy": busy}
    for row in out:
        timings = from_json(row["stage_timings"], {})
        inside += timings.get("embed", 0.0) + timings.get("entities", 0.0)
        cpu += row["cpu_s"]
        result["docs"][row["doc_id"]] = {
            "vectors": decode_vectors(row["node_vectors"], row["n_nodes"], 384),
            **{c: row[c] for c in _ENTITY_COLUMNS},
        }
    result.update(inside=inside / workers, cpu=cpu)
    with open(out_path, "wb") as f:
        pickle.dump(result, f)


def _tree(name: str, refs: dict[str, str], scratch: Path) -> Path:
    if name == "here":
        return ROOT
    ref = refs[name]
    target = scratch / f"tree-{ref}"
    if not target.exists():
        target.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def _counts(result: dict) -> tuple[int, int, int]:
    entities = [e for d in result["docs"].values() for e in json.loads(d["entities"])]
    relations = sum(len(json.loads(d["relations"])) for d in result["docs"].values())
    return len(entities), sum(len(e["node_ids"]) for e in entities), relations


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", default="musique", choices=[*PASSAGE_CORPORA, *PDF_CORPORA])
    parser.add_argument("--docs", type=int, default=0, help="0: 512 passages or 3 PDFs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", default="before,after")
    parser.add_argument("--before", default=BEFORE, help="the commit whose stage is 'before'")
    parser.add_argument("--start", default=START, help="the commit whose stage is 'start'")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        rows_path, out_path, workers, per_batch, overrides = args.child
        child(rows_path, out_path, int(workers), int(per_batch), overrides)
        return
    passages = args.corpus in PASSAGE_CORPORA
    rows = document_rows(args.corpus, args.docs or (512 if passages else 3))
    # as the index job batches them (index.passages_per_enrich_batch / pdfs_per_enrich_batch)
    index = BookindexConfig().index
    per_batch = index.passages_per_enrich_batch if passages else index.pdfs_per_enrich_batch
    n_nodes = sum(r["n_nodes"] for r in rows)
    print(
        f"corpus={args.corpus} documents={len(rows)} nodes={n_nodes} workers={args.workers} "
        f"documents/batch={per_batch} before={args.before} start={args.start} "
        f"load={' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(
        f"{'run':<8}{'wall s':>7}{'nodes/s':>8}{'start s':>8}{'nodes/s':>8}{'call s':>8}"
        f"{'nodes/s':>8}{'CPU s':>7}{'nodes/s*':>9}{'wall':>8}{'CPU':>8}{'load':>6}{'min cos':>9}"
        f"{'ents':>6}{'links':>6}{'rels':>6}{'diff':>5}{'dec':>5}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="enrich-bench-") as scratch:
        rows_path = Path(scratch) / "rows.pkl"
        with open(rows_path, "wb") as f:
            pickle.dump(rows, f)
        first = None
        for name in args.runs.split(","):
            tree_name, overrides = RUNS[name]
            refs = {"before": args.before, "start": args.start}
            tree = _tree(tree_name, refs, Path(scratch))
            out_path = Path(scratch) / f"{name}.pkl"
            command = [sys.executable, str(Path(__file__).resolve()), "--child"]
            command += [str(rows_path), str(out_path), str(args.workers), str(per_batch)]
            command.append(json.dumps(overrides))
            env = dict(os.environ, PYTHONPATH=str(tree), RAY_ADDRESS="local")
            done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"run {name} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
            with open(out_path, "rb") as f:
                result = pickle.load(f)  # noqa: S301 (written by the child above)
            first = first or result
            cosines = np.concatenate(
                [
                    (result["docs"][d]["vectors"] * first["docs"][d]["vectors"]).sum(axis=1)
                    for d in first["docs"]
                ]
            )
            differ = [
                sum(
                    any(result["docs"][d][c] != first["docs"][d][c] for c in columns)
                    for d in first["docs"]
                )
                for columns in (_GRAPH, ("er_decisions",))
            ]
            entities, links, relations = _counts(result)
            print(
                f"{name:<8}{result['wall']:>7.1f}{n_nodes / result['wall']:>8.1f}"
                f"{result['first']:>8.1f}{n_nodes / (result['wall'] - result['first']):>8.1f}"
                f"{result['inside']:>8.1f}{n_nodes / result['inside']:>8.1f}"
                f"{result['cpu']:>7.1f}{n_nodes / result['cpu'] * args.workers:>9.1f}"
                f"{first['wall'] / result['wall']:>7.2f}x{first['cpu'] / result['cpu']:>7.2f}x"
                f"{result['load'][0]:>6.1f}{cosines.min():>9.4f}{entities:>6}{links:>6}"
                f"{relations:>6}{differ[0]:>5}{differ[1]:>5}",
                flush=True,
            )


if __name__ == "__main__":
    main()
