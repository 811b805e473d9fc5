"""The indexing job's driver: PDFs and passages → section trees → Lance tables, on Ray Data.

Driver (no Ray needed, and no model loaded: it only checks the configuration): discover inputs,
hash them (``doc_id`` = sha256 of the bytes), compare with the index, and stop at once when
nothing is new — so a re-run on the same input takes seconds. Otherwise Ray Data runs the
stages (pipelines/structure_stage.py, pipelines/enrich.py; their rows: pipelines/rows.py):

    documents ─map(probe)─▶ probed rows (pages, status, metadata) ─▶ driver: plan_tasks
    groups of whole books ─map_batches(index_documents: parse + assemble)────────┐
    page ranges of long books ─map(parse)─groupby(doc_id).map_groups(assemble)──┤
    pages to OCR ─map_batches(OcrStage)─┬─groupby(doc_id).map_groups(assemble)──┴▶ one row
    their books' text pages ─map(parse)─┘                                          per document
      (tree as JSON) [─model_answers: figure/table descriptions, LLM entities through
      ray.data.llm, with --models openai|vllm] [─materialize─map_batches(EnrichStage)]
      ─write_document_rows (nodes, edges, communities as Lance fragments: in the enrich
      actors after each call, or a map_batches of its own without enrich)─▶
      driver: the document rows; one commit per table (nodes, edges, communities), corpus
      entity resolution (an actor), entity tables, documents + failures (last: the commit)

One streaming execution runs every part: the OCR workers' start-up and the grouping of the
books with scanned pages overlap the other books' tasks. A book is split into page ranges only
when it is long against the run (``split_limit``): a corpus of many books runs its books whole,
packed into a few tasks of about equal pages (``pack``), with no grouping barrier between parse
and assemble, while one long book still spreads over every worker. The rows are written where
they are made (``pipelines/store/fragments.py``): no second pass over the documents' nodes.
Stages that run a model own it (UDF classes that load it once per worker); the configuration
(``operators.config``: index, models, resolver) sizes their worker pools, GPU shares and
batches.

One bad file becomes a failed document row and a failures row; it never fails the job.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from bookindex.operators.config import BookindexConfig, ConfigError
from bookindex.operators.kinds import FAILED, NEEDS_OCR
from bookindex.operators.models import check_config, embedding_width
from bookindex.operators.parsing.discovery import discover
from bookindex.operators.parsing.probe import InputFile, Problem, identify
from bookindex.operators.structure.passages import Passage, is_passage_file, read_passages
from bookindex.pipelines import provenance
from bookindex.pipelines.enrich import EnrichStage, enrich_args
from bookindex.pipelines.er_selection import document_selections
from bookindex.pipelines.llm_processors import start_telemetry_actor
from bookindex.pipelines.model_requests import model_answers
from bookindex.pipelines.model_stage import bounded_retries
from bookindex.pipelines.ocr_stage import (
    OcrStage,
    nothing_to_read,
    ocr_args,
    ocr_tasks,
    text_ranges,
)
from bookindex.pipelines.rows import from_json, passage_document_row, to_json
from bookindex.pipelines.run_stats import (
    DriverPhases,
    ProgressListener,
    StageProgress,
    build_stats,
    summary_line,
    write_stats,
)
from bookindex.pipelines.store import fragments, lance_store, recovery
from bookindex.pipelines.store.document_writes import write_document_rows
from bookindex.pipelines.store.index_dir import check_index_dir
from bookindex.pipelines.store.index_lock import IndexLock
from bookindex.pipelines.store.layout_graph_store import backfill_layout_graph
from bookindex.pipelines.store.schemas import (
    COMMUNITIES,
    DOCUMENTS,
    EDGES,
    ENTITIES,
    FAILURES,
    NODES,
    SCHEMAS,
    SECTION_DECISIONS,
    communities_schema,
    edges_schema,
    nodes_schema,
)
from bookindex.pipelines.structure_stage import (
    Limits,
    pack,
    parse_range,
    plan_tasks,
    probe_documents,
    split_limit,
    structure_args,
)


@dataclass
class Summary:
    ok: int = 0
    failed: int = 0
    skipped: int = 0
    needs_ocr: int = 0
    pages: int = 0
    passages: int = 0  # passages of JSONL corpora indexed (they have no pages)
    nodes: int = 0
    entities: int = 0
    seconds: float = 0.0
    rebuilt: int = 0  # re-indexed because another build made their rows (pipelines/provenance)
    stale_kept: int = 0  # built otherwise and kept (index.stale_build="warn")
    stale: dict[str, str] = field(default_factory=dict)  # uri → why its build differs
    failures: list[dict] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    lock_notes: list[str] = field(default_factory=list)  # a stale lock broken, a wait

    def counts(self) -> dict:
        names = ("ok", "failed", "skipped", "needs_ocr", "pages", "passages", "nodes", "entities")
        names += ("rebuilt", "stale_kept")  # documents another build made (provenance.py)
        return dict({n: getattr(self, n) for n in names}, seconds=round(self.seconds, 3))

    def line(self) -> str:
        """The summary line, as read from the run's stats.json content."""
        return summary_line(self.stats or {"summary": self.counts()})


