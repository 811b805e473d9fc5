"""The index job with ``--models openai`` as tests/integration/test_llm_batch.py runs it: its wall
seconds and its Ray Data executions, this tree beside another commit's, and whether both trees
wrote the same index.

Run from the repo root (progress goes to stderr, the tables to stdout)::

    python -m benchmarks.llm_job [--start REF] [--reps N]

The job is the test's fixture (``indexed``): one 9-page MMLongBench paper (2303.05039v2: 11
figures, 6 tables; under ``<data>``, ``$BOOKINDEX_SHARED_DATA`` or ``<repo>/../shared/data``)
indexed with enrich on and the section refiner, descriptions, LLM entities and ER selection
asked through ``ray.data.llm`` processors (``models.max_retries=1``,
``index.enrich_workers=2``, ``index.section_window=6``) of a fake OpenAI-compatible server on
127.0.0.1 that answers by the test's rules (``tests.integration.test_llm_batch._answer``, 0.02 s
an answer: invalid JSON for some entity passages, refiner windows and selections, HTTP 503
forever for some entity passages), with one change: no refiner window answers 503 (the test
picks the first window sent that would get a valid answer, which depends on the order of
arrival); so every answer is a function of its request alone, and two runs of one job write the
same tables.

Each tree's job runs in a subprocess of its own (that tree as working directory and on
``PYTHONPATH``, its own tests module for the server's rules), in a fresh local Ray of 2 CPUs
with a 400 MiB object store, as the test session's ``ray_session`` starts it; the timed part is
``run_index`` alone, as the test's setup is (Ray's start-up is the session's). With ``--start
REF`` the job runs on the tree of commit ``REF`` (``git archive``) and on this tree,
alternating, ``--reps`` rounds, under the same load. Printed per tree and round: the job's wall
seconds, its Ray Data executions (``StreamingExecutor`` runs: count and summed seconds) and the
load average; per tree: the median seconds; with ``--start``, the ratio here / start of the
medians, and whether every table of the two trees' indexes (rows sorted) is the same, leaving
out the columns that hold times (``TIMED``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if "benchmarks" not in sys.modules:  # run as a script in another tree (--start): this checkout's
    from this_checkout import load_benchmarks  # benchmarks/this_checkout.py, beside this file

    load_benchmarks()

from benchmarks.index_throughput import data_dir, log, run_child, source_tree  # noqa: E402
from benchmarks.trees import tree_module  # noqa: E402

PAPER = "mmlongbench/documents/2303.05039v2.pdf"
# columns that hold a time (when a row was written, how long a stage took): left out of the
# comparison of the two trees' tables
TIMED = {"indexed_at", "failed_at", "decided_at", "stage_timings", "build"}


def child(spec_path: str) -> None:
    """One tree's job in this process (started in that tree, with it on ``PYTHONPATH``); the
    result as JSON to ``spec["out"]``, the index's tables as JSON lines beside it."""
    import ray

    spec = json.loads(Path(spec_path).read_text())
    ray.init(
        address="local",
        num_cpus=2,
        object_store_memory=400 * 1024 * 1024,
        include_dashboard=False,
        log_to_driver=False,
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    executions = _count_executions()
    from tests import fakes
    from tests.integration import test_llm_batch as rules

    rules.UNAVAILABLE_WINDOW[:] = [-1]  # no refiner window answers 503 (the docstring)
    config = tree_module("operators.config")
    models = tree_module("operators.models")
    run_index = tree_module("pipelines.index_pipeline").run_index
    fake = fakes.FakeOpenAI(rules._answer, delay_s=0.02)
    options = config.BookindexConfig(
        models=models.ModelConfig(
            backend="openai", base_url=fake.url, model="fake-vlm", max_retries=1
        )
    )
    options.index.enrich_workers = 2
    options.index.section_window = 6
    out = Path(spec["scratch"]) / "index"
    try:
        started = time.perf_counter()
        summary = run_index([spec["pdf"]], out, options)
        seconds = time.perf_counter() - started
    finally:
        fake.close()
        ray.shutdown()
    result = {
        "seconds": seconds,
        "executions": len(executions),
        "execution_s": sum(executions),
        "load": os.getloadavg()[0],
        "line": summary.line(),
        "requests": len(fake.chats),
        "tables": dump_tables(out, Path(spec["scratch"]) / "tables"),
    }
    Path(spec["out"]).write_text(json.dumps(result))


def _count_executions() -> list[float]:
    """The seconds of each Ray Data streaming execution of this process, as they end."""
    from ray.data._internal.execution import streaming_executor as se

    seconds: list[float] = []
    execute, shutdown = se.StreamingExecutor.execute, se.StreamingExecutor.shutdown

    def timed_execute(self, *args, **kwargs):
        self._bench_started = time.perf_counter()
        return execute(self, *args, **kwargs)

    def timed_shutdown(self, *args, **kwargs):
        started = self.__dict__.pop("_bench_started", None)
        if started is not None:
            seconds.append(time.perf_counter() - started)
        return shutdown(self, *args, **kwargs)

    se.StreamingExecutor.execute, se.StreamingExecutor.shutdown = timed_execute, timed_shutdown
    return seconds


def dump_tables(index: Path, folder: Path) -> dict[str, int]:
    """Each Lance table of ``index`` as ``folder/<table>.jsonl`` (rows sorted, ``TIMED``
    columns left out); the rows of each."""
    import lance

    folder.mkdir()
    rows: dict[str, int] = {}
    for path in sorted(index.glob("*.lance")):
        table = lance.dataset(str(path)).to_table()
        kept = [c for c in table.column_names if c not in TIMED]
        lines = sorted(
            json.dumps(r, sort_keys=True, default=str) for r in table.select(kept).to_pylist()
        )
        (folder / f"{path.stem}.jsonl").write_text("\n".join(lines))
        rows[path.stem] = len(lines)
    return rows


def differing_tables(a: Path, b: Path) -> list[str]:
    """The tables whose dumps (``dump_tables``) under ``a`` and ``b`` differ, or that only
    one has."""
    names = {p.name for p in a.glob("*.jsonl")} | {p.name for p in b.glob("*.jsonl")}
    return sorted(
        n
        for n in names
        if not (a / n).is_file()
        or not (b / n).is_file()
        or (a / n).read_text() != (b / n).read_text()
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.llm_job", description=__doc__)
    ap.add_argument("--start", default=None, help="also run the job on this commit's tree")
    ap.add_argument("--reps", type=int, default=1, help="rounds (each tree once a round)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    pdf = data_dir() / PAPER
    script = Path(__file__).resolve()
    with tempfile.TemporaryDirectory(prefix="bookindex_llm_job_") as tmp_name:
        tmp = Path(tmp_name)
        trees = {"start": source_tree(args.start, tmp)} if args.start else {}
        trees["here"] = REPO_ROOT
        results: dict[str, list[dict]] = {name: [] for name in trees}
        for rep in range(args.reps):
            for name, tree in trees.items():
                scratch = tmp / f"run_{rep}_{name}"
                scratch.mkdir()
                log(f"{name} (round {rep + 1}/{args.reps}) ...")
                result = run_child(name, tree, {"pdf": str(pdf)}, scratch, script)
                result["dump"] = str(scratch / "tables")
                log(f"{name}: {result['seconds']:.1f} s, {result['line']}")
                results[name].append(result)
        print(f"the test_llm_batch job on {PAPER}; CPUs: {os.cpu_count()}")
        print(f"load average at the end (1, 5, 15 min): {os.getloadavg()}")
        if args.start:
            print(f"start: the tree of commit {args.start}; here: this checkout")
        print(
            f"{'tree':<6} {'round':>5} {'seconds':>8} {'executions':>10} {'exec_s':>8} {'load':>5}"
        )
        for name, runs in results.items():
            for rep, r in enumerate(runs):
                print(
                    f"{name:<6} {rep + 1:>5} {r['seconds']:>8.1f} {r['executions']:>10}"
                    f" {r['execution_s']:>8.1f} {r['load']:>5.1f}"
                )
        medians = {n: statistics.median(r["seconds"] for r in runs) for n, runs in results.items()}
        for name, median in medians.items():
            print(f"{name}: median {median:.1f} s over {len(results[name])} round(s)")
        if args.start:
            print(f"here / start (median seconds): {medians['here'] / medians['start']:.2f}")
            first = Path(results["start"][0]["dump"])
            differ = sorted(
                {
                    t
                    for runs in results.values()
                    for r in runs
                    for t in differing_tables(first, Path(r["dump"]))
                }
            )
            print(f"tables that differ between any two runs: {', '.join(differ) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
