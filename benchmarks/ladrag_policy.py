"""LAD-RAG's offline policies side by side on a PDF QA set, each beside dense top-k at the same
number of evidence units (the PDF QA table's protocol, ``operators.eval.pdf_qa``): the search
policy (semantic_search, then contextualize: the policy before the graph filter was used) and
the structural policy (``graph_filter`` when the question names pages, sections, tables,
figures or counts; the search policy otherwise), on the same index, questions and k in one run.

    python -m benchmarks.ladrag_policy --index DIR --questions questions.jsonl [--k 5]
        [--limit N] [--every N] [--start I]

Prints per policy: units returned, page recall, perfect recall, irrelevant-page ratio and span
recall, each beside dense's at the same units; and the same for the questions the structural
policy sends to graph_filter (where the two policies differ).
"""

from __future__ import annotations

import argparse
import json
import time

from bookindex.operators.config import BookindexConfig
from bookindex.operators.eval.pdf_qa import score_unit_list
from bookindex.operators.eval.progress import Progress
from bookindex.operators.query import ladrag

POLICIES = {"search": ladrag.search_policy, "structural": ladrag.offline_policy}
KEYS = ("page_recall", "perfect_recall", "irrelevant_page_ratio", "span_recall")


def run(engine, questions: list[dict], k: int) -> list[dict]:
    """Per question and policy: the scores of its evidence and of dense's at equal units."""
    model, budget = engine.model, engine.config.query.ladrag_budget * k
    rows = []
    progress = Progress("ladrag policies", len(questions))
    for q in questions:
        doc = model.find_document(q["doc"])
        spec, _ = ladrag.structural_spec(q["question"])
        row = {"id": q["id"], "names_structure": spec is not None}
        for name, policy in POLICIES.items():
            started = time.perf_counter()
            tools = ladrag.LadRagTools(model, doc, engine.config.relevance)
            out = policy(tools, q["question"], k, budget)
            row[f"{name}_s"] = time.perf_counter() - started
            evidence = [
                engine.evidence_row(p, s) for p, s in zip(out.evidence, out.scores, strict=True)
            ]
            dense = engine.answer(q["question"], "dense", q["doc"], max(1, len(evidence)))
            row[name] = score_unit_list(q, evidence, None)
            row[f"{name}_dense"] = score_unit_list(q, dense["evidence"] if evidence else [], None)
        rows.append(row)
        progress.done()
    return rows


def summary(rows: list[dict], label: str) -> list[str]:
    lines = [f"{label}: {len(rows)} questions"]
    for name in POLICIES:
        cells = [f"units {_mean(rows, name, 'n_units'):.1f}"]
        for key in KEYS:
            ours, dense = _mean(rows, name, key), _mean(rows, f"{name}_dense", key)
            if ours == ours:  # not NaN: some question has this metric
                cells.append(f"{key} {100 * ours:.1f} (dense {100 * dense:.1f})")
        seconds = sum(r[f"{name}_s"] for r in rows) / max(1, len(rows))
        lines.append(f"  {name:>10}: " + ", ".join(cells) + f", {seconds:.3f} s/question")
    return lines


def _mean(rows: list[dict], name: str, key: str) -> float:
    values = [r[name][key] for r in rows if key in r[name]]
    return sum(values) / len(values) if values else float("nan")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index", required=True)
    parser.add_argument("--questions", required=True)
    parser.add_argument("--k", type=int, default=BookindexConfig().query.k)
    parser.add_argument("--limit", type=int, default=None, help="first N questions")
    parser.add_argument("--every", type=int, default=1, help="every Nth question (a sample)")
    parser.add_argument("--start", type=int, default=0, help="the sample's first question")
    args = parser.parse_args(argv)
    from bookindex.pipelines.store.reader import open_engine

    with open(args.questions, encoding="utf-8") as handle:
        questions = [json.loads(line) for line in handle if line.strip()]
    questions = questions[: args.limit][args.start :: args.every]
    engine = open_engine(args.index, BookindexConfig())
    known = {d.name for d in engine.model.documents}
    questions = [q for q in questions if q["doc"] in known]
    rows = run(engine, questions, args.k)
    print(
        f"index {args.index}, questions {args.questions} (k={args.k}, every {args.every} "
        f"from {args.start})"
    )
    for line in summary(rows, "all"):
        print(line)
    for line in summary([r for r in rows if r["names_structure"]], "naming structure"):
        print(line)


if __name__ == "__main__":
    main()
