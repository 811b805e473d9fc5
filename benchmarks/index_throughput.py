"""Indexing throughput: bookindex pages/s vs. a pymupdf4llm baseline, on the same PDFs.

Run from the repo root (progress goes to stderr, the table to stdout)::

    python -m benchmarks.index_throughput [--corpus hips,mmlongbench,docugami] [--limit N]
        [--baseline-pages N] [--skip-baseline] [--enrich] [--compare-rules]
        [--start REF] [--reps N]

Default PDFs: every PDF under ``<data>/hips/PDFs`` and ``<data>/mmlongbench/documents``, where
``<data>`` is ``$BOOKINDEX_SHARED_DATA`` or ``<repo>/../shared/data``. Rows of the table:

* ``(a_r)``, ``(a'_r)`` (``--compare-rules``): (a) and (a') with ``index.section_filter=rules``
  (the layout/outline rules alone, the section filter before the learned one), in the same
  run, so that the learned filter's cost is read side by side.
* ``(a) bookindex``: ``pipelines.index_pipeline.run_index(pdfs, fresh_dir, config)`` with
  ``index.parse_workers=2, index.enrich=false`` — the indexing job (hash, probe, parse,
  sections, tree, layout graph, Lance write) on Ray with 2 CPUs. The entity graph stage
  (``enrich``: node vectors, entity extraction and resolution, ~20 nodes/s on CPU) is measured
  by ``benchmarks.enrich_throughput``; ``--enrich`` includes it here too. Ray start-up is
  excluded: Ray is started first and a warm-up run on a generated 3-page PDF (another output
  dir) warms the workers before the timed run.
  Pages = ``Summary.pages`` (pages of documents that did not fail).
* ``--start REF``: the job (a) (and (a_r) with ``--compare-rules``) is run on this tree and on
  the source tree of commit ``REF`` (``git archive``; e.g. the code at the start of a round of
  work), each in a subprocess of its own with its own local Ray (started, and warmed up on the
  generated PDF, before the timing), alternating ``--reps`` times, so that the two codes are
  timed side by side in one run under the same load. Besides pages/s over the wall time, each
  row then has the CPU seconds of the subprocess and every process under it (Ray's and the
  workers', with their isolated children: ``psutil``) over the timed run, and ``pages/s*`` =
  pages per CPU-second × 2 (the rate with a core to each worker; it falls much less with the
  machine's load than the wall rate; with ``--enrich`` it misses the enrich actors' model
  processes, gone with their actors before the count: ``benchmarks.job_throughput``'s ``CpuMeter``
  counts them). A tree from before ``operators.config`` (67e641d and
  earlier) runs with its ``IndexOptions`` and its own section filter (the rules).
* ``(a') bookindex 1 proc``: reference only — ``parse_pages`` + ``assemble_document`` per
  PDF in this process, no Ray, no Lance write (open + metadata + parse + assemble are timed).
* ``(b) pymupdf4llm``: ``pymupdf4llm.to_markdown(pdf)`` in a spawn ``multiprocessing.Pool(2)``,
  one PDF per task, in the mode a user gets by default (2.x: ``layout``, the ONNX layout model,
  when pymupdf-layout is installed), OCR off (``use_ocr=False``: with an OCR engine installed
  pymupdf4llm would OCR image regions on every page, and its RapidOCR path raised a TypeError on
  one of these PDFs). bookindex keeps its default, OCR on, which reads only pages without a text
  layer: in the default corpus four image-only pages (three books' covers and one page of a
  report), in (a) and in (a_s) where the sample holds them; (a') runs no OCR. Each worker
  converts the warm-up PDF before timing starts (model loading excluded). Because it is slow,
  it runs on a deterministic sample: the first pages of every PDF, budget spread evenly, ~N
  pages in all (``--baseline-pages``), written as PDFs of their own (``Document.select``); or
  (``--sample whole-pdfs``) whole PDFs, in order, while they fit the budget. A document's first
  pages cost bookindex more per page than its rest (opening, metadata, outline and body-style
  analysis are per document), so the first-pages sample is the one less favourable to it.
* ``(a_s)`` and ``(a'_s)``: (a) and (a') on exactly that sample, in the same run. The printed
  ratios divide rates over the same pages: (a_s) / (b) (both 2 workers) and (a'_s) / (b); (a)
  is the job's rate on the whole corpus, not compared with (b). On a sample of a few hundred
  pages (a_s) carries the job's fixed costs (hashing, planning, Lance commits) over few pages,
  so it understates (a).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.trees import tree_module

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS_GLOBS = {
    "hips": "hips/PDFs/*.pdf",
    "mmlongbench": "mmlongbench/documents/*.pdf",
    "docugami": "docugami/*/data/**/*.pdf",
}


@dataclass
class Row:
    method: str
    pdfs: int
    pages: int
    seconds: float
    failed: int = 0
    cpu: float = 0.0  # CPU seconds of every process of the run (--start runs only)

    @property
    def rate(self) -> float:
        return self.pages / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_rate(self) -> float:
        """Pages per CPU-second × 2 workers (0 when the CPU time was not measured)."""
        return 2 * self.pages / self.cpu if self.cpu > 0 else 0.0


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def data_dir() -> Path:
    return Path(os.environ.get("BOOKINDEX_SHARED_DATA") or REPO_ROOT.parent / "shared" / "data")


def find_pdfs(corpora: list[str], limit: int | None) -> list[Path]:
    return [p for c in corpora for p in sorted(data_dir().glob(CORPUS_GLOBS[c]))[:limit]]


def page_counts(pdfs: list[Path]) -> list[int]:
    import pymupdf

    pymupdf.set_messages(stream=sys.stderr)  # MuPDF warnings go to stdout by default
    return [len(pymupdf.open(pdf)) for pdf in pdfs]


def make_warmup_pdf(path: Path) -> None:
    """A tiny 3-page PDF with a heading and some body text per page."""
    import pymupdf

    doc = pymupdf.open()
    for i in range(3):
        page = doc.new_page()
        page.insert_text((72, 90), f"{i + 1} Section {i + 1}", fontsize=18)
        page.insert_text((72, 130), "Body text of the warm-up document.", fontsize=10)
    doc.save(path)


def baseline_pages(counts: list[int], budget: int) -> list[int]:
    """Pages per PDF (its first pages), min(budget, total) in all, spread as evenly as possible."""
    take = [0] * len(counts)
    left = budget
    order = sorted(range(len(counts)), key=lambda i: (counts[i], i))
    for rank, i in enumerate(order):
        take[i] = min(counts[i], left // (len(order) - rank))
        left -= take[i]
    return take


def whole_pdfs(counts: list[int], budget: int) -> list[int]:
    """Pages per PDF for a sample of whole PDFs: each in order, taken whole while it fits the
    budget left (the smallest one when none fits)."""
    take, left = [0] * len(counts), budget
    for i, n in enumerate(counts):
        if n <= left:
            take[i], left = n, left - n
    if not any(take):
        smallest = min(range(len(counts)), key=lambda i: (counts[i], i))
        take[smallest] = counts[smallest]
    return take


def sample_pdfs(pdfs: list[Path], take: list[int], out: Path) -> list[Path]:
    """The first ``take[i]`` pages of each PDF as a PDF of its own (none where 0)."""
    import pymupdf

    out.mkdir(parents=True, exist_ok=True)
    sampled = []
    for i, (pdf, n) in enumerate(zip(pdfs, take, strict=True)):
        if not n:
            continue
        with pymupdf.open(pdf) as doc:
            doc.select(list(range(n)))
            path = out / f"{i:03d}_{pdf.name}"
            doc.save(path)
        sampled.append(path)
    return sampled


def run_bookindex(
    runs: dict[str, list[Path]],
    warmup: Path,
    tmp: Path,
    enrich: bool = False,
    section_filters: dict[str, str] | None = None,
) -> dict[str, Row]:
    """One timed ``run_index`` per named PDF list, into fresh directories, in one Ray session;
    ``section_filters``: a run's ``index.section_filter`` when not the default (learned)."""
    import ray

    from bookindex.operators.config import BookindexConfig, IndexConfig
    from bookindex.pipelines.index_pipeline import run_index

    log("starting Ray (num_cpus=2) ...")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    rows = {}
    try:
        kinds = {name: (section_filters or {}).get(name, "learned") for name in runs}
        options = {
            kind: BookindexConfig(
                index=IndexConfig(parse_workers=2, enrich=enrich, section_filter=kind)
            )
            for kind in set(kinds.values())
        }
        for kind, opts in sorted(options.items()):
            log(f"(a) warm-up run ({kind}) ...")
            run_index([str(warmup)], tmp / f"warmup_index_{kind}", opts)
        for name, pdfs in runs.items():
            log(f"{name} timed run on {len(pdfs)} PDFs ({kinds[name]}) ...")
            t0 = time.perf_counter()
            opts = options[kinds[name]]
            summary = run_index([str(p) for p in pdfs], tmp / f"index_{len(rows)}", opts)
            seconds = time.perf_counter() - t0
            log(f"{name} {summary.line()}")
            for failure in summary.failures[:5]:
                log(f"{name} failure: {failure['uri']} [{failure['stage']}] {failure['error']}")
            method = f"{name} bookindex run_index, Ray 2 workers, {kinds[name]}" + (
                ", enrich" if enrich else ""
            )
            rows[name] = Row(method, len(pdfs), summary.pages, seconds, summary.failed)
    finally:
        ray.shutdown()
    return rows


