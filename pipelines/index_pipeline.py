"""The indexing job as a Ray Data pipeline: PDFs → section trees → Lance tables.

Driver (no Ray needed): discover inputs, hash them (``doc_id`` = sha256 of the bytes), compare
with the index, and stop at once when nothing is new — so a re-run on the same input takes
seconds. Otherwise Ray Data runs:

    documents ─map(probe)─▶ probed rows (pages, status, metadata) ─▶ driver: plan_tasks
    whole books ─map_batches(index_documents: parse + assemble)─────────────────┐
    page ranges of long books ─map(parse)─groupby(doc_id).map_groups(assemble)─┴▶ one row
      per document (tree as JSON) ─materialize─▶ nodes (Ray write_lance), documents +
      failures (driver write)

A book is split into page ranges only when it is long against the run (``plan_tasks``): a
corpus of many books runs one task per book, with no grouping barrier between parse and
assemble, while one long book still spreads over every worker.

One bad file becomes a failed document row and a failures row; it never fails the job.
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from operators.graph.layout_graph import graph_columns
from operators.models import ModelConfig
from operators.parsing.parse import Block, parse_pages
from operators.parsing.probe import InputFile, Problem, discover, identify, page_ranges, probe_pdf
from operators.structure.assemble import assemble_document
from operators.structure.passages import (
    Passage,
    is_passage_file,
    passage_nodes,
    read_passages,
)
from pipelines.enrich import enrich_batch
from pipelines.run_stats import DriverPhases, build_stats, peak_memory_mb, summary_line, write_stats
from pipelines.store import lance_store, recovery
from pipelines.store.layout_graph_store import append_graph, backfill_layout_graph
from pipelines.store.schemas import (
    DOCUMENTS,
    EMBED_DIM,
    ENTITIES,
    FAILURES,
    NODES,
    nodes_schema,
)

_TRACEBACK_CHARS = 2000


@dataclass
class IndexOptions:
    use_outline: bool = True
    pages_per_task: int = 64
    force: bool = False
    parse_workers: int | None = None  # None: as many as Ray has CPUs
    enrich: bool = True  # node vectors, entities, relations, entity resolution
    model_config: ModelConfig = field(default_factory=ModelConfig)
    resolver_options: dict = field(default_factory=dict)  # g, floor, top_k, c0
    enrich_workers: int | None = None  # None: as many as Ray has CPUs
    # GPUs per task of the stages that run a model in-process (the section filter's model in
    # assemble, enrich): None = 1 with the in-process vLLM backend, else 0 (CPU only).
    model_gpus: float | None = None

    def stage_gpus(self) -> float:
        if self.model_gpus is not None:
            return self.model_gpus
        return 1.0 if self.model_config.backend == "vllm" else 0.0


@dataclass
class Summary:
    ok: int = 0
    failed: int = 0
    skipped: int = 0
    needs_ocr: int = 0
    pages: int = 0
    nodes: int = 0
    entities: int = 0
    seconds: float = 0.0
    failures: list[dict] = field(default_factory=list)
    stats: dict = field(default_factory=dict)

    def counts(self) -> dict:
        names = ("ok", "failed", "skipped", "needs_ocr", "pages", "nodes", "entities")
        return dict({n: getattr(self, n) for n in names}, seconds=round(self.seconds, 3))

    def line(self) -> str:
        """The summary line, as read from the run's stats.json content."""
        return summary_line(self.stats or {"summary": self.counts()})


def _now() -> datetime:
    return datetime.now(UTC)


def _tail(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))[-_TRACEBACK_CHARS:]


# ---- Ray Data stages (plain functions over rows and batches) ---------------------------------