def _now() -> datetime:
    return datetime.now(UTC)


# ---- the job ----------------------------------------------------------------------------------


# Ray's own output in this process (``show_ray_output``): its log lines below ERROR and Ray
# Data's progress bars. The command line turns it off unless --verbose.
_RAY_OUTPUT = {"shown": True}


def show_ray_output(shown: bool) -> None:
    """Whether the Ray this process starts logs below ERROR and shows Ray Data's progress bars
    (the job's own progress goes to its ``progress`` listener either way)."""
    _RAY_OUTPUT["shown"] = shown


def run_index(
    inputs: list[str],
    out_dir: str | Path,
    config: BookindexConfig | None = None,
    progress: ProgressListener | None = None,
) -> Summary:
    """Index ``inputs`` (directories, files, globs) into the Lance tables under ``out_dir``,
    as ``config`` says (its index, models and resolver sections; the defaults when None).
    ``progress`` hears each stage's documents done and its end (``run_stats.StageProgress``)."""
    config = config or BookindexConfig()
    started = time.perf_counter()
    # Before any work: --out a file, not writable, neither empty nor an index; the model
    # configuration. Then the lock, and under it (another job may be writing them) the tables:
    # a stray file, a table that does not open or misses a data file, the vectors' width.
    check_index_dir(out_dir, tables=False)
    check_config(config.models)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    index = config.index
    lock = IndexLock(out_dir, index.lock_heartbeat_s, index.lock_stale_s, index.lock_wait_s)
    with lock:  # one writer per index (store/index_lock.py); IndexLocked when another holds it
        uncreated = recovery.remove_uncommitted_tables(out_dir)  # a killed job's first write
        check_index_dir(out_dir)
        width = check_index_config(config, out_dir)
        summary = _run_locked(inputs, out_dir, config, width, lock, uncreated, progress)
        summary.seconds = time.perf_counter() - started
        summary.stats["summary"]["seconds"] = round(summary.seconds, 3)
        write_stats(out_dir, summary.stats)
    summary.lock_notes = lock.notes
    return summary


