"""The read model of an index: the query side's one view of the tables, held in memory.

Built from ``IndexTables`` (the committed rows of each table, as Arrow tables: read from Lance
by ``pipelines.store.reader``, or made in memory by a test), never from disk itself. A document
is visible when it is committed (the reader's rule) and its status is not ``failed``; nodes,
mentions and edges of anything else are left out. Nodes are held in document order (document by
``uri``, then ``order``) so that a document is one contiguous range of positions.

    model = ReadModel.from_tables(tables, backend)
    doc = model.find_document("report.pdf")       # file name, doc_id or uri
    lo, hi = model.doc_range(doc)                 # its node positions

The node-level arrays serve the query API (BookRAG, DeepRead, LAD-RAG, dense). The document-level
view of passage retrieval and ZoomRAG (``operators.query.documents.DocumentView``: document
vectors, the document–entity matrix, title entities, chunks) is derived from them;
``doc_vectors`` is computed here, at build time, from the stored vectors as they are (the node
rows are then scaled to unit length).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import scipy.sparse as sp

from bookindex.operators.config import METHODS_BM25_B
from bookindex.operators.graph.entity_linking import EntityLinker
from bookindex.operators.kinds import FAILED, LEAF_KINDS, ROOT, STRUCTURE_KINDS
from bookindex.operators.models import ModelBackend
from bookindex.operators.query.bm25 import DEFAULT_B, Bm25
from bookindex.operators.query.bm25_store import bm25_from_store

# What the read model reads of each table (the reader adds doc_id where it filters by it).
COLUMNS: dict[str, list[str]] = {
    "documents": ["doc_id", "uri", "title", "n_pages", "status", "toc"],
    "nodes": [
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
        "bbox",
        "vector",
        "sentence_vectors",
    ],
    "entities": ["entity_id", "name", "type", "aliases"],
    "mentions": ["entity_id", "node_id"],
    "relations": ["src_entity", "dst_entity", "weight"],
    "edges": ["src_node", "dst_node", "type"],
    "communities": ["node_id", "community"],
}
EMBED_CACHE = 4096  # texts whose vectors the read model keeps (the oldest go first)
DOC_BM25_KEPT = 64  # one-document BM25 indexes the read model keeps (_document_bm25)

# Columns an index built by an older job lacks; the reader leaves them out there (the view
# then says what to do: ``operators.query.documents.StaleIndexError``).
OPTIONAL_COLUMNS: dict[str, list[str]] = {"nodes": ["sentence_vectors"]}


@dataclass
class IndexTables:
    """The committed rows of an index's tables (``COLUMNS`` of each), as Arrow tables."""

    documents: pa.Table
    nodes: pa.Table
    entities: pa.Table
    mentions: pa.Table
    relations: pa.Table
    edges: pa.Table
    communities: pa.Table


@dataclass
class Document:
    position: int
    doc_id: str
    uri: str
    name: str  # the PDF's file name, or a passage's id
    title: str
    n_pages: int
    toc: list[dict]

    @property
    def passage(self) -> bool:
        """A passage of a passage corpus (its uri is ``file#id``), not a PDF."""
        return "#" in self.uri


def document_name(uri: str) -> str:
    """The passage id of ``file#id``, else the file name."""
    return uri.rsplit("#", 1)[1] if "#" in uri else Path(uri).name


def match_document(name: str, documents: Sequence[Document]) -> Document:
    """The document ``name`` names: its file name, doc_id (or a prefix of 12 or more), uri,
    or title (any case; a title two documents share names neither). KeyError with what went
    wrong otherwise."""
    wanted = name.strip()
    for d in documents:
        if wanted in (d.name, d.doc_id, d.uri) or (
            len(wanted) >= 12 and d.doc_id.startswith(wanted)
        ):
            return d
    folded = " ".join(wanted.split()).casefold()
    titled = [d for d in documents if " ".join((d.title or "").split()).casefold() == folded]
    if len(titled) == 1:
        return titled[0]
    if titled:
        names = ", ".join(d.name for d in titled[:5])
        raise KeyError(f"more than one document is titled {name!r} ({names}): name its file")
    raise KeyError(
        f"no document {name!r} in the index ({len(documents)} documents; "
        "a file name, a title or a doc_id)"
    )


