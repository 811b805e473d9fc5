"""The OCR stage: pages without a text layer read by OCR, as a Ray Data actor pool.

    probed rows ─driver: ocr_tasks─▶ one row per image-only page ─map_batches(OcrStage)─▶
      rows shaped as parse_range's (blocks of that page, ``ocr`` true) ─union with the
      document's parsed ranges─groupby(doc_id).map_groups(assemble_group)

``OcrStage`` loads the OCR engine (operators.parsing.ocr.OcrEngine: PP-OCR ONNX models from the
``rapidocr-onnxruntime`` wheel) once per worker; ``ocr_args`` builds its ``map_batches``
arguments from ``operators.config.IndexConfig`` (workers, pages per call, threads, GPU share).
A page that cannot be read becomes a page error of its document; the rest of the document is
indexed. The engine runs in a child process of the actor (pipelines/model_host.py): a page whose
OCR crashes or runs past ``index.model_timeout_s`` fails its document with that reason, and the
other documents are indexed.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from bookindex.operators.config import BookindexConfig
from bookindex.operators.kinds import FAILED, NEEDS_OCR
from bookindex.operators.parsing.isolation import Isolated
from bookindex.operators.parsing.ocr import OcrEngine
from bookindex.operators.parsing.probe import page_ranges
from bookindex.pipelines.model_host import ModelHost
from bookindex.pipelines.model_stage import actor_pool
from bookindex.pipelines.rows import from_json, to_json
from bookindex.pipelines.run_stats import peak_memory_mb


def ocr_tasks(probed: list[dict]) -> list[dict]:
    """One row per page that needs OCR (the probe's ``ocr_pages``), of every document not
    failed: ``start`` its 0-based index, ``ocr`` true."""
    rows = []
    for row in probed:
        if row["status"] == FAILED:
            continue
        for page in from_json(row.get("ocr_pages"), []):
            rows.append(dict(row, start=page - 1, stop=page, ocr=True))
    return rows


def nothing_to_read(probed: list[dict]) -> None:
    """With OCR on: a document without a text layer and without a page for OCR to read (blank
    pages, or images too small to be a scanned page) says so, instead of "needs OCR"."""
    for row in probed:
        if row["status"] == NEEDS_OCR and not from_json(row.get("ocr_pages"), []):
            row["error"] = (
                f"no text: none of its {row['n_pages']} page(s) has a text layer or a "
                "page-sized image for OCR to read (blank pages)"
            )


def text_ranges(row: dict, pages_per_task: int) -> list[dict]:
    """The page ranges of a document with OCR pages that hold any page with a text layer
    (a range of scans alone has nothing for the parser), ``ocr`` false; ``pages_per_task``
    0: one range, the whole document (one that is not split, ``plan_tasks``)."""
    scanned = set(from_json(row.get("ocr_pages"), []))
    return [
        dict(row, start=a, stop=b, ocr=False)
        for a, b in page_ranges(row["n_pages"], pages_per_task or row["n_pages"])
        if any(p + 1 not in scanned for p in range(a, b))
    ]


class OcrStage:
    """The Ray Data UDF class: a batch of page rows read by an ``OcrWorker`` in a child process
    (``pipelines.model_host``), ``timeout_s`` a page. A page whose OCR crashes or stalls fails
    its document (``range_error``: ``crashed: signal 11 (SIGSEGV)``, ``timed out after N s``;
    a crash tried ``retries`` more times first); the other pages and documents are read."""

    def __init__(
        self,
        dpi: int,
        threads: int = 0,
        gpu: bool = False,
        timeout_s: float = 300.0,
        retries: int = 2,
    ) -> None:
        kwargs = {"dpi": dpi, "threads": threads, "gpu": gpu}
        self.host = ModelHost("bookindex.pipelines.ocr_stage:OcrWorker", kwargs, timeout_s, retries)

    def __call__(self, batch: pa.Table) -> pa.Table:
        return self.host.call_isolated(batch, ocr_failed)


def ocr_failed(row: dict, exc: Isolated) -> dict:
    """A page whose OCR crashed or stalled: its ``range_error`` fails its document
    (``structure_stage.assemble_group``), and the worker skips it."""
    return dict(row, range_error=exc.reason, range_trace=exc.trace)


class OcrWorker:
    """Reads a batch of page rows with the OCR engine it loaded once; returns them with the
    fields ``parse_range`` adds (blocks, page_errors, parse_s, parse_mb). A row that carries a
    ``range_error`` already (``ocr_failed``) is returned as it is, with those fields empty."""

    def __init__(self, dpi: int, threads: int = 0, gpu: bool = False) -> None:
        self.engine = OcrEngine(gpu=gpu, threads=threads)
        self.dpi = dpi

    def __call__(self, batch: pa.Table) -> pa.Table:
        import pymupdf

        out = []
        opened: dict[str, Any] = {}
        try:
            for row in batch.to_pylist():
                started = time.perf_counter()
                blocks, errors = [], []
                if row.get("range_error"):  # its OCR crashed or stalled (OcrStage)
                    out.append(dict(row, blocks="[]", page_errors="[]", parse_s=0.0, parse_mb=0))
                    continue
                try:
                    if row["uri"] not in opened:
                        opened[row["uri"]] = pymupdf.open(row["uri"], filetype="pdf")
                    page = opened[row["uri"]][row["start"]]
                    blocks = [
                        b.as_row() for b in self.engine.read_page(page, row["stop"], self.dpi)
                    ]
                except Exception as exc:  # this page's failure alone
                    errors.append(f"page {row['stop']}: OCR: {type(exc).__name__}: {exc}")
                out.append(
                    dict(
                        row,
                        range_error="",  # the columns of parse_range's rows: one schema
                        range_trace="",
                        blocks=to_json(blocks),
                        page_errors=to_json(errors),
                        parse_s=time.perf_counter() - started,
                        parse_mb=peak_memory_mb(),
                    )
                )
        finally:
            for doc in opened.values():
                doc.close()
        return pa.Table.from_pylist(out)


def ocr_args(
    config: BookindexConfig, workers: int, cpus: int, pages: int | None = None
) -> dict[str, Any]:
    """``map_batches`` arguments of ``OcrStage``: ``index.ocr_workers`` workers (None:
    ``workers``), ``index.ocr_batch_size`` pages a call, the engine's threads (0: the CPUs
    shared among the configured workers) and GPU share. With GPUs the pool autoscales from 1
    worker. A run with few ``pages`` gets smaller calls, at least two a worker (a page takes
    10-30 s of a core, so the worker free first takes the next page: 4 pages on 2 workers are
    4 calls of 1, not 1 call of 4 on one worker while the other core idles), and no worker
    without a call (it would only hold a CPU while it loads the models). The threads stay
    those of the configured pool: a CPU a worker leaves may be another stage's (and on a
    cluster ``cpus`` is not one node's)."""
    index = config.index
    pool = index.ocr_workers or workers
    threads = index.ocr_threads or max(1, cpus // pool)
    batch_size = index.ocr_batch_size
    if pages is not None:
        batch_size = max(1, min(batch_size, pages // (2 * pool)))
        pool = max(1, min(pool, -(-pages // batch_size)))
    gpu = index.ocr_gpus > 0
    args: dict[str, Any] = {
        "fn_constructor_kwargs": {
            "dpi": index.ocr_dpi,
            "threads": threads,
            "gpu": gpu,
            "timeout_s": index.model_timeout_s,
            "retries": index.task_retries,
        },
        "compute": actor_pool(pool, autoscale=gpu),
        "batch_size": batch_size,
        "batch_format": "pyarrow",
    }
    if gpu:
        args["num_gpus"] = index.ocr_gpus
    return args