def _run_locked(
    inputs: list[str],
    out_dir: str | Path,
    config: BookindexConfig,
    width: int | None,
    lock: IndexLock,
    uncreated: list[str],
    progress: ProgressListener | None = None,
) -> Summary:
    """``run_index`` while this job holds the index lock (``uncreated``: the tables whose
    uncommitted first write was removed)."""
    summary = Summary()
    driver = DriverPhases(progress)
    with driver.phase("recover") as phase:  # rows an interrupted run left uncommitted
        recovered = recovery.recover(out_dir)
        phase.update(orphans=recovered.orphans, restored=recovered.restored)
        phase["removed_files"] = recovered.removed_files
        phase["uncreated"] = uncreated
    with driver.phase("identify") as phase:
        uris, problems, files, passages = _identify(inputs)
        phase.update(rows_in=len(uris), rows_out=len(files))
    lance_store.add_missing_columns(out_dir, DOCUMENTS)  # an index from before a column
    existing = lance_store.read_table(
        out_dir, DOCUMENTS, ["doc_id", "uri", "build", "status"]
    ).to_pylist()
    known_ids = {r["doc_id"] for r in existing}
    # Documents an earlier run left without text with OCR off are read again with OCR on (one
    # that OCR read already, and found no text in, is not read again by the same build).
    retry = (
        {r["doc_id"] for r in existing if r["status"] == NEEDS_OCR and not _ocr_read(r)}
        if config.index.ocr
        else set()
    )
    known_ids -= retry
    by_content: dict[str, InputFile] = {}
    for f in files:  # identical bytes under two names are one document (the first name)
        by_content.setdefault(f.doc_id, f)
    rebuild = _stale_builds(existing, by_content, config, summary)
    todo = [
        f
        for f in by_content.values()
        if config.index.force or f.doc_id not in known_ids or f.doc_id in rebuild
    ]
    summary.skipped = len(files) - len(todo)
    # A file whose bytes changed drops the rows of its previous version (unless that version
    # is still the content of another input); --force also replaces the unchanged ones.
    current = {f.uri: f.doc_id for f in files}
    live_ids = set(current.values())
    stale = {r["doc_id"] for r in existing if r["uri"] in current and r["doc_id"] not in live_ids}
    forced = {f.doc_id for f in todo} & known_ids  # --force, or built otherwise
    replaced = sorted(stale | forced | ({f.doc_id for f in todo} & retry))

    doc_rows: list[dict] = []
    if todo:
        lance_store.check_columns(out_dir, NODES)
        run = _RayRun(config, Path(out_dir), driver, width, lock)
        doc_rows, summary.entities = run.index(todo, passages, replaced)
    elif replaced:
        lock.check()
        _delete(out_dir, replaced)
        summary.entities = _refresh_entities(out_dir)
        recovery.mark_committed(out_dir)
    else:
        summary.entities = _count(out_dir, ENTITIES)
    failures = _failure_rows(problems, doc_rows)
    # Discovery problems are keyed by their input: a re-run replaces them, never repeats them.
    # (The documents' own failure rows were written with them, before their commit.)
    lance_store.delete_where(out_dir, FAILURES, "uri", [p.uri for p in problems])
    lance_store.append(out_dir, FAILURES, pa.Table.from_pylist(_failure_rows(problems, [])))
    for row in doc_rows:
        setattr(summary, row["status"], getattr(summary, row["status"]) + 1)
        if row["status"] != FAILED:
            summary.pages += row["n_pages"]
            summary.passages += int(row.get("source") == "passage")
        summary.nodes += row["n_nodes"]
    summary.failures = failures
    with driver.phase("layout_graph_backfill") as phase:  # indexes built before the graph
        phase["documents"] = backfill_layout_graph(out_dir)
    summary.stats = build_stats(summary.counts(), doc_rows, driver)
    return summary


def _ocr_read(row: dict) -> bool:
    """Whether a stored document was indexed with OCR on (its build's ``options.ocr``)."""
    try:
        return json.loads(row.get("build") or "{}").get("options", {}).get("ocr") is True
    except (ValueError, AttributeError):
        return False


def _identify(inputs: list[str]) -> tuple[list[str], list[Problem], list[InputFile], dict]:
    """Inputs → files with their doc_id (PDFs hashed; JSONL corpora read passage by passage).
    A file that cannot be read is a problem under the name it was found by (discovery.py)."""
    found = discover(inputs)
    problems = list(found.problems)
    uris = sorted(found.files)
    files = identify([u for u in uris if not is_passage_file(u)])
    problems += [Problem(found.files[f.uri], "read", f.error) for f in files if f.error]
    files = [f for f in files if not f.error]
    passages: dict[str, Passage] = {}
    for corpus in (u for u in uris if is_passage_file(u)):
        try:
            found_passages = read_passages(corpus)
        except OSError as exc:
            problems.append(Problem(found.files[corpus], "read", f"cannot read file: {exc}"))
            continue
        problems += [Problem(p.uri, "read", p.error) for p in found_passages if p.error]
        for p in found_passages:
            if not p.error:
                passages[p.doc_id] = p
                files.append(InputFile(p.uri, p.doc_id, len(p.text.encode("utf-8"))))
    return uris, problems, files, passages


