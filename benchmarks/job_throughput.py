"""Whole index job throughput: pages/s and nodes/s of the complete job, enrich on, on a fixed mix
of books, reports and papers, and a passage corpus, with its stage breakdown.

Run from the repo root (progress goes to stderr, the tables to stdout)::

    python -m benchmarks.job_throughput [--mix default|small] [--start REF] [--reps N] [--tables]

The job is ``run_index(inputs, fresh_dir, config)`` with ``index.parse_workers=2`` and
``index.enrich=true`` (the defaults otherwise): probe, parse, OCR of image-only pages,
assemble, layout graph, enrich (node and sentence vectors, entities and relations, resolution
within each document), corpus entity resolution, the Lance writes and the search indexes.

The mixes (``MIXES``; files under ``<data>``, ``$BOOKINDEX_SHARED_DATA`` or
``<repo>/../shared/data``; fixed names, listed sorted; passages: the first N lines of MuSiQue's
``corpus.jsonl``, written to a ``.jsonl`` the job reads as a passage corpus):

* ``default``: two HiPS books (the-regulation-of-megabanks, 246 pages, its cover an image the
  job reads by OCR; 6-traditional-medicines, 18 pages), six MMLongBench documents (three
  papers: 2303.05039v2, 2312.10997v5, 2401.18059v1; three reports: Independents-Report,
  PIP_Seniors-and-Tech-Use, NETFLIX_2015_10K), 439 pages in all, and 1,000 MuSiQue passages.
* ``small`` (the test's): one book (6-traditional-medicines, 18 pages), one paper
  (2303.05039v2, 9 pages) and 50 MuSiQue passages.

Each tree's job runs in a subprocess of its own with its own local Ray (2 CPUs), started and
warmed up (an enrich run on a generated 3-page PDF, into another directory) before the timed
run, as ``benchmarks.index_throughput --start`` does; the timed run includes what the job does
each time (its enrich actors start and load their models). With ``--start REF`` the same mix
runs on the source tree of commit ``REF`` (``git archive``) and on this tree, alternating,
``--reps`` rounds, under the same load. Printed:

* the whole job per tree (all rounds summed): pages (PDF pages of documents that did not fail),
  passages, nodes, wall seconds, pages/s and nodes/s over the job's wall time, the CPU seconds
  of the run's processes (``CpuMeter``: those alive at the end with the children they reaped,
  and those that ended unreaped at their last sample, every 0.5 s) and pages/s* = pages per
  CPU-second × 2;
* the stage breakdown from the job's own ``stats.json`` (``Summary.stats["stages"]``,
  docs/indexing.md): ``cpu`` rows, each per-document stage's ``cpu_s``, its seconds summed over
  documents as timed within the workers (wall time there, so they grow with the load): probe,
  parse, ocr, assemble, layout_graph, embed, entities (extraction of entities and relations),
  resolve_document (resolution within a document); ``wall`` rows, each driver phase's
  ``wall_s``: recover, identify, ray_pipeline (within it: plan = probe and task plan,
  materialize = the documents parsed, read and assembled before enrich starts, and
  enrich+fragments = the rest of ray_pipeline, enrich's streaming execution and the fragment
  writes), write_nodes, write_layout_graph, resolve (corpus entity resolution),
  write_entities, search_indexes, layout_graph_backfill, and other = the job's wall time less
  its phases (checks, lock, the documents' commit). A stage a tree does not record shows
  ``-``: trees before ocr, resolve_document and materialize were recorded (issue 42's start,
  ``70566a3``, among them) count OCR under parse and resolution within a document under
  entities;
* with ``--start``, the ratio here / start for pages/s, nodes/s and pages/s*, and for each
  stage its seconds here / start (under 1: faster here).

``--tables``: each run's index is dumped after its timed run (``llm_job.dump_tables``: every
Lance table, rows sorted, the columns that hold a time left out) and the tables that differ
between any two runs are printed (``none``: both trees wrote the same index, vectors to the
bit).

``--no-warmup`` leaves the warm-up run out (the test's check of the output; the timed run then
pays Ray Data's first start-up in its plan phase): not for figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if "benchmarks" not in sys.modules:  # run as a script in another tree (--start): this checkout's
    from this_checkout import load_benchmarks  # benchmarks/this_checkout.py, beside this file

    load_benchmarks()

from benchmarks.index_throughput import (  # noqa: E402 (after the package is this checkout's)
    _process_cpu,
    data_dir,
    log,
    make_warmup_pdf,
    run_child,
    source_tree,
)
from benchmarks.llm_job import differing_tables, dump_tables  # noqa: E402
from benchmarks.trees import tree_module  # noqa: E402

WORKERS = 2
PHASES = (  # the job's driver phases, in order; none inside another
    "recover",
    "identify",
    "ray_pipeline",
    "write_nodes",
    "write_layout_graph",
    "resolve",
    "write_entities",
    "search_indexes",
    "layout_graph_backfill",
)
IN_PIPELINE = ("plan", "materialize")  # spans the driver times within ray_pipeline


@dataclass(frozen=True)
class Mix:
    books: tuple[str, ...]  # under hips/PDFs
    documents: tuple[str, ...]  # under mmlongbench/documents
    passages: int  # the first N of multihop/musique/corpus.jsonl


MIXES = {
    "default": Mix(
        books=(
            "6-traditional-medicines-law-and-the-dis-ordering-of-temporalities.pdf",
            "the-regulation-of-megabanks-legal-frameworks-of-the-usa-and-eu.pdf",
        ),
        documents=(
            "2303.05039v2.pdf",
            "2312.10997v5.pdf",
            "2401.18059v1.pdf",
            "Independents-Report.pdf",
            "NETFLIX_2015_10K.pdf",
            "PIP_Seniors-and-Tech-Use_040314.pdf",
        ),
        passages=1000,
    ),
    "small": Mix(
        books=("6-traditional-medicines-law-and-the-dis-ordering-of-temporalities.pdf",),
        documents=("2303.05039v2.pdf",),
        passages=50,
    ),
}


def mix_inputs(mix: Mix, scratch: Path) -> list[Path]:
    """The mix's PDFs (sorted by name within each set) and its passages written as
    ``scratch/passages.jsonl``; a missing file stops the run."""
    root = data_dir()
    pdfs = [root / "hips" / "PDFs" / name for name in sorted(mix.books)]
    pdfs += [root / "mmlongbench" / "documents" / name for name in sorted(mix.documents)]
    corpus = root / "multihop" / "musique" / "corpus.jsonl"
    if missing := [str(p) for p in [*pdfs, corpus] if not p.is_file()]:
        raise SystemExit(f"missing shared data: {missing} (set BOOKINDEX_SHARED_DATA)")
    lines = corpus.read_text(encoding="utf-8").splitlines()[: mix.passages]
    if len(lines) < mix.passages:
        raise SystemExit(f"{corpus} has {len(lines)} passages, the mix takes {mix.passages}")
    passages = scratch / "passages.jsonl"
    passages.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [*pdfs, passages]


class CpuMeter:
    """CPU seconds of this process tree over a span: ``_process_cpu`` at the end (the processes
    alive then, with the children they reaped) plus, for each process seen under this one
    (sampled every ``interval`` s) that ended with its parent gone too, its CPU at its last
    sample. The enrich actors are killed at the end of their dataset and their model processes
    with them, unreaped: a count at the end alone missed those (the bulk of enrich's CPU). What an
    ended process spent after its last sample is not counted."""

    def __init__(self, interval: float = 0.5) -> None:
        import threading

        self.interval, self.last, self.parent = interval, {}, {}
        self.before = _process_cpu()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.done.wait(self.interval):
            for proc in me.children(recursive=True):
                try:
                    t = proc.cpu_times()
                    key = (proc.pid, proc.create_time())
                    self.last[key] = t.user + t.system + t.children_user + t.children_system
                    self.parent[key] = proc.ppid()
                except psutil.Error:
                    continue

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        now = _process_cpu()
        alive = {pid for pid, _ in now}
        ended = [k for k in self.last if k not in now and self.parent[k] not in alive]
        spent = {**{k: self.last[k] for k in ended}, **now}  # alive now, or at its last sample
        return sum(cpu - self.before.get(key, 0.0) for key, cpu in spent.items())


def start_ray(ray, tries: int = 3) -> None:
    """A local Ray of ``WORKERS`` CPUs, started again (``tries`` in all) when it timed out
    starting: Ray gives its raylet 30 s to register, which a loaded machine can exceed."""
    for attempt in range(tries):
        try:
            ray.init(
                address="local", num_cpus=WORKERS, include_dashboard=False, log_to_driver=False
            )
            return
        except Exception as exc:
            if "timed out during startup" not in str(exc) or attempt == tries - 1:
                raise
            ray.shutdown()
            log(f"Ray timed out starting (try {attempt + 1} of {tries}); starting it again")


def child(spec_path: str) -> None:
    """One tree's warm-up and timed job, in this process (started in that tree, with it on
    ``PYTHONPATH``); the result as JSON to ``spec["out"]``."""
    import ray

    spec = json.loads(Path(spec_path).read_text())
    run_index = tree_module("pipelines.index_pipeline").run_index
    config = tree_module("operators.config")
    options = config.BookindexConfig(index=config.IndexConfig(parse_workers=WORKERS, enrich=True))
    scratch = Path(spec["scratch"])
    start_ray(ray)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        if spec["warmup"]:
            run_index([spec["warmup"]], scratch / "warmup_index", options)
        meter, t0 = CpuMeter(), time.perf_counter()
        summary = run_index(spec["inputs"], scratch / "index", options)
        seconds = time.perf_counter() - t0
        cpu = meter.stop()
    finally:
        ray.shutdown()
    tables = dump_tables(scratch / "index", scratch / "tables") if spec.get("tables") else {}
    result = {
        "tables": tables,
        "seconds": seconds,
        "cpu": cpu,
        "load": os.getloadavg()[0],
        "line": summary.line(),
        "summary": summary.stats["summary"],
        "stages": summary.stats["stages"],
        "failures": [f"{f['uri']} [{f['stage']}] {f['error']}" for f in summary.failures[:5]],
    }
    Path(spec["out"]).write_text(json.dumps(result))


@dataclass
class Totals:
    """One tree's job over its rounds: the summed counts, seconds and stage seconds."""

    pages: int = 0
    passages: int = 0
    nodes: int = 0
    failed: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    rounds: int = 0
    stages: dict[str, float | None] = field(default_factory=dict)

    def add(self, result: dict) -> None:
        s = result["summary"]
        self.pages += s["pages"]
        self.passages += s.get("passages", 0)
        self.nodes += s["nodes"]
        self.failed += s["failed"]
        self.seconds += result["seconds"]
        self.cpu += result["cpu"]
        self.rounds += 1
        for name, seconds in stage_seconds(result).items():
            if seconds is not None:
                self.stages[name] = (self.stages.get(name) or 0.0) + seconds
            else:
                self.stages.setdefault(name, None)

    def worker_seconds(self) -> float:
        """The per-document stages' seconds, summed."""
        return sum(v or 0.0 for k, v in self.stages.items() if k.startswith("cpu "))

    def rates(self) -> dict[str, float]:
        per_s = lambda n: n / self.seconds if self.seconds > 0 else 0.0  # noqa: E731
        return {
            "pages/s": per_s(self.pages),
            "nodes/s": per_s(self.nodes),
            "pages/s*": WORKERS * self.pages / self.cpu if self.cpu > 0 else 0.0,
        }


