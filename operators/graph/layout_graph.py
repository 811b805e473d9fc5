"""The LAD-RAG document graph of one document: layout and reference edges, and communities.

Edge types (rows ``{doc_id, src_node, dst_node, type, weight}``, one document at a time):

- ``part_of``: every non-root node → its parent (a section or the root).
- ``next``: reading order over the leaves only (sections and the root are left out; they are
  reached through ``part_of``), one chain per document in ``order``, across page breaks.
- ``caption_of``: caption → the table or image it captions: the node right before or after it
  in the same section and on the same page (the pairing of ``operators.structure.tree._attach_captions``).
- ``references``: a leaf whose text names "Table 3", "Fig. 2", "Figure 2", "Section 4.1",
  "§4.1", "Chapter 2", "Appendix A" or "Eq. (3)" → the node with that label: the table or
  image whose caption starts with it (the caption itself when no table or image was paired),
  the section whose title starts with the number, the formula ending in "(3)". A caption's own
  label is not a reference, and neither is a link from a node to itself or to what it captions.
- ``continues``: a table followed directly by a table on the next page of the same section (a
  table split across pages, unless the second has a caption of its own), and a text paragraph
  followed directly by one on the next page or column when the first does not end a sentence.
  A paragraph the tree already merged (lower-case continuation) is one node whose
  ``page_end`` > ``page_start``: it needs no edge.

Communities: Louvain (networkx, fixed seed) on the undirected graph, parallel edges' weights
summed, started from the leaves grouped by (parent, page) (see ``document_communities``);
numbered by the smallest ``order`` of their members.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from bookindex.operators.kinds import CAPTION, EDGE_WEIGHTS, FIGURE_KINDS, STRUCTURE_KINDS

WEIGHTS = EDGE_WEIGHTS
_STRUCTURE = STRUCTURE_KINDS
_FIGURES = FIGURE_KINDS
_SENTENCE_END = (".", "!", "?", ":", '"', "”", "’", ")")
_MIN_CONTINUED_WORDS = 8
_DIGITS = re.compile(r"[\d\s]+")
_LABEL_START = re.compile(r"(?i:chapter|algorithm|table|figure|fig\.|section|appendix)\s*\d")

# The label a caption (or a table/image title) starts with: "Table 3:", "Fig. 2.", "Figure
# A1 —", "Table 4" at the end; not "Table 4 shows ..." (a sentence that refers to it).
_CAPTION_LABEL = re.compile(
    r"\s*(?P<kind>(?i:tables?|tab\.|figures?|figs?\.))\s*(?P<num>[A-Z]?\d+(?:\.\d+)*)\b"
    r"(?!\s+[a-z])"
)
# The number a section title starts with: "4.1 Methods", "4.1. Methods", "Chapter 2 ...",
# "Appendix A: ...", "A.2 Details", "A Proofs".
_SECTION_LABEL = re.compile(
    r"\s*(?:(?P<word>(?i:chapter|section|appendix|part))\s+)?"
    r"(?P<num>\d+(?:\.\d+)*|[A-Z](?:\.\d+)*)(?:[.:]|\s*[-–—])?(?=\s|$)"
)
_EQUATION_LABEL = re.compile(r"\((?P<num>\d+(?:\.\d+)?)\)\s*$")
_NUM = r"(?:[A-Z]?\d+(?:\.\d+)*[a-z]?|[A-Z](?!\w))"
_SEP = r"\s*(?:,|and|&|or|to|–|-|—)\s*"
_REFERENCE = re.compile(
    r"(?<![\w.])(?P<kind>(?i:tables?|tab\.|figures?|figs?\.|sections?|secs?\.|sects?\.|§§?"
    r"|chapters?|ch\.|appendix|appendices|app\.|equations?|eqs?\.))\s*"
    rf"(?P<nums>\(?{_NUM}\)?(?:{_SEP}\(?{_NUM}\)?)*)(?![\w])"
)
_ONE_NUM = re.compile(_NUM)
_RANGE = re.compile(r"(\d+)\)?\s*[–\-—]\s*\(?(\d+)(?![\w.])")
_MAX_RANGE = 20


def _label_kind(word: str) -> str:
    word = word.lower()
    if word.startswith("tab"):
        return "table"
    if word.startswith("fig"):
        return "figure"
    if word.startswith(("sec", "§")):
        return "section"
    if word.startswith("ch"):
        return "chapter"
    if word.startswith("app"):
        return "appendix"
    if word.startswith("eq"):
        return "equation"
    return "part"


def _numbers(nums: str) -> list[str]:
    """ "3", "3 and 4", "(3)-(5)", "2.1, 2.2" → the numbers named, ranges of integers expanded."""
    found = _ONE_NUM.findall(nums)
    for a, b in _RANGE.findall(nums):
        if 0 < int(b) - int(a) <= _MAX_RANGE:
            found += [str(i) for i in range(int(a) + 1, int(b))]
    return found


def _references(text: str) -> Iterable[tuple[str, str]]:
    """(kind, NUMBER) for every label the text names, in order, duplicates included."""
    for match in _REFERENCE.finditer(text):
        kind = _label_kind(match["kind"])
        for num in _numbers(match["nums"]):
            yield kind, num.rstrip("abcdefghijklmnopqrstuvwxyz").upper()  # "2a" → Figure 2


def _caption_label(text: str) -> tuple[str, str] | None:
    match = _CAPTION_LABEL.match(text or "")
    if match is None:
        return None
    return _label_kind(match["kind"]), match["num"].upper()


def _section_labels(title: str) -> list[tuple[tuple[str, str], int]]:
    """The labels a section title defines, each with a priority (0 wins over 1)."""
    match = _SECTION_LABEL.match(title or "")
    if match is None:
        return []
    num, word = match["num"].upper(), (match["word"] or "").lower()
    if word == "chapter":
        return [(("chapter", num), 0), (("section", num), 1)]
    if word == "appendix":
        return [(("appendix", num), 0), (("section", num), 1)]
    if word in ("section", "part"):
        return [((word, num), 0)]
    if num[0].isalpha():  # "A Proofs", "A.2 Details": appendix numbering
        return [(("section", num), 1), (("appendix", num), 1)]
    return [(("section", num), 0), (("chapter", num), 1)]


def _captions(nodes: list[dict]) -> list[tuple[dict, dict]]:
    """(caption, table or image) pairs, as tree._attach_captions pairs them (nodes in order)."""
    pairs = []
    for i, node in enumerate(nodes):
        if node["kind"] not in _FIGURES:
            continue
        for j in (i + 1, i - 1):
            if 0 <= j < len(nodes) and nodes[j]["kind"] == CAPTION:
                near = nodes[j]
                if (
                    near["page_start"] == node["page_start"]
                    and near["parent_id"] == node["parent_id"]
                ):
                    pairs.append((near, node))
                    break
    return pairs


def _label_targets(nodes: list[dict], pairs: list[tuple[dict, dict]]) -> dict[tuple[str, str], str]:
    """(kind, NUMBER) → node_id: tables/figures, sections, formulas; first in order wins."""
    ranked: dict[tuple[str, str], tuple[int, int, str]] = {}

    def offer(key: tuple[str, str], priority: int, node: dict) -> None:
        rank = (priority, node["order"], node["node_id"])
        if key not in ranked or rank < ranked[key]:
            ranked[key] = rank

    captioned = {caption["node_id"] for caption, _ in pairs}
    for node in nodes:
        kind = node["kind"]
        if kind in _FIGURES:
            label = _caption_label(node.get("title") or "")
            if label:
                offer(label, 0, node)
        elif kind == CAPTION and node["node_id"] not in captioned:
            label = _caption_label(node.get("text") or "")
            if label:
                offer(label, 1, node)
        elif kind == "section":
            for key, priority in _section_labels(node.get("title") or ""):
                offer(key, priority, node)
        elif kind == "formula":
            match = _EQUATION_LABEL.search(node.get("text") or "")
            if match:
                offer(("equation", match["num"].upper()), 0, node)
    return {key: rank[2] for key, rank in ranked.items()}


def _ends_sentence(text: str) -> bool:
    return (text or "").rstrip().endswith(_SENTENCE_END)


def _column_break(prev: dict, node: dict) -> bool:
    """Same page, the next block starts higher up and to the right: the next column."""
    a, b = prev.get("bbox") or [0.0] * 4, node.get("bbox") or [0.0] * 4
    return node["page_start"] == prev["page_end"] and b[1] < a[1] and b[0] >= a[2] - 1.0


def _running_key(text: str) -> str:
    """Text without digits and spaces, cut short: equal for a running header on every page."""
    return _DIGITS.sub("", (text or "")[:40]).lower()


def _repeated_texts(leaves: list[dict]) -> set[str]:
    """Texts seen on several pages: running headers and footers the parser kept as text."""
    pages: dict[str, set[int]] = {}
    for node in leaves:
        if node["kind"] == "text":
            pages.setdefault(_running_key(node["text"]), set()).add(node["page_start"])
    return {key for key, seen in pages.items() if len(seen) >= 2}


def _continues(prev: dict, node: dict, repeated: set[str]) -> bool:
    if prev["parent_id"] != node["parent_id"]:
        return False
    if prev["kind"] == "table" and node["kind"] == "table":
        if node["page_start"] != prev["page_end"] + 1:
            return False
        own, first = _caption_label(node.get("title") or ""), _caption_label(prev["title"] or "")
        return own is None or own == first or "cont" in (node.get("title") or "").lower()
    if prev["kind"] == "text" and node["kind"] == "text":
        broken = node["page_start"] == prev["page_end"] + 1 or _column_break(prev, node)
        return (
            broken
            and not _ends_sentence(prev["text"])
            and len((prev["text"] or "").split()) >= _MIN_CONTINUED_WORDS
            and not (node["text"] or "")[:1].islower()  # the tree merges those
            and (node["text"] or "")[:1].isalnum()
            and not _LABEL_START.match(node["text"])
            and _running_key(node["text"]) not in repeated
            and _running_key(prev["text"]) not in repeated
        )
    return False


def document_edges(nodes: list[dict], doc_id: str | None = None) -> list[dict]:
    """The edges of one document's graph (see the module docstring), in a fixed order."""
    if not nodes:
        return []
    doc_id = doc_id if doc_id is not None else nodes[0].get("doc_id", "")
    nodes = sorted(nodes, key=lambda n: n["order"])
    ids = {n["node_id"] for n in nodes}
    edges: list[dict] = []
    seen: set[tuple[str, str, str]] = set()

    def add(src: str, dst: str, kind: str) -> None:
        key = (src, dst, kind)
        if src != dst and key not in seen:
            seen.add(key)
            row = {"doc_id": doc_id, "src_node": src, "dst_node": dst}
            edges.append(dict(row, type=kind, weight=WEIGHTS[kind]))

    for node in nodes:
        if node["kind"] != "root" and node.get("parent_id") in ids:
            add(node["node_id"], node["parent_id"], "part_of")
    leaves = [n for n in nodes if n["kind"] not in _STRUCTURE]
    for prev, node in zip(leaves, leaves[1:], strict=False):
        add(prev["node_id"], node["node_id"], "next")
    pairs = _captions(nodes)
    for caption, figure in pairs:
        add(caption["node_id"], figure["node_id"], "caption_of")
    repeated = _repeated_texts(leaves)
    for prev, node in zip(leaves, leaves[1:], strict=False):
        if _continues(prev, node, repeated):
            add(prev["node_id"], node["node_id"], "continues")
    targets = _label_targets(nodes, pairs)
    captions_of: dict[str, set[str]] = {}
    for caption, figure in pairs:
        captions_of.setdefault(caption["node_id"], set()).add(figure["node_id"])
    for node in leaves:
        text = node.get("text") or ""
        if not text:
            continue
        own = _caption_label(text) if node["kind"] == "caption" else None
        skip = captions_of.get(node["node_id"], set())
        for key in _references(text):
            target = targets.get(key)
            if target is None or key == own or target in skip:
                continue
            add(node["node_id"], target, "references")
    return edges


