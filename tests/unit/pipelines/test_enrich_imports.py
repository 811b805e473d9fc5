"""The enrich stage's model process (``python -m pipelines.model_host`` building
``pipelines.enrich:EnrichWorker``) starts without PyMuPDF and the structure stage: every
worker pays its imports at start-up, once in the actor and once in its child."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_enrich_worker_imports_no_pdf_stack() -> None:
    probe = (
        "import sys, pipelines.enrich, pipelines.model_host; "
        "print(sorted(m for m in ('pymupdf', 'fitz', 'pipelines.structure_stage', "
        "'pipelines.model_requests', 'operators.parsing.parse') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
    # the lazily imported paths still work where they are called
    from operators.structure.passages import read_passages
    from pipelines.er_selection import _requests  # noqa: F401
    from pipelines.rows import passage_document_row

    corpus = ROOT.parent / "shared" / "data" / "multihop" / "musique" / "corpus.jsonl"
    row = passage_document_row(read_passages(str(corpus))[0])
    assert row["n_nodes"] == 2 and row["source"] == "passage"