def stage_seconds(result: dict) -> dict[str, float | None]:
    """``cpu <stage>`` (CPU seconds summed over documents) and ``wall <phase>`` (wall seconds)
    from one run's ``stats["stages"]`` (None where the job did not record it), and ``wall
    other``: the job's wall seconds less its phases'."""
    from bookindex.pipelines.run_stats import WORKER_STAGES  # this tree's (the parent's)

    stages = result["stages"]
    out: dict[str, float | None] = {
        f"cpu {name}": stages.get(name, {}).get("cpu_s") for name in WORKER_STAGES
    }
    phases = {name: stages.get(name, {}).get("wall_s") for name in PHASES}
    inner = {name: stages.get(name, {}).get("wall_s") for name in IN_PIPELINE}
    for name, seconds in phases.items():
        out[f"wall {name}"] = seconds
        if name == "ray_pipeline":
            out.update({f"wall  {part}": s for part, s in inner.items()})
            if seconds is not None and inner["materialize"] is not None:
                rest = seconds - sum(s for s in inner.values() if s)
                out["wall  enrich+fragments"] = max(0.0, rest)
            else:
                out["wall  enrich+fragments"] = None
    job = result["summary"].get("seconds") or result["seconds"]
    out["wall other"] = max(0.0, job - sum(s for s in phases.values() if s))
    return out


