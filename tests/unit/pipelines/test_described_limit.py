"""The model describes at most ``index.max_described_per_document`` figures and tables of a
document, and a document with more says so in its ``model_errors`` (a failures row, stage
enrich), on a real paper: MMLongBench's 2303.05039v2.pdf (Tables 1–6, Figures 1–2)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from bookindex.operators.config import IndexConfig
from bookindex.operators.kinds import IMAGE, TABLE
from bookindex.pipelines.model_requests import (
    MAX_DESCRIBED_PER_DOCUMENT,
    apply_descriptions,
    description_requests,
)
from tests.conftest import PAPER


@pytest.fixture(scope="module")
def paper_row(shared_data) -> dict:
    from bookindex.operators.parsing.probe import identify
    from bookindex.pipelines.structure_stage import index_documents, probe_document

    path = str(shared_data / "mmlongbench" / "documents" / PAPER)
    probed = [
        probe_document({"doc_id": f.doc_id, "uri": f.uri, "size": f.size}) for f in identify([path])
    ]
    whole = pa.Table.from_pylist([dict(p, start=0, stop=p["n_pages"]) for p in probed])
    return index_documents(whole, use_outline=True).to_pylist()[0]


def _figures_and_tables(row: dict) -> list[str]:
    return [n["node_id"] for n in json.loads(row["nodes"]) if n["kind"] in (IMAGE, TABLE)]


def test_the_default_limit_is_the_configured_one():
    assert IndexConfig().max_described_per_document == MAX_DESCRIBED_PER_DOCUMENT == 200


def test_only_the_first_n_are_asked_for_and_the_rest_leave_an_error(paper_row):
    nodes = _figures_and_tables(paper_row)
    assert len(nodes) >= 6  # the paper's tables and figures
    every = description_requests(paper_row, limit=len(nodes))
    assert [r["node_id"] for r in every] == nodes
    three = description_requests(paper_row, limit=3)
    assert [r["node_id"] for r in three] == nodes[:3]

    batch = pa.Table.from_pylist([dict(paper_row, model_errors="[]")])
    kept = apply_descriptions(batch, limit=3).to_pylist()[0]
    errors = json.loads(kept["model_errors"])
    left = len(nodes) - 3
    assert errors == [
        f"describe: {left} of {len(nodes)} figures and tables not described "
        "(index.max_described_per_document = 3); they keep their captions"
    ]
    untouched = apply_descriptions(batch, limit=len(nodes)).to_pylist()[0]
    assert json.loads(untouched["model_errors"]) == []  # nothing left out: no row