def probe_document(row: dict) -> dict:
    """One document's facts from ``probe_pdf``: status, error, warning, pages, metadata (JSON)
    and the probe's time and memory. A probe that raises fails this document alone."""
    started = time.perf_counter()
    base = {"doc_id": row["doc_id"], "uri": row["uri"], "size": row["size"], "meta": "{}"}
    base.update(start=0, stop=0, n_pages=0, status="failed", error="", warning="")
    base.update(failure_stage="", traceback="")
    try:
        probe = probe_pdf(row["uri"])
        base.update(status=probe.status, error=probe.error, warning=probe.warning)
        base["n_pages"] = probe.n_pages
        base["failure_stage"] = "open" if probe.status == "failed" else ""
        base["meta"] = json.dumps(probe.meta)
    except Exception as exc:  # anything unexpected is this document's failure alone
        base.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        base.update(failure_stage="open", traceback=_tail(exc))
    base["probe_s"] = time.perf_counter() - started
    base["probe_mb"] = peak_memory_mb()
    return base


def _parse(row: dict) -> tuple[list[Block], list[str]]:
    """Blocks and page errors of pages [start, stop) of a probed document (none if it failed)."""
    if row["status"] == "failed":
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
    out["blocks"] = json.dumps([b.as_row() for b in blocks])
    out["page_errors"] = json.dumps(errors)
    out["parse_s"] = time.perf_counter() - started
    out["parse_mb"] = peak_memory_mb()
    return out


def assemble_group(
    batch: pa.Table, use_outline: bool, model_config: dict | None = None
) -> pa.Table:
    """All page ranges of one document → one row: document facts and its nodes as JSON."""
    rows = sorted(batch.to_pylist(), key=lambda r: r["start"])
    blocks = [Block(**b) for r in rows for b in json.loads(r["blocks"])]
    errors = [e for r in rows for e in json.loads(r["page_errors"])]
    parse_s, parse_mb = sum(r["parse_s"] for r in rows), max(r["parse_mb"] for r in rows)
    doc = _assemble(rows[0], blocks, errors, (parse_s, parse_mb), use_outline, model_config)
    doc["n_ranges"] = len(rows)
    return pa.Table.from_pylist([doc])


def index_documents(
    batch: pa.Table, use_outline: bool, model_config: dict | None = None
) -> pa.Table:
    """Probed documents, each parsed whole and assembled in this task (no page ranges, no
    grouping): the path of every document that ``plan_tasks`` does not split. The output
    rows are those of ``assemble_group``."""
    docs = []
    for row in batch.to_pylist():
        started = time.perf_counter()
        blocks, errors = _parse(row)
        parsed = (time.perf_counter() - started, peak_memory_mb())
        doc = _assemble(row, blocks, errors, parsed, use_outline, model_config)
        doc["n_ranges"] = 1
        docs.append(doc)
    return pa.Table.from_pylist(docs)


def plan_tasks(probed: list[dict], pages_per_task: int, workers: int) -> tuple[list, list]:
    """Probed documents → (whole documents, page ranges of long documents).

    A document is split into ranges of ``pages_per_task`` pages only when it is long against
    the run: more than 2 ranges and more than a 1/(2 · workers) share of all pages, so that
    the tasks of a long book spread over the workers while a corpus of many books runs one
    task per book, with no grouping barrier and no blocks serialised between stages. Each
    list is largest first (the long tasks start first; short ones fill in around them)."""
    total = sum(r["n_pages"] for r in probed if r["status"] != "failed")
    limit = max(2 * pages_per_task, total / (2 * max(1, workers)))
    whole, ranges = [], []
    for row in sorted(probed, key=lambda r: (-r["n_pages"], r["doc_id"])):
        if row["status"] == "failed" or row["n_pages"] <= limit:
            whole.append(dict(row, start=0, stop=row["n_pages"]))
        else:
            spans = page_ranges(row["n_pages"], pages_per_task)
            ranges += [dict(row, start=a, stop=b) for a, b in spans]
    return whole, ranges