def run_mix(
    trees: dict[str, Path],
    inputs: list[Path],
    tmp: Path,
    reps: int,
    warm_up: bool = True,
    tables: list[Path] | None = None,
) -> dict[str, Totals]:
    """The job on each tree in a subprocess of its own, the trees alternating, ``reps``
    rounds; each tree's ``Totals``. ``warm_up``: a warm-up run before each timed one;
    ``tables``: given, each run's index is dumped (``llm_job.dump_tables``, after the timed
    run) and its folder added there."""
    warmup = tmp / "warmup.pdf"
    make_warmup_pdf(warmup)
    totals = {name: Totals() for name in trees}
    script = Path(__file__).resolve()
    for rep in range(reps):
        for name, tree in trees.items():
            scratch = tmp / f"run_{rep}_{name}"
            scratch.mkdir()
            spec = {"inputs": [str(p) for p in inputs], "warmup": str(warmup) if warm_up else ""}
            spec["tables"] = tables is not None
            log(f"{name} (round {rep + 1}/{reps}): {len(inputs)} inputs ...")
            result = run_child(name, tree, spec, scratch, script)
            log(f"{name}: {result['line']} (load {result['load']:.1f})")
            for failure in result["failures"]:
                log(f"{name} failure: {failure}")
            totals[name].add(result)
            if tables is not None:
                tables.append(scratch / "tables")
    return totals