def _process_cpu() -> dict[tuple[int, float], float]:
    """CPU seconds (its own and its reaped children's) of this process and of every process
    under it (Ray's processes, the workers and their children), by (pid, start time)."""
    import psutil

    me = psutil.Process()
    out = {}
    for proc in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            key = (proc.pid, proc.create_time())
            out[key] = t.user + t.system + t.children_user + t.children_system
    return out


def _cpu_since(before: dict[tuple[int, float], float]) -> float:
    """CPU seconds spent by this process tree since ``before`` (``_process_cpu``)."""
    return sum(cpu - before.get(key, 0.0) for key, cpu in _process_cpu().items())


def child(spec_path: str) -> None:
    """``--start`` runs: one tree's timed ``run_index`` per section filter, in this process
    (started with that tree on ``PYTHONPATH``); the results as JSON to ``spec["out"]``."""
    import ray

    with open(spec_path) as f:
        spec = json.load(f)
    pipeline = tree_module("pipelines.index_pipeline")  # the tree's own code (benchmarks/trees.py)
    run_index = pipeline.run_index

    try:
        config = tree_module("operators.config")

        def options(kind: str):
            index = config.IndexConfig(parse_workers=2, enrich=spec["enrich"], section_filter=kind)
            return config.BookindexConfig(index=index)

    except ImportError:  # a tree from before the typed configuration: its own (rules) filter

        def options(kind: str):
            return pipeline.IndexOptions(parse_workers=2, enrich=spec["enrich"])

    scratch = Path(spec["scratch"])
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    results = []
    try:
        for kind in spec["kinds"]:
            run_index([spec["warmup"]], scratch / f"warmup_{kind}", options(kind))
        for kind in spec["kinds"]:
            before, t0 = _process_cpu(), time.perf_counter()
            summary = run_index(spec["pdfs"], scratch / f"index_{kind}", options(kind))
            seconds = time.perf_counter() - t0
            cpu = _cpu_since(before)
            results.append(
                {
                    "kind": kind,
                    "pages": summary.pages,
                    "failed": summary.failed,
                    "seconds": seconds,
                    "cpu": cpu,
                    "load": os.getloadavg()[0],
                    "line": summary.line(),
                }
            )
    finally:
        ray.shutdown()
    with open(spec["out"], "w") as f:
        json.dump(results, f)