def _assemble(
    first: dict,
    blocks: list[Block],
    page_errors: list[str],
    parsed: tuple[float, float],
    use_outline: bool,
    model_config: dict | None,
) -> dict:
    """A probed document's blocks → its row: facts, nodes and layout graph as JSON, and the
    time and memory of each stage. ``parsed``: (parse seconds, parse peak memory MB)."""
    started = time.perf_counter()
    doc = {
        "doc_id": first["doc_id"],
        "uri": first["uri"],
        "size": first["size"],
        "n_pages": first["n_pages"],
        "status": first["status"],
        "error": first["error"],
        "warning": first["warning"],
        "failure_stage": first["failure_stage"],
        "traceback": first["traceback"],
        "title": "",
        "n_nodes": 0,
        "nodes": "[]",
        "toc": "[]",
        "page_labels": "[]",
        "outline_used": False,
        "n_sections": 0,
        "page_errors": json.dumps(page_errors),
        "edges": "[]",  # the layout graph (operators.graph.layout_graph), JSON edge rows
        "communities": "{}",  # JSON node_id → community
    }
    timings = {"probe": first["probe_s"], "parse": parsed[0]}
    node_dicts: list[dict] = []
    if doc["status"] != "failed":
        try:
            meta = json.loads(first["meta"])
            config = ModelConfig(**model_config) if model_config else None
            if config is not None and not config.generative:
                config = None  # the layout decision stands without a generative model
            nodes, toc, facts = assemble_document(
                doc["doc_id"], meta, blocks, use_outline, model_config=config
            )
            # vars, not asdict: a Node holds plain values and lists of them, and asdict's
            # recursive deep copy was a quarter of this stage's time
            node_dicts = [dict(vars(n)) for n in nodes]
            doc.update(
                title=nodes[0].title,
                nodes=json.dumps(node_dicts),
                toc=json.dumps(toc),
                page_labels=json.dumps(meta["page_labels"]),
                outline_used=facts["outline_used"],
                n_sections=facts["n_sections"],
                n_nodes=len(nodes),
            )
        except Exception as exc:
            doc.update(status="failed", error=f"{type(exc).__name__}: {exc}")
            doc.update(failure_stage="assemble", traceback=_tail(exc))
    timings["assemble"] = time.perf_counter() - started
    memory = {"probe": first["probe_mb"], "parse": parsed[1]}
    memory["assemble"] = peak_memory_mb()
    if doc["status"] != "failed":
        started = time.perf_counter()
        try:
            doc.update(graph_columns(node_dicts, doc["doc_id"]))
        except Exception as exc:  # the document is failed whole: no nodes without their graph
            doc.update(status="failed", error=f"{type(exc).__name__}: {exc}", nodes="[]")
            doc.update(failure_stage="layout_graph", traceback=_tail(exc), n_nodes=0)
        timings["layout_graph"] = time.perf_counter() - started
        memory["layout_graph"] = peak_memory_mb()
    doc["stage_timings"] = json.dumps({k: round(v, 4) for k, v in timings.items()})
    doc["stage_memory"] = json.dumps(memory)
    doc["source"] = "pdf"
    return doc


def explode_nodes(batch: pa.Table) -> pa.Table:
    """Document rows → node rows in the ``nodes`` schema."""
    import numpy as np

    rows: list[dict] = []
    has_vectors = "node_vectors" in batch.column_names
    for i, (doc_id, nodes_json) in enumerate(
        zip(batch.column("doc_id").to_pylist(), batch.column("nodes").to_pylist(), strict=True)
    ):
        nodes = json.loads(nodes_json)
        vectors = None
        if has_vectors and nodes:
            raw = batch.column("node_vectors")[i].as_py()
            vectors = np.frombuffer(raw, np.float32).reshape(len(nodes), -1)
        for j, node in enumerate(nodes):
            node["doc_id"] = doc_id
            node["summary"] = node.get("summary")
            node["vector"] = vectors[j].tolist() if vectors is not None else None
            rows.append(node)
    if not rows:
        return nodes_schema.empty_table()
    return pa.Table.from_pylist(rows, schema=nodes_schema)


