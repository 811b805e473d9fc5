"""The index job's first stages: probe, parse and assemble (PDF → a document row, rows.py).

    probe_document (map)                      one probed row per file
    index_documents (map_batches)             whole books: parse + assemble in one task
    parse_range (map) → assemble_group        page ranges of long books, grouped by doc_id
                        (map_groups)

Without a generative model these are plain functions (Ray tasks: nothing to load). With one, the
section filter (BookRAG §4.2.2) runs it: ``StructureStage``, a UDF class that loads the model
once per worker, runs the same functions (``structure_args`` says which and how).

One bad file becomes a failed document row; it never fails the job.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

import pyarrow as pa

from operators.config import BookindexConfig
from operators.graph.layout_graph import graph_columns
from operators.kinds import FAILED, NEEDS_OCR, OK
from operators.models import ModelBackend
from operators.parsing.ocr import merge_ocr_blocks
from operators.parsing.parse import Block, parse_pages
from operators.parsing.probe import page_ranges, probe_pdf
from operators.structure.assemble import assemble_document
from pipelines.model_stage import ModelStage, model_stage_args
from pipelines.rows import document_row, from_json, to_json
from pipelines.run_stats import peak_memory_mb

_TRACEBACK_CHARS = 2000


def failure_tail(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))[-_TRACEBACK_CHARS:]


def _failed(row: dict, exc: BaseException, stage: str) -> None:
    """Mark a row failed in ``stage`` by ``exc`` (its error and traceback tail)."""
    row.update(status=FAILED, error=f"{type(exc).__name__}: {exc}")
    row.update(failure_stage=stage, traceback=failure_tail(exc))


def probe_document(row: dict) -> dict:
    """One document's facts from ``probe_pdf``: status, error, warning, pages, metadata (JSON)
    and the probe's time and memory. A probe that raises fails this document alone."""
    started = time.perf_counter()
    base = {"doc_id": row["doc_id"], "uri": row["uri"], "size": row["size"], "meta": "{}"}
    base.update(start=0, stop=0, n_pages=0, status=FAILED, error="", warning="")
    base.update(failure_stage="", traceback="", ocr_pages="[]")
    try:
        probe = probe_pdf(row["uri"])
        base.update(status=probe.status, error=probe.error, warning=probe.warning)
        base["ocr_pages"] = to_json(probe.ocr_pages)
        base["n_pages"] = probe.n_pages
        base["failure_stage"] = "open" if probe.status == FAILED else ""
        base["meta"] = to_json(probe.meta)
    except Exception as exc:  # anything unexpected is this document's failure alone
        _failed(base, exc, "open")
    base["probe_s"] = time.perf_counter() - started
    base["probe_mb"] = peak_memory_mb()
    return base


def plan_tasks(probed: list[dict], pages_per_task: int, workers: int) -> tuple[list, list]:
    """Probed documents → (whole documents, page ranges of long documents).

    A document is split into ranges of ``pages_per_task`` pages only when it is long against
    the run: more than 2 ranges and more than a 1/(2 · workers) share of all pages, so that
    the tasks of a long book spread over the workers while a corpus of many books runs one
    task per book, with no grouping barrier and no blocks serialised between stages. Each
    list is largest first (the long tasks start first; short ones fill in around them)."""
    total = sum(r["n_pages"] for r in probed if r["status"] != FAILED)
    limit = max(2 * pages_per_task, total / (2 * max(1, workers)))
    whole, ranges = [], []
    for row in sorted(probed, key=lambda r: (-r["n_pages"], r["doc_id"])):
        if row["status"] == FAILED or row["n_pages"] <= limit:
            whole.append(dict(row, start=0, stop=row["n_pages"]))
        else:
            spans = page_ranges(row["n_pages"], pages_per_task)
            ranges += [dict(row, start=a, stop=b) for a, b in spans]
    return whole, ranges


def _parse(row: dict) -> tuple[list[Block], list[str]]:
    """Blocks and page errors of pages [start, stop) of a probed document (none if it failed)."""
    if row["status"] == FAILED:
        return [], []
    import pymupdf

    try:
        with pymupdf.open(row["uri"], filetype="pdf") as doc:
            parsed = parse_pages(doc, row["start"], row["stop"])
        return parsed.blocks, parsed.errors
    except Exception as exc:
        return [], [f"pages {row['start'] + 1}-{row['stop']}: {type(exc).__name__}: {exc}"]


def parse_range(row: dict) -> dict:
    """Parse one page range into blocks (JSON, so every batch has the same Arrow schema)."""
    started = time.perf_counter()
    blocks, errors = _parse(row)
    out = dict(row)
    out["blocks"] = to_json([b.as_row() for b in blocks])
    out["page_errors"] = to_json(errors)
    out["parse_s"] = time.perf_counter() - started
    out["parse_mb"] = peak_memory_mb()
    return out


