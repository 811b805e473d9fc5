"""One query API over one read model: the BookRAG agent, DeepRead, ZoomRAG, LAD-RAG and the dense
top-k baseline, all answering in the same shape; and passage retrieval over the same model,
walk engine and model backend (``engine.retrieval``).

    engine = QueryEngine(ReadModel.from_tables(tables, backend), config)
    # or pipelines.store.reader.open_engine("index_dir", config)
    result = engine.answer("How many tables are in Section 3?", method="auto", doc="report.pdf")
    # {"question", "method", "query_class", "doc", "answer", "answer_type", "citations": [
    #    {"doc", "page", "sec_id", "para_idx"}], "evidence": [
    #    {"doc", "doc_id", "node_id", "kind", "page", "page_end", "sec_id", "para_idx",
    #     "text", "score"}], "plan", "trace", "timings", "usage": {"prompt_tokens",
    #     "completion_tokens", "requests"}, "error"}

Every method answers. With a generative backend the answer is the model's, from the method's
own evidence, with citations (``operators.query.answering``: one request per question, the
evidence numbered with its coordinates; BookRAG's Reduce is that request), ``answer_type``
"generated"; a model call that fails leaves the extractive answer and a ``fallbacks`` entry in
the trace. Offline the answer is extractive (``answer_type`` "extractive", or "count" for a
BookRAG count) and ``citations`` is empty. ``usage``: the chat tokens and requests the question
spent (the endpoint's own counts, ``operators.models.usage``; zeros offline). The evidence is
the method's retrieval alone: answering never changes it.

A bad request (empty or over-long question, unknown method or document, k out of range) comes
back as a result with ``error`` set and no evidence, never as an exception; so does a question
nothing in the index matches. The parameters are the configuration's walk, relevance and query
sections (``operators.config``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bookindex.operators.config import BookindexConfig
from bookindex.operators.models import is_generative
from bookindex.operators.models.usage import metered, no_usage
from bookindex.operators.query import answering, deepread, ladrag
from bookindex.operators.query import bookrag as bookrag_agent
from bookindex.operators.query.bookrag_ops import best_sentence
from bookindex.operators.query.documents import Chunk, DocumentView
from bookindex.operators.query.read_model import ReadModel
from bookindex.operators.query.registry import QUERY, QUERY_METHODS, needs_vectors
from bookindex.operators.query.retrieval import Retrieval
from bookindex.operators.query.scoring import (
    fused_scores,
    fused_with_bm25,
    page_ranker,
    text_scores,
)
from bookindex.operators.query.zoom import Zoom, softmax_seeds
from bookindex.operators.walks.engine import WalkEngine, make_engine

# auto: an alias of the best single method, not a router. Routing by query class
# (rules.classify) was measured with benchmarks/auto_route.py, the route chosen on the tune part
# of benchmarks/pdf_qa_split.json and scored on its report part (MMLongBench, 114 answerable
# questions): it did not beat the best single method (page recall 79.2 against deepread's 81.2
# at its 15 units; page recall over dense's at equal units 12.3, bookrag's alone 12.3).
# bookrag is the best at equal units (docs/results.md, PDF QA).
AUTO_METHOD = "bookrag"
DOC_ZOOMS_KEPT = 64  # one-document ZoomRAG views kept (QueryEngine.zoom_of)


class QueryEngine:
    def __init__(
        self,
        model: ReadModel,
        config: BookindexConfig | None = None,
        walk: WalkEngine | None = None,
        graph_dir: str | Path | None = None,
    ) -> None:
        """``graph_dir``: where ZoomRAG's walk graph, a passage corpus's title links and the BM25
        indexes are kept between processes (the index directory: ``operators.walks.
        graph_store``, ``operators.graph.title_link_store``, ``operators.query.bm25_store``);
        None, or ``walk.keep_graph`` off: built in memory."""
        self.model = model
        self.config = config or BookindexConfig()
        model.bm25_headings = self.config.relevance.bm25_headings
        model.bm25_b = self.config.relevance.bm25_b
        model.bm25_scope = self.config.relevance.bm25_scope
        self.graph_dir = graph_dir if self.config.walk.keep_graph else None
        model.store_dir = Path(self.graph_dir) if self.graph_dir is not None else None
        self.walk = walk or make_engine(self.config.walk)
        self._zoom: Zoom | None = None
        self._doc_zooms: dict[int, Zoom] = {}  # zoom_of's, least recently used first
        self._retrieval: Retrieval | None = None
        self._reranker: Any = False  # not loaded yet

    @property
    def zoom(self) -> Zoom:
        """ZoomRAG over the model's document view (built on first use)."""
        if self._zoom is None:
            view = DocumentView.from_read_model(self.model, self.graph_dir)
            self._zoom = Zoom(view, self.model.backend, self.walk, self.graph_dir)
        return self._zoom

    @property
    def reranker(self):
        """The cross-encoder of ``models.rerank_model`` (``operators.models.reranker``) for
        BookRAG's Text_Reasoning, loaded on first use; None when none is configured."""
        if self._reranker is False:
            from bookindex.operators.models import load_reranker

            self._reranker = load_reranker(self.config.models)
        return self._reranker

    @property
    def retrieval(self) -> Retrieval:
        """Passage retrieval (zoom, bm25, dense) over the same model, walk engine and backend."""
        if self._retrieval is None:
            self._retrieval = Retrieval(self.zoom)
        return self._retrieval

    def warm_up(self, passage_methods: Sequence[str] | None = None) -> None:
        """Build the lazy parts (embedding model, walk graph, BM25 indexes, linkers) before
        threads share them or a timed run starts; ``passage_methods``: only those of passage
        retrieval (default: every method of both APIs)."""
        _ = self.zoom.engine
        for method in passage_methods or ("dense", "bm25", "zoom"):
            self.retrieval.retrieve(["warm up"], method, 1)
        if passage_methods is None:  # hybrid: the plain BM25 index (the methods' reads headings)
            for method in ("bookrag", "zoom", "hybrid"):
                self.answer("warm up", method, generate=False)

    def bm25_sources(self) -> dict[str, str]:
        """How each BM25 index built so far was had, "read" from the index directory or
        "built" (``operators.query.bm25_store``): the documents' (passage retrieval), the
        nodes' and, on a corpus with sections, the nodes' with their headings."""
        found = {"documents": self.retrieval.bm25_source, **self.model.lexical_sources}
        return {name: how for name, how in found.items() if how}

    # ---- the API ----------------------------------------------------------------------------
    def answer(
        self,
        question: str,
        method: str = "auto",
        doc: str | None = None,
        k: int | None = None,
        generate: bool = True,
    ) -> dict:
        """One question, ``k`` evidence units (default ``QueryConfig.k``)."""
        request = {"question": question, "method": method, "doc": doc, "k": k}
        return self.answer_many([request], generate)[0]

    def answer_many(self, requests: list[dict], generate: bool = True) -> list[dict]:
        """Many questions (dicts with question, method, doc, k); results in the same order,
        each as ``answer`` gives it alone. Answered as a batch: the questions' vectors in one
        embedding call; dense and zoom questions together (one scoring pass, one Doc-Zoom
        walk and one Chunk-Zoom solve for all of them); the agents (BookRAG, DeepRead,
        LAD-RAG) one question after another on the prefetched vectors. A question that fails
        unexpectedly gets its own error; the others are answered. ``generate`` False: no
        answering request after the method's own steps (the extractive answer; a probe or a
        warm-up that must not wait on the model)."""
        started = time.perf_counter()
        jobs, results = [], []
        for request in requests:
            job = self._prepare(request)
            results.append(job[0])
            if job[1] is not None:
                jobs.append(job)
        if jobs and self.model.backend is not None:
            # one call, cached; on failure each method meets the error on its own question
            with contextlib.suppress(Exception):
                self.model.embed([question for _, question, *_ in jobs])
        batched = {"dense": self._dense_many, "zoom": self._zoom_many, "hybrid": self._hybrid_many}
        for method in sorted({job[2] for job in jobs}):
            group = [job for job in jobs if job[2] == method]
            if method in batched:
                self._isolated(batched[method], group)
            else:
                for job in group:
                    self._isolated(self._run_one, [job])
        for result, question, *_ in jobs:
            evidence = result.pop("_evidence", ([], []))
            result["evidence"] = [self.evidence_row(p, s) for p, s in zip(*evidence, strict=True)]
            if not evidence[0] and not result.get("answer"):
                result["error"] = result.get("error") or "nothing in the index matches the question"
            if not result["error"] and evidence[0]:
                self._final_answer(result, question, list(evidence[0]), generate)
            result.pop("_cited", None)
            result["timings"]["total_s"] = round(time.perf_counter() - started, 4)
        return results

    def _final_answer(
        self, result: dict, question: str, positions: list[int], generate: bool = True
    ) -> None:
        """The answer from the method's evidence: the model's with citations where a
        generative backend is configured (unless the method's own Reduce gave one), else, or
        when the model call fails, the extractive one (the method's, or the best sentence of
        the first three units for the methods that only retrieve: dense, zoom, hybrid)."""
        started = time.perf_counter()
        backend = self.model.backend
        try:
            if generate and is_generative(backend) and not result.get("_cited"):
                draft = result["answer"] if result["answer_type"] == "generated" else None
                notes = [f"A reading agent's draft answer: {draft}"] if draft else []
                with metered(backend) as used:
                    answered = answering.cited_answer(self.model, question, positions, notes)
                _add_usage(result, used)
                if answered.answer is None and draft:
                    answered.step["fallbacks"][0]["fallback"] = "the agent's uncited answer"
                result["trace"].append(answered.step)
                if answered.answer is not None:
                    result.update(
                        answer=answered.answer,
                        answer_type="generated",
                        citations=answered.citations,
                    )
            if result["answer"] is None:
                texts = [self.model.node_text(p) for p in positions[:3]]
                answer = best_sentence(self.model, question, texts)
                result.update(answer=answer or None, answer_type="extractive" if answer else "none")
        except Exception as exc:  # the evidence stands; the answer is what there was
            result["trace"].append(
                {"op": "Cited_Answer", "fallbacks": [{"step": "Cited_Answer",
                 "error": f"{type(exc).__name__}: {exc}"[:300], "fallback": "no answer"}]}
            )  # fmt: skip
        result["timings"]["answer_s"] = round(time.perf_counter() - started, 4)

    def _prepare(self, request: dict) -> tuple:
        """(result, question, method, doc position, k); question None when the request is
        answered already (an error)."""
        question, method = request.get("question", ""), request.get("method") or "auto"
        doc, k = request.get("doc"), request.get("k")
        k = self.config.query.k if k is None else k
        result = _empty(question, method, doc)
        problem = self._check(question, method, k)
        if problem:
            result["error"] = problem
            return result, None, None, None, k
        try:
            position = self.model.find_document(doc) if doc else None
        except KeyError as exc:
            result["error"] = str(exc.args[0])
            return result, None, None, None, k
        question = question.strip()
        chosen = method
        if method == "auto":
            chosen = AUTO_METHOD
        result["method"] = chosen
        return result, question, chosen, position, k

    def _isolated(self, run, group: list[tuple]) -> None:
        """``run(group)``; when it raises, each question of the group alone, so that one bad
        question gets the error and the others their answers."""
        try:
            run(group)
        except Exception as exc:
            if len(group) > 1:
                for job in group:
                    self._isolated(run, [job])
            else:
                group[0][0]["error"] = f"{type(exc).__name__}: {exc}"

    def _run_one(self, group: list[tuple]) -> None:
        for result, question, method, position, k in group:
            result["_evidence"] = self._run(method, question, position, k, result)

    def evidence_row(self, position: int, score: float) -> dict:
        model = self.model
        document = model.documents[int(model.doc[position])]
        return {
            "doc": document.name,
            "doc_id": document.doc_id,
            "node_id": model.node_ids[position],
            "kind": str(model.kind[position]),
            "page": int(model.page_start[position]),
            "page_end": int(model.page_end[position]),
            "sec_id": int(model.sec_id[position]),
            "para_idx": int(model.para_idx[position]),
            "text": model.node_text(position),
            "score": round(float(score), 6),
        }

    # ---- methods ----------------------------------------------------------------------------
    def _check(self, question: Any, method: str, k: Any) -> str | None:
        limits = self.config.query
        if not isinstance(question, str) or not question.strip():
            return "the question is empty"
        if len(question) > limits.max_question_chars:
            return f"the question is longer than {limits.max_question_chars} characters"
        if method not in QUERY_METHODS:
            return f"unknown method {method!r}; choose one of {', '.join(QUERY_METHODS)}"
        if not isinstance(k, int) or not 1 <= k <= limits.max_k:
            return f"k must be between 1 and {limits.max_k}"
        if not self.model.documents:
            return "the index holds no documents"
        if needs_vectors(QUERY, method) and not self.model.has_vector.any():
            return (
                f"the index holds no vectors (built with --no-enrich), and {method} ranks by "
                "them: re-index without --no-enrich, or ask with bookrag, deepread or ladrag, "
                "which rank by words where there are no vectors"
            )
        return None

    def _run(
        self, method: str, question: str, doc: int | None, k: int, result: dict
    ) -> tuple[list[int], list[float]]:
        """An agent (BookRAG, DeepRead, LAD-RAG) on one question."""
        started = time.perf_counter()
        with metered(self.model.backend) as used:
            out = self._agent(method, question, doc, k)
        _add_usage(result, used)
        result.update(answer=out.answer, answer_type=out.answer_type, trace=out.trace)
        if isinstance(out, bookrag_agent.AgentResult):  # its Reduce is the answering step
            result.update(query_class=out.query_class, plan=out.plan)
            result.update(citations=out.citations or [], _cited=True)
        else:
            result["plan"] = [s["op"] for s in out.trace]
        result["timings"][method + "_s"] = round(time.perf_counter() - started, 4)
        return list(out.evidence), list(out.scores)

    def _agent(
        self, method: str, question: str, doc: int | None, k: int
    ) -> bookrag_agent.AgentResult | deepread.ToolRunResult:
        """BookRAG (structured or paper plan), DeepRead or LAD-RAG on one question."""
        model, query = self.model, self.config.query
        if method in ("bookrag", "bookrag_paper"):
            plan = "paper" if method == "bookrag_paper" else "structured"
            scope, relevance = model.scope(doc), self.config.relevance
            reranker = self.reranker if plan == "paper" else None
            return bookrag_agent.run(
                model, question, scope, self.walk, k, plan=plan, relevance=relevance,
                reranker=reranker,
            )  # fmt: skip
        if method == "deepread":
            tools = deepread.DeepReadTools(model, doc, query.deepread_scan_window)
            if is_generative(model.backend):
                return deepread.react_loop(
                    tools, question, k, query.deepread_max_rounds, query.agent_toc_documents
                )
            return deepread.offline_policy(
                tools, question, k, self.config.relevance,
                query.deepread_neighbour_share, query.deepread_page_repeat,
            )  # fmt: skip
        tools = ladrag.LadRagTools(model, doc, self.config.relevance)
        if is_generative(model.backend):
            budget = query.ladrag_budget * k
            return ladrag.agent_loop(
                tools, question, k, query.ladrag_max_rounds, budget, query.agent_toc_documents
            )
        return ladrag.offline_policy(tools, question, k, query.ladrag_budget * k)

    def dense(self, question: str, doc: int | None, k: int) -> tuple[list[int], list[float]]:
        """The baseline: top-k leaves by cosine to the question."""
        return self.dense_many([question], [doc], [k])[0]

    def dense_many(
        self, questions: list[str], docs: list[int | None], ks: list[int]
    ) -> list[tuple[list[int], list[float]]]:
        """The baseline for a batch: one embedding call, one product of the batch's vectors
        with every leaf's, then per question the top k of its scope (its document, or all)."""
        leaves = self.model.leaves()
        scores = self.model.vectors[leaves] @ self.model.embed(questions).T  # leaves × batch
        out = []
        for column, doc, k in zip(scores.T, docs, ks, strict=True):
            lo, hi = 0, len(leaves)
            if doc is not None:
                lo, hi = np.searchsorted(leaves, self.model.doc_range(doc))
            scope, found = leaves[lo:hi], column[lo:hi]
            top = np.lexsort((scope, -found))[:k]
            out.append((scope[top].tolist(), found[top].tolist()))
        return out

    def hybrid(self, question: str, doc: int | None, k: int) -> tuple[list[int], list[float]]:
        """The second baseline: top-k leaves by BM25 and dense fused by reciprocal rank
        (``scoring.fused_scores``)."""
        scope = self.model.leaves(doc)
        if scope.size == 0:
            return [], []
        vector = self.model.embed([question])[0] if self.model.has_vector.any() else None
        scores = fused_scores(self.model, question, scope, vector)
        top = np.lexsort((scope, -scores))[:k]
        return scope[top].tolist(), scores[top].tolist()

    def _hybrid_many(self, group: list[tuple]) -> None:
        for result, question, _method, doc, k in group:
            started = time.perf_counter()
            result.update(plan=["Hybrid_TopK"], _evidence=self.hybrid(question, doc, k))
            result["timings"]["hybrid_s"] = round(time.perf_counter() - started, 4)

    def _dense_many(self, group: list[tuple]) -> None:
        started = time.perf_counter()
        found = self.dense_many([j[1] for j in group], [j[3] for j in group], [j[4] for j in group])
        seconds = round(time.perf_counter() - started, 4)
        for (result, *_), evidence in zip(group, found, strict=True):
            result.update(plan=["Dense_TopK"], _evidence=evidence)
            result["timings"].update(dense_s=seconds, batch=len(group))

    def _zoom_many(self, group: list[tuple]) -> None:
        started = time.perf_counter()
        found = self.zoom_many([j[1] for j in group], [j[3] for j in group], [j[4] for j in group])
        seconds = round(time.perf_counter() - started, 4)
        for (result, *_), (evidence, trace) in zip(group, found, strict=True):
            result["trace"] += trace
            if len(trace) == 2:
                result["plan"] = ["Doc_Zoom", "Chunk_Zoom"]
            result["_evidence"] = evidence
            result["timings"].update(zoom_s=seconds, batch=len(group))

    def zoom_many(
        self, questions: list[str], docs: list[int | None], ks: list[int]
    ) -> list[tuple[tuple[list[int], list[float]], list[dict]]]:
        """ZoomRAG (``operators.query.zoom``) for a batch: Doc-Zoom over the corpus gives the
        documents and the entity scores (one walk for the batch); Chunk-Zoom over those
        documents' chunks (a PDF's leaves, a passage's sentences) picks the evidence (one
        solve for the batch; over a PDF's leaves the walk starts from the methods' relevance,
        ``_relevance_seeds``): the leaf of each chunk, best first, once (a PDF's leaves: the
        walk's ranking, fused with BM25's where ``relevance.zoom_bm25_weight`` > 0, spread
        over pages by Page_Ranker: ``_pdf_evidence``). A question asked of
        one document walks that document's own graph (``zoom_of``: its vector, its entities,
        the query's links to them) and takes its chunks from it, and BM25 reads that
        document's statistics (``relevance.bm25_scope``), so its evidence does not depend on
        the other documents' text (only on how the index resolved its entities across
        documents). Per question: (evidence positions, scores) and its trace."""
        vectors = self.model.embed(questions)
        doc_lists: list[list[int]] = [[] for _ in questions]
        ranked: list[list] = [[] for _ in questions]
        corpus = [i for i, doc in enumerate(docs) if doc is None]
        if corpus:
            ids, _, entity_scores = self.zoom.doc_zoom(
                [questions[i] for i in corpus], vectors[corpus]
            )
            lists = [[int(d) for d in row] for row in ids]
            seeds = [
                self._relevance_seeds(
                    [questions[i]],
                    vectors[i : i + 1],
                    [c for d in row for c in self.zoom.chunks(d)],
                )[0]
                for i, row in zip(corpus, lists, strict=True)
            ]
            found = self.zoom.chunk_zoom(lists, entity_scores, vectors[corpus], seeds)
            for i, row, chunks in zip(corpus, lists, found, strict=True):
                doc_lists[i], ranked[i] = row, chunks
        for doc in sorted({d for d in docs if d is not None}):
            asked = [i for i, d in enumerate(docs) if d == doc]
            zoom = self.zoom_of(doc)
            query_entity = zoom.link_entities([questions[i] for i in asked])
            _, entity_scores = zoom.doc_zoom_scores(vectors[asked], query_entity, 1)
            seeds = self._relevance_seeds(
                [questions[i] for i in asked], vectors[asked], zoom.chunks(0)
            )
            found = zoom.chunk_zoom([[0]] * len(asked), entity_scores, vectors[asked], seeds)
            for i, chunks in zip(asked, found, strict=True):
                doc_lists[i], ranked[i] = [doc], chunks
        out = []
        batch = zip(questions, vectors, doc_lists, ranked, ks, strict=True)
        for question, vector, doc_list, chunks, k in batch:
            trace = [{"op": "Doc_Zoom", "out": len(doc_list)}]
            n_chunks = sum(len(self.zoom.chunks(d)) for d in doc_list)
            if n_chunks == 0:
                out.append((([], []), trace))
                continue
            trace.append({"op": "Chunk_Zoom", "in": n_chunks, "out": len(chunks)})
            best: dict[int, float] = {}
            for chunk, score in chunks:
                best.setdefault(self.model.position(chunk.node_id), score)
            if any(not self.model.documents[d].passage for d in doc_list):
                evidence, scores = self._pdf_evidence(question, vector, best, k)
            else:
                evidence = list(best)[:k]
                scores = [best[p] for p in evidence]
            out.append(((evidence, scores), trace))
        return out

    def _relevance_seeds(
        self, questions: list[str], vectors: np.ndarray, chunks: Sequence[Chunk]
    ) -> list[np.ndarray | None]:
        """Chunk-Zoom's query seed of each question over the same ``chunks`` (a PDF's leaves,
        ``walk.seed_scores`` ``relevance``): softmax over ``walk.relevance_temperature`` of the
        methods' relevance of each chunk's leaf (``scoring.text_scores``: dense and BM25 over
        the leaf read after its headings, min–max within these leaves), so that the walk starts
        where BookRAG, DeepRead and LAD-RAG would look, names and numbers included; the chunks'
        positions are read once for the questions. None (the walk seeds by the question's
        cosine, ``zoom.query_seeds``): ``similarity``, no chunks, or a passage corpus's
        sentences (several to a passage node, which one relevance score cannot tell apart)."""
        walk = self.config.walk
        if walk.seed_scores != "relevance" or walk.query_seed <= 0 or not chunks:
            return [None] * len(questions)
        positions = np.asarray([self.model.position(c.node_id) for c in chunks], np.int64)
        docs = np.unique(self.model.doc[positions])
        if any(self.model.documents[int(d)].passage for d in docs):
            return [None] * len(questions)
        weight = self.config.relevance.dense_weight
        return [
            softmax_seeds(
                text_scores(self.model, question, positions, vector, weight),
                walk.relevance_temperature,
            )
            for question, vector in zip(questions, vectors, strict=True)
        ]

    def _pdf_evidence(
        self, question: str, vector: np.ndarray, best: dict[int, float], k: int
    ) -> tuple[list[int], list[float]]:
        """Chunk-Zoom's leaves of a PDF (position: walk score) to k evidence units: the walk's
        ranking fused with BM25's by reciprocal rank at ``relevance.zoom_bm25_weight`` (0: the
        walk's scores alone), then spread over pages as BookRAG's Page_Ranker does (units on a
        page already taken add no page). Where Chunk-Zoom's cut (``walk.keep_fraction``) left
        fewer leaves than k, the document's other leaves follow, by the methods' relevance
        (``scoring.text_scores``, with the question's ``vector``), so that a small document
        still gets k units."""
        relevance = self.config.relevance
        positions = np.asarray(list(best), np.int64)
        scores = np.asarray(list(best.values()), np.float64)
        if relevance.zoom_bm25_weight > 0:
            scores = fused_with_bm25(
                self.model, question, positions, scores, relevance.zoom_bm25_weight
            )
        ranked, ranked_scores = page_ranker(self.model, positions, scores, k, relevance=relevance)
        evidence, evidence_scores = ranked.tolist(), ranked_scores.tolist()
        if len(evidence) < k and positions.size:
            docs = np.unique(self.model.doc[positions])
            scope = np.concatenate([self.model.leaves(int(d)) for d in docs])
            rest = scope[~np.isin(scope, positions)]
            rest_scores = text_scores(self.model, question, rest, vector, relevance.dense_weight)
            top = np.lexsort((rest, -rest_scores))[: k - len(evidence)]
            evidence += rest[top].tolist()
            evidence_scores += rest_scores[top].tolist()
        return evidence, evidence_scores

    def zoom_of(self, doc: int) -> Zoom:
        """ZoomRAG over document ``doc`` alone (``DocumentView.single``), on a walk engine of
        its own (one document's graph: built in milliseconds); the latest
        ``DOC_ZOOMS_KEPT`` are kept."""
        zoom = self._doc_zooms.pop(doc, None)
        if zoom is None:
            view = self.zoom.view.single(doc)
            zoom = Zoom(view, self.model.backend, make_engine(self.config.walk))
        self._doc_zooms[doc] = zoom  # most recently used last
        while len(self._doc_zooms) > DOC_ZOOMS_KEPT:
            del self._doc_zooms[next(iter(self._doc_zooms))]
        return zoom


def _add_usage(result: dict, used: dict) -> None:
    for key, value in used.items():
        result["usage"][key] = result["usage"].get(key, 0) + value


def _empty(question: Any, method: str, doc: str | None) -> dict:
    return {
        "question": question if isinstance(question, str) else "",
        "method": method,
        "query_class": None,
        "doc": doc,
        "answer": None,
        "answer_type": "none",
        "citations": [],
        "evidence": [],
        "plan": [],
        "trace": [],
        "timings": {},
        "usage": no_usage(),
        "error": None,
    }
