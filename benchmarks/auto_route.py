"""Whether routing by query class beats the best single method: reads two ``bookindex eval
--docs`` outputs of the same methods, one on the split's ``tune`` part and one on its ``report``
part (``benchmarks/pdf_qa_split.json``), classes each question by the rules
(``operators.query.rules.classify``: what ``auto`` routes by), picks on the tune part the best
method of each class and scores that route on the report part beside every single method.

    bookindex eval --docs DOCS --questions Q --index IDX --split benchmarks/pdf_qa_split.json \\
        --part tune --method bookrag,deepread,zoom,ladrag,dense,hybrid --out TUNE   # and REPORT
    python -m benchmarks.auto_route --tune TUNE --report REPORT --questions Q

Two scores, both over the answerable questions: page recall (each method at its own number of
units, as the PDF QA table) and page recall minus dense top-k's at the same number of units (the
gain at equal budget: a method that returns more units does not win by that alone).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from bookindex.operators.query.rules import classify

SCORES = {
    "page recall": lambda r: r["page_recall"],
    "gain over dense at equal units": lambda r: r["page_recall"] - r["dense_page_recall"],
}


def load(folder: str) -> dict[str, dict[str, dict]]:
    """method → question id → result row (answerable questions only)."""
    out: dict[str, dict[str, dict]] = {}
    for path in sorted(Path(folder).glob("results_*.jsonl")):
        rows = [json.loads(line) for line in path.open(encoding="utf-8")]
        rows = [r for r in rows if r.get("page_recall") is not None and not r.get("error")]
        if rows:
            out[rows[0]["method"]] = {r["id"]: r for r in rows}
    return out


def questions_of(results: dict[str, dict[str, dict]]) -> dict[str, str]:
    """question id → its rules class, over the questions every method answered."""
    ids = set.intersection(*(set(rows) for rows in results.values()))
    any_method = next(iter(results.values()))
    return {i: classify(any_method[i].get("question") or "") for i in sorted(ids)}


def mean(values: list[float]) -> float:
    return 100.0 * sum(values) / len(values) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tune", required=True, help="bookindex eval --out of the tune part")
    parser.add_argument("--report", required=True, help="... of the report part")
    parser.add_argument("--questions", required=True, help="the questions file (for the text)")
    args = parser.parse_args(argv)
    with open(args.questions, encoding="utf-8") as handle:
        text = {q["id"]: q["question"] for q in map(json.loads, handle)}
    parts = {"tune": load(args.tune), "report": load(args.report)}
    for results in parts.values():
        for rows in results.values():
            for i, r in rows.items():
                r["question"] = text.get(i, "")
    for name, score in SCORES.items():
        tune = parts["tune"]
        classes = questions_of(tune)
        route = {}
        print(f"## {name}")
        for cls in sorted(set(classes.values())):
            ids = [i for i, c in classes.items() if c == cls]
            by_method = {m: mean([score(rows[i]) for i in ids]) for m, rows in tune.items()}
            route[cls] = max(by_method, key=lambda m: (by_method[m], m))
            shown = ", ".join(f"{m} {v:.1f}" for m, v in sorted(by_method.items()))
            print(f"tune, {cls} ({len(ids)} questions): {shown} -> {route[cls]}")
        report = parts["report"]
        classes = questions_of(report)
        counts = defaultdict(int)
        for c in classes.values():
            counts[c] += 1
        singles = {m: mean([score(rows[i]) for i in classes]) for m, rows in report.items()}
        routed = mean([score(report[route.get(c, "bookrag")][i]) for i, c in classes.items()])
        best = max(singles, key=lambda m: singles[m])
        print(f"report ({len(classes)} questions, {dict(counts)}):")
        for m, v in sorted(singles.items(), key=lambda kv: -kv[1]):
            print(f"  {m}: {v:.1f}")
        print(f"  routed by class: {routed:.1f} (best single: {best} {singles[best]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
