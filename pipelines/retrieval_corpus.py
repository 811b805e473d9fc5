"""What retrieval needs from the index, read once from the Lance tables.

For PDFs a document is a PDF and its chunks are its tree leaves in reading order; for passage
corpora a document is a passage and its chunks are its sentences (ZoomRAG's setting).
A document's vector is the normalised mean of its leaf vectors (a passage: its one paragraph).

Entities are those of the index plus, for passage corpora, one title entity per distinct
passage title (``operators.graph.entity_linking.title_links``), computed here when the corpus is
loaded: it links the passages with that title and every passage whose text names the title,
the hyperlinks of the encyclopedia the passages come from. They follow the index's entities
(columns from ``n_index_entities`` on), with ids ``title:<normalised title>``. ``title_entity``
gives each passage its own title's entity (-1: none), so that a question that names a title can
be led to the passages that carry it (``pipelines.retrieval``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from operators.graph.entity_linking import EntityLinker, sentences, strip_accents, title_links
from operators.graph.resolution import normalise_name
from pipelines.store import lance_store
from pipelines.store.schemas import DOCUMENTS, ENTITIES, MENTIONS, NODES

LEAF_KINDS = ("text", "list", "table", "image", "caption", "formula")
TITLE_ENTITY = "title:"  # id prefix of the title entities added at load time


@dataclass
class Chunk:
    doc: int  # document position
    text: str
    node_id: str
    sec_id: int
    para_idx: int
    page: int
    vector: np.ndarray | None = None  # the leaf's vector from the index (None: a sentence)


@dataclass
class RetrievalCorpus:
    doc_ids: list[str]
    uris: list[str]
    titles: list[str]
    texts: list[str]  # title + leaf texts, for lexical search
    doc_vectors: np.ndarray  # (n_docs, dim), unit rows
    entity_ids: list[str]
    entity_names: list[list[str]]  # canonical name first, then aliases
    doc_entity: sp.csr_matrix  # (n_docs, n_entities) 0/1
    leaves: dict[int, list[Chunk]] = field(default_factory=dict)
    passage: list[bool] = field(default_factory=list)
    n_index_entities: int = -1  # entities from the index; title entities follow (-1: all)
    title_entity: np.ndarray | None = None  # per document: its own title entity, -1 none
    _linker: EntityLinker | None = None
    _query_linker: EntityLinker | None = None

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    def external_id(self, doc: int) -> str:
        """The passage id of a passage corpus (``file#id``), else the PDF's file name."""
        uri = self.uris[doc]
        return uri.rsplit("#", 1)[1] if "#" in uri else Path(uri).name

    @property
    def linker(self) -> EntityLinker:
        if self._linker is None:
            self._linker = EntityLinker(self.entity_names)
        return self._linker

    @property
    def query_linker(self) -> EntityLinker:
        """Linker for questions: names up to 10 words (long titles), compared without accents;
        call ``link(text, capitalised=True)`` so that common words do not link."""
        if self._query_linker is None:
            self._query_linker = EntityLinker(self.entity_names, max_words=10, fold_accents=True)
        return self._query_linker

    def chunks(self, doc: int) -> list[Chunk]:
        """A passage's sentences, or a PDF's leaves, in reading order."""
        leaves = self.leaves.get(doc, [])
        if not self.passage[doc]:
            return leaves
        out = []
        for leaf in leaves:
            out += [
                Chunk(doc, s, leaf.node_id, leaf.sec_id, leaf.para_idx, leaf.page)
                for s in sentences(leaf.text)
            ]
        return out


def load_corpus(index_dir: str | Path) -> RetrievalCorpus:
    docs = pl.from_arrow(lance_store.read_table(index_dir, DOCUMENTS)).filter(
        pl.col("status") != "failed"
    )
    docs = docs.sort("uri")
    nodes = pl.from_arrow(
        lance_store.read_table(
            index_dir,
            NODES,
            [
                "doc_id",
                "node_id",
                "kind",
                "title",
                "text",
                "order",
                "sec_id",
                "para_idx",
                "page_start",
                "vector",
            ],
        )
    )
    position = {d: i for i, d in enumerate(docs["doc_id"].to_list())}
    n_docs = len(position)
    nodes = nodes.filter(pl.col("doc_id").is_in(list(position))).sort(["doc_id", "order"])
    leaves: dict[int, list[Chunk]] = {}
    dim = len(nodes["vector"][0]) if nodes.height else 384
    sums = np.zeros((n_docs, dim), np.float32)
    texts = [[t] for t in docs["title"].fill_null("").to_list()]
    for row in nodes.filter(pl.col("kind").is_in(LEAF_KINDS)).iter_rows(named=True):
        doc = position[row["doc_id"]]
        text = row["text"] or row["title"] or ""
        vector = None if row["vector"] is None else np.asarray(row["vector"], np.float32)
        leaves.setdefault(doc, []).append(
            Chunk(
                doc,
                text,
                row["node_id"],
                row["sec_id"],
                row["para_idx"] or 0,
                row["page_start"],
                vector,
            )
        )
        texts[doc].append(text)
        if vector is not None:
            sums[doc] += vector
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    doc_vectors = sums / np.where(norms > 0, norms, 1.0)

    entities = pl.from_arrow(
        lance_store.read_table(index_dir, ENTITIES, ["entity_id", "name", "aliases", "doc_id"])
    )
    entity_ids = entities["entity_id"].to_list()
    aliases = entities["aliases"].to_list()
    names = [[n, *(a or [])] for n, a in zip(entities["name"].to_list(), aliases, strict=True)]
    column = {e: i for i, e in enumerate(entity_ids)}
    mentions = pl.from_arrow(lance_store.read_table(index_dir, MENTIONS, ["entity_id", "doc_id"]))
    pairs = mentions.unique().filter(pl.col("doc_id").is_in(list(position)))
    rows = [position[d] for d in pairs["doc_id"].to_list()]
    cols = [column[e] for e in pairs["entity_id"].to_list()]
    n_index_entities = len(entity_ids)
    passage = ["#" in u for u in docs["uri"].to_list()]
    titles = docs["title"].fill_null("").to_list()
    title_names, links, own_title = title_links(
        [t if p else "" for t, p in zip(titles, passage, strict=True)],
        ["\n".join(t[1:]) if p else "" for t, p in zip(texts, passage, strict=True)],
    )
    entity_ids += [TITLE_ENTITY + normalise_name(strip_accents(n[0])) for n in title_names]
    names += title_names
    rows += [d for d, _ in links]
    cols += [n_index_entities + e for _, e in links]
    doc_entity = sp.csr_matrix(
        (np.ones(len(rows), np.float32), (rows, cols)), shape=(n_docs, len(entity_ids))
    )
    doc_entity.sum_duplicates()
    doc_entity.data[:] = 1.0
    own_title = np.asarray(own_title, np.int64)
    return RetrievalCorpus(
        doc_ids=docs["doc_id"].to_list(),
        uris=docs["uri"].to_list(),
        titles=titles,
        texts=["\n".join(t) for t in texts],
        doc_vectors=doc_vectors,
        entity_ids=entity_ids,
        entity_names=names,
        doc_entity=doc_entity,
        leaves=leaves,
        passage=passage,
        n_index_entities=n_index_entities,
        title_entity=np.where(own_title >= 0, n_index_entities + own_title, -1),
    )
