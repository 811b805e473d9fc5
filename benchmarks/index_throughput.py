"""Indexing throughput: bookindex pages/s vs. a pymupdf4llm baseline, on the same PDFs.

Run from the repo root (progress goes to stderr, the table to stdout)::

    python -m benchmarks.index_throughput [--corpus hips,mmlongbench,docugami] [--limit N]
        [--baseline-pages N] [--skip-baseline] [--enrich]

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
* ``(a') bookindex 1 proc``: reference only — ``parse_pages`` + ``assemble_document`` per
  PDF in this process, no Ray, no Lance write (open + metadata + parse + assemble are timed).
* ``(b) pymupdf4llm``: ``pymupdf4llm.to_markdown(pdf)`` in a spawn ``multiprocessing.Pool(2)``,
  one PDF per task, in the mode a user gets by default (2.x: ``layout``, the ONNX layout model,
  when pymupdf-layout is installed), OCR off (``use_ocr=False``: bookindex here runs no OCR
  either; with an OCR engine installed pymupdf4llm would OCR image regions, and its RapidOCR
  path raised a TypeError on one of these PDFs). Each worker converts the warm-up PDF before timing starts
  (model loading excluded). Because it is slow, it runs on a deterministic sample: the first
  pages of every PDF, budget spread evenly, ~N pages in all (``--baseline-pages``), written as
  PDFs of their own (``Document.select``); or (``--sample whole-pdfs``) whole PDFs, in order,
  while they fit the budget. A document's first pages cost bookindex more per page than its
  rest (opening, metadata, outline and body-style analysis are per document), so the
  first-pages sample is the one less favourable to it.
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
import multiprocessing as mp
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

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

    @property
    def rate(self) -> float:
        return self.pages / self.seconds if self.seconds > 0 else 0.0


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

    from operators.config import BookindexConfig, IndexConfig
    from pipelines.index_pipeline import run_index

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


def parse_and_assemble(pdf: Path, section_filter: str = "learned") -> int:
    """One document through parse + assemble (the pipeline's stages, no Ray); its page count."""
    import pymupdf

    from operators.parsing.parse import document_metadata, parse_pages
    from operators.structure.assemble import assemble_document

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
    print(head, "-" * len(head), sep="\n")
    for r in rows:
        failed = f"  ({r.failed} PDFs failed, pages not counted)" if r.failed else ""
        print(
            f"{r.method:<54} | {r.pdfs:>5} | {r.pages:>6} | {r.seconds:>8.2f} | {r.rate:>8.1f}"
            + failed
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
    args = ap.parse_args(argv)
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
        runs = {} if args.sample_only else {"(a)": pdfs}
        if args.compare_rules and not args.sample_only:
            runs = {"(a_r)": pdfs, **runs}
        if not args.skip_baseline:
            pick = whole_pdfs if args.sample == "whole-pdfs" else baseline_pages
            sample = sample_pdfs(pdfs, pick(counts, args.baseline_pages), tmp / "s")
            runs["(a_s)"] = sample
        indexed = run_bookindex(
            runs, warmup, tmp, enrich=args.enrich, section_filters={"(a_r)": "rules"}
        )
        index_row = indexed.get("(a)")
        rows = [] if args.sample_only else [index_row, run_single_process(pdfs, warmup)]
        if args.compare_rules and not args.sample_only:
            rows = [
                indexed["(a_r)"],
                run_single_process(pdfs, warmup, "(a'_r)", "rules"),
                *rows,
            ]
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
    if index_row:
        print(f"target: >= 150 pages/s for (a)  -> (a) = {index_row.rate:.1f} pages/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
