"""The index as the query tools see it: every table read once into arrays, per-document views.

Visible documents are those in the ``documents`` table (the commit marker of a run) whose status
is not ``failed``; nodes, mentions and edges of anything else are ignored. Nodes are held in
document order (document by ``uri``, then ``order``) so a document is one contiguous range.

    index = QueryIndex.open("index_dir")
    doc = index.find_document("report.pdf")      # file name, doc_id or uri
    lo, hi = index.doc_range(doc)                # its node positions
    scores = index.text_scores("question", index.leaves(doc))
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from operators.graph.entity_linking import EntityLinker
from operators.models import ModelBackend, ModelConfig, load_backend
from operators.query.bookrag_ops import minmax
from pipelines.store import lance_store
from pipelines.store.schemas import (
    COMMUNITIES,
    DOCUMENTS,
    EDGES,
    ENTITIES,
    MENTIONS,
    NODES,
    RELATIONS,
)

LEAF_KINDS = ("text", "list", "table", "image", "caption", "formula")
STRUCTURE_KINDS = ("root", "section")
_NODE_COLUMNS = [
    "doc_id",
    "node_id",
    "parent_id",
    "kind",
    "level",
    "title",
    "text",
    "summary",
    "page_start",
    "page_end",
    "sec_id",
    "para_idx",
    "order",
    "n_tokens",
    "bbox",
    "vector",
]


@dataclass
class Document:
    position: int
    doc_id: str
    uri: str
    name: str  # the PDF's file name, or a passage's id
    title: str
    n_pages: int
    toc: list[dict]


@dataclass
class QueryIndex:
    """Arrays over all visible nodes (position = row), entities and the layout graph."""

    documents: list[Document]
    node_ids: list[str]
    doc: np.ndarray  # node → document position
    kind: np.ndarray  # object array of str
    level: np.ndarray
    title: list[str]
    text: list[str]
    summary: list[str]
    page_start: np.ndarray
    page_end: np.ndarray
    sec_id: np.ndarray
    para_idx: np.ndarray  # 0 for sections and roots
    parent: np.ndarray  # parent's position, −1 for roots
    bbox: np.ndarray  # (n_nodes, 4) x0, y0, x1, y1 in points
    vectors: np.ndarray  # (n_nodes, dim) unit rows; zero rows where the index has no vector
    entity_ids: list[str]
    entity_names: list[list[str]]  # canonical name first, then aliases
    entity_types: list[str]
    mentions: sp.csr_matrix  # (n_nodes, n_entities) 0/1: the GT-link matrix M
    relations: sp.csr_matrix  # (n_entities, n_entities) symmetric weights
    edges: dict[str, tuple[np.ndarray, np.ndarray]]  # type → (src positions, dst positions)
    community: np.ndarray  # node → community within its document, −1 when unknown
    backend: ModelBackend | None = None
    _position: dict[str, int] = field(default_factory=dict)
    _sections: dict[tuple[int, int], int] = field(default_factory=dict)
    _section_leaves: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    _ranges: list[tuple[int, int]] = field(default_factory=list)
    _linker: EntityLinker | None = None
    _bm25: object | None = None
    timings: dict[str, float] = field(default_factory=dict)

    # ---- loading ------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        index_dir: str | Path,
        config: ModelConfig | None = None,
        backend: ModelBackend | None = None,
    ) -> QueryIndex:
        started = time.perf_counter()
        index = _load(Path(index_dir))
        index.backend = backend or load_backend(config or ModelConfig())
        index.timings["open_s"] = time.perf_counter() - started
        return index

    def __post_init__(self) -> None:
        self._position = {node_id: i for i, node_id in enumerate(self.node_ids)}
        n_docs = len(self.documents)
        bounds = np.searchsorted(self.doc, np.arange(n_docs + 1))
        self._ranges = [(int(bounds[d]), int(bounds[d + 1])) for d in range(n_docs)]
        for i in range(len(self.node_ids)):
            key = (int(self.doc[i]), int(self.sec_id[i]))
            if self.kind[i] in STRUCTURE_KINDS:
                self._sections[key] = i
            else:
                self._section_leaves.setdefault(key, []).append(i)

    # ---- documents and the tree --------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return len(self.node_ids)

    def find_document(self, name: str) -> int:
        """A document's position from its file name, doc_id (or a prefix of 12+), or uri."""
        wanted = name.strip()
        for d in self.documents:
            if wanted in (d.name, d.doc_id, d.uri) or (
                len(wanted) >= 12 and d.doc_id.startswith(wanted)
            ):
                return d.position
        raise KeyError(f"no document {name!r} in the index ({len(self.documents)} documents)")

    def doc_range(self, doc: int) -> tuple[int, int]:
        return self._ranges[doc]

    def position(self, node_id: str) -> int:
        return self._position[node_id]

    def scope(self, doc: int | None) -> np.ndarray:
        """Node positions of one document, or of the whole index."""
        if doc is None:
            return np.arange(self.n_nodes)
        lo, hi = self.doc_range(doc)
        return np.arange(lo, hi)

    def leaves(self, doc: int | None = None) -> np.ndarray:
        positions = self.scope(doc)
        return positions[np.isin(self.kind[positions], LEAF_KINDS)]

    def section_node(self, doc: int, sec_id: int) -> int | None:
        return self._sections.get((doc, sec_id))

    def section_leaves(self, doc: int, sec_id: int) -> list[int]:
        """Leaves directly under a section, in para_idx order."""
        return self._section_leaves.get((doc, sec_id), [])

    def subtree(self, position: int) -> np.ndarray:
        """A node and all its descendants (contiguous in document order)."""
        doc = int(self.doc[position])
        _, hi = self.doc_range(doc)
        if self.kind[position] not in STRUCTURE_KINDS:
            return np.array([position])
        if self.kind[position] == "root":
            return self.scope(doc)
        level = self.level[position]
        end = position + 1
        while end < hi and not (self.kind[end] in STRUCTURE_KINDS and self.level[end] <= level):
            end += 1
        return np.arange(position, end)

    def ancestor_section(self, position: int, depth: int) -> int:
        """The section at ``depth`` (1 = chapter) above a node; the deepest one above it when the
        tree is shallower; the root for nodes outside any section."""
        chain = []
        p = position if self.kind[position] in STRUCTURE_KINDS else int(self.parent[position])
        while p >= 0:
            chain.append(p)
            p = int(self.parent[p])
        chain.reverse()  # root first
        return chain[min(depth, len(chain) - 1)]

    def node_text(self, position: int) -> str:
        """What a reader sees of a node: caption/title and text, or the figure's description."""
        parts = []
        title, text, summary = self.title[position], self.text[position], self.summary[position]
        if title and title != text:
            parts.append(title)
        if text:
            parts.append(text)
        if summary and summary not in parts:
            parts.append(summary)
        return "\n".join(parts)

    def toc(self, doc: int) -> list[dict]:
        return self.documents[doc].toc

    # ---- entities -----------------------------------------------------------------------------
    @property
    def linker(self) -> EntityLinker:
        if self._linker is None:
            self._linker = EntityLinker(self.entity_names)
        return self._linker

    # ---- text relevance -----------------------------------------------------------------------
    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self.backend.embed(texts), np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)

    def dense_scores(self, query_vector: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return self.vectors[positions] @ np.asarray(query_vector, np.float32).ravel()

    def lexical_scores(self, query: str, positions: np.ndarray) -> np.ndarray:
        """BM25 over every node's title, text and summary (one index for the whole corpus)."""
        bm25, tokenize = self._lexical()
        tokens = tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        if not tokens:
            return np.zeros(len(positions), np.float32)
        return np.asarray(bm25.get_scores(tokens), np.float32)[positions]

    def text_scores(
        self,
        query: str,
        positions: np.ndarray,
        query_vector: np.ndarray | None = None,
        dense_weight: float = 0.5,
    ) -> np.ndarray:
        """Hybrid relevance in [0, 1]: dense_weight × dense cosine + the rest × BM25, each
        min–max scaled within ``positions`` (the scope the question is asked in)."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return np.zeros(0, np.float32)
        if query_vector is None:
            query_vector = self.embed([query])[0]
        dense = minmax(self.dense_scores(query_vector, positions))
        lexical = minmax(self.lexical_scores(query, positions))
        return (dense_weight * dense + (1 - dense_weight) * lexical).astype(np.float32)

    def _lexical(self):
        if self._bm25 is None:
            import bm25s

            started = time.perf_counter()
            texts = [self.node_text(i) or " " for i in range(self.n_nodes)]
            tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False, return_ids=False)
            index = bm25s.BM25()
            index.index(tokens, show_progress=False)
            self._bm25 = (index, bm25s.tokenize)
            self.timings["bm25_build_s"] = time.perf_counter() - started
        return self._bm25

    # ---- layout graph -------------------------------------------------------------------------
    def neighbours(self, position: int) -> list[tuple[int, str, str]]:
        """(neighbour position, edge type, direction "out"/"in") of a node in the layout graph."""
        out = []
        for edge_type, (src, dst) in self.edges.items():
            for other in dst[src == position]:
                out.append((int(other), edge_type, "out"))
            for other in src[dst == position]:
                out.append((int(other), edge_type, "in"))
        return out

    def community_members(self, position: int) -> np.ndarray:
        c = self.community[position]
        if c < 0:
            return np.array([position])
        positions = self.scope(int(self.doc[position]))
        return positions[self.community[positions] == c]


def _load(index_dir: Path) -> QueryIndex:
    if not lance_store.exists(index_dir, DOCUMENTS):
        raise FileNotFoundError(f"no index at {index_dir} (no documents table)")
    docs = pl.from_arrow(lance_store.read_table(index_dir, DOCUMENTS))
    docs = docs.filter(pl.col("status") != "failed").sort("uri")
    documents = [
        Document(
            position=i,
            doc_id=row["doc_id"],
            uri=row["uri"],
            name=row["uri"].rsplit("#", 1)[1] if "#" in row["uri"] else Path(row["uri"]).name,
            title=row["title"] or "",
            n_pages=row["n_pages"] or 0,
            toc=json.loads(row["toc"] or "[]"),
        )
        for i, row in enumerate(docs.iter_rows(named=True))
    ]
    doc_position = {d.doc_id: d.position for d in documents}
    nodes = pl.from_arrow(lance_store.read_table(index_dir, NODES, _NODE_COLUMNS))
    nodes = nodes.filter(pl.col("doc_id").is_in(list(doc_position)))
    nodes = nodes.with_columns(
        pl.col("doc_id").replace_strict(doc_position, return_dtype=pl.Int32).alias("doc")
    ).sort(["doc", "order"])
    node_ids = nodes["node_id"].to_list()
    position = {n: i for i, n in enumerate(node_ids)}
    parent = np.array(
        [position.get(p, -1) if p else -1 for p in nodes["parent_id"].to_list()], np.int64
    )
    vectors = _vectors(nodes["vector"])

    entities = pl.from_arrow(
        lance_store.read_table(index_dir, ENTITIES, ["entity_id", "name", "type", "aliases"])
    )
    entity_ids = entities["entity_id"].to_list()
    column = {e: i for i, e in enumerate(entity_ids)}
    names = [
        [n, *(a or [])]
        for n, a in zip(entities["name"].to_list(), entities["aliases"].to_list(), strict=True)
    ]
    mention_rows = pl.from_arrow(
        lance_store.read_table(index_dir, MENTIONS, ["entity_id", "node_id"])
    )
    pairs = [
        (position[n], column[e])
        for e, n in zip(
            mention_rows["entity_id"].to_list(), mention_rows["node_id"].to_list(), strict=True
        )
        if n in position and e in column
    ]
    mentions = _indicator(pairs, (len(node_ids), len(entity_ids)))
    relation_rows = pl.from_arrow(
        lance_store.read_table(index_dir, RELATIONS, ["src_entity", "dst_entity", "weight"])
    )
    triples = [
        (column[s], column[d], float(w or 1.0))
        for s, d, w in zip(
            relation_rows["src_entity"].to_list(),
            relation_rows["dst_entity"].to_list(),
            relation_rows["weight"].to_list(),
            strict=True,
        )
        if s in column and d in column and s != d
    ]
    n_e = len(entity_ids)
    if triples:
        r, c, w = map(np.asarray, zip(*triples, strict=True))
        rel = sp.csr_matrix((w.astype(np.float32), (r, c)), shape=(n_e, n_e))
        rel = (rel + rel.T).tocsr()
    else:
        rel = sp.csr_matrix((n_e, n_e), dtype=np.float32)
    return QueryIndex(
        documents=documents,
        node_ids=node_ids,
        doc=nodes["doc"].to_numpy().astype(np.int64),
        kind=np.asarray(nodes["kind"].to_list(), dtype=object),
        level=nodes["level"].fill_null(0).to_numpy(),
        title=nodes["title"].fill_null("").to_list(),
        text=nodes["text"].fill_null("").to_list(),
        summary=nodes["summary"].fill_null("").to_list(),
        page_start=nodes["page_start"].fill_null(0).to_numpy(),
        page_end=nodes["page_end"].fill_null(0).to_numpy(),
        sec_id=nodes["sec_id"].fill_null(0).to_numpy(),
        para_idx=nodes["para_idx"].fill_null(0).to_numpy(),
        parent=parent,
        bbox=_boxes(nodes["bbox"]),
        vectors=vectors,
        entity_ids=entity_ids,
        entity_names=names,
        entity_types=entities["type"].fill_null("").to_list(),
        mentions=mentions,
        relations=rel,
        edges=_edges(index_dir, position),
        community=_communities(index_dir, position, len(node_ids)),
    )


def _vectors(column: pl.Series) -> np.ndarray:
    n = len(column)
    dim = next((len(v) for v in column.head(1000).to_list() if v is not None), 384)
    out = np.zeros((n, dim), np.float32)
    for i, v in enumerate(column.to_list()):
        if v is not None:
            out[i] = v
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


def _boxes(column: pl.Series) -> np.ndarray:
    out = np.zeros((len(column), 4), np.float32)
    for i, box in enumerate(column.to_list()):
        if box is not None:
            out[i] = box
    return out


def _indicator(pairs: list[tuple[int, int]], shape: tuple[int, int]) -> sp.csr_matrix:
    if not pairs:
        return sp.csr_matrix(shape, dtype=np.float32)
    rows, cols = map(np.asarray, zip(*sorted(set(pairs)), strict=True))
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=shape)


def _edges(index_dir: Path, position: dict[str, int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    if not lance_store.exists(index_dir, EDGES):
        return {}
    rows = pl.from_arrow(lance_store.read_table(index_dir, EDGES, ["src_node", "dst_node", "type"]))
    out: dict[str, tuple[list[int], list[int]]] = {}
    for s, d, t in zip(
        rows["src_node"].to_list(), rows["dst_node"].to_list(), rows["type"].to_list(), strict=True
    ):
        if s in position and d in position:
            src, dst = out.setdefault(t, ([], []))
            src.append(position[s])
            dst.append(position[d])
    return {t: (np.asarray(s, np.int64), np.asarray(d, np.int64)) for t, (s, d) in out.items()}


def _communities(index_dir: Path, position: dict[str, int], n: int) -> np.ndarray:
    out = np.full(n, -1, np.int64)
    if not lance_store.exists(index_dir, COMMUNITIES):
        return out
    rows = pl.from_arrow(lance_store.read_table(index_dir, COMMUNITIES, ["node_id", "community"]))
    for node_id, c in zip(rows["node_id"].to_list(), rows["community"].to_list(), strict=True):
        if node_id in position:
            out[position[node_id]] = c
    return out
