"""The LAD-RAG document graph (edges and Louvain communities) on hand-built nodes."""

from __future__ import annotations

import pytest

from bookindex.operators.graph.layout_graph import WEIGHTS, document_communities, document_edges


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
