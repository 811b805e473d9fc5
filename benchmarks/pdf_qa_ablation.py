"""Where BookRAG's structured plan gains page recall over dense top-k: each ingredient added
one at a time, at the same number of evidence units, on an indexed PDF QA set.

    python -m benchmarks.pdf_qa_ablation --index DIR --questions questions.jsonl [--k K]
        [--config FILE] [--set SECTION.FIELD=VALUE ...]

Rows (answerable questions only; page recall in %). The first is the query API's ``dense``
method; every other row runs the plan's own code (``bookrag.structured_evidence``, one question,
no decomposition) with a ``RelevanceConfig`` that turns on one more ingredient of the configured
one (or ``Page_Ranker`` alone, the last row):
  dense top-k (raw question)            the baseline of jobs.evaluate
  + question without format instructions
  + BM25 (dense_weight, BM25 the rest)
  + page ranker (k nodes on k pages)
  + section scent, + modal scent, + entity subtrees, + named references  (= the plan)
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from bookindex.operators.config import RelevanceConfig, add_config_arguments, config_from_args
from bookindex.operators.eval.qa_metrics import page_metrics
from bookindex.operators.query import bookrag, scoring
from bookindex.operators.query.engine import QueryEngine


def ingredients(plan: RelevanceConfig) -> list[tuple[str, RelevanceConfig]]:
    """The plan's weights switched on one at a time, starting from dense alone."""
    steps = [
        ("+ no format instructions", {}),
        ("+ BM25", {"dense_weight": plan.dense_weight}),
        ("+ page ranker", {"page_ranker": plan.page_ranker}),
        ("+ section scent", {"section_scent": plan.section_scent}),
        ("+ modal scent", {"modal_scent": plan.modal_scent}),
        ("+ entity subtrees", {"entity_scent": plan.entity_scent}),
        ("+ named references (the plan)", {"named_references": plan.named_references}),
    ]
    values = dict(
        dense_weight=1.0,
        page_ranker=False,
        section_scent=0.0,
        modal_scent=0.0,
        entity_scent=0.0,
        named_references=False,
    )
    out = []
    for name, change in steps:
        values.update(change)
        out.append((name, plan.model_copy(update=values)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pdf_qa_ablation")
    parser.add_argument("--index", required=True)
    parser.add_argument("--questions", required=True)
    parser.add_argument("--k", type=int, default=None, help="evidence units (query.k)")
    add_config_arguments(parser)
    args = parser.parse_args(argv)
    from bookindex.pipelines.store.reader import open_engine

    config = config_from_args(args, {"query": {"k": args.k}})
    engine: QueryEngine = open_engine(args.index, config)
    model, k = engine.model, config.query.k
    names = {d.name for d in model.documents}
    with open(args.questions, encoding="utf-8") as handle:
        questions = [json.loads(line) for line in handle if line.strip()]
    questions = [q for q in questions if q.get("evidence_pages") and q["doc"] in names]
    variants = ingredients(config.relevance)
    rows: dict[str, list[float]] = {}

    def record(name: str, positions, question: dict) -> None:
        units = [
            {"page": int(model.page_start[p]), "page_end": int(model.page_end[p])}
            for p in positions
        ]
        recall = page_metrics(units, question["evidence_pages"])["page_recall"]
        rows.setdefault(name, []).append(recall)

    for q in questions:
        doc = model.find_document(q["doc"])
        raw = q["question"]
        record("dense top-k (raw question)", engine.dense(raw, doc, k)[0], q)
        for name, relevance in variants:
            kept, _ = bookrag.structured_evidence(model, [raw], model.scope(doc), k, relevance)
            record(name, kept, q)
        leaves = model.leaves(doc)
        dense = model.dense_scores(model.embed([raw])[0], leaves)
        spread = scoring.page_ranker(model, leaves, dense, k, relevance=config.relevance)[0]
        record("dense top-k + page ranker only", spread, q)
    base = float(np.mean(rows["dense top-k (raw question)"]))
    print(f"{len(questions)} answerable questions, k = {k}")
    print(f"{'variant':40s} {'page recall':>11s} {'vs dense':>9s}")
    for name, values in rows.items():
        value = float(np.mean(values))
        print(f"{name:40s} {100 * value:11.1f} {100 * (value - base):+9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