def _stale_builds(
    existing: list[dict], inputs: dict[str, InputFile], config: BookindexConfig, summary: Summary
) -> set[str]:
    """The inputs already indexed by another build (pipelines/provenance.py): their doc_ids
    to re-index, or none when ``index.stale_build`` is "warn" (counted in ``summary``)."""
    stored = [r for r in existing if r["doc_id"] in inputs]
    stale = provenance.stale_documents(stored, config)
    summary.stale = {inputs[d].uri: why for d, why in stale.items()}
    if config.index.stale_build == "warn":
        summary.stale_kept = len(stale)
        return set()
    summary.rebuilt = len(stale)
    return set(stale)


def _delete(out_dir: str | Path, doc_ids: list[str]) -> None:
    """``documents`` first: a kill part-way leaves orphans, which ``recovery.recover`` removes."""
    for table in (DOCUMENTS, *recovery.PER_DOCUMENT_TABLES):
        lance_store.delete_documents(out_dir, table, doc_ids)


def _count(out_dir: str | Path, table: str) -> int:
    if not lance_store.exists(out_dir, table):
        return 0
    import lance

    return lance.dataset(lance_store.table_path(out_dir, table)).count_rows()


def _refresh_entities(out_dir: str | Path) -> int:
    """After documents were dropped: entity mention counts again, unmentioned ones removed."""
    return recovery.refresh_entities(out_dir)


def check_index_config(config: BookindexConfig, out_dir: str | Path) -> int | None:
    """What the driver checks before any work, without loading a model: the model
    configuration, and that the configured embedder's width is the index's. Returns the width
    of the index's vectors (None: known only once the embedder answers)."""
    check_config(config.models)
    width = lance_store.check_vector_width(out_dir, embedding_width(config.models))
    if width is None and not config.index.enrich:
        raise ConfigError(
            "the width of models.embed_model's vectors is not known: set models.embed_dim "
            "(or run with enrich, which asks the model)"
        )
    return width


def ray_address(config: BookindexConfig, environ: dict[str, str] | None = None) -> str:
    """The Ray the job starts or joins: ``index.ray_address``, else ``RAY_ADDRESS`` (the Job
    API sets it to the cluster's address), else "local" — a Ray of its own. (``ray.init()``
    without an address would join whatever cluster ``ray start`` left on this machine.)"""
    env = os.environ if environ is None else environ
    return config.index.ray_address or env.get("RAY_ADDRESS", "") or "local"


def _blocks(ray, groups: list[list[dict]]):
    """A dataset with one block per group of rows (``ray.data.from_items`` cuts a list into
    blocks of equal row counts)."""
    return ray.data.from_arrow([pa.Table.from_pylist(rows) for rows in groups])