def source_tree(ref: str, scratch: Path) -> Path:
    """The source tree of commit ``ref`` of this repository, exported under ``scratch`` (as
    ``benchmarks.enrich_throughput`` exports its ``before``/``start`` trees)."""
    from benchmarks.enrich_throughput import _tree

    return _tree("start", {"start": ref}, scratch)


def run_child(name: str, tree: Path, spec: dict, scratch: Path, script: Path) -> list | dict:
    """``script --child`` on ``spec`` (with ``scratch`` and ``out`` added) in a subprocess of its
    own, in ``tree`` and with it on ``PYTHONPATH`` (so with its own local Ray); what the child
    wrote to ``out``. A child that fails stops the run with its output."""
    spec = dict(spec, scratch=str(scratch), out=str(scratch / "out.json"))
    (scratch / "spec.json").write_text(json.dumps(spec))
    command = [sys.executable, str(script), "--child", str(scratch / "spec.json")]
    env = dict(os.environ, PYTHONPATH=str(tree), RAY_ADDRESS="local")
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{name} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return json.loads((scratch / "out.json").read_text())


def run_trees(
    trees: dict[str, Path],
    pdfs: list[Path],
    kinds: list[str],
    warmup: Path,
    tmp: Path,
    reps: int,
    enrich: bool = False,
) -> list[Row]:
    """The job on each tree in a subprocess of its own (own Ray), the trees alternating,
    ``reps`` rounds; a row per tree, filter and round."""
    rows = []
    for rep in range(reps):
        for name, tree in trees.items():
            scratch = tmp / f"run_{rep}_{name.split()[0]}"
            scratch.mkdir()
            spec = {"pdfs": [str(p) for p in pdfs], "kinds": kinds, "enrich": enrich}
            spec["warmup"] = str(warmup)
            log(f"{name} (round {rep + 1}/{reps}): {len(pdfs)} PDFs, {','.join(kinds)} ...")
            script = Path(__file__).resolve()
            for r in run_child(name, tree, spec, scratch, script):
                log(f"{name} {r['kind']}: {r['line']} (load {r['load']:.1f})")
                method = f"(a) {name}, {r['kind']}" + (f", round {rep + 1}" if reps > 1 else "")
                row = Row(method, len(pdfs), r["pages"], r["seconds"], r["failed"], r["cpu"])
                rows.append(row)
    return rows


