"""One query API over one index: the BookRAG agent, DeepRead, ZoomRAG, LAD-RAG and the dense
top-k baseline, all answering in the same shape.

    engine = QueryEngine.open("index_dir")
    result = engine.answer("How many tables are in Section 3?", method="auto", doc="report.pdf")
    # {"question", "method", "query_class", "doc", "answer", "answer_type", "evidence": [
    #    {"doc", "doc_id", "node_id", "kind", "page", "page_end", "sec_id", "para_idx",
    #     "text", "score"}], "plan", "trace", "timings", "error"}

A bad request (empty or over-long question, unknown method or document) comes back as a result
with ``error`` set and no evidence, never as an exception; so does a question nothing in the
index matches.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from operators.models import ModelConfig, is_generative
from operators.query import bookrag as bookrag_agent
from operators.query import deepread, ladrag
from operators.query.rules import GLOBAL, MULTI, classify
from operators.walks.engine import TOP_K, make_engine
from pipelines.query_index import QueryIndex

METHODS = ("auto", "bookrag", "deepread", "zoom", "ladrag", "dense", "bookrag_paper")
MAX_QUESTION_CHARS = 4_000
DEFAULT_K = 5
# auto: the method that measured best per question class (see README, PDF QA evaluation)
AUTO_ROUTE = {GLOBAL: "bookrag", MULTI: "bookrag", "single-hop": "bookrag"}


class QueryEngine:
    def __init__(self, index: QueryIndex, device: str = "auto") -> None:
        self.index = index
        self.walk = make_engine(device)
        self._zoom_fitted = False

    @classmethod
    def open(
        cls, index_dir: str | Path, config: ModelConfig | None = None, device: str = "auto"
    ) -> QueryEngine:
        return cls(QueryIndex.open(index_dir, config), device)

    # ---- the API ----------------------------------------------------------------------------
    def answer(
        self, question: str, method: str = "auto", doc: str | None = None, k: int = DEFAULT_K
    ) -> dict:
        started = time.perf_counter()
        result = _empty(question, method, doc)
        problem = self._check(question, method, k)
        if problem:
            result["error"] = problem
            return result
        try:
            position = self.index.find_document(doc) if doc else None
        except KeyError as exc:
            result["error"] = str(exc.args[0])
            return result
        question = question.strip()
        chosen = method
        if method == "auto":
            result["query_class"] = classify(question)
            chosen = AUTO_ROUTE[result["query_class"]]
        result["method"] = chosen
        evidence, scores = self._run(chosen, question, position, k, result)
        result["evidence"] = [
            self.evidence_row(p, s) for p, s in zip(evidence, scores, strict=True)
        ]
        if not evidence and not result.get("answer"):
            result["error"] = result.get("error") or "nothing in the index matches the question"
        result["timings"]["total_s"] = round(time.perf_counter() - started, 4)
        return result

    def answer_many(self, requests: list[dict]) -> list[dict]:
        """Many questions (dicts with question, method, doc, k); results in the same order."""
        return [
            self.answer(
                r.get("question", ""),
                r.get("method", "auto"),
                r.get("doc"),
                int(r.get("k", DEFAULT_K)),
            )
            for r in requests
        ]

    def evidence_row(self, position: int, score: float) -> dict:
        index = self.index
        document = index.documents[int(index.doc[position])]
        return {
            "doc": document.name,
            "doc_id": document.doc_id,
            "node_id": index.node_ids[position],
            "kind": str(index.kind[position]),
            "page": int(index.page_start[position]),
            "page_end": int(index.page_end[position]),
            "sec_id": int(index.sec_id[position]),
            "para_idx": int(index.para_idx[position]),
            "text": index.node_text(position),
            "score": round(float(score), 6),
        }

    # ---- methods ----------------------------------------------------------------------------
    def _check(self, question: Any, method: str, k: int) -> str | None:
        if not isinstance(question, str) or not question.strip():
            return "the question is empty"
        if len(question) > MAX_QUESTION_CHARS:
            return f"the question is longer than {MAX_QUESTION_CHARS} characters"
        if method not in METHODS:
            return f"unknown method {method!r}; choose one of {', '.join(METHODS)}"
        if not 1 <= k <= 100:
            return "k must be between 1 and 100"
        if not self.index.documents:
            return "the index holds no documents"
        return None

    def _run(
        self, method: str, question: str, doc: int | None, k: int, result: dict
    ) -> tuple[list[int], list[float]]:
        index = self.index
        started = time.perf_counter()
        if method == "dense":
            evidence, scores = self.dense(question, doc, k)
            result["plan"] = ["Dense_TopK"]
        elif method in ("bookrag", "bookrag_paper"):
            scope = index.scope(doc)
            plan = "paper" if method == "bookrag_paper" else "structured"
            out = bookrag_agent.run(index, question, scope, self.walk, k=k, plan=plan)
            evidence, scores = out.evidence, out.scores
            result.update(
                query_class=out.query_class,
                answer=out.answer,
                answer_type=out.answer_type,
                plan=out.plan,
                trace=out.trace,
            )
        elif method == "deepread":
            tools = deepread.DeepReadTools(index, doc)
            if is_generative(index.backend):
                out = deepread.react_loop(tools, question, k=k)
            else:
                out = deepread.offline_policy(tools, question, k=k)
            evidence, scores = out.evidence, out.scores
            result.update(answer=out.answer, answer_type=out.answer_type, trace=out.trace)
            result["plan"] = [s["op"] for s in out.trace]
        elif method == "ladrag":
            out = ladrag.offline_policy(ladrag.LadRagTools(index, doc), question, k=k, budget=2 * k)
            evidence, scores = out.evidence, out.scores
            result.update(answer=out.answer, answer_type=out.answer_type, trace=out.trace)
            result["plan"] = [s["op"] for s in out.trace]
        else:
            evidence, scores = self.zoom(question, doc, k, result)
        result["timings"][method + "_s"] = round(time.perf_counter() - started, 4)
        return list(evidence), list(scores)

    def dense(self, question: str, doc: int | None, k: int) -> tuple[list[int], list[float]]:
        """The baseline: top-k leaves by cosine to the question."""
        leaves = self.index.leaves(doc)
        vector = self.index.embed([question])[0]
        scores = self.index.dense_scores(vector, leaves)
        top = np.lexsort((leaves, -scores))[:k]
        return leaves[top].tolist(), scores[top].tolist()

    def zoom(
        self, question: str, doc: int | None, k: int, result: dict
    ) -> tuple[list[int], list[float]]:
        """ZoomRAG: Doc-Zoom over the corpus (query–document–entity walk) gives the documents
        and the entity scores; Chunk-Zoom over those documents' leaves (stored vectors, entity
        links from the mention matrix) picks the evidence. With ``doc`` the chunks come from
        that document only."""
        index = self.index
        self._fit_zoom()
        vector = index.embed([question])[0]
        links = index.linker.link(question)
        query_entity = sp.csr_matrix(
            (np.ones(len(links)), ([0] * len(links), links)), shape=(1, len(index.entity_ids))
        )
        ids, doc_scores, entity_scores = self.walk.doc_zoom(
            vector[None], query_entity, k=min(TOP_K, len(index.documents))
        )
        docs = [doc] if doc is not None else [int(d) for d in ids[0]]
        result["trace"].append({"op": "Doc_Zoom", "out": len(docs)})
        chunks = np.concatenate([index.leaves(d) for d in docs])
        if chunks.size == 0:
            return [], []
        ranked = self.walk.chunk_zoom(
            [index.vectors[chunks]],
            [index.doc[chunks]],
            [index.mentions[chunks]],
            entity_scores[:1],
        )[0]
        order, scores = ranked
        result["trace"].append({"op": "Chunk_Zoom", "in": int(chunks.size), "out": len(order)})
        result["plan"] = ["Doc_Zoom", "Chunk_Zoom"]
        return chunks[order[:k]].tolist(), [float(s) for s in scores[:k]]

    def _fit_zoom(self) -> None:
        if self._zoom_fitted:
            return
        index = self.index
        n_docs = len(index.documents)
        doc_vectors = np.zeros((n_docs, index.vectors.shape[1]), np.float32)
        np.add.at(doc_vectors, index.doc, index.vectors)
        norms = np.linalg.norm(doc_vectors, axis=1, keepdims=True)
        doc_vectors /= np.where(norms > 0, norms, 1.0)
        node_doc = sp.csr_matrix(
            (np.ones(index.n_nodes), (index.doc, np.arange(index.n_nodes))),
            shape=(n_docs, index.n_nodes),
        )
        doc_entity = (node_doc @ index.mentions).tocsr()
        doc_entity.data[:] = 1.0
        self.walk.fit(doc_vectors, doc_entity)
        self._zoom_fitted = True


def _empty(question: Any, method: str, doc: str | None) -> dict:
    return {
        "question": question if isinstance(question, str) else "",
        "method": method,
        "query_class": None,
        "doc": doc,
        "answer": None,
        "answer_type": "none",
        "evidence": [],
        "plan": [],
        "trace": [],
        "timings": {},
        "error": None,
    }
