"""The indexing job end to end on the sample corpus: tree shape against the generator's
manifest, DeepRead coordinates, Lance tables readable by lancedb / polars / Ray, incremental
and idempotent re-runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lance
import lancedb
import polars as pl
import pytest

from bookindex.operators.config import BookindexConfig, IndexConfig
from bookindex.operators.eval.heading_gold import normalize_title
from bookindex.operators.eval.ocr_quality import page_subset_pdf
from bookindex.pipelines.index_pipeline import run_index
from bookindex.pipelines.run_stats import summary_line
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import (
    DOCUMENTS,
    ENTITIES,
    FAILURES,
    MENTIONS,
    NODES,
    RELATIONS,
)
from bookindex.pipelines.structure_stage import plan_tasks, split_limit


@pytest.fixture(scope="module")
def indexed(sample_index) -> tuple[Path, object]:
    """The sample corpus indexed once for the session, from a copy of its own (``corpus``
    beside ``index``; tests/conftest.py): the re-run test starts from this first run."""
    return sample_index


def _manifest(sample_corpus: Path) -> dict[str, dict]:
    data = json.loads((sample_corpus / "manifest.json").read_text())
    return {d["file"]: d for d in data["documents"]}


def _nodes(out: Path) -> pl.DataFrame:
    return pl.from_arrow(lance_store.read_table(out, NODES))


def _docs(out: Path) -> pl.DataFrame:
    return pl.from_arrow(lance_store.read_table(out, DOCUMENTS))


def test_every_sample_document_is_indexed(indexed, sample_corpus):
    out, summary = indexed
    assert (summary.ok, summary.failed, summary.skipped) == (4, 0, 0)
    docs = _docs(out)
    assert sorted(Path(u).name for u in docs["uri"]) == sorted(_manifest(sample_corpus))
    assert set(docs["status"]) == {"ok"}
    assert summary.pages == docs["n_pages"].sum() > 40


# Known false headings of the committed section model, each to be gone with the next retrain
# (strict: the test fails when one is no longer produced, so that it is removed from here).
# Stop 10's model keeps none (stop 9's kept sample_03's "Same as a /= b.", the first line under
# its page's running head).
KNOWN_FALSE_HEADINGS: dict[str, list[tuple[int, str, int]]] = {}


def test_sections_match_the_generated_headings(indexed, sample_corpus):
    """With or without an outline, every chapter/section/subsection is found at its page and
    its relative level, and nothing else is called a section (but ``KNOWN_FALSE_HEADINGS``,
    each of which must still be there)."""
    out, _ = indexed
    docs, nodes = _docs(out), _nodes(out)
    for name, truth in _manifest(sample_corpus).items():
        doc_id = docs.filter(pl.col("uri").str.ends_with(name))["doc_id"][0]
        sections = nodes.filter((pl.col("doc_id") == doc_id) & (pl.col("kind") == "section"))
        sections = sections.sort("order")
        got = [
            (lvl, normalize_title(t), p)
            for lvl, t, p in zip(
                sections["level"], sections["title"], sections["page_start"], strict=True
            )
        ]
        want = [(h["level"], normalize_title(h["title"]), h["page"]) for h in truth["headings"]]
        offset = min(g[0] for g in got) - 1
        got = [(lvl - offset, t, p) for lvl, t, p in got]
        for known in KNOWN_FALSE_HEADINGS.get(name, []):
            assert known in got, f"{name}: {known} is gone: remove it from KNOWN_FALSE_HEADINGS"
            got.remove(known)
        assert got == want, name


def test_tables_images_lists_and_captions_are_leaves(indexed, sample_corpus):
    out, _ = indexed
    docs, nodes = _docs(out), _nodes(out)
    for name, truth in _manifest(sample_corpus).items():
        doc_id = docs.filter(pl.col("uri").str.ends_with(name))["doc_id"][0]
        mine = nodes.filter(pl.col("doc_id") == doc_id)
        tables = mine.filter(pl.col("kind") == "table")
        assert sorted(zip(tables["title"], tables["page_start"], strict=True)) == sorted(
            (t["caption"], t["page"]) for t in truth["tables"]
        ), name
        for table in truth["tables"]:
            row = tables.filter(pl.col("title") == table["caption"]).row(0, named=True)
            assert table["rows"][0][0] in row["text"]  # header cells kept as the table's text
        images = mine.filter(pl.col("kind") == "image")
        assert [(f["caption"], f["page"]) for f in truth["figures"]] == list(
            zip(images["title"], images["page_start"], strict=True)
        )
        assert mine.filter(pl.col("kind") == "list").height >= 1
        assert mine.filter(pl.col("text").str.contains("see Table 2")).height == 1
        headers = mine.filter(pl.col("text").str.contains(truth["title"], literal=True))
        assert headers.filter(pl.col("kind") != "root").height <= 1  # running header dropped


def test_every_run_writes_stage_statistics(indexed):
    out, summary = indexed
    stats = json.loads((out / "stats.json").read_text())
    assert summary_line(stats) == summary.line()
    assert stats["summary"]["ok"] == 4 and len(stats["documents"]) == 4
    stages = stats["stages"]
    for name in ("probe", "parse", "assemble", "embed", "entities", "resolve_document"):
        assert stages[name]["documents"] == 4 and stages[name]["cpu_s"] > 0, name
        assert stages[name]["peak_memory_mb"] > 50, name
    for name in ("identify", "ray_pipeline", "write_nodes", "resolve", "write_entities"):
        assert stages[name]["wall_s"] > 0, name
    # plan and materialize (the documents before enrich) are spans within the Ray pipeline
    inner = stages["plan"]["wall_s"] + stages["materialize"]["wall_s"]
    assert stages["materialize"]["wall_s"] > 0 and inner < stages["ray_pipeline"]["wall_s"]
    assert "ocr" not in stages  # no page of the sample corpus is read by OCR
    assert stages["write_nodes"]["rows_out"] == summary.nodes
    assert stages["resolve"]["rows_in"] >= stages["resolve"]["rows_out"] > 0
    assert all(d["timings"]["parse"] > 0 for d in stats["documents"])


def test_tables_and_figures_are_entities_with_their_headers_contained_in(indexed, sample_corpus):
    """BookRAG §4.3.1: a table is a typed entity; its column and row headers are entities
    linked to it by contained_in; a figure is an entity named by its caption."""
    out, _ = indexed
    docs, nodes = _docs(out), _nodes(out)
    entities = pl.from_arrow(lance_store.read_table(out, ENTITIES))
    mentions = pl.from_arrow(lance_store.read_table(out, MENTIONS))
    relations = pl.from_arrow(lance_store.read_table(out, RELATIONS))
    for name, truth in _manifest(sample_corpus).items():
        doc_id = docs.filter(pl.col("uri").str.ends_with(name))["doc_id"][0]
        for table in truth["tables"]:
            node = nodes.filter(
                (pl.col("doc_id") == doc_id) & (pl.col("title") == table["caption"])
            ).row(0, named=True)
            linked = mentions.filter(pl.col("node_id") == node["node_id"]).join(
                entities, on="entity_id"
            )
            typed = linked.filter(pl.col("type") == "TABLE")
            assert typed["name"].to_list() == [table["caption"]], name
            table_id = typed["entity_id"][0]
            headers = relations.filter(
                (pl.col("dst_entity") == table_id) & (pl.col("type") == "contained_in")
            ).join(entities, left_on="src_entity", right_on="entity_id")
            header_names = set(headers["name"].to_list()) | {
                a for al in headers["aliases"] for a in al
            }
            assert set(table["rows"][0]) & header_names, name  # column headers
            assert {r[0] for r in table["rows"][1:]} & header_names, name  # row headers
        figures = entities.filter((pl.col("type") == "IMAGE") & (pl.col("doc_id") == doc_id))
        assert sorted(figures["name"].to_list()) == sorted(f["caption"] for f in truth["figures"])
    vectors = nodes["vector"].to_list()
    assert all(v is not None and len(v) == 384 for v in vectors)


def test_deepread_coordinates_and_toc_skeleton(indexed):
    out, _ = indexed
    docs, nodes = _docs(out), _nodes(out)
    for doc in docs.iter_rows(named=True):
        mine = nodes.filter(pl.col("doc_id") == doc["doc_id"]).sort("order")
        assert mine["order"].to_list() == list(range(mine.height))
        assert mine["node_id"].n_unique() == mine.height
        sections = mine.filter(pl.col("kind").is_in(["root", "section"]))
        assert sections["sec_id"].to_list() == list(range(sections.height))
        leaves = mine.filter(~pl.col("kind").is_in(["root", "section"]))
        assert leaves["para_idx"].null_count() == 0
        for sec_id, group in leaves.group_by("sec_id"):
            assert sorted(group["para_idx"]) == list(range(1, group.height + 1)), sec_id
        by_node = {r["node_id"]: r for r in mine.iter_rows(named=True)}
        for leaf in leaves.iter_rows(named=True):
            assert by_node[leaf["parent_id"]]["sec_id"] == leaf["sec_id"]
        toc = json.loads(doc["toc"])
        assert [e["sec_id"] for e in toc] == sections["sec_id"].to_list()
        counts = leaves.group_by("sec_id").len()
        expected = dict(zip(counts["sec_id"], counts["len"], strict=True))
        for entry in toc:
            assert entry["n_paragraphs"] == expected.get(entry["sec_id"], 0)
            for child in entry["children"]:
                assert child > entry["sec_id"]


def test_tables_are_readable_by_lancedb_polars_and_ray(indexed, ray_session):
    out, summary = indexed
    db = lancedb.connect(str(out))
    assert set(db.list_tables().tables) >= {DOCUMENTS, NODES}
    assert db.open_table(NODES).count_rows() == summary.nodes
    lazy = pl.scan_pyarrow_dataset(lance.dataset(lance_store.table_path(out, NODES)))
    assert lazy.filter(pl.col("kind") == "section").collect().height > 20
    ds = ray_session.data.read_lance(lance_store.table_path(out, DOCUMENTS))
    assert ds.count() == 4


def test_rerun_adds_nothing_and_a_changed_file_replaces_its_rows(indexed, tmp_path):
    """From the module's first run: a copy of its index, over the module's corpus (which this
    test changes, and puts back as it was at the end)."""
    first_out, first = indexed
    corpus = first_out.parent / "corpus"
    out = tmp_path / "index"
    shutil.copytree(first_out, out)
    assert first.ok == 4
    original = tmp_path / "sample_03.original.pdf"
    shutil.copy(corpus / "sample_03.pdf", original)
    try:
        _rerun_and_change(corpus, out, tmp_path)
    finally:
        shutil.copy(original, corpus / "sample_03.pdf")
        (corpus / "added.pdf").unlink(missing_ok=True)


def _rerun_and_change(corpus: Path, out: Path, tmp_path: Path) -> None:
    versions = {
        t: lance.dataset(lance_store.table_path(out, t)).version for t in (DOCUMENTS, NODES)
    }
    before = _nodes(out).sort("node_id")

    again = run_index([str(corpus)], out)
    assert (again.ok, again.skipped) == (0, 4)
    assert {
        t: lance.dataset(lance_store.table_path(out, t)).version for t in (DOCUMENTS, NODES)
    } == versions  # nothing was written at all

    # Change one file (new bytes under the same name) and add a new one.
    from bookindex.operators.eval.sample_corpus import build_sample_corpus

    other = build_sample_corpus(tmp_path / "other", n_docs=2, seed=1)
    old_id = _docs(out).filter(pl.col("uri").str.ends_with("sample_03.pdf"))["doc_id"][0]
    # three pages of each other book: new bytes are what the run must notice, not their length
    # (whole books only made this run parse and enrich ~2 x 400 more nodes)
    page_subset_pdf(str(other[0]), str(corpus / "sample_03.pdf"), [1, 2, 3])
    page_subset_pdf(str(other[1]), str(corpus / "added.pdf"), [1, 2, 3])
    third = run_index([str(corpus)], out)
    assert (third.ok, third.skipped) == (2, 3)
    docs = _docs(out)
    assert old_id not in docs["doc_id"].to_list()
    assert old_id not in _nodes(out)["doc_id"].to_list()
    assert docs.height == 5
    assert _nodes(out)["doc_id"].n_unique() == 5

    forced = run_index(
        [str(corpus / "sample_00.pdf")], out, BookindexConfig(index=IndexConfig(force=True))
    )
    assert forced.ok == 1
    after = _nodes(out)
    assert after["doc_id"].n_unique() == 5
    assert after.height == _nodes(out).unique().height
    same_doc = after.filter(pl.col("doc_id") == before["doc_id"][0]).sort("node_id")
    columns = ["node_id", "kind", "title", "text", "sec_id", "para_idx", "page_start"]
    assert same_doc.select(columns).equals(
        before.filter(pl.col("doc_id") == before["doc_id"][0]).sort("node_id").select(columns)
    )
    assert lance_store.read_table(out, FAILURES).num_rows == 0


def test_identical_files_under_two_names_are_one_document(ray_session, sample_corpus, tmp_path):
    corpus = tmp_path / "dupes"
    corpus.mkdir()
    shutil.copy(sample_corpus / "sample_02.pdf", corpus / "a.pdf")
    shutil.copy(sample_corpus / "sample_02.pdf", corpus / "b.pdf")
    summary = run_index(
        [str(corpus)], tmp_path / "index", BookindexConfig(index=IndexConfig(enrich=False))
    )
    assert (summary.ok, summary.skipped) == (1, 1)
    nodes = _nodes(tmp_path / "index")
    assert nodes["node_id"].n_unique() == nodes.height
    assert _docs(tmp_path / "index").height == 1


def test_plan_splits_only_books_long_against_the_run():
    """One task per book unless a book is long against the run: then page ranges, so its
    pages spread over the workers. Failed documents stay whole (nothing to split)."""

    def probed(doc_id: str, pages: int, status: str = "ok") -> dict:
        return {"doc_id": doc_id, "n_pages": pages, "status": status}

    books = [probed("a", 300), probed("b", 40), probed("c", 30), probed("x", 0, "failed")]
    whole, ranges = plan_tasks(books, pages_per_task=64, workers=2)
    # 370 pages over 2 workers: the limit is max(2 · 64, 370 / 4) = 128 pages
    assert split_limit(books, pages_per_task=64, workers=2) == 128
    assert [(r["doc_id"], r["start"], r["stop"]) for r in ranges] == [
        ("a", 0, 64),
        ("a", 64, 128),
        ("a", 128, 192),
        ("a", 192, 256),
        ("a", 256, 300),
    ]
    assert [(r["doc_id"], r["start"], r["stop"]) for r in whole] == [
        ("b", 0, 40),
        ("c", 0, 30),
        ("x", 0, 0),
    ]
    # many books of equal length: none is long against the run, each is one task
    many = [probed(str(i), 300) for i in range(8)]
    whole, ranges = plan_tasks(many, pages_per_task=64, workers=2)
    assert len(whole) == 8 and ranges == []
    # the run's limit, counted over every document (those with pages to OCR too), is given
    whole, ranges = plan_tasks(books, pages_per_task=64, workers=2, limit=300)
    assert len(whole) == 4 and ranges == []
