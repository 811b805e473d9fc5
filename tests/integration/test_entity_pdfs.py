"""The entity graph on real PDFs (two NTSB accident reports from ../shared/data/docugami):
entities named in both reports resolve to one canonical entity, with mentions in each."""

from __future__ import annotations

import shutil

import polars as pl
import pytest

from bookindex.pipelines.index_pipeline import run_index
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import ENTITIES, ER_DECISIONS, MENTIONS, NODES, RELATIONS

REPORTS = ("20080102X00002.pdf", "20080108X00029.pdf")


@pytest.fixture(scope="module")
def reports_index(ray_session, shared_data, tmp_path_factory):
    folder = shared_data / "docugami" / "ntsb-aviation-incident-accident-reports" / "data" / "v1"
    root = tmp_path_factory.mktemp("ntsb")
    for name in REPORTS:
        shutil.copy(folder / "docs" / name, root / name)
    out = root / "index"
    summary = run_index([str(root)], out)
    tables = {
        t: pl.from_arrow(lance_store.read_table(out, t))
        for t in (NODES, ENTITIES, MENTIONS, RELATIONS, ER_DECISIONS)
    }
    return summary, tables


def test_an_entity_of_both_reports_is_one_canonical_entity(reports_index):
    summary, t = reports_index
    assert summary.ok == 2
    ntsb = t[ENTITIES].filter(pl.col("name") == "NTSB")
    assert ntsb.height == 1 and ntsb["n_documents"][0] == 2
    linked = t[MENTIONS].filter(pl.col("entity_id") == ntsb["entity_id"][0])
    assert linked["doc_id"].n_unique() == 2
    assert set(linked["node_id"].to_list()) <= set(t[NODES]["node_id"].to_list())
    corpus = t[ER_DECISIONS].filter((pl.col("scope") == "corpus") & (pl.col("new_name") == "NTSB"))
    assert sorted(corpus["action"].to_list()) == ["exact", "new"]


def test_places_people_and_relations_of_a_report(reports_index):
    _, t = reports_index
    places = set(t[ENTITIES].filter(pl.col("type") == "PLACE")["name"].to_list())
    assert {"France", "Mexico"} <= places
    assert t[ENTITIES].filter(pl.col("type") == "PERSON").height >= 2
    relations = t[RELATIONS]
    assert relations.height > 0 and (relations["weight"] >= 1).all()
    assert all(v is not None for v in t[NODES]["vector"].to_list())