def print_tree_ratios(rows: list[Row], names: list[str], kinds: list[str]) -> None:
    """Per filter: each tree's pages/s and pages/s* over all its rounds, and the ratio of the
    last tree (this one) to the first."""
    for kind in kinds:
        rates = []
        for name in names:
            mine = [r for r in rows if r.method.startswith(f"(a) {name}, {kind}")]
            pages, seconds = sum(r.pages for r in mine), sum(r.seconds for r in mine)
            cpu = sum(r.cpu for r in mine)
            rates.append((pages / seconds, 2 * pages / cpu if cpu else 0.0))
            print(
                f"{kind:<8} {name:<24} {rates[-1][0]:>7.1f} pages/s {rates[-1][1]:>7.1f} pages/s*"
            )
        if len(rates) > 1 and rates[0][0] and rates[0][1]:
            wall, cpu = rates[-1][0] / rates[0][0], rates[-1][1] / rates[0][1]
            print(
                f"{kind:<8} ratio {names[-1]} / {names[0]}: {wall:.2f}x wall, {cpu:.2f}x per CPU-s"
            )


def parse_and_assemble(pdf: Path, section_filter: str = "learned") -> int:
    """One document through parse + assemble (the pipeline's stages, no Ray); its page count."""
    import pymupdf

    from bookindex.operators.parsing.parse import document_metadata, parse_pages
    from bookindex.operators.structure.assemble import assemble_document

    with pymupdf.open(pdf, filetype="pdf") as doc:
        meta = document_metadata(doc)
        blocks = parse_pages(doc, 0, doc.page_count).blocks
    doc_id = hashlib.sha256(str(pdf).encode()).hexdigest()
    assemble_document(doc_id, meta, blocks, section_filter_kind=section_filter)
    return meta["n_pages"]


def run_single_process(
    pdfs: list[Path], warmup: Path, name: str = "(a')", section_filter: str = "learned"
) -> Row:
    parse_and_assemble(warmup, section_filter)
    log(f"{name} parse + assemble in one process on {len(pdfs)} PDFs ({section_filter}) ...")
    t0 = time.perf_counter()
    pages = sum(parse_and_assemble(pdf, section_filter) for pdf in pdfs)
    seconds = time.perf_counter() - t0
    method = f"{name} parse+assemble, 1 proc, no Ray/write, {section_filter}"
    return Row(method, len(pdfs), pages, seconds)


