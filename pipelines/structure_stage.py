"""The index job's first stages: probe, parse and assemble (PDF → a document row, rows.py).

    probe_document (map)                      one probed row per file
    index_documents (map_batches)             whole books: parse + assemble in one task
    parse_range (map) → assemble_group        page ranges of long books, grouped by doc_id
                        (map_groups)

These are plain functions (Ray tasks: nothing to load, no model). With a generative model the LLM
section refiner (BookRAG §4.2.2) runs in two passes around a ``ray.data.llm`` processor: here
(``review``: the window size) the tree is built from the rule-based decisions and the row keeps the
refiner's windows (``section_review``) and the blocks (``section_blocks``); the processor
answers every window at once (pipelines/model_requests.py), and ``apply_section_answers``
rebuilds the tree with the model's decisions and writes them down (``section_decisions``).

One bad file becomes a failed document row; it never fails the job. Whatever touches a PDF runs
in a child process (``operators.parsing.isolation``) within the document's budget
(``index.doc_timeout_s``, ``index.doc_memory_mb``): a PDF that crashes MuPDF (SIGSEGV) or stalls
it is failed with the reason (``crashed: signal 11``, ``timed out after N s``) and its worker goes
on with the next document. ``Limits`` carries the budget into the tasks.
"""

from __future__ import annotations

import functools
import time
import traceback
from typing import Any, NamedTuple

import pyarrow as pa

from bookindex.operators.config import BookindexConfig
from bookindex.operators.graph.layout_graph import graph_columns
from bookindex.operators.kinds import FAILED, NEEDS_OCR, OK
from bookindex.operators.parsing.isolation import Isolated, run_isolated, run_isolated_each
from bookindex.operators.parsing.ocr import merge_ocr_blocks
from bookindex.operators.parsing.parse import Block, parse_pages
from bookindex.operators.parsing.probe import page_ranges, probe_pdf
from bookindex.operators.structure.assemble import (
    DEFAULT_SECTION_FILTER,
    Review,
    assemble_document,
    section_filter_for,
)
from bookindex.pipelines.model_stage import bounded_retries
from bookindex.pipelines.rows import document_row, from_json, ray_node_id, to_json
from bookindex.pipelines.run_stats import peak_memory_mb

_TRACEBACK_CHARS = 2000


class Limits(NamedTuple):
    """One document's budget: seconds and added memory (MiB, 0: none) of its isolated work."""

    timeout_s: float = 300.0
    memory_mb: int = 4096

    @classmethod
    def of(cls, config: BookindexConfig) -> Limits:
        return cls(config.index.doc_timeout_s, config.index.doc_memory_mb)


DEFAULT_LIMITS = Limits()


@functools.cache
def _preload(section_filter: str | None = None) -> None:
    """Import and load in the worker, once, what the isolated children would otherwise load
    lazily: a child is discarded after its document, so an import there, or the learned
    filter's model read there (~0.1 s), would be paid per document. ``section_filter``: the
    filter the children will build (None: a probe or a parse, no filter)."""
    import networkx.algorithms.community  # noqa: F401  (the layout graph's Louvain)
    import pymupdf.utils  # noqa: F401  (page labels)

    if section_filter is not None:  # the learned filter's model (cached), the refiner module
        section_filter_for([], False, kind=section_filter)


def _isolated(fn: Any, *args: Any, limits: Limits, section_filter: str | None = None) -> Any:
    _preload(section_filter)
    return run_isolated(fn, *args, timeout_s=limits.timeout_s, memory_mb=limits.memory_mb)


def _isolation_failed(row: dict, exc: Isolated, stage: str) -> None:
    """Mark a row failed in ``stage`` because its isolated work crashed, stalled or raised."""
    row.update(status=FAILED, error=exc.reason, failure_stage=stage, traceback=exc.trace)


def failure_tail(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))[-_TRACEBACK_CHARS:]


def _failed(row: dict, exc: BaseException, stage: str) -> None:
    """Mark a row failed in ``stage`` by ``exc`` (its error and traceback tail)."""
    row.update(status=FAILED, error=f"{type(exc).__name__}: {exc}")
    row.update(failure_stage=stage, traceback=failure_tail(exc))


def probe_document(row: dict, limits: Limits = DEFAULT_LIMITS) -> dict:
    """One document's facts from ``probe_pdf``: status, error, warning, pages, metadata (JSON)
    and the probe's time and memory. A probe that raises, crashes or runs past the budget
    fails this document alone."""
    started = time.perf_counter()
    try:
        probe: Any = _isolated(probe_pdf, row["uri"], limits=limits)
    except Exception as exc:  # Isolated, or anything unexpected: this document's failure
        probe = exc
    return _probed(row, probe, time.perf_counter() - started)


