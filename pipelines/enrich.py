"""The enrich stage: node vectors, entities and relations, and resolution within a document.

``EnrichStage`` is a Ray Data UDF class over document rows (the output of the structure stage,
pipelines/rows.py): its ``__init__`` starts a child process (pipelines/model_host.py) in which
``EnrichWorker`` (pipelines/enrich_worker.py) loads the configured models once per worker (and
checks that they make vectors of the index's width); each call enriches one batch of documents
there, within a time budget per document, and a document whose enrich crashes or stalls
becomes a ``failed`` row alone. ``enrich_args`` builds its ``map_batches`` arguments from the
configuration: pool size (``index.enrich_workers``), GPUs per worker (``index.model_gpus``),
documents per batch. It adds the ``ENRICH_FIELDS`` of pipelines/rows.py.

This module is what each actor imports (to unpickle ``EnrichStage``), so it holds no model,
graph or configuration code: the actor imports pyarrow and the model host only, and starts its
child at once; the child imports pipelines/enrich_worker.py (start-up is paid per worker).
Where the job asks it to (``write``), the actor then imports the fragment writer
(pipelines/store/document_writes.py), while its child loads the models, and writes each call's
rows itself: the job then has no write tasks after enrich, whose workers would wait for the
actors' CPUs and then start afresh (2-3 s of imports each), and enriched rows never wait in the
object store for them.
"""

from __future__ import annotations

import functools
import importlib
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from bookindex.operators.kinds import FAILED
from bookindex.operators.parsing.isolation import Isolated
from bookindex.pipelines.model_host import ModelHost
from bookindex.pipelines.rows import ray_node_id

if TYPE_CHECKING:
    from bookindex.operators.config import BookindexConfig

WORKER = "bookindex.pipelines.enrich_worker:EnrichWorker"  # what the child builds (pipelines/model_host.py)
_WRITES = "bookindex.pipelines.store.document_writes"  # write_document_rows, where asked


class EnrichStage:
    """Document rows → the same rows with the enrich columns: the Ray Data UDF class. Its
    models live in a child process (``pipelines.model_host``, an ``EnrichWorker`` of
    pipelines/enrich_worker.py there), so a document whose enrich crashes or stalls
    (``timeout_s`` a document) fails alone: its row becomes ``failed`` (stage ``enrich``, ``crashed: signal 11 (SIGSEGV)``, ``timed out after
    N s``), a crashed one after ``retries`` more tries, and the other documents are enriched.
    A document's budget: ``timeout_s`` plus ``per_node_s`` for each of its nodes."""

    def __init__(
        self,
        timeout_s: float = 300.0,
        retries: int = 2,
        per_node_s: float = 0.5,
        write: dict | None = None,
        **worker: Any,
    ) -> None:
        """``worker``: ``EnrichWorker``'s arguments (models, resolver, width, answers).
        ``write``: ``write_document_rows``'s ``out_dir`` and ``width``: each call's rows are
        written as Lance fragments here, after the call (pipelines/store/document_writes.py),
        and go on without their heavy columns; None: they go on whole."""
        worker["node"] = ray_node_id()  # the actor's node (the child has no Ray)
        self.write_rows = None
        with ThreadPoolExecutor(1) as pool:  # the writer imported while the child loads models
            writes = pool.submit(importlib.import_module, _WRITES) if write is not None else None
            self.host = ModelHost(WORKER, worker, timeout_s, retries, per_node_s)
        if writes is not None:
            self.write_rows = functools.partial(writes.result().write_document_rows, **write)

    def __call__(self, batch: pa.Table) -> pa.Table:
        enriched = self.host.call_isolated(batch, enrich_failed)
        return enriched if self.write_rows is None else self.write_rows(enriched)


def enrich_failed(row: dict, exc: Isolated) -> dict:
    """A document whose enrich failed: ``failed`` in stage ``enrich`` with the reason, without
    nodes (the worker then gives it the enrich columns of an empty document)."""
    row = dict(row, status=FAILED, error=exc.reason, failure_stage="enrich", traceback=exc.trace)
    row.update(nodes="[]", n_nodes=0, n_sections=0, edges="[]", communities="{}")
    return row


def enrich_args(
    config: BookindexConfig,
    workers: int,
    docs_per_batch: int,
    width: int | None,
    answers: bool = False,
) -> dict[str, Any]:
    """``map_batches`` arguments of ``EnrichStage``: ``docs_per_batch`` documents a call,
    ``index.enrich_workers`` workers (None: ``workers``), ``index.model_gpus`` each, a
    document's budget (``index.model_timeout_s`` + ``index.model_s_per_node`` a node) and
    ``index.task_retries`` retries of a crash;
    ``answers``: the rows carry the model's answers (pipelines/model_requests.py).
    A worker that reserves a GPU (``--models vllm``, ``index.model_gpus``, or
    ``models.embed_device`` cuda, which reserves one a worker by default) embeds on it:
    its offline embedder gets ``embed_device`` cuda (otherwise the GPU would sit reserved and
    idle while the CPU embeds)."""
    from bookindex.pipelines.model_stage import (
        model_stage_args,  # the driver's (models, configuration)
    )

    args = model_stage_args(
        config,
        workers,
        config.index.enrich_workers,
        resolver=config.resolver.model_dump(),
        width=width,
        answers=answers,
        timeout_s=config.index.model_timeout_s,
        retries=config.index.task_retries,
        per_node_s=config.index.model_s_per_node,
    )
    if args.get("num_gpus", 0) > 0:
        constructor = args["fn_constructor_kwargs"]
        constructor["models"] = {**constructor["models"], "embed_device": "cuda"}
    return {"batch_size": docs_per_batch, "batch_format": "pyarrow", **args}