# ---- the job ----------------------------------------------------------------------------------


def run_index(
    inputs: list[str], out_dir: str | Path, options: IndexOptions | None = None
) -> Summary:
    """Index ``inputs`` (directories, files, globs) into the Lance tables under ``out_dir``."""
    options = options or IndexOptions()
    started = time.perf_counter()
    summary = Summary()
    driver = DriverPhases()
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    with driver.phase("recover") as phase:  # rows an interrupted run left uncommitted
        recovered = recovery.recover(out_dir)
        phase.update(orphans=recovered.orphans, restored=recovered.restored)
    with driver.phase("identify") as phase:
        uris, problems, files, passages = _identify(inputs)
        phase.update(rows_in=len(uris), rows_out=len(files))
    existing = lance_store.read_table(out_dir, DOCUMENTS, ["doc_id", "uri"]).to_pylist()
    known_ids = {r["doc_id"] for r in existing}
    by_content: dict[str, InputFile] = {}
    for f in files:  # identical bytes under two names are one document (the first name)
        by_content.setdefault(f.doc_id, f)
    todo = [f for f in by_content.values() if options.force or f.doc_id not in known_ids]
    summary.skipped = len(files) - len(todo)
    # A file whose bytes changed drops the rows of its previous version (unless that version
    # is still the content of another input); --force also replaces the unchanged ones.
    current = {f.uri: f.doc_id for f in files}
    live_ids = set(current.values())
    stale = {r["doc_id"] for r in existing if r["uri"] in current and r["doc_id"] not in live_ids}
    forced = {f.doc_id for f in todo} & known_ids if options.force else set()
    replaced = sorted(stale | forced)

    doc_rows: list[dict] = []
    if todo:
        doc_rows, summary.entities = _run_ray(todo, passages, out_dir, options, replaced, driver)
    elif replaced:
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
        if row["status"] != "failed":
            summary.pages += row["n_pages"]
        summary.nodes += row["n_nodes"]
    summary.failures = failures
    with driver.phase("layout_graph_backfill") as phase:  # indexes built before the graph
        phase["documents"] = backfill_layout_graph(out_dir)
    summary.seconds = time.perf_counter() - started
    summary.stats = build_stats(summary.counts(), doc_rows, driver)
    write_stats(out_dir, summary.stats)
    return summary


def _identify(inputs: list[str]) -> tuple[list[str], list[Problem], list[InputFile], dict]:
    """Inputs → files with their doc_id (PDFs hashed; JSONL corpora read passage by passage)."""
    uris, problems = discover(inputs)
    files = identify([u for u in uris if not is_passage_file(u)])
    problems += [Problem(f.uri, "read", f.error) for f in files if f.error]
    files = [f for f in files if not f.error]
    passages: dict[str, Passage] = {}
    for corpus in (u for u in uris if is_passage_file(u)):
        try:
            found = read_passages(corpus)
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem(corpus, "read", f"{type(exc).__name__}: {exc}"))
            continue
        problems += [Problem(p.uri, "read", p.error) for p in found if p.error]
        for p in found:
            if not p.error:
                passages[p.doc_id] = p
                files.append(InputFile(p.uri, p.doc_id, len(p.text.encode("utf-8"))))
    return uris, problems, files, passages


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