def probe_documents(batch: pa.Table, limits: Limits = DEFAULT_LIMITS) -> pa.Table:
    """``probe_document`` for a block of documents, probed one after the other in one isolated
    child (``run_isolated_each``: a fork per block, not per file; each file within its own
    budget, and one whose probe fails there probed again alone, so its verdict is its own)."""
    _preload()
    rows = batch.to_pylist()
    probes = run_isolated_each(
        probe_pdf, [r["uri"] for r in rows], timeout_s=limits.timeout_s, memory_mb=limits.memory_mb
    )
    return pa.Table.from_pylist([_probed(r, p, s) for r, (p, s) in zip(rows, probes, strict=True)])


def _probed(row: dict, probe: Any, seconds: float) -> dict:
    """The probed row of ``row`` from its ``Probe``, or the exception its probe ended in
    (``Isolated``: crashed, stalled or raised in the child)."""
    base = {"doc_id": row["doc_id"], "uri": row["uri"], "size": row["size"], "meta": "{}"}
    base.update(start=0, stop=0, n_pages=0, status=FAILED, error="", warning="")
    base.update(failure_stage="", traceback="", ocr_pages="[]")
    try:
        if isinstance(probe, Exception):
            raise probe
        base.update(status=probe.status, error=probe.error, warning=probe.warning)
        base["ocr_pages"] = to_json(probe.ocr_pages)
        base["n_pages"] = probe.n_pages
        base["failure_stage"] = "open" if probe.status == FAILED else ""
        base["meta"] = to_json(probe.meta)
    except Isolated as exc:
        _isolation_failed(base, exc, "open")
    except Exception as exc:  # anything unexpected is this document's failure alone
        _failed(base, exc, "open")
    base["probe_s"] = seconds
    base["probe_mb"] = peak_memory_mb()
    return base


def split_limit(probed: list[dict], pages_per_task: int, workers: int) -> float:
    """The page count above which a document is long against the run and is split into page
    ranges: more than 2 ranges and more than a 1/(2 · workers) share of all pages (of the
    documents not failed), so that the tasks of a long book spread over the workers while a
    corpus of many books runs one task per book, with no grouping barrier and no blocks
    serialised between stages."""
    total = sum(r["n_pages"] for r in probed if r["status"] != FAILED)
    return max(2 * pages_per_task, total / (2 * max(1, workers)))


def plan_tasks(
    probed: list[dict], pages_per_task: int, workers: int, limit: float | None = None
) -> tuple[list, list]:
    """Probed documents → (whole documents, page ranges of ``pages_per_task`` pages of the
    documents longer than ``limit`` pages; None: ``split_limit`` of these documents). Each
    list is largest first (the long tasks start first; short ones fill in around them)."""
    if limit is None:
        limit = split_limit(probed, pages_per_task, workers)
    whole, ranges = [], []
    for row in sorted(probed, key=lambda r: (-r["n_pages"], r["doc_id"])):
        if row["status"] == FAILED or row["n_pages"] <= limit:
            whole.append(dict(row, start=0, stop=row["n_pages"]))
        else:
            spans = page_ranges(row["n_pages"], pages_per_task)
            ranges += [dict(row, start=a, stop=b) for a, b in spans]
    return whole, ranges


def pack(rows: list[dict], weight: str, bins: int) -> list[list[dict]]:
    """``rows`` in at most ``bins`` groups of about equal total ``weight`` (a row's pages, a
    file's bytes): the heaviest row first into the lightest group. Groups heaviest first, each
    in the order its rows were placed; deterministic (ties by position). A group is one task:
    few, even tasks instead of one per small document, whose start-up and scheduling cost as
    much as the document's work."""
    if not rows:
        return []
    groups: list[list[dict]] = [[] for _ in range(max(1, min(bins, len(rows))))]
    totals = [0.0] * len(groups)
    order = sorted(range(len(rows)), key=lambda i: (-rows[i][weight], i))
    for i in order:
        lightest = min(range(len(groups)), key=lambda g: (totals[g], g))
        groups[lightest].append(rows[i])
        totals[lightest] += rows[i][weight]
    ranked = sorted(range(len(groups)), key=lambda g: (-totals[g], g))
    return [groups[g] for g in ranked if groups[g]]


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


def _parse_rows(row: dict) -> tuple[list[dict], list[str]]:
    """``_parse`` with its blocks as rows (plain values: the answer of an isolated call)."""
    blocks, errors = _parse(row)
    return [b.as_row() for b in blocks], errors


