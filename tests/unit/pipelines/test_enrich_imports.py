"""Every enrich worker pays its imports at start-up, once in the actor and once in its model
process, so each imports only what it runs: the actor (``pipelines.enrich``, unpickling
``EnrichStage``) the model host and no model, graph or configuration code; the model process
(``python -m pipelines.model_host`` building ``pipelines.enrich_worker:EnrichWorker``) neither
PyMuPDF and the structure stage nor the query side (scipy, polars)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[3]


def _imported(modules: str, watched: tuple[str, ...]) -> list[str]:
    """Which of ``watched`` a fresh interpreter has after importing ``modules``."""
    probe = f"import sys, {modules}; print(sorted(m for m in {watched!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return eval(done.stdout)  # noqa: S307 (a list of module names printed above)


def test_the_enrich_worker_imports_no_pdf_stack_and_no_query_side() -> None:
    watched = (
        "pymupdf",
        "fitz",
        "bookindex.pipelines.structure_stage",
        "bookindex.pipelines.model_requests",
    )
    watched += (
        "bookindex.operators.parsing.parse",
        "bookindex.operators.query.documents",
        "scipy",
        "polars",
    )
    assert (
        _imported("bookindex.pipelines.enrich_worker, bookindex.pipelines.model_host", watched)
        == []
    )
    # the lazily imported paths still work where they are called
    from bookindex.operators.structure.passages import read_passages
    from bookindex.pipelines.er_selection import _requests  # noqa: F401
    from bookindex.pipelines.rows import passage_document_row

    corpus = SHARED_DATA / "multihop" / "musique" / "corpus.jsonl"
    row = passage_document_row(read_passages(str(corpus))[0])
    assert row["n_nodes"] == 2 and row["source"] == "passage"


def test_the_enrich_actor_imports_no_model_code() -> None:
    watched = (
        "bookindex.pipelines.enrich_worker",
        "bookindex.operators.models",
        "bookindex.operators.config",
        "pydantic",
    )
    watched += ("bookindex.operators.graph.entity_sets", "bookindex.pipelines.model_stage", "scipy")
    assert _imported("bookindex.pipelines.enrich", watched) == []
    # the worker the actor's child builds is the enrich worker
    from bookindex.pipelines.enrich import WORKER
    from bookindex.pipelines.enrich_worker import EnrichWorker
    from bookindex.pipelines.model_host import _load

    assert _load(WORKER) is EnrichWorker