def assemble_group(
    batch: pa.Table,
    use_outline: bool,
    backend: ModelBackend | None = None,
    section_filter: str = "learned",
) -> pa.Table:
    """All page ranges of one document (and its pages read by OCR, ``ocr_stage``) → one row:
    document facts and its nodes as JSON."""
    rows = sorted(batch.to_pylist(), key=lambda r: (r["start"], r.get("ocr", False)))
    ranges = [r for r in rows if not r.get("ocr")]
    read = [r for r in rows if r.get("ocr")]
    blocks = [Block(**b) for r in ranges for b in from_json(r["blocks"])]
    if read:
        ocr_blocks = [Block(**b) for r in read for b in from_json(r["blocks"])]
        blocks = merge_ocr_blocks(blocks, ocr_blocks)
    errors = [e for r in rows for e in from_json(r["page_errors"])]
    parse_s, parse_mb = sum(r["parse_s"] for r in rows), max(r["parse_mb"] for r in rows)
    first = dict(rows[0])
    if read and first["status"] == NEEDS_OCR:  # its text came from OCR: indexed like any other
        first.update(status=OK, error="")
    doc = _assemble(
        first, blocks, errors, (parse_s, parse_mb), use_outline, backend, section_filter
    )
    doc["n_ranges"] = len(ranges)
    doc["n_ocr_pages"] = sum(not from_json(r["page_errors"]) for r in read)
    return pa.Table.from_pylist([doc])


def index_documents(
    batch: pa.Table,
    use_outline: bool,
    backend: ModelBackend | None = None,
    section_filter: str = "learned",
) -> pa.Table:
    """Probed documents, each parsed whole and assembled in this task (no page ranges, no
    grouping): the path of every document that ``plan_tasks`` does not split. The output
    rows are those of ``assemble_group``."""
    docs = []
    for row in batch.to_pylist():
        started = time.perf_counter()
        blocks, errors = _parse(row)
        parsed = (time.perf_counter() - started, peak_memory_mb())
        doc = _assemble(row, blocks, errors, parsed, use_outline, backend, section_filter)
        doc["n_ranges"] = 1
        docs.append(doc)
    return pa.Table.from_pylist(docs)


def _assemble(
    first: dict,
    blocks: list[Block],
    page_errors: list[str],
    parsed: tuple[float, float],
    use_outline: bool,
    backend: ModelBackend | None,
    section_filter: str = "learned",
) -> dict:
    """A probed document's blocks → its row: facts, nodes and layout graph as JSON, and the
    time and memory of each stage. ``parsed``: (parse seconds, parse peak memory MB)."""
    started = time.perf_counter()
    doc = document_row(first, page_errors)
    timings = {"probe": first["probe_s"], "parse": parsed[0]}
    node_dicts = _assemble_tree(doc, first, blocks, use_outline, backend, section_filter)
    timings["assemble"] = time.perf_counter() - started
    memory = {"probe": first["probe_mb"], "parse": parsed[1]}
    memory["assemble"] = peak_memory_mb()
    if doc["status"] != FAILED:
        started = time.perf_counter()
        try:
            doc.update(graph_columns(node_dicts, doc["doc_id"]))
        except Exception as exc:  # the document is failed whole: no nodes without their graph
            _failed(doc, exc, "layout_graph")
            doc.update(nodes="[]", n_nodes=0)
        timings["layout_graph"] = time.perf_counter() - started
        memory["layout_graph"] = peak_memory_mb()
    doc["stage_timings"] = to_json({k: round(v, 4) for k, v in timings.items()})
    doc["stage_memory"] = to_json(memory)
    doc["source"] = "pdf"
    return doc


def _assemble_tree(
    doc: dict,
    first: dict,
    blocks: list[Block],
    use_outline: bool,
    backend: ModelBackend | None,
    section_filter: str = "learned",
) -> list[dict]:
    """The document's tree into ``doc`` (nodes, toc, facts); its nodes as dicts. A failure
    marks ``doc`` failed in stage "assemble"."""
    if doc["status"] == FAILED:
        return []
    try:
        meta = from_json(first["meta"])
        nodes, toc, facts = assemble_document(
            doc["doc_id"], meta, blocks, use_outline, backend, section_filter
        )
        # vars, not asdict: a Node holds plain values and lists of them, and asdict's
        # recursive deep copy was a quarter of this stage's time
        node_dicts = [dict(vars(n)) for n in nodes]
        doc.update(
            title=nodes[0].title,
            nodes=to_json(node_dicts),
            toc=to_json(toc),
            page_labels=to_json(meta["page_labels"]),
            outline_used=facts["outline_used"],
            n_sections=facts["n_sections"],
            n_nodes=len(nodes),
        )
        return node_dicts
    except Exception as exc:
        _failed(doc, exc, "assemble")
        return []


class StructureStage(ModelStage):
    """``index_documents`` (``grouped``: ``assemble_group``) with the section filter's model
    loaded once per worker (a generative backend; BookRAG §4.2.2)."""

    def __init__(
        self,
        models: dict,
        use_outline: bool,
        grouped: bool = False,
        section_filter: str = "learned",
    ) -> None:
        super().__init__(models)
        self.use_outline = use_outline
        self.section_filter = section_filter
        self.fn = assemble_group if grouped else index_documents

    def __call__(self, batch: pa.Table) -> pa.Table:
        return self.fn(batch, self.use_outline, self.backend, self.section_filter)


def structure_args(config: BookindexConfig, workers: int, grouped: bool) -> dict[str, Any]:
    """``fn`` and the ``map_batches`` / ``map_groups`` arguments of the assemble step: the plain
    function as Ray tasks, or ``StructureStage`` when a generative model refines the sections
    (``parse_workers`` of them, each with its GPU share)."""
    if not config.models.generative:
        fn = assemble_group if grouped else index_documents
        return {
            "fn": fn,
            "fn_kwargs": {
                "use_outline": config.index.use_outline,
                "section_filter": config.index.section_filter,
            },
        }
    args = model_stage_args(
        config,
        workers,
        config.index.parse_workers,
        use_outline=config.index.use_outline,
        grouped=grouped,
        section_filter=config.index.section_filter,
    )
    return {"fn": StructureStage, **args}