def _block(node: dict) -> str:
    """The starting group of a node: leaves by (parent, page), sections and the root alone."""
    if node["kind"] in _STRUCTURE or not node.get("parent_id"):
        return node["node_id"]
    return f"{node['parent_id']}@{node['page_start']}"


def _loops(weights: dict[tuple[str, str], float]) -> bool:
    return any(a == b for a, b in weights)


def document_communities(nodes: list[dict], edges: list[dict], seed: int = 0) -> dict[str, int]:
    """node_id → community (Louvain, fixed seed), numbered by each community's first node.

    Louvain starts from the leaves grouped by (parent, page) — the groups its first level
    finds anyway — as networkx's first level needs about n/4 passes over a reading-order
    chain of n leaves (minutes for a 10k-node manual; grouped: under a second, the same
    partition for > 99.8 % of node pairs on the shared PDFs). Intra-group edges become
    self-loops, so modularity is that of the node graph.
    """
    import networkx as nx
    from networkx.algorithms.community import louvain_communities

    ordered = sorted(nodes, key=lambda n: n["order"])
    block = {n["node_id"]: _block(n) for n in ordered}
    rank: dict[str, int] = {}  # a group's position: its first node's
    for node in ordered:
        rank.setdefault(block[node["node_id"]], len(rank))
    weights: dict[tuple[str, str], float] = {}
    for edge in edges:
        a, b = block.get(edge["src_node"]), block.get(edge["dst_node"])
        if a is None or b is None or edge["src_node"] == edge["dst_node"]:
            continue
        key = (a, b) if rank[a] <= rank[b] else (b, a)
        weights[key] = weights.get(key, 0.0) + float(edge["weight"])
    if len(rank) == 1 or (len(rank) == 2 and len(weights) == 1 and not _loops(weights)):
        parts = [set(rank)]  # what Louvain finds, without its setup cost (passage documents)
    elif weights:
        graph = nx.Graph()
        graph.add_nodes_from(rank)
        graph.add_weighted_edges_from(
            (a, b, w)
            for (a, b), w in sorted(weights.items(), key=lambda e: (rank[e[0][0]], rank[e[0][1]]))
        )
        parts = louvain_communities(graph, weight="weight", resolution=1.0, seed=seed)
    else:
        parts = [{b} for b in rank]
    firsts = [min(rank[b] for b in part) for part in parts]
    number = {first: i for i, first in enumerate(sorted(firsts))}
    community = {b: number[first] for part, first in zip(parts, firsts, strict=True) for b in part}
    return {n["node_id"]: community[block[n["node_id"]]] for n in ordered}


def graph_columns(nodes: list[dict], doc_id: str, seed: int = 0) -> dict[str, str]:
    """The per-document row columns the index job carries: ``edges`` (JSON list of edge rows)
    and ``communities`` (JSON object node_id → community)."""
    edges = document_edges(nodes, doc_id)
    communities = document_communities(nodes, edges, seed=seed) if nodes else {}
    return {"edges": json.dumps(edges), "communities": json.dumps(communities)}