def parse_range(row: dict, limits: Limits = DEFAULT_LIMITS) -> dict:
    """Parse one page range into blocks (JSON, so every batch has the same Arrow schema). A
    crash or time-out is kept in ``range_error``: the document fails when it is assembled."""
    started = time.perf_counter()
    out = dict(row, range_error="", range_trace="")
    blocks: list[dict] = []
    errors: list[str] = []
    try:
        blocks, errors = _isolated(_parse_rows, row, limits=limits)
    except Isolated as exc:
        where = f"pages {row['start'] + 1}-{row['stop']}"
        out.update(range_error=f"{where}: {exc.reason}", range_trace=exc.trace)
    out["blocks"] = to_json(blocks)
    out["page_errors"] = to_json(errors)
    out["parse_s"] = time.perf_counter() - started
    out["parse_mb"] = peak_memory_mb()
    return out


def assemble_group(
    batch: pa.Table,
    use_outline: bool,
    review: int = 0,
    section_filter: str = DEFAULT_SECTION_FILTER,
    limits: Limits = DEFAULT_LIMITS,
) -> pa.Table:
    """All page ranges of one document (and its pages read by OCR, ``ocr_stage``) → one row:
    document facts and its nodes as JSON. The assembly runs isolated within the document's
    budget. ``review``: the LLM refiner's windows are planned (module docstring)."""
    rows = sorted(batch.to_pylist(), key=lambda r: (r["start"], r.get("ocr", False)))
    ranges = [r for r in rows if not r.get("ocr")]
    read = [r for r in rows if r.get("ocr")]
    first = dict(rows[0])
    broken = next((r for r in rows if r.get("range_error")), None)
    if broken is not None:  # a range crashed or stalled: the document fails with its reason
        stage = "ocr" if broken.get("ocr") else "parse"
        first.update(status=FAILED, error=broken["range_error"], failure_stage=stage)
        first["traceback"] = broken["range_trace"]
    errors = [e for r in rows for e in from_json(r["page_errors"])]
    # parse: the text ranges' seconds; ocr: the OCR stage's pages' (a stage of its own)
    parsed = (sum(r["parse_s"] for r in ranges), max(r["parse_mb"] for r in rows))
    blocks = [b for r in ranges for b in from_json(r["blocks"])] if broken is None else []
    scanned = [b for r in read for b in from_json(r["blocks"])] if broken is None else []
    if broken is None and read and first["status"] == NEEDS_OCR:
        if scanned or blocks:  # its text came from OCR: indexed like any other
            first.update(status=OK, error="")
        else:  # OCR ran and read nothing: say so, not "needs OCR"
            first["error"] = ocr_found_nothing(first, read)
    args = (first, blocks, errors, parsed, use_outline)
    try:
        doc = _isolated(
            _assemble_rows,
            *args,
            review,
            section_filter,
            scanned,
            limits=limits,
            section_filter=section_filter,
        )
    except Isolated as exc:
        doc = document_row(first, errors)
        _isolation_failed(doc, exc, "assemble")
        doc.update(stage_timings=to_json({}), stage_memory=to_json({}), source="pdf")
    if read:
        timings = from_json(doc["stage_timings"], {})
        doc["stage_timings"] = to_json(dict(timings, ocr=round(sum(r["parse_s"] for r in read), 4)))
    doc["n_ranges"] = len(ranges)
    doc["n_ocr_pages"] = sum(not from_json(r["page_errors"]) for r in read)
    doc["stage_nodes"] = to_json({"assemble": ray_node_id()})  # here, not in the child
    return pa.Table.from_pylist([doc])


def ocr_found_nothing(first: dict, read: list[dict]) -> str:
    """The error of a document without a text layer whose pages OCR read without finding any
    text (``read``: its OCR rows; a page whose OCR failed has its own page error)."""
    done = sum(not from_json(r["page_errors"]) for r in read)
    pages = first["n_pages"]
    return f"no text found: OCR read {done} of its {pages} page(s) and found no text"


def _assemble_rows(
    first: dict,
    blocks: list[dict],
    page_errors: list[str],
    parsed: tuple[float, float],
    use_outline: bool,
    review: int = 0,
    section_filter: str = DEFAULT_SECTION_FILTER,
    ocr_blocks: list[dict] | None = None,
) -> dict:
    """``_assemble`` on blocks as rows (what crosses into an isolated child), with the blocks
    of pages read by OCR merged in page order."""
    rows = [Block(**b) for b in blocks]
    if ocr_blocks:
        rows = merge_ocr_blocks(rows, [Block(**b) for b in ocr_blocks])
    return _assemble(first, rows, page_errors, parsed, use_outline, review, section_filter)


