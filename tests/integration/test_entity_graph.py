"""The entity graph on a real passage corpus (MuSiQue passages through the same index job):
node vectors, entities, mentions, relations, resolution decisions, incremental re-runs."""

from __future__ import annotations

import json
from pathlib import Path

import lancedb
import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from bookindex.pipelines.index_pipeline import run_index
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import (
    DOCUMENTS,
    ENTITIES,
    ER_DECISIONS,
    FAILURES,
    MENTIONS,
    NODES,
    RELATIONS,
)

N_FIRST, N_SECOND = 24, 36


def _passages(shared_data: Path) -> list[dict]:
    path = shared_data / "multihop" / "musique" / "corpus.jsonl"
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(N_SECOND), handle, strict=False)]


def _write(path: Path, passages: list[dict], extra_lines: tuple[str, ...] = ()) -> Path:
    lines = [json.dumps(p) for p in passages] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _table(out: Path, name: str) -> pl.DataFrame:
    return pl.from_arrow(lance_store.read_table(out, name))


@pytest.fixture(scope="module")
def first_run(ray_session, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("passages")
    passages = _passages(shared_data)
    corpus = _write(root / "corpus.jsonl", passages[:N_FIRST], ('{"id": "broken", "title": 3}',))
    out = root / "index"
    summary = run_index([str(corpus)], out)
    snapshot = {t: _table(out, t) for t in (NODES, ENTITIES, MENTIONS, RELATIONS, ER_DECISIONS)}
    return root, corpus, out, summary, snapshot, passages


def test_passages_are_documents_of_one_section_with_vectors(first_run):
    _, _, out, summary, snap, passages = first_run
    assert summary.ok == N_FIRST
    docs = _table(out, DOCUMENTS)
    assert sorted(docs["title"].to_list()) == sorted(p["title"] for p in passages[:N_FIRST])
    nodes = snap[NODES]
    assert nodes.height == 2 * N_FIRST  # a root and one paragraph each
    leaves = nodes.filter(pl.col("kind") == "text")
    assert set(leaves["sec_id"].to_list()) == {0} and set(leaves["para_idx"].to_list()) == {1}
    vectors = np.asarray(nodes["vector"].to_list(), np.float32)
    assert vectors.shape == (2 * N_FIRST, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    # the broken line is recorded, nothing else is lost
    failures = _table(out, FAILURES)
    assert failures.filter(pl.col("uri").str.ends_with("#line25")).height == 1
    assert lance_store.lance.dataset(lance_store.table_path(out, NODES)).schema.field(
        "vector"
    ).type == pa.list_(pa.float32(), 384)


def test_entities_mentions_and_relations_are_consistent(first_run):
    _, _, out, _, snap, passages = first_run
    entities, mentions, relations = snap[ENTITIES], snap[MENTIONS], snap[RELATIONS]
    assert entities.height > 2 * N_FIRST
    assert entities["entity_id"].n_unique() == entities.height
    # every passage title is an entity, linked to its passage's root
    names = set(entities["name"].to_list()) | {a for al in entities["aliases"] for a in al}
    assert {p["title"] for p in passages[:N_FIRST]} <= names
    node_ids = set(snap[NODES]["node_id"].to_list())
    assert set(mentions["node_id"].to_list()) <= node_ids
    assert set(mentions["entity_id"].to_list()) == set(entities["entity_id"].to_list())
    counts = mentions.group_by("entity_id").len()
    joined = entities.join(counts, on="entity_id")
    assert (joined["n_mentions"] == joined["len"]).all()
    known = set(entities["entity_id"].to_list())
    assert set(relations["src_entity"].to_list()) | set(relations["dst_entity"].to_list()) <= known
    assert (relations["type"] == "co_occurs").all() and (relations["weight"] >= 1).all()
    assert (relations["src_entity"] != relations["dst_entity"]).all()
    # an entity named in several passages is one canonical entity with mentions in each
    assert entities["n_documents"].max() >= 2


def test_every_decision_is_recorded_and_merges_keep_the_mentions(first_run):
    _, _, _, _, snap, _ = first_run
    decisions = snap[ER_DECISIONS]
    assert set(decisions["scope"].unique().to_list()) == {"document", "corpus"}
    assert set(decisions["action"].unique().to_list()) >= {"new", "exact"}
    corpus = decisions.filter(pl.col("scope") == "corpus")
    entities = snap[ENTITIES]
    assert set(corpus["entity_id"].to_list()) <= set(entities["entity_id"].to_list())
    new = corpus.filter(pl.col("action") == "new")
    assert new["entity_id"].n_unique() == new.height
    merged = corpus.filter(pl.col("action").is_in(["merge", "select", "exact"]))
    for row in merged.head(20).iter_rows(named=True):
        assert row["selected"] and row["entity_id"] in row["selected"]
        mentions = snap[MENTIONS].filter(
            (pl.col("entity_id") == row["entity_id"]) & (pl.col("doc_id") == row["doc_id"])
        )
        assert mentions.height >= 1  # the links followed the merge


def test_lancedb_reads_the_tables_with_vector_and_text_search(first_run):
    _, _, out, _, snap, passages = first_run
    db = lancedb.connect(str(out))
    assert {NODES, ENTITIES, MENTIONS, RELATIONS, ER_DECISIONS} <= set(db.list_tables().tables)
    nodes = db.open_table(NODES)
    target = snap[NODES].filter(pl.col("kind") == "text").row(3, named=True)
    vector = np.asarray(target["vector"], np.float32)  # nodes has two: vector, sentence_vectors
    hits = nodes.search(vector, vector_column_name="vector").limit(3).to_list()
    assert hits[0]["node_id"] == target["node_id"]
    word = passages[0]["title"].split()[0]
    found = nodes.search(word, query_type="fts").limit(5).to_list()
    assert any(word.lower() in (h["text"] + h["title"]).lower() for h in found)


def test_both_tables_get_their_full_text_index_the_nodes_beside_the_resolver(first_run):
    """The nodes' search indexes are built while the corpus resolver runs, the entities' after
    their table is written: both are there when the job ends, and each answers."""
    _, _, out, summary, snap, _ = first_run
    db = lancedb.connect(str(out))
    for table, column in ((NODES, "text"), (ENTITIES, "name")):
        indexed = [i.columns for i in db.open_table(table).list_indices()]
        assert [column] in indexed, (table, indexed)
    name = snap[ENTITIES].sort("name")["name"][0]
    hits = db.open_table(ENTITIES).search(name, query_type="fts").limit(5).to_list()
    assert name in [h["name"] for h in hits]
    stage = summary.stats["stages"]["search_indexes"]
    assert stage["built"] == 2 and stage["nodes_s"] > 0  # full text alone: under 1,000 rows


def test_a_grown_corpus_resolves_only_new_entities_and_replaces_a_changed_passage(first_run):
    root, corpus, out, _, snap, passages = first_run
    changed = dict(passages[0], text=passages[0]["text"] + " It was later renamed Zanzibar.")
    _write(corpus, [changed] + passages[1:N_SECOND])
    summary = run_index([str(corpus)], out)
    assert (summary.ok, summary.skipped) == (1 + N_SECOND - N_FIRST, N_FIRST - 1)
    docs = _table(out, DOCUMENTS)
    old_doc = snap[NODES].filter(pl.col("title") == passages[0]["title"])["doc_id"][0]
    new_ids = set(docs["doc_id"].to_list()) - set(snap[NODES]["doc_id"].to_list())
    assert old_doc not in docs["doc_id"].to_list()
    mentions, relations = _table(out, MENTIONS), _table(out, RELATIONS)
    assert old_doc not in mentions["doc_id"].to_list()
    assert old_doc not in relations["doc_id"].to_list()
    # the other first-run documents keep exactly their rows
    kept = set(snap[NODES]["doc_id"].to_list()) - {old_doc}
    for name, table in ((MENTIONS, mentions), (RELATIONS, relations)):
        before = snap[name].filter(pl.col("doc_id").is_in(kept)).sort(pl.all())
        after = table.filter(pl.col("doc_id").is_in(kept)).sort(pl.all())
        assert before.equals(after), name
    # resolution ran for the new documents only, against the stored entities
    decisions = _table(out, ER_DECISIONS)
    added = decisions.join(snap[ER_DECISIONS], on=decisions.columns, how="anti")
    assert set(added["doc_id"].to_list()) == new_ids
    assert (added.filter(pl.col("scope") == "corpus")["action"] != "new").any()
    zanzibar = _table(out, ENTITIES).filter(pl.col("name") == "Zanzibar")
    assert zanzibar.height == 1
    # entities of the first run that are still mentioned keep their ids
    still = set(_table(out, ENTITIES)["entity_id"].to_list())
    assert len(set(snap[ENTITIES]["entity_id"].to_list()) & still) > 0.9 * snap[ENTITIES].height