def _run_ray(
    todo: list,
    passages: dict[str, Passage],
    out_dir: str | Path,
    options: IndexOptions,
    replaced: list[str],
    driver: DriverPhases,
) -> tuple[list[dict], int]:
    import ray

    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    from ray.data.context import DataContext, ShuffleStrategy

    # The grouping moves little data (block lists of a few documents): a task-based sort
    # shuffle starts in milliseconds, where the default actor-based one takes ~15 s here.
    DataContext.get_current().shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    workers = options.parse_workers or max(1, int(ray.available_resources().get("CPU", 1)))
    # Model stages land on GPU workers only when a GPU model is configured (cluster.yaml).
    gpu_args = {"num_gpus": options.stage_gpus()} if options.stage_gpus() > 0 else {}
    assemble_gpu_args = gpu_args if options.model_config.generative else {}
    pdfs = [
        {"doc_id": f.doc_id, "uri": f.uri, "size": f.size} for f in todo if f.doc_id not in passages
    ]
    texts = [passage_document_row(passages[f.doc_id]) for f in todo if f.doc_id in passages]
    parts = []
    if pdfs:
        # Probe first (page counts, status, metadata: small rows back to the driver), then
        # plan: one task per book, page ranges only for books long against the run.
        with driver.phase("plan", rows_in=len(pdfs)) as phase:
            # a probe takes milliseconds: a few blocks, not a task per file
            blocks = min(len(pdfs), 2 * workers)
            probed = (
                ray.data.from_items(pdfs, override_num_blocks=blocks).map(probe_document).take_all()
            )
            whole, ranges = plan_tasks(probed, options.pages_per_task, workers)
            phase.update(rows_out=len(probed), whole=len(whole), ranges=len(ranges))
        assemble_args = {
            "use_outline": options.use_outline,
            "model_config": options.model_config.to_dict(),
        }
        if whole:
            books = ray.data.from_items(whole, override_num_blocks=len(whole)).map_batches(
                index_documents,
                batch_size=None,  # a block is one document
                batch_format="pyarrow",
                fn_kwargs=assemble_args,
                **assemble_gpu_args,
            )
            parts.append((books, 1))  # books: one document per enrich batch
        if ranges:
            split = (
                ray.data.from_items(ranges, override_num_blocks=len(ranges))
                .map(parse_range)
                .groupby("doc_id", num_partitions=workers)
                .map_groups(
                    assemble_group,
                    batch_format="pyarrow",
                    fn_kwargs=assemble_args,
                    **assemble_gpu_args,
                )
            )
            parts.append((split, 1))
    if texts:
        blocks = min(len(texts), workers * 4)
        parts.append((ray.data.from_items(texts, override_num_blocks=blocks), 256))
    enriched = []
    for dataset, docs_per_batch in parts:
        if options.enrich:
            dataset = dataset.map_batches(
                enrich_batch,
                batch_size=docs_per_batch,
                batch_format="pyarrow",
                fn_kwargs={"model_config": options.model_config.to_dict()},
                concurrency=options.enrich_workers or workers,
                **gpu_args,
            )
        enriched.append(dataset)
    per_doc = enriched[0] if len(enriched) == 1 else enriched[0].union(*enriched[1:])
    with driver.phase("ray_pipeline", rows_in=len(todo)) as phase:
        per_doc = per_doc.materialize()
        phase["rows_out"] = per_doc.count()
    _delete(out_dir, replaced)
    heavy = ["nodes", "edges", "communities"] + (["node_vectors"] if options.enrich else [])
    doc_rows = per_doc.drop_columns(heavy).take_all()
    n_nodes = sum(row["n_nodes"] for row in doc_rows)
    with driver.phase("write_nodes", rows_in=len(doc_rows), rows_out=n_nodes):
        if n_nodes:
            nodes = per_doc.map_batches(explode_nodes, batch_format="pyarrow")
            mode = "append" if lance_store.exists(out_dir, NODES) else "create"
            path = lance_store.table_path(out_dir, NODES)
            nodes.write_lance(path, mode=mode, schema=nodes_schema)
    with driver.phase("write_layout_graph", rows_in=len(doc_rows)) as phase:
        graph = per_doc.select_columns(["doc_id", "edges", "communities"])
        batches = graph.iter_batches(batch_format="pyarrow", batch_size=64)
        phase["edges"], phase["communities"] = append_graph(out_dir, batches)
    n_entities = _count(out_dir, ENTITIES)
    if options.enrich:
        from pipelines.entity_graph import resolve_corpus
        from pipelines.store.entity_tables import build_search_indexes, write_entity_tables

        n_local = sum(len(json.loads(r["entities"])) for r in doc_rows if "entities" in r)
        with driver.phase("resolve", rows_in=n_local) as phase:
            results, canonical, vectors = resolve_corpus(
                out_dir,
                doc_rows,
                EMBED_DIM,
                resolver_options=options.resolver_options,
                model_config=options.model_config.to_dict(),
            )
            phase["rows_out"] = len(canonical)
        with driver.phase("write_entities", rows_in=len(canonical)) as phase:
            written = write_entity_tables(out_dir, doc_rows, results, canonical, vectors)
            n_entities = phase["rows_out"] = written["entities"]
        with driver.phase("search_indexes") as phase:
            phase["built"] = len(build_search_indexes(out_dir))
    # Every other table is written above; the documents rows go last (recovery.py).
    _commit(out_dir, doc_rows)
    return doc_rows, n_entities