@dataclass
class ReadModel:
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
    has_vector: np.ndarray  # bool per node: the index holds a vector for it
    doc_vectors: np.ndarray  # (n_docs, dim): normalised sum of the stored leaf vectors
    entity_ids: list[str]
    entity_names: list[list[str]]  # canonical name first, then aliases
    entity_types: list[str]
    mentions: sp.csr_matrix  # (n_nodes, n_entities) 0/1: the GT-link matrix M
    relations: sp.csr_matrix  # (n_entities, n_entities) symmetric weights
    edges: dict[str, tuple[np.ndarray, np.ndarray]]  # type → (src positions, dst positions)
    community: np.ndarray  # node → community within its document, −1 when unknown
    # a passage leaf's position → its sentences' stored vectors (n_sentences, dim), as stored
    sentence_vectors: dict[int, np.ndarray] = field(default_factory=dict)
    backend: ModelBackend | None = None
    timings: dict[str, float] = field(default_factory=dict)
    _position: dict[str, int] = field(default_factory=dict)
    _sections: dict[tuple[int, int], int] = field(default_factory=dict)
    _section_leaves: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    _ranges: list[tuple[int, int]] = field(default_factory=list)
    _linker: EntityLinker | None = None
    bm25_headings: bool = True  # the methods' BM25 reads headings (relevance.bm25_headings)
    bm25_b: float = METHODS_BM25_B  # the methods' BM25 length normalisation (relevance.bm25_b)
    bm25_scope: str = "document"  # whose statistics score one PDF's nodes (relevance.bm25_scope)
    store_dir: Path | None = None  # where the BM25 indexes are kept (operators.query.bm25_store)
    lexical_sources: dict[str, str] = field(default_factory=dict)  # index → "read" | "built"
    _lexical: Bm25 | None = None  # the nodes' own words (the hybrid baseline's)
    _lexical_in_context: Bm25 | None = None  # with their section headings (the methods')
    _lexical_in_context_b: float | None = None  # the b it was built with
    # (document, headings, b) → that PDF's own BM25, least recently used first
    _doc_lexical: dict[tuple[int, bool, float], Bm25] = field(default_factory=dict)
    _doc_lexical_lock: threading.Lock = field(default_factory=threading.Lock)
    _embedded: dict[str, np.ndarray] = field(default_factory=dict)  # text → unit vector
    _embed_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_tables(cls, tables: IndexTables, backend: ModelBackend | None = None) -> ReadModel:
        started = time.perf_counter()
        model = _build(tables)
        model.backend = backend
        model.timings["build_s"] = time.perf_counter() - started
        return model

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
        """A document's position from its file name, title, doc_id (or a prefix of 12+) or
        uri (``match_document``)."""
        return match_document(name, self.documents).position

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
        if self.kind[position] == ROOT:
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

    # ---- vectors and words --------------------------------------------------------------------
    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``: those not embedded lately in one backend call, the rest
        from a small cache (so a batch's questions, embedded together by the query engine,
        are not embedded again by each agent)."""
        with self._embed_lock:
            found = {t: self._embedded.get(t) for t in texts}
        missing = [t for t, v in found.items() if v is None]
        if missing:
            vectors = np.asarray(self.backend.embed(missing), np.float32)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            found.update(zip(missing, vectors / np.where(norms > 0, norms, 1.0), strict=True))
            with self._embed_lock:
                self._embedded.update((t, found[t]) for t in missing)
                while len(self._embedded) > EMBED_CACHE:
                    self._embedded.pop(next(iter(self._embedded)))
        if not texts:
            return np.zeros((0, self.vectors.shape[1]), np.float32)
        return np.stack([found[t] for t in texts])

    def dense_scores(self, query_vector: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return self.vectors[positions] @ np.asarray(query_vector, np.float32).ravel()

    def lexical_scores(
        self, query: str, positions: np.ndarray, headings: bool = True
    ) -> np.ndarray:
        """BM25 over every node's title, text and summary; with ``headings`` (the methods'
        relevance), each node's text is read after the titles of the sections above it
        (``heading_paths``), so that a paragraph under "Grading" is found by a question about
        grading although its own words never say it. Without, the node's own words alone (the
        ``hybrid`` baseline: plain chunks; every caller when ``bm25_headings`` is off, as
        ``relevance.bm25_headings`` sets it). The index with headings normalises lengths by
        ``bm25_b`` (``relevance.bm25_b``), the other by bm25s's default. An index whose nodes
        sit under no section (a passage corpus) holds one index for both: the baseline's.

        Whose statistics (``bm25_scope``, ``relevance.bm25_scope``): where ``positions`` lie in
        one PDF and the scope is ``document``, that document's own BM25 (its nodes' term
        rarities and lengths: ``_document_bm25``), so that a question asked of one PDF gets the
        same scores whatever else the index holds; else one index for the whole corpus."""
        positions = np.asarray(positions, np.int64)
        in_context = headings and self.bm25_headings
        doc = self._one_pdf(positions)
        if doc is not None:
            lo, _ = self.doc_range(doc)
            return self._document_bm25(doc, in_context).scores(query)[positions - lo]
        lexical = self._bm25_in_context() if in_context else self._bm25()
        return lexical.scores(query)[positions]

    def _one_pdf(self, positions: np.ndarray) -> int | None:
        """The PDF all ``positions`` lie in, where BM25 reads one document's statistics (None
        where the index holds that PDF alone: its statistics are the index's, whose BM25 is
        kept beside the index)."""
        if self.bm25_scope != "document" or positions.size == 0:
            return None
        doc = int(self.doc[positions[0]])
        if self.documents[doc].passage or not np.all(self.doc[positions] == doc):
            return None
        return None if self.doc_range(doc) == (0, self.n_nodes) else doc

    def _document_bm25(self, doc: int, in_context: bool) -> Bm25:
        """BM25 over one document's nodes (in document order, as ``scope`` gives them), read
        as the whole index's of the same kind reads them; the latest ``DOC_BM25_KEPT`` kept
        (built on first use: MMLongBench's 10-K of 4,857 nodes in about 0.2 s)."""
        b = self.bm25_b if in_context else DEFAULT_B
        key = (doc, in_context, b)
        with self._doc_lexical_lock:
            found = self._doc_lexical.pop(key, None)
            if found is not None:
                self._doc_lexical[key] = found  # most recently used last
                return found
        paths = self.heading_paths(doc) if in_context else None
        if in_context and not any(paths):  # no sections: one index for both, the baseline's
            bm25 = self._document_bm25(doc, False)
        else:
            bm25 = Bm25(self._bm25_texts(self.scope(doc), paths), b)
        with self._doc_lexical_lock:
            self._doc_lexical[key] = bm25
            while len(self._doc_lexical) > DOC_BM25_KEPT:
                del self._doc_lexical[next(iter(self._doc_lexical))]
        return bm25

    def _bm25(self) -> Bm25:
        if self._lexical is None:
            self._lexical = self._bm25_of(self._bm25_texts(self.scope(None)), "nodes")
        return self._lexical

    def _bm25_in_context(self) -> Bm25:
        if self._lexical_in_context is None or self._lexical_in_context_b != self.bm25_b:
            paths = self.heading_paths()
            if not any(paths):
                self._lexical_in_context = self._bm25()
            else:
                texts = self._bm25_texts(self.scope(None), paths)
                self._lexical_in_context = self._bm25_of(texts, "headings", self.bm25_b)
            self._lexical_in_context_b = self.bm25_b
        return self._lexical_in_context

    def _bm25_texts(self, positions: np.ndarray, paths: list[str] | None = None) -> list[str]:
        """What BM25 reads of each node of ``positions``: its text after its heading path
        (``paths``, one per position) where it has one, else its own words (" " for a node
        without text); the whole index's and a document's own index read the same."""
        paths = paths or [""] * len(positions)
        return [
            f"{path}\n{self.node_text(i)}" if path else self.node_text(i) or " "
            for i, path in zip(positions.tolist(), paths, strict=True)
        ]

    def _bm25_of(self, texts: list[str], name: str, b: float = DEFAULT_B) -> Bm25:
        """The BM25 index ``name`` of ``texts`` (length normalisation ``b``): read from
        ``store_dir`` when it holds the index of these texts, else built (and kept there)."""
        bm25, how = bm25_from_store(texts, self.store_dir, name, b)
        self.timings[f"bm25_{name}_s"] = bm25.build_s  # built, or read
        self.lexical_sources[name] = how
        return bm25

    def heading_paths(self, doc: int | None = None) -> list[str]:
        """Per node (of document ``doc``, or of the index), the titles of the sections above
        it, outermost first, one per line (the document's root, its title, left out: every
        node of the document shares it); empty for nodes under no section."""
        titled: dict[int, str] = {}  # section position → its path including itself

        def path_of(section: int) -> str:
            if section < 0 or self.kind[section] == ROOT:
                return ""
            if section not in titled:
                above = path_of(int(self.parent[section]))
                own = (self.title[section] or "").strip()
                titled[section] = "\n".join(t for t in (above, own) if t)
            return titled[section]

        return [path_of(int(self.parent[i])) for i in self.scope(doc)]

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


# ---- building ---------------------------------------------------------------------------------
def _build(tables: IndexTables) -> ReadModel:
    """The read model of ``tables``: visible documents, their nodes in document order, and the
    entity, mention, relation, edge and community arrays over those nodes."""
    documents = _documents(tables.documents)
    doc_position = {d.doc_id: d.position for d in documents}
    columns = [c for c in COLUMNS["nodes"] if c != "sentence_vectors"]
    nodes = pl.from_arrow(tables.nodes.select(columns)).with_row_index("row")
    nodes = nodes.filter(pl.col("doc_id").is_in(list(doc_position)))
    nodes = nodes.with_columns(
        pl.col("doc_id").replace_strict(doc_position, return_dtype=pl.Int32).alias("doc")
    ).sort(["doc", "order"])
    node_ids = nodes["node_id"].to_list()
    position = {n: i for i, n in enumerate(node_ids)}
    doc = nodes["doc"].to_numpy().astype(np.int64)
    kind = np.asarray(nodes["kind"].to_list(), dtype=object)
    stored, has_vector = _stored_vectors(nodes["vector"])
    entities, column = _entities(tables.entities)
    return ReadModel(
        documents=documents,
        node_ids=node_ids,
        doc=doc,
        kind=kind,
        level=nodes["level"].fill_null(0).to_numpy(),
        title=nodes["title"].fill_null("").to_list(),
        text=nodes["text"].fill_null("").to_list(),
        summary=nodes["summary"].fill_null("").to_list(),
        page_start=nodes["page_start"].fill_null(0).to_numpy(),
        page_end=nodes["page_end"].fill_null(0).to_numpy(),
        sec_id=nodes["sec_id"].fill_null(0).to_numpy(),
        para_idx=nodes["para_idx"].fill_null(0).to_numpy(),
        parent=np.array(
            [position.get(p, -1) if p else -1 for p in nodes["parent_id"].to_list()], np.int64
        ),
        bbox=_boxes(nodes["bbox"]),
        vectors=_unit_rows(stored),
        has_vector=has_vector,
        doc_vectors=_leaf_sums(stored, doc, kind, has_vector, len(documents)),
        entity_ids=entities["entity_id"].to_list(),
        entity_names=[
            [n, *(a or [])]
            for n, a in zip(entities["name"].to_list(), entities["aliases"].to_list(), strict=True)
        ],
        entity_types=entities["type"].fill_null("").to_list(),
        mentions=_mentions(tables.mentions, position, column),
        relations=_relations(tables.relations, column),
        edges=_edges(tables.edges, position),
        community=_communities(tables.communities, position),
        sentence_vectors=_sentence_vectors(tables.nodes, nodes["row"].to_numpy()),
    )


def _documents(table: pa.Table) -> list[Document]:
    docs = pl.from_arrow(table.select(COLUMNS["documents"]))
    docs = docs.filter(pl.col("status") != FAILED).sort("uri")
    return [
        Document(
            position=i,
            doc_id=row["doc_id"],
            uri=row["uri"],
            name=document_name(row["uri"]),
            title=row["title"] or "",
            n_pages=row["n_pages"] or 0,
            toc=json.loads(row["toc"] or "[]"),
        )
        for i, row in enumerate(docs.iter_rows(named=True))
    ]


def _entities(table: pa.Table) -> tuple[pl.DataFrame, dict[str, int]]:
    entities = pl.from_arrow(table.select(COLUMNS["entities"]))
    return entities, {e: i for i, e in enumerate(entities["entity_id"].to_list())}


def _stored_vectors(column: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """The node vectors as stored (zero rows where missing) and which nodes have one."""
    values = column.to_list()
    # The stored width: the column's fixed size (the index job writes FixedSizeList columns),
    # else the first vector's length; an index without vectors has width 0.
    dim = getattr(column.dtype, "size", None) or next((len(v) for v in values if v is not None), 0)
    out = np.zeros((len(values), dim), np.float32)
    has = np.zeros(len(values), bool)
    for i, v in enumerate(values):
        if v is not None:
            out[i] = v
            has[i] = True
    return out, has


def _sentence_vectors(table: pa.Table, rows: np.ndarray) -> dict[int, np.ndarray]:
    """Per node position (``rows``: each position's row in ``table``), the stored vectors of
    its sentences; nodes without (PDF nodes, an index built before they were stored) absent."""
    if "sentence_vectors" not in table.column_names:
        return {}
    column = table.column("sentence_vectors").take(pa.array(rows, pa.int64())).combine_chunks()
    if column.null_count == len(column):
        return {}
    offsets = column.offsets.to_numpy()
    inner = column.values  # one sentence vector per entry (fixed or variable width)
    flat = inner.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    width = flat.size // max(len(inner), 1)
    flat = flat.reshape(len(inner), width)
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    return {int(p): flat[offsets[p] : offsets[p + 1]] for p in np.flatnonzero(valid).tolist()}


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _leaf_sums(
    stored: np.ndarray, doc: np.ndarray, kind: np.ndarray, has: np.ndarray, n_docs: int
) -> np.ndarray:
    """Per document, the normalised sum of its leaves' stored vectors, added in reading order
    (a passage: its one paragraph's vector)."""
    sums = np.zeros((n_docs, stored.shape[1]), np.float32)
    leaves = np.flatnonzero(np.isin(kind, LEAF_KINDS) & has)
    np.add.at(sums, doc[leaves], stored[leaves])
    return _unit_rows(sums)


def _boxes(column: pl.Series) -> np.ndarray:
    out = np.zeros((len(column), 4), np.float32)
    for i, box in enumerate(column.to_list()):
        if box is not None:
            out[i] = box
    return out


def _mentions(table: pa.Table, position: dict[str, int], column: dict[str, int]) -> sp.csr_matrix:
    """The 0/1 node × entity matrix M of the mentions of visible nodes and known entities."""
    shape = (len(position), len(column))
    pairs = {
        (position[n], column[e])
        for e, n in zip(
            table.column("entity_id").to_pylist(), table.column("node_id").to_pylist(), strict=True
        )
        if n in position and e in column
    }
    if not pairs:
        return sp.csr_matrix(shape, dtype=np.float32)
    rows, cols = map(np.asarray, zip(*sorted(pairs), strict=True))
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=shape)


def _relations(table: pa.Table, column: dict[str, int]) -> sp.csr_matrix:
    """Symmetric entity × entity weights (a relation without a weight counts 1)."""
    n_e = len(column)
    triples = [
        (column[s], column[d], float(w or 1.0))
        for s, d, w in zip(
            table.column("src_entity").to_pylist(),
            table.column("dst_entity").to_pylist(),
            table.column("weight").to_pylist(),
            strict=True,
        )
        if s in column and d in column and s != d
    ]
    if not triples:
        return sp.csr_matrix((n_e, n_e), dtype=np.float32)
    r, c, w = map(np.asarray, zip(*triples, strict=True))
    rel = sp.csr_matrix((w.astype(np.float32), (r, c)), shape=(n_e, n_e))
    return (rel + rel.T).tocsr()


def _edges(table: pa.Table, position: dict[str, int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out: dict[str, tuple[list[int], list[int]]] = {}
    for s, d, t in zip(
        table.column("src_node").to_pylist(),
        table.column("dst_node").to_pylist(),
        table.column("type").to_pylist(),
        strict=True,
    ):
        if s in position and d in position:
            src, dst = out.setdefault(t, ([], []))
            src.append(position[s])
            dst.append(position[d])
    return {t: (np.asarray(s, np.int64), np.asarray(d, np.int64)) for t, (s, d) in out.items()}


def _communities(table: pa.Table, position: dict[str, int]) -> np.ndarray:
    out = np.full(len(position), -1, np.int64)
    for node_id, c in zip(
        table.column("node_id").to_pylist(), table.column("community").to_pylist(), strict=True
    ):
        if node_id in position:
            out[position[node_id]] = c
    return out