def _index_one(
    row: dict,
    use_outline: bool,
    review: int = 0,
    section_filter: str = DEFAULT_SECTION_FILTER,
) -> dict:
    """One probed document parsed whole and assembled."""
    started = time.perf_counter()
    blocks, errors = _parse(row)
    parsed = (time.perf_counter() - started, peak_memory_mb())
    return _assemble(row, blocks, errors, parsed, use_outline, review, section_filter)


def index_documents(
    batch: pa.Table,
    use_outline: bool,
    review: int = 0,
    section_filter: str = DEFAULT_SECTION_FILTER,
    limits: Limits = DEFAULT_LIMITS,
) -> pa.Table:
    """Probed documents, each parsed whole and assembled in this task (no page ranges, no
    grouping): the path of every document that ``plan_tasks`` does not split. The output
    rows are those of ``assemble_group``. Each document runs isolated within its budget."""
    docs = []
    for row in batch.to_pylist():
        started = time.perf_counter()
        try:
            doc = _isolated(
                _index_one,
                row,
                use_outline,
                review,
                section_filter,
                limits=limits,
                section_filter=section_filter,
            )
        except Isolated as exc:
            doc = document_row(row, [])
            _isolation_failed(doc, exc, "parse")
            timings = {"probe": row["probe_s"], "parse": time.perf_counter() - started}
            doc.update(stage_timings=to_json(timings), stage_memory=to_json({}), source="pdf")
        doc["n_ranges"] = 1
        doc["stage_nodes"] = to_json({"assemble": ray_node_id()})  # here, not in the child
        docs.append(doc)
    return pa.Table.from_pylist(docs)


def _assemble(
    first: dict,
    blocks: list[Block],
    page_errors: list[str],
    parsed: tuple[float, float],
    use_outline: bool,
    review: int = 0,
    section_filter: str = DEFAULT_SECTION_FILTER,
) -> dict:
    """A probed document's blocks → its row: facts, nodes and layout graph as JSON, and the
    time and memory of each stage. ``parsed``: (parse seconds, parse peak memory MB).
    ``review``: the refiner's windows and the blocks are kept (``section_review``,
    ``section_blocks``) for ``apply_section_answers``."""
    started = time.perf_counter()
    doc = document_row(first, page_errors)
    kept = [b.as_row() for b in blocks] if review else []
    timings = {"probe": first["probe_s"], "parse": parsed[0]}
    node_dicts = _assemble_tree(doc, first, blocks, use_outline, section_filter, review)
    timings["assemble"] = time.perf_counter() - started
    memory = {"probe": first["probe_mb"], "parse": parsed[1]}
    memory["assemble"] = peak_memory_mb()
    if doc["status"] != FAILED:
        started = time.perf_counter()
        _graph(doc, node_dicts)
        timings["layout_graph"] = time.perf_counter() - started
        memory["layout_graph"] = peak_memory_mb()
        if doc["section_review"]:
            review_facts = from_json(doc["section_review"])
            review_facts["meta"] = from_json(first["meta"])
            doc["section_review"] = to_json(review_facts)
            doc["section_blocks"] = to_json(kept)
    doc["stage_timings"] = to_json({k: round(v, 4) for k, v in timings.items()})
    doc["stage_memory"] = to_json(memory)
    doc["source"] = "pdf"
    return doc


def _graph(doc: dict, node_dicts: list[dict]) -> None:
    """The layout graph's columns into ``doc``; a failure fails the document whole."""
    try:
        doc.update(graph_columns(node_dicts, doc["doc_id"]))
    except Exception as exc:  # the document is failed whole: no nodes without their graph
        _failed(doc, exc, "layout_graph")
        doc.update(nodes="[]", n_nodes=0)


def _assemble_tree(
    doc: dict,
    first: dict,
    blocks: list[Block],
    use_outline: bool,
    section_filter: str = DEFAULT_SECTION_FILTER,
    review: int | Review = 0,
) -> list[dict]:
    """The document's tree into ``doc`` (nodes, toc, facts; with ``review``, the refiner's
    ``section_review``); its nodes as dicts. A failure marks ``doc`` failed in stage
    "assemble"."""
    if doc["status"] == FAILED:
        return []
    try:
        meta = from_json(first["meta"])
        planned = Review(window=review) if isinstance(review, int) else review
        planned = planned if review else None
        nodes, toc, facts = assemble_document(
            doc["doc_id"], meta, blocks, use_outline, None, section_filter, planned
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
            section_filter=facts["section_filter"],
            n_sections=facts["n_sections"],
            n_nodes=len(nodes),
        )
        if facts.get("section_review", {}).get("windows"):
            doc["section_review"] = to_json(facts["section_review"])
        return node_dicts
    except Exception as exc:
        _failed(doc, exc, "assemble")
        return []