def _commit(out_dir: str | Path, doc_rows: list[dict]) -> None:
    """The documents' failure rows, then their ``documents`` rows: the commit marker."""
    lance_store.append(out_dir, FAILURES, pa.Table.from_pylist(_failure_rows([], doc_rows)))
    lance_store.append(out_dir, DOCUMENTS, pa.Table.from_pylist(_document_rows(doc_rows)))
    recovery.mark_committed(out_dir)


def _document_rows(doc_rows: list[dict]) -> list[dict]:
    indexed_at = _now()
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
            "page_labels": json.loads(row["page_labels"]),
            "toc": row["toc"],
        }
        for row in sorted(doc_rows, key=lambda r: r["uri"])
    ]


def _failure_rows(problems: list[Problem], doc_rows: list[dict]) -> list[dict]:
    """One row per problem: discovery, a failed or image-only document, a damaged page."""
    found: list[tuple[str, str, str, str, str]] = [
        (p.uri, p.doc_id, p.stage, p.error, "") for p in problems
    ]
    for row in sorted(doc_rows, key=lambda r: r["uri"]):
        key = (row["uri"], row["doc_id"])
        if row["status"] == "failed":
            found.append((*key, row["failure_stage"], row["error"], row["traceback"]))
        elif row["status"] == "needs_ocr":
            found.append((*key, "ocr", row["error"], ""))
        if row["warning"]:
            found.append((*key, "open", row["warning"], ""))
        found += [(*key, "parse", error, "") for error in json.loads(row["page_errors"])]
        found += [(*key, "enrich", e, "") for e in json.loads(row.get("enrich_errors") or "[]")]
    at = _now()
    names = ("uri", "doc_id", "stage", "error", "traceback_tail")
    return [dict(zip(names, values, strict=True), failed_at=at) for values in found]


def passage_document_row(passage: Passage) -> dict:
    """The per-document row the index pipeline carries (same keys as a parsed PDF's)."""
    nodes, toc = passage_nodes(passage)
    node_dicts = [asdict(n) for n in nodes]
    return {
        "doc_id": passage.doc_id,
        "uri": passage.uri,
        "size": len(passage.text.encode("utf-8")),
        "n_pages": 0,
        "status": "ok",
        "error": "",
        "warning": "",
        "failure_stage": "",
        "traceback": "",
        "title": passage.title,
        "n_nodes": len(nodes),
        "nodes": json.dumps(node_dicts),
        "toc": json.dumps(toc),
        "page_labels": "[]",
        "outline_used": False,
        "n_sections": 0,
        "page_errors": "[]",
        "stage_timings": "{}",
        "stage_memory": "{}",
        "n_ranges": 0,
        "source": "passage",
        **graph_columns(node_dicts, passage.doc_id),  # edges: the one part_of
    }
