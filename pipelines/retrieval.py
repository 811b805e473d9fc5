"""Retrieval over an index: ZoomRAG (Doc-Zoom then Chunk-Zoom on the batched walk engine) and
the two baselines (BM25, dense), one call for a batch of queries.

    retrieval = Retrieval.open("index_dir")
    results = retrieval.retrieve(["who ...?", ...], method="zoom", k=10)
    # per query: [DocHit(rank order) with .chunks (Chunk-Zoom evidence) for zoom]
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from operators.models import ModelBackend, ModelConfig, load_backend
from operators.retrievers import Bm25Retriever, DenseRetriever
from operators.walk_engine import TOP_K, make_engine
from pipelines.retrieval_corpus import Chunk, RetrievalCorpus, load_corpus

METHODS = ("zoom", "bm25", "dense")


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
        """Query–entity indicator (n_queries × n_entities): entities named in the query."""
        rows, cols = [], []
        for q, text in enumerate(queries):
            found = self.corpus.linker.link(text)
            rows += [q] * len(found)
            cols += found
        shape = (len(queries), len(self.corpus.entity_ids))
        return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=shape)

    def _zoom(self, queries: list[str], vectors: np.ndarray, k: int) -> list[list[DocHit]]:
        query_entity = self.link_entities(queries)
        depth = max(k, TOP_K)
        ids, scores, entity_scores = self.engine.doc_zoom(vectors, query_entity, k=depth)
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