def _p4llm_init(warmup: str, ready: mp.queues.Queue) -> None:
    """Pool worker: import pymupdf4llm, convert the warm-up PDF once, report its mode."""
    import pymupdf
    import pymupdf4llm

    from bookindex._pymupdf import allow_layout

    # its default mode where pymupdf-layout is installed (as it is with PyMuPDF 2.0), which
    # ``import bookindex`` turns off (bookindex/_pymupdf.py)
    allow_layout()
    with contextlib.suppress(ImportError):
        pymupdf4llm.use_layout(True)

    pymupdf.set_messages(stream=sys.stderr)
    with contextlib.redirect_stdout(sys.stderr):
        pymupdf4llm.to_markdown(warmup, use_ocr=False)
    mode = "layout" if getattr(pymupdf4llm, "_use_layout", False) else "legacy"
    ready.put(f"pymupdf4llm {pymupdf4llm.__version__}, default mode '{mode}'")


def _p4llm_convert(path: str) -> int:
    import pymupdf
    import pymupdf4llm

    with contextlib.redirect_stdout(sys.stderr):
        pymupdf4llm.to_markdown(path, use_ocr=False)
    with pymupdf.open(path) as doc:
        return doc.page_count


def run_baseline(sample: list[Path], warmup: Path) -> tuple[Row, str]:
    tasks = [str(p) for p in sample]
    total = sum(page_counts(sample))
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    log("(b) starting Pool(2), each worker converts the warm-up PDF ...")
    with ctx.Pool(2, initializer=_p4llm_init, initargs=(str(warmup), ready)) as pool:
        mode = [ready.get(timeout=600) for _ in range(2)][0]
        log(f"(b) {mode}; timed run: {total} pages of {len(tasks)} PDFs ...")
        t0, pages = time.perf_counter(), 0
        for n in pool.imap_unordered(_p4llm_convert, tasks):
            pages += n
            log(f"(b) {pages}/{total} pages, {time.perf_counter() - t0:.1f}s")
        seconds = time.perf_counter() - t0
    return Row("(b) pymupdf4llm.to_markdown, Pool(2)", len(tasks), pages, seconds), mode