def structure_args(config: BookindexConfig, workers: int, grouped: bool) -> dict[str, Any]:
    """``fn`` and the ``map_batches`` / ``map_groups`` arguments of the assemble step, as Ray
    tasks (no model: with a generative one, the refiner's windows are only planned here)."""
    fn = assemble_group if grouped else index_documents
    kwargs = {
        "use_outline": config.index.use_outline,
        "review": config.index.section_window if config.models.generative else 0,
        "section_filter": config.index.section_filter,
        "limits": Limits.of(config),
    }
    return {"fn": fn, "fn_kwargs": kwargs, **bounded_retries(config)}


def _rebuilt(
    row: dict,
    review: dict,
    kept: list[dict],
    use_outline: bool,
    section_filter: str,
    decided: dict[int, int],
    errors: dict[int, str],
    window: int,
) -> tuple[dict, list[dict]] | None:
    """The row with its tree rebuilt from the kept blocks with the model's decisions, and the
    reviewed candidates; None when that failed."""
    doc = dict(row)
    first = {"meta": to_json(review["meta"])}
    blocks = [Block(**b) for b in kept]
    planned = Review(decided, errors, window)
    node_dicts = _assemble_tree(doc, first, blocks, use_outline, section_filter, planned)
    if doc["status"] != FAILED:
        _graph(doc, node_dicts)
    if doc["status"] == FAILED:
        return None
    reviews = from_json(doc.pop("section_review", None), {}).get("reviews", review["reviews"])
    return doc, reviews


def apply_section_answers(
    batch: pa.Table,
    use_outline: bool,
    section_filter: str = DEFAULT_SECTION_FILTER,
    window: int = 40,
) -> pa.Table:
    """Document rows with the refiner's answers (``section_answers``: JSON ``{window: [answer,
    error, attempts]}``, pipelines/model_requests.py) → the rows with the model's decisions:
    the tree rebuilt from the kept blocks when a decision changed, ``section_decisions`` (JSON
    list of ``llm_refiner.Review`` fields) and ``section_errors`` (windows without a usable
    answer: their candidates keep the rule-based decision). Deterministic: the same blocks and
    answers make the same tree."""
    from bookindex.operators.structure.llm_refiner import block_levels

    out = []
    for row in batch.to_pylist():
        review = from_json(row.pop("section_review", None), None)
        kept = from_json(row.pop("section_blocks", None), None)
        answers = from_json(row.pop("section_answers", None), {}) or {}
        row.update(section_decisions="[]", section_errors="[]")
        if review is None or row["status"] == FAILED:
            out.append(row)
            continue
        started = time.perf_counter()
        decided: dict[int, int] = {}
        errors: dict[int, str] = {}
        for planned in review["windows"]:
            answer, error, attempts = answers.get(str(planned["number"]), ("", "no answer", 0))
            found = block_levels(planned["blocks"], from_json(answer)) if answer else None
            if found is None:
                error = error or "no decisions list in the answer"
                errors[planned["number"]] = f"{error} ({attempts} attempt(s))"
            else:
                decided.update(found)
        rule = {r["block_index"]: r["rule_level"] for r in review["reviews"]}
        reviews = review["reviews"]
        rebuilt = None
        if any(rule.get(i) != level for i, level in decided.items()):
            rebuilt = _rebuilt(
                row, review, kept, use_outline, section_filter, decided, errors, window
            )
            if rebuilt is None:  # the model's tree could not be built: the rules' tree stands
                errors[-1] = "rebuilding the tree with the model's decisions failed"
        if rebuilt is not None:
            row, reviews = rebuilt
        else:
            for r in reviews:
                r["model_level"] = decided.get(r["block_index"])
                r["error"] = errors.get(r["window"], "")
        row.pop("section_review", None)
        row["section_decisions"] = to_json(reviews)
        row["section_errors"] = to_json(
            [f"sections window {n}: {why}" for n, why in sorted(errors.items())]
        )
        timings = from_json(row.get("stage_timings"), {})
        timings["sections"] = round(time.perf_counter() - started, 4)
        row["stage_timings"] = to_json(timings)
        out.append(row)
    return pa.Table.from_pylist(out)
