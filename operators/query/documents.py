"""The document-level view of a read model: what passage retrieval and ZoomRAG work on.

For PDFs a document is a PDF and its chunks are its tree leaves in reading order; for passage
corpora a document is a passage and its chunks are its sentences (ZoomRAG's setting; their
vectors are written by the index job, ``chunk_sentences``: a query embeds only the question). A
document's vector is the read model's ``doc_vectors`` row (the normalised mean of its leaf
vectors; a passage: its one paragraph's).

Entities are those of the index plus, for passage corpora, one title entity per distinct
passage title (``operators.graph.entity_linking.title_links``), computed when the view is
derived (or read from the index directory where an earlier process stored them for the same
passages, ``operators.graph.title_link_store``): it links the passages with that title and
every passage whose text names the title, the hyperlinks of the encyclopedia the passages come from. They follow the index's entities
(columns from ``n_index_entities`` on), with ids ``title:<normalised title>``. ``title_entity``
gives each passage its own title's entity (-1: none), so that a question that names a title can
be led to the passages that carry it (``operators.query.zoom``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bookindex.operators.graph.entity_linking import EntityLinker, sentences, strip_accents
from bookindex.operators.graph.resolution import normalise_name
from bookindex.operators.graph.title_link_store import title_links_from_store
from bookindex.operators.query.read_model import ReadModel

TITLE_ENTITY = "title:"  # id prefix of the title entities of a passage corpus
REINDEX = (
    "the index job now stores the vectors of the sentences Chunk-Zoom ranks: add them with "
    "bookindex migrate INDEX_DIR, or re-index into a new directory"
)


class StaleIndexError(ValueError):
    """The index lacks what the query side needs (built by an older index job)."""


@dataclass
class Chunk:
    doc: int  # document position
    text: str
    node_id: str
    sec_id: int
    para_idx: int
    page: int
    vector: np.ndarray | None = None  # from the index: the leaf's, or the sentence's


@dataclass
class DocumentView:
    doc_ids: list[str]
    uris: list[str]
    names: list[str]  # passage id, or the PDF's file name
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
    sentence_vectors: dict[str, np.ndarray] = field(default_factory=dict)  # leaf → (n, dim)
    title_links_source: str = "built"  # the title links "read" from the index directory, or not
    _linker: EntityLinker | None = None
    _query_linker: EntityLinker | None = None

    @classmethod
    def from_read_model(cls, model: ReadModel, store_dir: str | Path | None = None) -> DocumentView:
        """The view of a read model: its documents, leaves and entities (module docstring).
        ``store_dir``: where the title links are kept between processes (the index
        directory; ``operators.graph.title_link_store``); None: linked here, not kept."""
        n_docs = len(model.documents)
        leaves = _leaf_chunks(model)
        titles = [d.title for d in model.documents]
        leaf_texts = [[c.text for c in leaves.get(d, [])] for d in range(n_docs)]
        passage = [d.passage for d in model.documents]
        title_names, links, own_title, source = title_links_from_store(
            [t if p else "" for t, p in zip(titles, passage, strict=True)],
            ["\n".join(t) if p else "" for t, p in zip(leaf_texts, passage, strict=True)],
            store_dir,
        )
        n_index = len(model.entity_ids)
        entity_ids = model.entity_ids + [
            TITLE_ENTITY + normalise_name(strip_accents(n[0])) for n in title_names
        ]
        node_doc = sp.csr_matrix(
            (np.ones(model.n_nodes, np.float32), (model.doc, np.arange(model.n_nodes))),
            shape=(n_docs, model.n_nodes),
        )
        named = sp.csr_matrix(
            (np.ones(len(links), np.float32), ([d for d, _ in links], [e for _, e in links])),
            shape=(n_docs, len(title_names)),
        )
        doc_entity = sp.hstack([node_doc @ model.mentions, named], format="csr")
        doc_entity.sum_duplicates()
        doc_entity.eliminate_zeros()
        doc_entity.data[:] = 1.0
        own_title = np.asarray(own_title, np.int64)
        return cls(
            doc_ids=[d.doc_id for d in model.documents],
            uris=[d.uri for d in model.documents],
            names=[d.name for d in model.documents],
            titles=titles,
            texts=["\n".join([t, *texts]) for t, texts in zip(titles, leaf_texts, strict=True)],
            doc_vectors=model.doc_vectors,
            entity_ids=entity_ids,
            entity_names=model.entity_names + title_names,
            doc_entity=doc_entity.astype(np.float32),
            leaves=leaves,
            passage=passage,
            n_index_entities=n_index,
            title_entity=np.where(own_title >= 0, n_index + own_title, -1),
            sentence_vectors={
                model.node_ids[p]: rows for p, rows in model.sentence_vectors.items()
            },
            title_links_source=source,
        )

    def single(self, doc: int) -> DocumentView:
        """The view of document ``doc`` alone: its chunks as document 0 and only its own
        entities (the columns renumbered; names are linked against these alone). The graph a
        question asked of that one document walks, so that its evidence does not depend on
        the other documents of the index (their vectors, their entities, their names; its own
        entities are as the index resolved them, across documents: an alias another document
        gave one of them stays)."""
        own = self.doc_entity[doc].indices
        column = np.full(len(self.entity_ids), -1, np.int64)
        column[own] = np.arange(len(own))
        title = -1 if self.title_entity is None else int(self.title_entity[doc])
        return DocumentView(
            doc_ids=[self.doc_ids[doc]],
            uris=[self.uris[doc]],
            names=[self.names[doc]],
            titles=[self.titles[doc]],
            texts=[self.texts[doc]],
            doc_vectors=self.doc_vectors[doc : doc + 1],
            entity_ids=[self.entity_ids[e] for e in own],
            entity_names=[self.entity_names[e] for e in own],
            doc_entity=sp.csr_matrix(np.ones((1, len(own)), np.float32)),
            leaves={0: [replace(c, doc=0) for c in self.leaves.get(doc, [])]},
            passage=[self.passage[doc]],
            n_index_entities=int((own < self.n_index_entities).sum())
            if self.n_index_entities >= 0
            else -1,
            title_entity=np.array([column[title] if title >= 0 else -1], np.int64),
            sentence_vectors=self.sentence_vectors,
            title_links_source=self.title_links_source,
        )

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    def external_id(self, doc: int) -> str:
        """The passage id of a passage corpus (``file#id``), else the PDF's file name."""
        return self.names[doc]

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
        """A passage's sentences, or a PDF's leaves, in reading order, with their stored
        vectors (StaleIndexError: a passage whose sentence vectors the index lacks)."""
        leaves = self.leaves.get(doc, [])
        if not self.passage[doc]:
            return leaves
        out = []
        for leaf in leaves:
            texts = sentences(leaf.text)
            stored = self.sentence_vectors.get(leaf.node_id)
            if stored is None or len(stored) != len(texts):
                raise StaleIndexError(
                    f"passage {self.names[doc]!r} has no stored sentence vectors "
                    f"({'none' if stored is None else len(stored)} for {len(texts)} sentences): "
                    + REINDEX
                )
            out += [
                Chunk(doc, s, leaf.node_id, leaf.sec_id, leaf.para_idx, leaf.page, v)
                for s, v in zip(texts, stored, strict=True)
            ]
        return out


def _leaf_chunks(model: ReadModel) -> dict[int, list[Chunk]]:
    """Each document's leaves as chunks, in reading order: text (else the caption/title),
    coordinates and the leaf's vector (None where the index has none)."""
    out: dict[int, list[Chunk]] = {}
    for p in model.leaves().tolist():
        doc = int(model.doc[p])
        out.setdefault(doc, []).append(
            Chunk(
                doc,
                model.text[p] or model.title[p] or "",
                model.node_ids[p],
                int(model.sec_id[p]),
                int(model.para_idx[p]),
                int(model.page_start[p]),
                model.vectors[p] if model.has_vector[p] else None,
            )
        )
    return out
