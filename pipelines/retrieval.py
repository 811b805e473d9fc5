"""Retrieval over an index: ZoomRAG (Doc-Zoom then Chunk-Zoom on the batched walk engine) and
the two baselines (BM25, dense), one call for a batch of queries.

    retrieval = Retrieval.open("index_dir")
    results = retrieval.retrieve(["who ...?", ...], method="zoom", k=10)
    # per query: [DocHit(rank order) with .chunks (Chunk-Zoom evidence) for zoom]

Doc-Zoom here is two batched walks on the same graph (documents, the index's entities and the
title entities of a passage corpus, ``pipelines.retrieval_corpus``), read as two ranked lists:

1. the query list: the passages whose own title the query names (``named_passages``: the
   query links their title entity), then every other document, each group in the order of the
   query walk (the query node links to documents by exp(cos), sparsified, and to the entities
   its text names: capitalised names, accents folded);
2. the bridge list: a second walk whose start node links only to the entities of the query
   list's first document that the query does not name (its title, the titles it cites, its
   named entities), so it reaches the documents one hop further (the next hop of a multi-hop
   question); its document distribution is multiplied by exp(cos(query, document)), the
   weight the query walk gives its own document links, so that of the next-hop documents
   those about the question come first; the seed document itself is left out.

The ranking takes the two lists' documents in turn (query list first), each list skipping
documents already taken; a query whose bridge walk reached no document (no seeds) keeps the
query list alone. The document at position p scores 1/(1 + p). Entity scores, inherited by
Chunk-Zoom, are the equal mix of the two walks' distributions (each normalised to sum 1 over
documents). Why two lists: in a single walk (restart 0.8 at the query) a document reached only
through another document scores orders of magnitude below every document the query links to
directly, and mixing the two walks' scores still ranks the second hop below the query walk's
near neighbours (the bridge walk's mass sits mostly on its seed); taking the lists in turn puts
the bridge walk's best new document second. Why named titles first: a question names the
subject of its first hop by the title of its passage ("Who is older, Sid Haig or Vic
Darchinyan?"); the walk spreads a named entity's mass over every passage that mentions it,
and the title passage, one of many, can fall out of the top ranks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from operators.models import ModelBackend, ModelConfig, load_backend
from operators.query.retrievers import Bm25Retriever, DenseRetriever
from operators.walks.engine import TOP_K, make_engine, top_k_rows, unit_rows
from pipelines.retrieval_corpus import Chunk, RetrievalCorpus, load_corpus

METHODS = ("zoom", "bm25", "dense")
BRIDGE_WEIGHT = 0.5  # share of the bridge walk in the entity scores handed to Chunk-Zoom


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

    def named_passages(self, query_entity: sp.csr_matrix) -> sp.csr_matrix:
        """Query–document indicator (n_queries × n_docs): the passages whose own title the
        query names (their title entity is among the query's links)."""
        own = self.corpus.title_entity
        nq, nd = query_entity.shape[0], self.corpus.n_docs
        if own is None or not (own >= 0).any():
            return sp.csr_matrix((nq, nd), dtype=np.float32)
        docs = np.flatnonzero(own >= 0)
        hit = sp.csr_matrix(query_entity)[:, own[docs]].tocoo()
        keep = hit.data > 0
        return sp.csr_matrix(
            (np.ones(int(keep.sum()), np.float32), (hit.row[keep], docs[hit.col[keep]])),
            shape=(nq, nd),
        )

    def doc_zoom_scores(
        self, vectors: np.ndarray, query_entity: sp.csr_matrix, depth: int = TOP_K
    ) -> tuple[np.ndarray, np.ndarray]:
        """Doc-Zoom scores (module docstring): documents (B × n_docs; the fused ranking's
        first ``depth`` documents score 1/(1 + position), the rest 0) and entities
        (B × n_entities, the mixed walk distribution), each query independent of the batch."""
        nd, nq = self.corpus.n_docs, len(vectors)
        first = _node_distribution(self.engine.walk(vectors, query_entity)[0], nd)
        # The query list: passages the query names by title first, then by the query walk.
        query_list = first[:, :nd] + 2.0 * self.named_passages(query_entity).toarray()
        best, _ = top_k_rows(query_list, 1)
        seeds = (self.corpus.doc_entity[best[:, 0]] > 0).astype(np.float32)
        seeds = (seeds - seeds.multiply(query_entity > 0)).tocsr()  # only what the query lacks
        seeds.eliminate_zeros()
        # The bridge walk's start node has no document links (a zero vector links none).
        second = _node_distribution(self.engine.walk(np.zeros_like(vectors), seeds)[0], nd)
        reached = second[:, :nd].sum(axis=1) > 0  # no seeds: the query list alone
        # The bridge list: bridge walk × exp(cos(query, document)), its seed left out.
        bridge_list = second[:, :nd] * np.exp(
            unit_rows(np, np.asarray(vectors, np.float64)) @ self.corpus.doc_vectors.T
        )
        bridge_list[np.arange(nq), best[:, 0]] = -1.0
        docs = _round_robin(query_list, bridge_list, reached, min(depth, nd))
        weight = np.where(reached[:, None], BRIDGE_WEIGHT, 0.0)
        entities = (1 - weight) * first[:, nd:] + weight * second[:, nd:]
        return docs, entities

    def _zoom(self, queries: list[str], vectors: np.ndarray, k: int) -> list[list[DocHit]]:
        query_entity = self.link_entities(queries)
        docs, entity_scores = self.doc_zoom_scores(vectors, query_entity, max(k, TOP_K))
        ids, scores = top_k_rows(docs, max(k, TOP_K))
        results = [self._hits(i[:k], s[:k]) for i, s in zip(ids, scores, strict=True)]
        self._attach_chunks(results, ids, entity_scores)
        return results

    def _attach_chunks(
        self, results: list[list[DocHit]], ids: np.ndarray, entity_scores: np.ndarray
    ) -> None:
        """Chunk-Zoom over the chunks of each query's top documents; evidence per document."""
        self._load_chunks(sorted({int(d) for d in np.asarray(ids).ravel()}))
        per_query = [[self._chunk_cache[int(d)] for d in row] for row in ids]
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

    def _load_chunks(self, docs: list[int]) -> None:
        """Cache each document's chunks, their vectors and the entities each names. A PDF
        leaf's vector comes from the index; the chunks without one (a passage's sentences) of
        all the documents not cached yet are embedded in one call, not one call per document."""
        todo = [d for d in docs if d not in self._chunk_cache]
        chunk_lists = [self.corpus.chunks(d) for d in todo]
        missing = [c for chunks in chunk_lists for c in chunks if c.vector is None]
        embedded = iter(self.backend.embed([c.text for c in missing]) if missing else [])
        for doc, chunks in zip(todo, chunk_lists, strict=True):
            rows = [c.vector if c.vector is not None else next(embedded) for c in chunks]
            vectors = (
                np.asarray(rows, np.float32).reshape(len(chunks), -1)
                if chunks
                else np.zeros((0, self.backend.dim), np.float32)
            )
            own = set(self.corpus.doc_entity[doc].indices.tolist())
            entities = [[e for e in self.corpus.linker.link(c.text) if e in own] for c in chunks]
            self._chunk_cache[doc] = (chunks, vectors, entities)

    def _hits(self, ids, scores) -> list[DocHit]:
        c = self.corpus
        return [
            DocHit(
                rank, int(d), c.external_id(int(d)), c.doc_ids[int(d)], c.titles[int(d)], float(s)
            )
            for rank, (d, s) in enumerate(zip(ids, scores, strict=True))
        ]


def _round_robin(
    query_list: np.ndarray, bridge_list: np.ndarray, bridged: np.ndarray, depth: int
) -> np.ndarray:
    """Fused document scores (B × n_docs): the two lists' best documents taken in turn (query
    list, bridge list, query list, ...), each list skipping documents already taken; a row
    with ``bridged`` false takes the query list alone. The document at position p of the fused
    ranking scores 1/(1 + p) for p < ``depth``; the others 0."""
    nq, nd = query_list.shape
    out = np.zeros((nq, nd))
    if depth <= 0:
        return out
    q_ids, _ = top_k_rows(query_list, depth)
    b_ids, b_scores = top_k_rows(bridge_list, depth)
    for row in range(nq):
        lists = [iter(q_ids[row].tolist())]
        if bridged[row]:
            lists.append(iter(b_ids[row][b_scores[row] > 0].tolist()))
        taken: dict[int, None] = {}
        while lists and len(taken) < depth:
            for ids in list(lists):  # one turn each; a list with nothing new left drops out
                doc = next((d for d in ids if d not in taken), None)
                if doc is None:
                    lists.remove(ids)
                elif len(taken) < depth:
                    taken[doc] = None
        out[row, list(taken)] = 1.0 / (1.0 + np.arange(len(taken)))
    return out


def _node_distribution(r, n_docs: int) -> np.ndarray:
    """Walk scores (nodes × queries, NumPy or CuPy) as host rows (queries × nodes), scaled so
    each query's document scores sum to 1 (a query whose walk reached no document: zeros)."""
    r = np.asarray(r.get() if hasattr(r, "get") else r, np.float64).T
    total = r[:, :n_docs].sum(axis=1, keepdims=True)
    return r / np.where(total > 0, total, 1.0)
