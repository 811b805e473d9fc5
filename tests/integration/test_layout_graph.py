"""The LAD-RAG document graph on a real paper indexed end to end (tables ``edges`` and
``communities``), with the backfill of an old index. Hand-built nodes: tests/unit/graph."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import lancedb
import pytest

from bookindex.operators.config import BookindexConfig, IndexConfig
from bookindex.operators.graph.layout_graph import document_communities, document_edges
from bookindex.pipelines.index_pipeline import run_index
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.layout_graph_store import backfill_layout_graph, missing_layout_graph
from bookindex.pipelines.store.schemas import COMMUNITIES, DOCUMENTS, EDGES, NODES

PAPER = "mmlongbench/documents/2303.05039v2.pdf"  # 9 pages: Tables 1-6, Figures 1-2, "2.1 ..."


# ---- a real paper, indexed end to end ---------------------------------------------------------


@pytest.fixture(scope="module")
def paper_graph(ray_session, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("layout_graph")
    shutil.copy(shared_data / PAPER, root / Path(PAPER).name)
    passages = [{"id": f"p{i}", "title": f"Passage {i}", "text": f"See Table {i}."} for i in (1, 2)]
    (root / "passages.jsonl").write_text("\n".join(json.dumps(p) for p in passages) + "\n")
    out = root / "index"
    inputs = [str(root / Path(PAPER).name), str(root / "passages.jsonl")]
    summary = run_index(inputs, out, BookindexConfig(index=IndexConfig(enrich=False)))
    assert (summary.ok, summary.failed) == (3, 0), summary.failures
    docs = lance_store.read_table(out, DOCUMENTS).to_pylist()
    doc_id = next(d["doc_id"] for d in docs if d["uri"].endswith(".pdf"))
    nodes = [n for n in lance_store.read_table(out, NODES).to_pylist() if n["doc_id"] == doc_id]
    edges = [e for e in lance_store.read_table(out, EDGES).to_pylist() if e["doc_id"] == doc_id]
    communities = {
        c["node_id"]: c["community"]
        for c in lance_store.read_table(out, COMMUNITIES).to_pylist()
        if c["doc_id"] == doc_id
    }
    return out, summary, sorted(nodes, key=lambda n: n["order"]), edges, communities


def _starting(nodes: list[dict], label: str, kinds: tuple[str, ...]) -> dict:
    found = [n for n in nodes if n["kind"] in kinds and (n["title"] or n["text"]).startswith(label)]
    assert found, label
    return found[0]


def test_captions_are_linked_to_their_table_or_figure(paper_graph):
    _, _, nodes, edges, _ = paper_graph
    by_id = {n["node_id"]: n for n in nodes}
    pairs = [
        (by_id[e["src_node"]], by_id[e["dst_node"]]) for e in edges if e["type"] == "caption_of"
    ]
    assert len(pairs) >= 5
    for caption, figure in pairs:
        assert caption["kind"] == "caption" and figure["kind"] in ("table", "image")
        assert figure["title"] == caption["text"] and figure["page_start"] == caption["page_start"]
    labels = {(c["text"][:8], f["kind"]) for c, f in pairs}
    assert {("Table 1:", "table"), ("Table 3:", "table"), ("Figure 1", "image")} <= labels


def test_references_point_at_the_labelled_node(paper_graph):
    _, _, nodes, edges, _ = paper_graph
    by_id = {n["node_id"]: n for n in nodes}
    refs = {(e["src_node"], e["dst_node"]) for e in edges if e["type"] == "references"}
    cases = [
        ("Table 1", "Table 1:", ("table",)),
        ("Table 3", "Table 3:", ("table",)),
        ("Fig. 1", "Figure 1:", ("image",)),
        ("Section 2.1", "2.1 ", ("section",)),
    ]
    for phrase, label, kinds in cases:
        target = _starting(nodes, label, kinds)
        sources = [n for n in nodes if n["kind"] == "text" and phrase in n["text"]]
        assert sources, phrase
        assert all((s["node_id"], target["node_id"]) in refs for s in sources), phrase
    assert all(src != dst for src, dst in refs)
    for src, dst in refs:  # a caption never references what it captions
        assert by_id[src]["kind"] != "caption" or by_id[dst]["title"] != by_id[src]["text"]


def test_part_of_and_next_cover_the_tree(paper_graph):
    _, _, nodes, edges, _ = paper_graph
    part_of = Counter(e["src_node"] for e in edges if e["type"] == "part_of")
    assert part_of == Counter(n["node_id"] for n in nodes if n["kind"] != "root")
    parent = {n["node_id"]: n["parent_id"] for n in nodes}
    assert all(parent[e["src_node"]] == e["dst_node"] for e in edges if e["type"] == "part_of")
    leaves = [n["node_id"] for n in nodes if n["kind"] not in ("root", "section")]
    chain = [(e["src_node"], e["dst_node"]) for e in edges if e["type"] == "next"]
    assert sorted(chain) == sorted(zip(leaves, leaves[1:], strict=False))


def test_communities_cover_every_node_deterministically(paper_graph):
    _, _, nodes, edges, communities = paper_graph
    assert set(communities) == {n["node_id"] for n in nodes}
    assert 1 < len(set(communities.values())) < len(nodes)
    assert communities[nodes[0]["node_id"]] == 0
    assert document_communities(nodes, edges, seed=0) == communities
    assert document_communities(nodes, edges, seed=0) == document_communities(nodes, edges)
    assert _counted(document_edges(nodes)) == _counted(edges)  # as stored: recomputable


def _counted(rows: list[dict]) -> Counter:
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


def test_tables_are_readable_and_passages_have_their_part_of(paper_graph):
    out, summary, _, _, _ = paper_graph
    db = lancedb.connect(str(out))
    edges = db.open_table(EDGES).to_arrow()
    communities = db.open_table(COMMUNITIES).to_arrow()
    # 504 edges at stop 7; the paper's running heads ("Lu and Kan", "IRS@WSDM '23, …", 8 blocks
    # set at the height of its other running heads) are furniture since, not nodes
    assert edges.num_rows == lance_store.read_table(out, EDGES).num_rows > 450
    assert communities.num_rows == lance_store.read_table(out, NODES).num_rows
    passage_ids = [
        d["doc_id"] for d in lance_store.read_table(out, DOCUMENTS).to_pylist() if "#" in d["uri"]
    ]
    passage_edges = [e for e in edges.to_pylist() if e["doc_id"] in passage_ids]
    assert sorted(e["type"] for e in passage_edges) == ["part_of", "part_of"]
    timings = [d["timings"] for d in summary.stats["documents"] if d["uri"].endswith(".pdf")]
    assert "layout_graph" in timings[0]
    assert summary.stats["stages"]["layout_graph_backfill"]["documents"] == 0


def test_backfill_builds_the_graph_of_an_index_without_one(paper_graph, tmp_path):
    out, _, _, _, _ = paper_graph
    old = tmp_path / "old_index"
    shutil.copytree(out, old)
    before = {t: _rows(old, t) for t in (EDGES, COMMUNITIES)}
    for table in (EDGES, COMMUNITIES):
        shutil.rmtree(lance_store.table_path(old, table))
    assert len(missing_layout_graph(old)) == 3
    assert backfill_layout_graph(old) == 3
    assert {t: _rows(old, t) for t in (EDGES, COMMUNITIES)} == before
    assert missing_layout_graph(old) == [] and backfill_layout_graph(old) == 0


def _rows(index: Path, table: str) -> Counter:
    return _counted(lance_store.read_table(index, table).to_pylist())
