"""Where BookRAG's structured plan gains page recall over dense top-k: each ingredient added
one at a time, at the same number of evidence units, on an indexed PDF QA set.

    python -m benchmarks.pdf_qa_ablation --index DIR --questions questions.jsonl [--k 5]

Rows (answerable questions only; page recall in %):
  dense top-k (raw question)            the baseline of jobs.evaluate
  + question without format instructions
  + BM25 (0.8 dense + 0.2 BM25)
  + page ranker (k nodes on k pages)
  + section scent, + modal scent, + entity subtrees, + named references  (= the plan)
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from operators.eval.qa_metrics import page_metrics
from operators.query import bookrag_ops as ops
from operators.query.rules import retrieval_text
from pipelines.query_index import QueryIndex


def _top(leaves: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    return leaves[np.lexsort((leaves, -scores))[:k]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pdf_qa_ablation")
    parser.add_argument("--index", required=True)
    parser.add_argument("--questions", required=True)
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args(argv)
    index = QueryIndex.open(args.index)
    names = {d.name for d in index.documents}
    with open(args.questions, encoding="utf-8") as handle:
        questions = [json.loads(line) for line in handle if line.strip()]
    questions = [q for q in questions if q.get("evidence_pages") and q["doc"] in names]
    rows: dict[str, list[float]] = {}

    def record(name: str, positions, question: dict) -> None:
        units = [
            {"page": int(index.page_start[p]), "page_end": int(index.page_end[p])}
            for p in positions
        ]
        recall = page_metrics(units, question["evidence_pages"])["page_recall"]
        rows.setdefault(name, []).append(recall)

    k = args.k
    for q in questions:
        doc = index.find_document(q["doc"])
        scope, leaves = index.scope(doc), index.leaves(doc)
        raw = q["question"]
        record(
            "dense top-k (raw question)",
            _top(leaves, index.dense_scores(index.embed([raw])[0], leaves), k),
            q,
        )
        text = retrieval_text(raw)
        vector = index.embed([text])[0]
        dense = ops.minmax(index.dense_scores(vector, leaves))
        record("+ no format instructions", _top(leaves, dense, k), q)
        hybrid = index.text_scores(text, leaves, vector, ops.DENSE_WEIGHT)
        record("+ BM25", _top(leaves, hybrid, k), q)
        record("+ page ranker", ops.page_ranker(index, leaves, hybrid, k)[0], q)
        score = hybrid + ops.SECTION_SCENT * ops.section_scent(index, leaves, vector)
        record("+ section scent", ops.page_ranker(index, leaves, score, k)[0], q)
        score = score + ops.MODAL_SCENT * ops.modal_scent(index, leaves, text)
        record("+ modal scent", ops.page_ranker(index, leaves, score, k)[0], q)
        entities = ops.extract(index, text, scope)
        if entities:
            region, _ = ops.select_by_entity(index, scope, entities)
            score = score + ops.ENTITY_SCENT * np.isin(leaves, region)
        record("+ entity subtrees", ops.page_ranker(index, leaves, score, k)[0], q)
        forced = ops.referenced_nodes(index, leaves, text)
        record(
            "+ named references (the plan)", ops.page_ranker(index, leaves, score, k, forced)[0], q
        )
        record(
            "dense top-k + page ranker only",
            ops.page_ranker(index, leaves, index.dense_scores(index.embed([raw])[0], leaves), k)[0],
            q,
        )
    base = float(np.mean(rows["dense top-k (raw question)"]))
    print(f"{len(questions)} answerable questions, k = {k}")
    print(f"{'variant':40s} {'page recall':>11s} {'vs dense':>9s}")
    for name, values in rows.items():
        value = float(np.mean(values))
        print(f"{name:40s} {100 * value:11.1f} {100 * (value - base):+9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