def print_table(rows: list[Row]) -> None:
    head = f"{'method':<54} | {'pdfs':>5} | {'pages':>6} | {'seconds':>8} | {'pages/s':>8}"
    head += f" | {'CPU s':>7} | {'pages/s*':>8}"
    print(head, "-" * len(head), sep="\n")
    for r in rows:
        failed = f"  ({r.failed} PDFs failed, pages not counted)" if r.failed else ""
        cpu = f"{r.cpu:>7.1f} | {r.cpu_rate:>8.1f}" if r.cpu else f"{'':>7} | {'':>8}"
        print(
            f"{r.method:<54} | {r.pdfs:>5} | {r.pages:>6} | {r.seconds:>8.2f} | {r.rate:>8.1f}"
            f" | {cpu}" + failed
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.index_throughput", description=__doc__)
    ap.add_argument("--corpus", default="hips,mmlongbench", help="comma-separated PDF sets")
    ap.add_argument("--limit", type=int, default=None, help="at most N PDFs per set")
    ap.add_argument(
        "--baseline-pages", type=int, default=300, help="pages of the sample (b) and (a_s) index"
    )
    ap.add_argument("--skip-baseline", action="store_true", help="do not run (b)")
    ap.add_argument(
        "--sample",
        choices=("first-pages", "whole-pdfs"),
        default="first-pages",
        help="the sample: the first pages of every PDF, or whole PDFs in order while they fit",
    )
    ap.add_argument("--sample-only", action="store_true", help="skip (a) and (a') (whole corpus)")
    ap.add_argument("--enrich", action="store_true", help="(a) includes the entity graph stage")
    ap.add_argument(
        "--compare-rules",
        action="store_true",
        help="also (a_r) and (a'_r): the same PDFs with index.section_filter=rules, same run",
    )
    ap.add_argument(
        "--start",
        default=None,
        help="also run the job on the tree of this commit, side by side (subprocesses)",
    )
    ap.add_argument("--reps", type=int, default=1, help="rounds of the --start runs")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    corpora = [c.strip() for c in args.corpus.split(",") if c.strip()]
    if bad := [c for c in corpora if c not in CORPUS_GLOBS]:
        ap.error(f"unknown corpus {bad}; choose from {','.join(CORPUS_GLOBS)}")
    pdfs = find_pdfs(corpora, args.limit)
    if not pdfs:
        ap.error(f"no PDFs for {corpora} under {data_dir()} (set BOOKINDEX_SHARED_DATA)")
    counts = page_counts(pdfs)
    log(f"{len(pdfs)} PDFs, {sum(counts)} pages ({','.join(corpora)}, data {data_dir()})")

    with tempfile.TemporaryDirectory(prefix="bookindex_bench_") as tmp_name:
        tmp = Path(tmp_name)
        warmup = tmp / "warmup.pdf"
        make_warmup_pdf(warmup)
        runs = {} if args.sample_only or args.start else {"(a)": pdfs}
        if args.compare_rules and runs:
            runs = {"(a_r)": pdfs, **runs}
        tree_rows: list[Row] = []
        names: list[str] = []
        kinds = ["rules", "learned"] if args.compare_rules else ["learned"]
        if args.start and not args.sample_only:
            trees = {f"start {args.start}": source_tree(args.start, tmp), "here": REPO_ROOT}
            names = list(trees)
            tree_rows = run_trees(trees, pdfs, kinds, warmup, tmp, args.reps, args.enrich)
        if not args.skip_baseline:
            pick = whole_pdfs if args.sample == "whole-pdfs" else baseline_pages
            sample = sample_pdfs(pdfs, pick(counts, args.baseline_pages), tmp / "s")
            runs["(a_s)"] = sample
        indexed = (
            run_bookindex(runs, warmup, tmp, enrich=args.enrich, section_filters={"(a_r)": "rules"})
            if runs
            else {}
        )
        index_row = indexed.get("(a)")
        one_proc = [] if args.sample_only else [run_single_process(pdfs, warmup)]
        rows = [r for r in [index_row] if r] + one_proc
        if args.compare_rules and not args.sample_only:
            rules = [indexed["(a_r)"]] if "(a_r)" in indexed else []
            rows = [*rules, run_single_process(pdfs, warmup, "(a'_r)", "rules"), *rows]
        rows = tree_rows + rows
        if not args.skip_baseline:
            rows += [indexed["(a_s)"], run_single_process(sample, warmup, "(a'_s)")]
            base_row, mode = run_baseline(sample, warmup)
            rows.append(base_row)

    print(f"PDFs: {len(pdfs)} ({','.join(corpora)}), {sum(counts)} pages; CPUs: {os.cpu_count()}")
    print(f"load average at the end (1, 5, 15 min): {os.getloadavg()}")
    print_table(rows)
    print("(a') is a reference only: the same stages in one process, no Ray, no Lance write.")
    if not args.skip_baseline:
        what = "whole PDFs" if args.sample == "whole-pdfs" else "the first pages of each PDF"
        print(f"(a_s), (a'_s), (b): the same sample, {what}: {base_row.pages}")
        print(f"    of {sum(counts)} pages (--baseline-pages {args.baseline_pages}); (b) {mode}")
        for row in rows[-3:-1]:
            ratio = row.rate / base_row.rate if base_row.rate > 0 else float("inf")
            print(f"ratio {row.method.split()[0]}/(b), same pages, same run: {ratio:.1f}x")
    if tree_rows:
        print("pages/s* = pages per CPU-second (every process of the run) x 2 workers")
        print_tree_ratios(tree_rows, names, kinds)
        here = [r for r in tree_rows if r.method.startswith("(a) here, learned")]
        index_row = Row("(a)", 0, sum(r.pages for r in here), sum(r.seconds for r in here))
    if index_row:
        print(f"target: >= 150 pages/s for (a)  -> (a) = {index_row.rate:.1f} pages/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
