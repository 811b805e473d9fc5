"""ZoomRAG over a document view: Doc-Zoom, then Chunk-Zoom, on the batched walk engine. The one
implementation: passage retrieval (``operators.query.retrieval``, method ``zoom``) and the query
API (``operators.query.engine``, method ``zoom``) both call it.

    zoom = Zoom(view, backend, make_engine(config.walk))
    hits = zoom.search(["who ...?"], vectors, k=10)     # per query: DocHits with .chunks
    ranked = zoom.chunk_zoom([[doc, ...]], entity_scores)  # per query: (Chunk, score), best first

Doc-Zoom here is two batched walks on the same graph (documents, the index's entities and the
title entities of a passage corpus, ``operators.query.documents``), read as two ranked lists:

1. the query list: the passages whose own title the query names (``named_passages``: the
   query links their title entity), then every other document, each group in the order of the
   query walk (the query node links to documents by exp(cos), sparsified, and to the entities
   its text names, ``link_entities``);
2. the bridge list: a second walk whose start node links only to the entities of the query
   list's first document that the query does not name (its title, the titles it cites, its
   named entities), so it reaches the documents one hop further (the next hop of a multi-hop
   question); its document distribution is multiplied by exp(cos(query, document)), the
   weight the query walk gives its own document links, so that of the next-hop documents
   those about the question come first; the seed document itself is left out.

The ranking takes the two lists' documents in turn (query list first), each list skipping
documents already taken; a query whose bridge walk reached no document (no seeds) keeps the
query list alone. The document at position p scores 1/(1 + p). Entity scores, inherited by
Chunk-Zoom, mix the two walks' distributions (each normalised to sum 1 over documents; the
bridge walk's share is ``WalkConfig.bridge_weight``). Why two lists: in a single walk (restart
0.8 at the query) a document reached only through another document scores orders of magnitude
below every document the query links to directly, and mixing the two walks' scores still ranks
the second hop below the query walk's near neighbours (the bridge walk's mass sits mostly on its
seed); taking the lists in turn puts the bridge walk's best new document second. Why named
titles first: a question names the subject of its first hop by the title of its passage ("Who is
older, Sid Haig or Vic Darchinyan?"); the walk spreads a named entity's mass over every passage
that mentions it, and the title passage, one of many, can fall out of the top ranks.

Chunk-Zoom ranks the chunks of each query's documents (a PDF's leaves, a passage's sentences:
both with vectors the index job stored, so a query embeds only its question), linked to the
entities of their document that their text names, from the Doc-Zoom entity scores; the
queries of a batch are solved together (``WalkEngine.chunk_zoom``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bookindex.operators.models import ModelBackend
from bookindex.operators.query.documents import REINDEX, Chunk, DocumentView, StaleIndexError
from bookindex.operators.walks.engine import ChunkLinks, WalkEngine
from bookindex.operators.walks.graph_store import fit_from_store
from bookindex.operators.walks.topk import host as _host
from bookindex.operators.walks.topk import top_k_rows


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
    doc: int  # position in the view
    id: str  # passage id, or the PDF's file name
    doc_id: str
    title: str
    score: float
    chunks: list[ChunkHit] = field(default_factory=list)


class Zoom:
    def __init__(
        self,
        view: DocumentView,
        backend: ModelBackend | None,
        walk: WalkEngine,
        graph_dir: str | Path | None = None,
    ) -> None:
        """``graph_dir``: where the graph's document rows are kept between processes
        (``operators.walks.graph_store``; None: built in memory each time)."""
        self.view = view
        self.backend = backend
        self.walk = walk
        self.graph_dir = graph_dir
        self.config = walk.config
        self._fitted = False
        self._chunk_cache: dict[int, tuple[list[Chunk], np.ndarray, list[list[int]]]] = {}
        self.timings: dict[str, float] = {}
        self.engine_source: str | None = None  # "built", or graph_store's "read" / "grown"

    @property
    def engine(self) -> WalkEngine:
        """The walk engine, holding the query-independent Doc-Zoom graph (built once, or read
        from ``graph_dir``: ``engine_source`` says which)."""
        if not self._fitted:
            started = time.perf_counter()
            view = self.view
            if self.graph_dir is None:
                self.walk.fit(view.doc_vectors, view.doc_entity)
                how = "built"
            else:
                how = fit_from_store(
                    self.walk, view.doc_vectors, view.doc_entity, view.doc_ids, self.graph_dir
                )
            self._fitted = True
            self.timings["engine_build_s"] = time.perf_counter() - started
            self.engine_source = how
        return self.walk

    # ---- Doc-Zoom ---------------------------------------------------------------------------
    def link_entities(self, queries: list[str]) -> sp.csr_matrix:
        """Query–entity indicator (n_queries × n_entities): entities named in the query. In a
        passage corpus a name counts where one of its words is capitalised (accents folded):
        encyclopedia titles are often common words ("State"). Over PDFs every name counts, in
        any case: questions name a document's terms in lower case, and Chunk-Zoom, whose start
        vector holds only entity scores, ranks by them (capitalised linking there cost 4.6
        points of page recall on MMLongBench, docs/results.md)."""
        passages = any(self.view.passage)
        rows, cols = [], []
        for q, text in enumerate(queries):
            if passages:
                found = self.view.query_linker.link(text, capitalised=True)
            else:
                found = self.view.linker.link(text)
            rows += [q] * len(found)
            cols += found
        shape = (len(queries), len(self.view.entity_ids))
        return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=shape)

    def named_passages(self, query_entity: sp.csr_matrix) -> sp.csr_matrix:
        """Query–document indicator (n_queries × n_docs): the passages whose own title the
        query names (their title entity is among the query's links)."""
        own = self.view.title_entity
        nq, nd = query_entity.shape[0], self.view.n_docs
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
        self, vectors: np.ndarray, query_entity: sp.csr_matrix, depth: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Doc-Zoom scores (module docstring): documents (B × n_docs; the fused ranking's
        first ``depth`` documents, default ``top_docs``, score 1/(1 + position), the rest 0)
        and entities (B × n_entities, the mixed walk distribution), each query independent of
        the batch."""
        depth = self.config.top_docs if depth is None else depth
        nd, nq = self.view.n_docs, len(vectors)
        similarity = self.engine.similarities(vectors)  # exp(cos(query, document)), on device
        first = self.engine.walk(vectors, query_entity, similarities=similarity)[0]
        similarity = _host(similarity)
        first = _node_distribution(first, nd)
        # The query list: passages the query names by title first, then by the query walk.
        query_list = first[:, :nd] + 2.0 * self.named_passages(query_entity).toarray()
        best, _ = top_k_rows(query_list, 1)
        seeds = (self.view.doc_entity[best[:, 0]] > 0).astype(np.float32)
        seeds = (seeds - seeds.multiply(query_entity > 0)).tocsr()  # only what the query lacks
        seeds.eliminate_zeros()
        # The bridge walk's start node has no document links (a zero vector links none).
        second = _node_distribution(self.engine.walk(np.zeros_like(vectors), seeds)[0], nd)
        reached = second[:, :nd].sum(axis=1) > 0  # no seeds: the query list alone
        # The bridge list: bridge walk × exp(cos(query, document)) (the query walk's document
        # weights), its seed left out.
        bridge_list = second[:, :nd] * similarity
        bridge_list[np.arange(nq), best[:, 0]] = -1.0
        docs = _round_robin(query_list, bridge_list, reached, min(depth, nd))
        weight = np.where(reached[:, None], self.config.bridge_weight, 0.0)
        entities = np.multiply(1 - weight, first[:, nd:])
        entities += weight * second[:, nd:]
        return docs, entities

    def doc_zoom(
        self, queries: list[str], vectors: np.ndarray, depth: int | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ``depth`` best documents per query (ids, scores; B × depth) and the entity
        scores Chunk-Zoom starts from."""
        depth = self.config.top_docs if depth is None else depth
        docs, entity_scores = self.doc_zoom_scores(vectors, self.link_entities(queries), depth)
        ids, scores = top_k_rows(docs, depth)
        return ids, scores, entity_scores

    def search(self, queries: list[str], vectors: np.ndarray, k: int) -> list[list[DocHit]]:
        """Per query, the k best documents, each with its Chunk-Zoom evidence (the chunks of
        the ``max(k, top_docs)`` best documents are ranked together)."""
        ids, scores, entity_scores = self.doc_zoom(queries, vectors, max(k, self.config.top_docs))
        results = [self.hits(i[:k], s[:k]) for i, s in zip(ids, scores, strict=True)]
        ranked = self.chunk_zoom([[int(d) for d in row] for row in ids], entity_scores, vectors)
        for hits, chunks in zip(results, ranked, strict=True):
            by_doc = {hit.doc: hit for hit in hits}
            for chunk, score in chunks:
                if chunk.doc in by_doc:
                    by_doc[chunk.doc].chunks.append(
                        ChunkHit(
                            chunk.text,
                            score,
                            chunk.node_id,
                            chunk.sec_id,
                            chunk.para_idx,
                            chunk.page,
                        )
                    )
        return results

    def hits(self, ids, scores) -> list[DocHit]:
        v = self.view
        return [
            DocHit(
                rank, int(d), v.external_id(int(d)), v.doc_ids[int(d)], v.titles[int(d)], float(s)
            )
            for rank, (d, s) in enumerate(zip(ids, scores, strict=True))
        ]

    # ---- Chunk-Zoom -------------------------------------------------------------------------
    def chunks(self, doc: int) -> list[Chunk]:
        """A document's chunks (cached with their vectors and entity links)."""
        self._load_chunks([doc])
        return self._chunk_cache[doc][0]

    def chunk_zoom(
        self,
        doc_lists: list[list[int]],
        entity_scores: np.ndarray,
        query_vectors: np.ndarray | None = None,
        chunk_seeds: Sequence[np.ndarray | None] | None = None,
    ) -> list[list[tuple[Chunk, float]]]:
        """Per query (its documents, its row of Doc-Zoom entity scores): the chunks Chunk-Zoom
        keeps, best first, with their scores. With ``walk.query_seed`` > 0 the walk also
        starts from the chunks by the question's relevance to them: ``chunk_seeds`` (per
        query, a weight per chunk of its documents in order, summing to 1: the engine's
        relevance over a PDF's leaves) or, where none is given for a query, their similarity
        to the question (``query_seeds``, with ``query_vectors``)."""
        self._load_chunks(sorted({d for docs in doc_lists for d in docs}))
        vectors, docs, links, flat = [], [], [], []
        for query_docs in ([self._chunk_cache[d] for d in row] for row in doc_lists):
            chunks = [c for chunk_list, _, _ in query_docs for c in chunk_list]
            flat.append(chunks)
            vectors.append(
                np.concatenate([v for _, v, _ in query_docs])
                if chunks
                else np.zeros((0, self.view.doc_vectors.shape[1]), np.float32)
            )
            docs.append(np.asarray([c.doc for c in chunks], np.int64))
            rows, cols = [], []
            offset = 0
            for chunk_list, _, entity_lists in query_docs:
                for j, ents in enumerate(entity_lists):
                    rows += [offset + j] * len(ents)
                    cols += ents
                offset += len(chunk_list)
            links.append(ChunkLinks(rows, cols))
        out: list[list[tuple[Chunk, float]]] = [[] for _ in doc_lists]
        usable = [i for i, chunks in enumerate(flat) if chunks]
        if not usable:
            return out
        seeds = None
        given = chunk_seeds if chunk_seeds is not None else [None] * len(doc_lists)
        if self.config.query_seed > 0 and (
            query_vectors is not None or all(given[i] is not None for i in usable)
        ):
            seeds = [
                query_seeds(vectors[i], query_vectors[i], self.config)
                if given[i] is None
                else np.asarray(given[i], np.float64)
                for i in usable
            ]
        ranked = self.engine.chunk_zoom(
            [vectors[i] for i in usable],
            [docs[i] for i in usable],
            [links[i] for i in usable],
            entity_scores[usable],
            chunk_seeds=seeds,
            seed_weight=self.config.query_seed,
        )
        for i, (order, chunk_scores) in zip(usable, ranked, strict=True):
            out[i] = [(flat[i][int(j)], float(s)) for j, s in zip(order, chunk_scores, strict=True)]
        return out

    def _load_chunks(self, docs: list[int]) -> None:
        """Cache each document's chunks, their stored vectors (a PDF leaf's, a passage
        sentence's: written by the index job, nothing is embedded here) and the entities each
        names. StaleIndexError: a chunk without a stored vector (an older index, or one built
        without enrich)."""
        for doc in (d for d in docs if d not in self._chunk_cache):
            chunks = self.view.chunks(doc)
            if any(c.vector is None for c in chunks):
                raise StaleIndexError(
                    f"document {self.view.names[doc]!r} has chunks without stored vectors "
                    "(an index built without enrich): " + REINDEX
                )
            vectors = (
                np.asarray([c.vector for c in chunks], np.float32).reshape(len(chunks), -1)
                if chunks
                else np.zeros((0, self.view.doc_vectors.shape[1]), np.float32)
            )
            own = set(self.view.doc_entity[doc].indices.tolist())
            entities = self.view.linker.link_among([c.text for c in chunks], own)
            self._chunk_cache[doc] = (chunks, vectors, entities)


def query_seeds(chunk_vectors: np.ndarray, query_vector: np.ndarray, config) -> np.ndarray:
    """Each chunk's weight in Chunk-Zoom's start vector by the question's similarity to it:
    softmax of cosine / ``seed_temperature`` (stored chunk vectors are unit rows)."""
    cosines = np.asarray(chunk_vectors, np.float64) @ np.asarray(query_vector, np.float64).ravel()
    return softmax_seeds(cosines, config.seed_temperature)


def softmax_seeds(scores: np.ndarray, temperature: float) -> np.ndarray:
    """Start weights from scores: softmax of score / ``temperature`` (an empty array: empty)."""
    scores = np.asarray(scores, np.float64)
    if scores.size == 0:
        return scores
    weights = np.exp((scores - scores.max()) / temperature)
    return weights / weights.sum()


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