def _seconds(value: float | None) -> str:
    return f"{value:>10.2f}" if value is not None else f"{'-':>10}"


def print_tables(totals: dict[str, Totals]) -> None:
    names = list(totals)
    ratio = len(names) > 1
    head = f"{'':<26}" + "".join(f" | {n[:18]:>18}" for n in names)
    head += f" | {f'ratio {names[-1]} / {names[0]}':>24}" if ratio else ""
    print(head, "-" * len(head), sep="\n")
    rows = [
        ("rounds", lambda t: t.rounds, "{:>18d}"),
        ("pages", lambda t: t.pages, "{:>18d}"),
        ("passages", lambda t: t.passages, "{:>18d}"),
        ("nodes", lambda t: t.nodes, "{:>18d}"),
        ("failed documents", lambda t: t.failed, "{:>18d}"),
        ("job wall s", lambda t: t.seconds, "{:>18.2f}"),
        ("job CPU s", lambda t: t.cpu, "{:>18.2f}"),
    ]
    for label, get, fmt in rows:
        print(f"{label:<26}" + "".join(" | " + fmt.format(get(totals[n])) for n in names))
    for key in ("pages/s", "nodes/s", "pages/s*"):
        values = [totals[n].rates()[key] for n in names]
        line = f"{key:<26}" + "".join(f" | {v:>18.2f}" for v in values)
        if ratio:
            line += f" | {values[-1] / values[0]:>23.2f}x" if values[0] else f" | {'-':>24}"
        print(line)
    print()
    print(
        "stage breakdown: cpu = the stage's seconds in the workers summed over documents"
        " (stats.json cpu_s; timed as wall time within each worker); wall = the driver phase's"
        " wall seconds"
    )
    head = f"{'stage':<26}" + "".join(f" | {n[:10]:>10} | {'share':>6}" for n in names)
    head += f" | {f'time {names[-1]} / {names[0]}':>20}" if ratio else ""
    print(head, "-" * len(head), sep="\n")
    order = list(next(iter(totals.values())).stages)
    for stage in order:
        line = f"{stage:<26}"
        for n in names:
            t = totals[n]
            value = t.stages.get(stage)
            whole = t.worker_seconds() if stage.startswith("cpu") else t.seconds
            share = f"{100 * value / whole:>5.1f}%" if value is not None and whole else f"{'-':>6}"
            line += f" | {_seconds(value)} | {share}"
        if ratio:
            first, last = totals[names[0]].stages.get(stage), totals[names[-1]].stages.get(stage)
            line += f" | {last / first:>19.2f}x" if first and last is not None else f" | {'-':>20}"
        print(line)
    print(
        "share: of the cpu rows' sum (cpu rows) or of the job's wall seconds (wall rows; the"
        " indented ones lie within ray_pipeline, enrich+fragments is its rest: the enrich"
        " stage's streaming execution and the fragment writes)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.job_throughput", description=__doc__)
    ap.add_argument("--mix", choices=sorted(MIXES), default="default", help="the fixed input mix")
    ap.add_argument(
        "--start", default=None, help="also run the job on the tree of this commit, alternating"
    )
    ap.add_argument("--reps", type=int, default=1, help="rounds (each tree once a round)")
    ap.add_argument(
        "--no-warmup",
        action="store_true",
        help="no warm-up run (a check of the output, not for figures: the timed run pays it)",
    )
    ap.add_argument(
        "--tables",
        action="store_true",
        help="compare every run's index, table by table (times left out), and print the"
        " tables that differ between any two runs",
    )
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    mix = MIXES[args.mix]
    with tempfile.TemporaryDirectory(prefix="bookindex_job_bench_") as tmp_name:
        tmp = Path(tmp_name)
        inputs = mix_inputs(mix, tmp)
        log(
            f"mix {args.mix}: {len(inputs) - 1} PDFs and {mix.passages} passages (data {data_dir()})"
        )
        trees = {"start": source_tree(args.start, tmp)} if args.start else {}
        trees["here"] = REPO_ROOT
        dumps: list[Path] | None = [] if args.tables else None
        totals = run_mix(trees, inputs, tmp, args.reps, not args.no_warmup, dumps)
        differ = sorted({t for d in dumps or [] for t in differing_tables(dumps[0], d)})
    books, docs = len(mix.books), len(mix.documents)
    print(
        f"mix {args.mix}: {books} HiPS books, {docs} MMLongBench documents, {mix.passages}"
        f" MuSiQue passages; {WORKERS} workers, enrich on; CPUs: {os.cpu_count()}"
    )
    print(f"load average at the end (1, 5, 15 min): {os.getloadavg()}")
    if args.start:
        print(f"start: the tree of commit {args.start}; here: this checkout")
    print_tables(totals)
    if dumps:
        print(f"tables that differ between any two runs' indexes: {', '.join(differ) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
