"""The LAD-RAG document graph: edges and communities on hand-built nodes, and on a real paper
indexed end to end (tables ``edges`` and ``communities``), with the backfill of an old index."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import lancedb
import pytest

from operators.graph.layout_graph import WEIGHTS, document_communities, document_edges
from pipelines.index_pipeline import IndexOptions, run_index
from pipelines.store import lance_store
from pipelines.store.layout_graph_store import backfill_layout_graph, missing_layout_graph
from pipelines.store.schemas import COMMUNITIES, DOCUMENTS, EDGES, NODES

PAPER = "mmlongbench/documents/2303.05039v2.pdf"  # 9 pages: Tables 1-6, Figures 1-2, "2.1 ..."


def _node(order: int, kind: str, parent: str | None, page: int = 1, **fields) -> dict:
    node = {
        "doc_id": "d",
        "node_id": f"d:{order}",
        "parent_id": parent,
        "kind": kind,
        "level": 0,
        "title": "",
        "text": "",
        "page_start": page,
        "page_end": page,
        "bbox": [50.0, 100.0 + order, 300.0, 110.0 + order],
        "sec_id": 0,
        "para_idx": None,
        "order": order,
    }
    node.update(fields)
    return node


def _by_type(edges: list[dict]) -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {}
    for e in edges:
        found.setdefault(e["type"], set()).add((e["src_node"], e["dst_node"]))
    return found


@pytest.fixture()
def split_table() -> list[dict]:
    """A section with a table split over pages 4-5, its caption, text naming it, a figure."""
    return [
        _node(0, "root", None, title="Doc"),
        _node(1, "section", "d:0", page=4, title="3.2 Results", text="3.2 Results"),
        _node(2, "caption", "d:1", page=4, text="Table 3: Scores per model (see Table 3)."),
        _node(3, "table", "d:1", page=4, title="Table 3: Scores per model", text="Table 3 | a"),
        _node(4, "table", "d:1", page=5, text="c | d"),
        _node(
            5,
            "text",
            "d:1",
            page=5,
            text="As Table 3 shows, and Table 3 again, Fig. 1 and Section 3.2 agree with the",
        ),
        _node(6, "text", "d:1", page=6, text="Results of Tables 1-3 hold for every model."),
        _node(7, "image", "d:1", page=6, title="Figure 1: Overview, unlike Figure 1 in [4]"),
        _node(8, "caption", "d:1", page=6, text="Figure 1: Overview, unlike Figure 1 in [4]"),
    ]


def test_continues_links_a_table_split_over_two_pages(split_table):
    edges = document_edges(split_table)
    kinds = _by_type(edges)
    assert kinds["continues"] >= {("d:3", "d:4")}
    assert kinds["caption_of"] == {("d:2", "d:3"), ("d:8", "d:7")}
    assert all(e["weight"] == WEIGHTS[e["type"]] and e["doc_id"] == "d" for e in edges)


def test_references_resolve_labels_without_self_links(split_table):
    refs = _by_type(document_edges(split_table))["references"]
    # "Table 3" twice → one edge to the captioned table (not its continuation, not the caption);
    # "Fig. 1" → the image titled "Figure 1: ..."; "Section 3.2" → the section "3.2 Results".
    assert {dst for src, dst in refs if src == "d:5"} == {"d:3", "d:7", "d:1"}
    # A caption names its own table, a table's cells name the table, a figure's caption names
    # "Figure 1" again: none of them is a reference.
    assert not {(s, d) for s, d in refs if s in ("d:2", "d:3", "d:4", "d:7", "d:8")}
    assert all(src != dst for src, dst in refs)
    # "Tables 1-3": only Table 3 exists in this document.
    assert {dst for src, dst in refs if src == "d:6"} == {"d:3"}


def test_text_continues_across_a_page_only_when_the_sentence_is_open(split_table):
    kinds = _by_type(document_edges(split_table))
    assert ("d:5", "d:6") in kinds["continues"]  # "... agree with the" | "Results of ..."
    closed = [dict(n, text=n["text"] + ".") if n["order"] == 5 else n for n in split_table]
    assert ("d:5", "d:6") not in _by_type(document_edges(closed)).get("continues", set())


def test_part_of_next_and_communities_on_hand_built_nodes(split_table):
    edges = document_edges(split_table)
    kinds = _by_type(edges)
    assert kinds["part_of"] == {(n["node_id"], n["parent_id"]) for n in split_table[1:]}
    assert kinds["next"] == {(f"d:{i}", f"d:{i + 1}") for i in range(2, 8)}  # leaves only
    assert len(edges) == len({(e["src_node"], e["dst_node"], e["type"]) for e in edges})
    communities = document_communities(split_table, edges, seed=0)
    assert set(communities) == {n["node_id"] for n in split_table}
    assert communities["d:0"] == 0
    assert communities == document_communities(list(reversed(split_table)), edges[::-1], seed=0)


# ---- a real paper, indexed end to end ---------------------------------------------------------


@pytest.fixture(scope="module")
def paper_graph(ray_session, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("layout_graph")
    shutil.copy(shared_data / PAPER, root / Path(PAPER).name)
    passages = [{"id": f"p{i}", "title": f"Passage {i}", "text": f"See Table {i}."} for i in (1, 2)]
    (root / "passages.jsonl").write_text("\n".join(json.dumps(p) for p in passages) + "\n")
    out = root / "index"
    inputs = [str(root / Path(PAPER).name), str(root / "passages.jsonl")]
    summary = run_index(inputs, out, IndexOptions(enrich=False))
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
    assert edges.num_rows == lance_store.read_table(out, EDGES).num_rows > 500
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
