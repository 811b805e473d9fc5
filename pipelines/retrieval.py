"""Retrieval over an index: ZoomRAG (Doc-Zoom then Chunk-Zoom on the batched walk engine) and
the two baselines (BM25, dense), one call for a batch of queries.

    retrieval = Retrieval.open("index_dir")
    results = retrieval.retrieve(["who ...?", ...], method="zoom", k=10)
    # per query: [DocHit(rank order) with .chunks (Chunk-Zoom evidence) for zoom]

Doc-Zoom here is two batched walks on the same graph (documents, the index's entities and the
title entities of a passage corpus, ``pipelines.retrieval_corpus``):

1. the query walk: the query node links to documents by exp(cos) (sparsified) and to the
   entities its text names (capitalised names, accents folded);
2. the bridge walk: a second start node links to the entities of the query walk's best
   document that the query does not name (its title, the titles it cites, its named entities),
   so the walk reaches the documents one hop further (the next hop of a multi-hop question).

A document's score is the equal mix of the two walks' document distributions (each normalised
to sum 1 over documents): ``(1 − BRIDGE_WEIGHT)·r_query + BRIDGE_WEIGHT·r_bridge``, or the
query walk alone where the bridge walk has no seed; entity scores, inherited by Chunk-Zoom, are
mixed the same way. Why two walks: in a single walk (restart 0.8 at the query) a document
reached only through another document scores orders of magnitude below every document the
query links to directly, so the next hop of a question never reaches the top ranks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from operators.models import ModelBackend, ModelConfig, load_backend
from operators.retrievers import Bm25Retriever, DenseRetriever
from operators.walk_engine import TOP_K, make_engine, top_k_rows
from pipelines.retrieval_corpus import Chunk, RetrievalCorpus, load_corpus

METHODS = ("zoom", "bm25", "dense")
BRIDGE_DOCS = 1  # bridge seeds: entities of the query walk's best document(s)
BRIDGE_WEIGHT = 0.5  # share of the bridge walk in the mixed document distribution


@dataclass
class ChunkHit:
    text: str
    score: float
    node_id: str
    sec_id: int
    para_idx: int
    page: int


@dataclass
class DocHit:
    rank: int
    doc: int  # position in the corpus
    id: str  # passage id, or the PDF's file name
    doc_id: str
    title: str
    score: float
    chunks: list[ChunkHit] = field(default_factory=list)


class Retrieval:
    def __init__(
        self, corpus: RetrievalCorpus, backend: ModelBackend, device: str = "auto"
    ) -> None:
        self.corpus = corpus
        self.backend = backend
        self.device = device
        self._engine = None
        self._bm25: Bm25Retriever | None = None
        self._dense = DenseRetriever(corpus.doc_vectors)
        self._chunk_cache: dict[int, tuple[list[Chunk], np.ndarray, list[list[int]]]] = {}
        self.timings: dict[str, float] = {}

    @classmethod
    def open(
        cls, index_dir: str | Path, config: ModelConfig | None = None, device: str = "auto"
    ) -> Retrieval:
        return cls(load_corpus(index_dir), load_backend(config or ModelConfig()), device)

    @property
    def engine(self):
        """The walk engine holding the query-independent Doc-Zoom graph (built once)."""
        if self._engine is None:
            started = time.perf_counter()
            self._engine = make_engine(self.device).fit(
                self.corpus.doc_vectors, self.corpus.doc_entity
            )
            self.timings["engine_build_s"] = time.perf_counter() - started
        return self._engine

    @property
    def bm25(self) -> Bm25Retriever:
        if self._bm25 is None:
            self._bm25 = Bm25Retriever(self.corpus.texts)
        return self._bm25

    def retrieve(self, queries: list[str], method: str = "zoom", k: int = 10) -> list[list[DocHit]]:
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
        if not queries:
            return []
        if method == "bm25":
            found = self.bm25.search(queries, k)
            return [self._hits(ids, scores) for ids, scores in found]
        vectors = self.backend.embed(queries)
        if method == "dense":
            return [self._hits(ids, s) for ids, s in self._dense.search(vectors, k)]
        return self._zoom(queries, vectors, k)

    def link_entities(self, queries: list[str]) -> sp.csr_matrix:
        """Query–entity indicator (n_queries × n_entities): entities named in the query
        (a name counts where one of its words is capitalised; accents folded)."""
        rows, cols = [], []
        for q, text in enumerate(queries):
            found = self.corpus.query_linker.link(text, capitalised=True)
            rows += [q] * len(found)
            cols += found
        shape = (len(queries), len(self.corpus.entity_ids))
        return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=shape)

    def doc_zoom_scores(
        self, vectors: np.ndarray, query_entity: sp.csr_matrix
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mixed Doc-Zoom scores (module docstring): documents (B × n_docs) and entities
        (B × n_entities), each query independent of the others in the batch."""
        nd, nq = self.corpus.n_docs, len(vectors)
        first = _node_distribution(self.engine.walk(vectors, query_entity)[0], nd)
        best, _ = top_k_rows(first[:, :nd], BRIDGE_DOCS)
        owner = sp.csr_matrix(
            (np.ones(best.size), (np.repeat(np.arange(nq), best.shape[1]), np.arange(best.size))),
            shape=(nq, best.size),
        )
        seeds = (owner @ self.corpus.doc_entity[best.ravel()] > 0).astype(np.float32)
        seeds = (seeds - seeds.multiply(query_entity > 0)).tocsr()  # only what the query lacks
        seeds.eliminate_zeros()
        # The bridge walk's start node has no document links (a zero vector links none).
        second = _node_distribution(self.engine.walk(np.zeros_like(vectors), seeds)[0], nd)
        # A query whose bridge walk reached no document (no seeds) keeps its query walk alone.
        weight = np.where(second[:, :nd].sum(axis=1, keepdims=True) > 0, BRIDGE_WEIGHT, 0.0)
        mixed = (1 - weight) * first + weight * second
        return mixed[:, :nd], mixed[:, nd:]

    def _zoom(self, queries: list[str], vectors: np.ndarray, k: int) -> list[list[DocHit]]:
        query_entity = self.link_entities(queries)
        docs, entity_scores = self.doc_zoom_scores(vectors, query_entity)
        ids, scores = top_k_rows(docs, max(k, TOP_K))
        results = [self._hits(i[:k], s[:k]) for i, s in zip(ids, scores, strict=True)]
        self._attach_chunks(results, ids, entity_scores)
        return results

    def _attach_chunks(
        self, results: list[list[DocHit]], ids: np.ndarray, entity_scores: np.ndarray
    ) -> None:
        """Chunk-Zoom over the chunks of each query's top documents; evidence per document."""
        per_query = [[self._chunks(int(d)) for d in row] for row in ids]
        vectors, docs, links, flat = [], [], [], []
        for query_docs in per_query:
            chunks = [c for chunk_list, _, _ in query_docs for c in chunk_list]
            flat.append(chunks)
            vectors.append(
                np.concatenate([v for _, v, _ in query_docs])
                if chunks
                else np.zeros((0, self.backend.dim), np.float32)
            )
            docs.append(np.asarray([c.doc for c in chunks], np.int64))
            rows, cols = [], []
            offset = 0
            for chunk_list, _, entity_lists in query_docs:
                for j, ents in enumerate(entity_lists):
                    rows += [offset + j] * len(ents)
                    cols += ents
                offset += len(chunk_list)
            links.append(
                sp.csr_matrix(
                    (np.ones(len(rows)), (rows, cols)),
                    shape=(len(chunks), len(self.corpus.entity_ids)),
                )
            )
        usable = [i for i, chunks in enumerate(flat) if chunks]
        if not usable:
            return
        ranked = self.engine.chunk_zoom(
            [vectors[i] for i in usable],
            [docs[i] for i in usable],
            [links[i] for i in usable],
            entity_scores[usable],
        )
        for i, (order, chunk_scores) in zip(usable, ranked, strict=True):
            by_doc = {hit.doc: hit for hit in results[i]}
            for j, score in zip(order, chunk_scores, strict=True):
                chunk = flat[i][int(j)]
                if chunk.doc in by_doc:
                    by_doc[chunk.doc].chunks.append(
                        ChunkHit(
                            chunk.text,
                            float(score),
                            chunk.node_id,
                            chunk.sec_id,
                            chunk.para_idx,
                            chunk.page,
                        )
                    )

    def _chunks(self, doc: int) -> tuple[list[Chunk], np.ndarray, list[list[int]]]:
        """A document's chunks, their vectors and the entities each names (cached)."""
        if doc not in self._chunk_cache:
            chunks = self.corpus.chunks(doc)
            vectors = self.backend.embed([c.text for c in chunks])
            own = set(self.corpus.doc_entity[doc].indices.tolist())
            entities = [[e for e in self.corpus.linker.link(c.text) if e in own] for c in chunks]
            self._chunk_cache[doc] = (chunks, vectors, entities)
        return self._chunk_cache[doc]

    def _hits(self, ids, scores) -> list[DocHit]:
        c = self.corpus
        return [
            DocHit(
                rank, int(d), c.external_id(int(d)), c.doc_ids[int(d)], c.titles[int(d)], float(s)
            )
            for rank, (d, s) in enumerate(zip(ids, scores, strict=True))
        ]


def _node_distribution(r, n_docs: int) -> np.ndarray:
    """Walk scores (nodes × queries, NumPy or CuPy) as host rows (queries × nodes), scaled so
    each query's document scores sum to 1 (a query whose walk reached no document: zeros)."""
    r = np.asarray(r.get() if hasattr(r, "get") else r, np.float64).T
    total = r[:, :n_docs].sum(axis=1, keepdims=True)
    return r / np.where(total > 0, total, 1.0)