class _RayRun:
    """One run's Ray part: the per-document dataset, then every table but ``documents``, then
    the commit. ``width``: of the index's vectors (None: the enrich stage's model says)."""

    def __init__(
        self,
        config: BookindexConfig,
        out_dir: Path,
        driver: DriverPhases,
        width: int | None,
        lock: IndexLock,
    ) -> None:
        import ray

        shown = _RAY_OUTPUT["shown"]
        if not ray.is_initialized():
            level = logging.INFO if shown else logging.ERROR
            address = ray_address(config)
            ray.init(
                address=address, include_dashboard=False, log_to_driver=False, logging_level=level
            )
        from ray.data.context import DataContext, ShuffleStrategy

        # The grouping moves little data (block lists of a few documents): a task-based sort
        # shuffle starts in milliseconds, where the default actor-based one takes ~15 s here.
        context = DataContext.get_current()
        context.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
        # No per-operator CPU reservation: on a small node (2 CPUs) Ray Data's reservation
        # (half the CPUs split among the operators) ran the probe's tasks one at a time and
        # left a CPU idle. Every actor pool here reads a materialised input (OCR: its page
        # rows; enrich and the model processors: the documents, materialised first), so no
        # pool can hold the CPUs that the tasks feeding it wait for.
        context.op_resource_reservation_enabled = False
        if not shown:
            context.enable_progress_bars = False
            logging.getLogger("ray").setLevel(logging.ERROR)
        self.ray = ray
        self.config, self.out_dir, self.driver, self.width = config, out_dir, driver, width
        self.lock = lock
        cpus = max(1, int(ray.available_resources().get("CPU", 1)))
        self.workers = config.index.parse_workers or cpus

    def index(
        self, todo: list[InputFile], passages: dict[str, Passage], replaced: list[str]
    ) -> tuple[list[dict], int]:
        """Index ``todo``, replacing the documents ``replaced``; the document rows (without
        their heavy columns) and the number of entities."""
        with self.driver.phase("ray_pipeline", rows_in=len(todo)) as phase:
            # the last step writes each block's nodes and layout graph as Lance fragments
            # (store/fragments.py), so only the small document rows come back here
            written = self._documents(todo, passages)
            stage = "enrich" if self.config.index.enrich else "parse"
            doc_rows = self._stream(written, stage, len(todo))
            phase["rows_out"] = len(doc_rows)
        written_fragments: dict[str, list[str]] = {NODES: [], EDGES: [], COMMUNITIES: []}
        for row in doc_rows:
            for table, found in from_json(row.pop("fragments", None), {}).items():
                written_fragments[table] += found
        self.lock.check()  # the first write: still this job's index
        _delete(self.out_dir, replaced)
        if self.config.index.enrich and self.width is None:  # a new index, an endpoint
            self.width = doc_rows[0]["vector_width"]  # embedder: as it answered
        n_nodes = sum(row["n_nodes"] for row in doc_rows)
        with self.driver.phase("write_nodes", rows_in=len(doc_rows), rows_out=n_nodes):
            fragments.commit(
                self.out_dir, NODES, nodes_schema(self.width), written_fragments[NODES]
            )
        with self.driver.phase("write_layout_graph", rows_in=len(doc_rows)) as phase:
            # edges before communities: a document with communities rows has its graph
            phase["edges"] = fragments.commit(
                self.out_dir, EDGES, edges_schema, written_fragments[EDGES]
            )
            phase["communities"] = fragments.commit(
                self.out_dir, COMMUNITIES, communities_schema, written_fragments[COMMUNITIES]
            )
        enrich = self.config.index.enrich
        n_entities = self._write_entities(doc_rows) if enrich else _count(self.out_dir, ENTITIES)
        # Every other table is written above; the documents rows go last (recovery.py).
        self.lock.check()
        _commit(self.out_dir, doc_rows, self.config)
        return doc_rows, n_entities

    def _stream(self, dataset, stage: str, total: int) -> list[dict]:
        """The rows of ``dataset`` as its blocks finish (one streaming execution), each
        block's documents told to the progress listener."""
        rows: list[dict] = []
        started, pages = time.perf_counter(), 0
        for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
            block = batch.to_pylist()
            rows += block
            pages += sum(r["n_pages"] or 0 for r in block if r["status"] != FAILED)
            elapsed = time.perf_counter() - started
            self.driver.tell(StageProgress(stage, len(rows), total, pages, elapsed))
        seconds = time.perf_counter() - started
        self.driver.tell(StageProgress(stage, len(rows), total, pages, seconds, finished=True))
        return rows

    def _materialize(self, dataset, total: int, pages: int):
        """``dataset`` materialised (the documents before the enrich actors start), the parse
        stage's start and end told to the progress listener (``total`` documents, ``pages``
        pages as probed)."""
        started = time.perf_counter()
        self.driver.tell(StageProgress("parse", 0, total))
        dataset = dataset.materialize()
        seconds = time.perf_counter() - started
        self.driver.add("materialize", seconds)  # stats.json: the documents before enrich
        self.driver.tell(StageProgress("parse", total, total, pages, seconds, finished=True))
        return dataset

    def _documents(self, todo: list[InputFile], passages: dict[str, Passage]):
        """The per-document dataset: PDFs parsed and assembled, passages as they are, each
        enriched (when configured) in batches of its own size, and written
        (``write_document_rows``: nodes, edges and communities as Lance fragments, the rows
        without their heavy columns) by the enrich actors themselves, or by tasks of their
        own without enrich or with the model's selections after it."""
        ray, index = self.ray, self.config.index
        pdfs = [
            {"doc_id": f.doc_id, "uri": f.uri, "size": f.size}
            for f in todo
            if f.doc_id not in passages
        ]
        texts = [passage_document_row(passages[f.doc_id]) for f in todo if f.doc_id in passages]
        if self.config.models.generative:  # the first processor waits for it: started now
            start_telemetry_actor()
        books, pages = self._pdf_documents(pdfs)
        parts = (
            [(books, index.pdfs_per_enrich_batch, len(pdfs), pages)] if books is not None else []
        )
        if texts:
            blocks = min(len(texts), self.workers * 4)
            passages_ds = ray.data.from_items(texts, override_num_blocks=blocks)
            parts.append((passages_ds, index.passages_per_enrich_batch, len(texts), 0))
        enriched = []
        write = {"out_dir": str(self.out_dir), "width": self.width}
        generative = self.config.models.generative
        answers = index.enrich and generative
        enrich_writes = index.enrich and not answers  # the enrich actors write their own rows
        for dataset, docs_per_batch, total, part_pages in parts:
            if generative:  # section refiner, descriptions, entities: ray.data.llm processors
                dataset = model_answers(dataset, self.config, self.workers, index.enrich)
            if index.enrich:
                # The documents are materialized before the enrich actors start: a fixed pool
                # of them can otherwise hold every CPU while the structure tasks it waits for
                # wait for one (seen on a 2-CPU node: Ray Data's budget left them none).
                dataset = self._materialize(dataset, total, part_pages)
                # no more workers than batches: each loads the models, and a small job (one
                # book, a few hundred passages) would load them for a worker with nothing to do
                batches = max(1, -(-total // docs_per_batch))
                pool = min(self.workers, batches)
                args = enrich_args(self.config, pool, docs_per_batch, self.width, answers)
                args.update(bounded_retries(self.config, actors=True))
                if enrich_writes:
                    args["fn_constructor_kwargs"]["write"] = write
                dataset = dataset.map_batches(EnrichStage, **args)
                if answers:  # ER selection: one processor pass for the corpus's questions
                    dataset = document_selections(dataset, self.config)
            if not enrich_writes:
                dataset = dataset.map_batches(
                    write_document_rows,
                    fn_kwargs=write,
                    batch_size=None,
                    batch_format="pyarrow",
                    **bounded_retries(self.config),
                )
            enriched.append(dataset)
        return enriched[0] if len(enriched) == 1 else enriched[0].union(*enriched[1:])

    def _pdf_documents(self, pdfs: list[dict]):
        """Probe first (page counts, status, metadata: small rows back to the driver), then
        plan: one task per book, page ranges only for books long against the run, and the
        books with pages to OCR. One dataset of document rows (None without PDFs) and the
        pages the probe counted: its parts run in one streaming execution, so that the OCR
        workers' start-up and the grouping of the OCR books overlap the other books' tasks
        instead of running before them."""
        if not pdfs:
            return None, 0
        ray = self.ray
        limits, retries = Limits.of(self.config), bounded_retries(self.config)
        with self.driver.phase("plan", rows_in=len(pdfs)) as phase:
            # a probe takes milliseconds: a few blocks of about equal bytes, not a task a file
            probed = _blocks(ray, pack(pdfs, "size", 2 * self.workers))
            probed = probed.map_batches(
                probe_documents,
                fn_kwargs={"limits": limits},
                batch_size=None,
                batch_format="pyarrow",
                **retries,
            )
            probed = probed.take_all()
            pages = ocr_tasks(probed) if self.config.index.ocr else []
            if self.config.index.ocr:
                nothing_to_read(probed)
            scanned = {r["doc_id"] for r in pages}
            plain = [r for r in probed if r["doc_id"] not in scanned]
            limit = split_limit(probed, self.config.index.pages_per_task, self.workers)
            whole, ranges = plan_tasks(plain, self.config.index.pages_per_task, self.workers, limit)
            phase.update(rows_out=len(probed), whole=len(whole), ranges=len(ranges))
            phase["ocr_pages"] = len(pages)
        parts = []
        if whole:
            args = structure_args(self.config, self.workers, grouped=False)
            # a block (one task: batch_size None) is a group of books of about equal pages,
            # 4 a worker: the largest first, each alone when long
            books = _blocks(ray, pack(whole, "n_pages", 4 * self.workers))
            parts.append(books.map_batches(batch_size=None, batch_format="pyarrow", **args))
        if ranges:
            args = structure_args(self.config, self.workers, grouped=True)
            split = ray.data.from_items(ranges, override_num_blocks=len(ranges))
            split = split.map(parse_range, fn_kwargs={"limits": limits}, **retries)
            grouped = split.groupby("doc_id", num_partitions=self.workers)
            parts.append(grouped.map_groups(batch_format="pyarrow", **args))
        if pages:
            parts.append(self._ocr_part(probed, scanned, pages, limit))
        n_pages = sum(r["n_pages"] or 0 for r in probed if r["status"] != FAILED)
        return (parts[0] if len(parts) == 1 else parts[0].union(*parts[1:])), n_pages

    def _ocr_part(self, probed: list[dict], scanned: set[str], pages: list[dict], limit: float):
        """Documents with pages to OCR: their text pages parsed (in page ranges only when the
        document is longer than ``limit``, as ``plan_tasks`` splits), their image-only pages
        read by the OCR stage (an actor pool of at most one worker per batch of pages), both
        grouped by document and assembled together. (Not materialised here: the caller
        materialises the documents before any actor pool downstream, enrich, starts.)"""
        ray, index = self.ray, self.config.index
        cpus = max(1, int(ray.available_resources().get("CPU", 1)))
        ocr = ray.data.from_items(pages, override_num_blocks=min(len(pages), 4 * self.workers))
        args = ocr_args(self.config, self.workers, cpus, pages=len(pages))
        ocr = ocr.map_batches(OcrStage, **bounded_retries(self.config, actors=True), **args)
        texts = [
            t
            for r in probed
            if r["doc_id"] in scanned
            for t in text_ranges(r, index.pages_per_task if r["n_pages"] > limit else 0)
        ]
        if texts:
            split = ray.data.from_items(texts, override_num_blocks=len(texts))
            limits = Limits.of(self.config)
            split = split.map(
                parse_range, fn_kwargs={"limits": limits}, **bounded_retries(self.config)
            )
            ocr = split.union(ocr)
        args = structure_args(self.config, self.workers, grouped=True)
        grouped = ocr.groupby("doc_id", num_partitions=self.workers)
        return grouped.map_groups(batch_format="pyarrow", **args)

    def _write_entities(self, doc_rows: list[dict]) -> int:
        """Corpus resolution (one actor), the entity tables and the search indexes. The nodes'
        search indexes are built in a thread of the driver while the resolver's actor works
        (the nodes table is committed already, and the driver would only wait): the
        ``search_indexes`` phase is the entities' indexes and what is left of the nodes'."""
        from concurrent.futures import ThreadPoolExecutor

        from bookindex.pipelines.entity_graph import resolve_corpus
        from bookindex.pipelines.store.entity_tables import (
            build_table_search_indexes,
            write_entity_tables,
        )

        n_local = sum(len(from_json(r["entities"])) for r in doc_rows)
        with ThreadPoolExecutor(1, thread_name_prefix="node-indexes") as pool:
            nodes_indexed = pool.submit(_timed, build_table_search_indexes, self.out_dir, NODES)
            with self.driver.phase("resolve", rows_in=n_local) as phase:
                errors: dict[str, list[str]] = {}  # ER selections without a usable answer
                results, canonical, vectors = resolve_corpus(
                    self.out_dir, doc_rows, self.width, self.config, errors=errors
                )
                for row in doc_rows:
                    if errors.get(row["doc_id"]):
                        found = from_json(row.get("enrich_errors"), []) + errors[row["doc_id"]]
                        row["enrich_errors"] = to_json(found)
                phase["rows_out"] = len(canonical)
            with self.driver.phase("write_entities", rows_in=len(canonical)) as phase:
                written = write_entity_tables(self.out_dir, doc_rows, results, canonical, vectors)
                phase["rows_out"] = written["entities"]
            with self.driver.phase("search_indexes") as phase:
                built = build_table_search_indexes(self.out_dir, ENTITIES)
                node_indexes, nodes_s = nodes_indexed.result()
                phase["built"] = len(node_indexes) + len(built)
                phase["nodes_s"] = round(nodes_s, 3)  # their own wall time, overlapping resolve
        return written["entities"]


def _timed(fn, *args):
    """``fn(*args)`` and its wall seconds."""
    started = time.perf_counter()
    return fn(*args), time.perf_counter() - started


def _commit(out_dir: str | Path, doc_rows: list[dict], config: BookindexConfig) -> None:
    """The refiner's decisions and the documents' failure rows, then their ``documents`` rows:
    the commit marker."""
    decisions = section_decision_rows(doc_rows)
    if decisions:
        table = pa.Table.from_pylist(decisions, schema=SCHEMAS[SECTION_DECISIONS])
        lance_store.append(out_dir, SECTION_DECISIONS, table)
    lance_store.append(out_dir, FAILURES, pa.Table.from_pylist(_failure_rows([], doc_rows)))
    documents = _document_rows(doc_rows, config)
    lance_store.append(out_dir, DOCUMENTS, pa.Table.from_pylist(documents))
    recovery.mark_committed(out_dir)


def _document_rows(doc_rows: list[dict], config: BookindexConfig) -> list[dict]:
    indexed_at = _now()
    builds = {s: provenance.document_build({"source": s}, config) for s in ("pdf", "passage")}
    return [
        {
            "doc_id": row["doc_id"],
            "uri": row["uri"],
            "title": row["title"],
            "n_pages": row["n_pages"],
            "status": row["status"],
            "error": row["error"],
            "stage_timings": row["stage_timings"],
            "indexed_at": indexed_at,
            "file_size": row["size"],
            "n_nodes": row["n_nodes"],
            "n_sections": row["n_sections"],
            "outline_used": row["outline_used"],
            "page_labels": from_json(row["page_labels"]),
            "toc": row["toc"],
            "build": provenance.with_runtime(builds[row.get("source") or "pdf"], row),
            "ocr_pages": row["n_ocr_pages"],
        }
        for row in sorted(doc_rows, key=lambda r: r["uri"])
    ]


def section_decision_rows(doc_rows: list[dict]) -> list[dict]:
    """The ``section_decisions`` rows: every candidate the LLM section refiner reviewed."""
    at = _now()
    return [
        {
            "doc_id": row["doc_id"],
            "block_index": r["block_index"],
            "text": r["text"],
            "page": r["page"],
            "window": r["window"],
            "rule_level": r["rule_level"],
            "model_level": r["model_level"],
            "probability": r["probability"],
            "error": r["error"],
            "decided_at": at,
        }
        for row in sorted(doc_rows, key=lambda r: r["uri"])
        for r in from_json(row.get("section_decisions"), [])
    ]


def _failure_rows(problems: list[Problem], doc_rows: list[dict]) -> list[dict]:
    """One row per problem: discovery, a failed or image-only document, a damaged page."""
    found: list[tuple[str, str, str, str, str]] = [
        (p.uri, p.doc_id, p.stage, p.error, "") for p in problems
    ]
    for row in sorted(doc_rows, key=lambda r: r["uri"]):
        key = (row["uri"], row["doc_id"])
        if row["status"] == FAILED:
            found.append((*key, row["failure_stage"], row["error"], row["traceback"]))
        elif row["status"] == NEEDS_OCR:
            found.append((*key, "ocr", row["error"], ""))
        if row["warning"]:
            found.append((*key, "open", row["warning"], ""))
        found += [(*key, "parse", error, "") for error in from_json(row["page_errors"])]
        found += [(*key, "sections", e, "") for e in from_json(row.get("section_errors"), [])]
        if provenance.fell_back(row):
            found.append((*key, "sections", f"section filter: {row['section_filter']}", ""))
        found += [(*key, "enrich", e, "") for e in from_json(row.get("enrich_errors"), [])]
    at = _now()
    names = ("uri", "doc_id", "stage", "error", "traceback_tail")
    return [dict(zip(names, values, strict=True), failed_at=at) for values in found]
