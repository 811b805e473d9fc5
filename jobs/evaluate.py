"""``bookindex eval``: evaluate retrieval on a passage QA set or a PDF QA set (the canonical
formats of ../shared/data/README.md).

    bookindex eval --corpus corpus.jsonl --questions questions.jsonl \\
        --method zoom,bm25,dense --out DIR [--index DIR] [--limit N] [--batch 64]
    bookindex eval --docs DIR --questions questions.jsonl \\
        --method bookrag,deepread,zoom,ladrag --out DIR [--index DIR] [--k K]
        [--judge-url URL --judge-model NAME]
    (both: [--device auto] [--config FILE] [--set SECTION.FIELD=VALUE ...])

Example: ``bookindex eval --docs pdfs/ --questions questions.jsonl --out eval_out``

PDF QA (``--docs``): indexes the PDFs (or reuses the index), asks every question of its own
document with each method of the query API, and scores each method beside dense top-k with the
same number of evidence units: page recall, perfect recall, irrelevant-page ratio, span recall
(when ``evidence_texts`` are given), units returned; and the answers the papers score
(``operators/eval/answer_judge.py``): EM/F1 after answer extraction, inclusion accuracy,
LLM-judged accuracy (only with a judge endpoint apart from the answering model: ``--judge-url
URL --judge-model NAME`` or the ``judge`` section; else "not computed"), the answering model's
prompt and completion tokens per question from the endpoint's usage ("not measured" where the
backend reports none) and seconds per question.

Indexes the corpus through the index job (or reuses the index: only new passages are
processed), runs every question through each method in batches, and writes per method
``results_<method>.jsonl`` (one line per question: ranked passage ids and scores, gold ids,
recall@k) plus ``metrics.json``, ``summary.md`` with recall@2/5/10 side by side, and
``report.html``: plots of the figures of ``metrics.json``, drawn from it (recall against the
units spent per method with the baselines' beside it and, for PDF QA, each method's margin over
them with its interval and the per-document scores; seconds per question). For PDF QA with a
``--split`` file that names each document's kind, ``summary.md`` and ``metrics.json`` also hold
each method's figures per kind of document (``per_kind``).
Passage recall@k = |gold ∩ top-k| / |gold|, averaged over questions.

The summary says what each method saw (``operators.query.registry``: its ``sees``), which
build made the index (``pipelines/provenance.py``) and, for PDF QA, how often a method fell
back from a model to the rules. An index holding documents that another build made (other
stage fingerprints, models or options than this run's) is refused (exit 2, the documents and why
printed) unless ``--stale reindex`` (re-index them first) or ``--stale allow`` (evaluate them as
they are; the summary says so). An index whose documents differ in what ran when they were
indexed (the section filter that decided — a fallback to the rules when the learned filter's
model could not load —, the embedder runtime, the int8 instructions:
``provenance.mixed_runtime``) is refused after the index job (exit 2, the differences
printed) unless ``--allow-mixed`` (the summary then says so).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TextIO

from bookindex.jobs.console import Console, job_parser, one_line, run_job
from bookindex.operators.config import (
    BookindexConfig,
    ConfigError,
    add_config_arguments,
    config_from_args,
)
from bookindex.operators.eval.progress import Progress
from bookindex.operators.query.registry import (
    PASSAGE,
    QUERY,
    describe,
    evaluated,
    method_names,
    sees,
)

KS = (2, 5, 10)


COMMAND = "eval"  # bookindex eval


def read_questions(path: str, limit: int | None = None, key: str = "gold_ids") -> list[dict]:
    """Questions of a JSONL file; each needs a non-empty 'question' and ``key`` (gold_ids for
    passage QA, doc for PDF QA; an empty string counts as missing)."""
    questions = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            if not record.get("question") or record.get(key) in (None, ""):
                raise ValueError(f"{path}:{number}: a question needs 'question' and '{key}'")
            questions.append(record)
            if limit and len(questions) >= limit:
                break
    return questions


def split_questions(questions: list[dict], split: str | None, part: str | None) -> list[dict]:
    """The questions whose document is in ``part`` of the split file ``split`` (every set's
    ``part`` list together: {"mmlongbench": {"tune": [...], "report": [...]}, ...})."""
    if not (split and part):
        raise ValueError("give both --split FILE and --part NAME")
    with open(split, encoding="utf-8") as handle:
        sets = json.load(handle)
    docs = {d for value in sets.values() if isinstance(value, dict) for d in value.get(part, [])}
    if not docs:
        raise KeyError(f"no documents in part {part!r} of {split}")
    return [q for q in questions if q["doc"] in docs]


def document_kinds(split: str) -> dict[str, str]:
    """Each document's kind where the split file names kinds (``{"mmlongbench": {"kinds":
    {"paper": [...], "filing": [...]}, ...}}``, every set's together); {} where it names none.
    ValueError: a ``kinds`` that is not kind → list of file names."""
    with open(split, encoding="utf-8") as handle:
        sets = json.load(handle)
    found: dict[str, str] = {}
    for name, value in sets.items():
        kinds = value.get("kinds") if isinstance(value, dict) else None
        if kinds is None:
            continue
        if not isinstance(kinds, dict) or not all(
            isinstance(docs, list) and all(isinstance(d, str) for d in docs)
            for docs in kinds.values()
        ):
            raise ValueError(f"{name}.kinds in {split}: expected {{kind: [file names]}}")
        found.update((doc, kind) for kind, docs in kinds.items() for doc in docs)
    return found


def parse_methods(value: str | None, kind: str, err: TextIO | None = None) -> list[str] | None:
    """The comma-separated methods of a kind (default: those evaluated by default); None
    (after a message) when one is unknown."""
    allowed = method_names(kind)
    methods = [m.strip() for m in (value or ",".join(evaluated(kind))).split(",") if m.strip()]
    unknown = [m for m in methods if m not in allowed]
    if unknown:
        print(f"unknown method(s) {unknown}; choose from {allowed}", file=err or sys.stderr)
        return None
    return methods


def write_outputs(
    out: Path,
    rows: dict[str, list[dict]],
    metrics: dict,
    report: str,
    console: Console | None = None,
    kind: str = PASSAGE,
    questions: str = "",
) -> None:
    """results_<method>.jsonl, metrics.json, summary.md and report.html (its plots drawn from
    metrics.json as written: ``operators.eval.report``) under ``out``; the summary printed."""
    from bookindex.operators.eval.report import PASSAGE as PASSAGE_REPORT
    from bookindex.operators.eval.report import PDF, report_html

    for method, method_rows in rows.items():
        with (out / f"results_{method}.jsonl").open("w", encoding="utf-8") as handle:
            for row in method_rows:
                handle.write(json.dumps(row) + "\n")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    (out / "summary.md").write_text(report)
    written = json.loads((out / "metrics.json").read_text())
    html = report_html(written, PASSAGE_REPORT if kind == PASSAGE else PDF, questions)
    (out / "report.html").write_text(html, encoding="utf-8")
    if console is None:
        print(report)
    else:  # the report, or with --json the metrics
        console.result(report, metrics)


def recall_at(ranked: list[str], gold: list[str], k: int) -> float:
    gold_set = {str(g) for g in gold}
    return len(gold_set & set(ranked[:k])) / len(gold_set) if gold_set else 0.0


def evaluate_method(
    retrieval, questions: list[dict], method: str, batch: int, err: TextIO | None = None
) -> list[dict]:
    rows = []
    progress = Progress(method, len(questions), err)
    for lo in range(0, len(questions), batch):
        group = questions[lo : lo + batch]
        started = time.perf_counter()
        results = retrieval.retrieve([q["question"] for q in group], method, k=max(KS))
        seconds = (time.perf_counter() - started) / len(group)
        for question, hits in zip(group, results, strict=True):
            ranked = [h.id for h in hits]
            row = {
                "id": question["id"],
                "question": question["question"],
                "type": question.get("type", ""),
                "gold_ids": [str(g) for g in question["gold_ids"]],
                "ranked": ranked,
                "scores": [round(h.score, 6) for h in hits],
                "seconds": round(seconds, 4),
            }
            row.update({f"recall@{k}": recall_at(ranked, question["gold_ids"], k) for k in KS})
            if hits and hits[0].chunks:
                row["evidence"] = [c.text for h in hits[:2] for c in h.chunks[:2]]
            rows.append(row)
        progress.done(len(group))
    return rows


def summarise(rows: list[dict]) -> dict[str, float]:
    n = max(1, len(rows))
    out = {f"recall@{k}": sum(r[f"recall@{k}"] for r in rows) / n for k in KS}
    out["questions"] = len(rows)
    out["seconds_per_query"] = sum(r["seconds"] for r in rows) / n
    return out


def index_notes(index: Path, kind: str, methods: list[str], stale_note: str) -> str:
    """What each method saw and the index's build(s), for the summary."""
    from bookindex.pipelines import provenance

    lines = ["", "What each method saw:", ""]
    lines += [f"- {method}: {sees(kind, method)}" for method in methods]
    builds: dict[str | None, int] = {}
    for row in provenance.stored_builds(index):
        builds[row["build"]] = builds.get(row["build"], 0) + 1
    lines += ["", "Index:", ""]
    lines += [f"- {n} document(s): {provenance.describe(b)}" for b, n in builds.items()]
    if stale_note:
        lines += ["", stale_note]
    return "\n".join(lines) + "\n"


def check_build(
    index: Path, config: BookindexConfig, policy: str, err: TextIO | None = None
) -> tuple[BookindexConfig | None, str]:
    """The configuration to index with and a note for the summary; None when the index holds
    documents another build made and ``policy`` is "refuse" (they are printed to ``err``)."""
    err = err or sys.stderr
    from bookindex.pipelines.provenance import index_staleness

    stale = index_staleness(index, config)
    if not stale:
        return config, ""
    print(f"{len(stale)} document(s) of {index} were indexed by another build:", file=err)
    for uri, why in list(stale.items())[:10]:
        print(f"  {one_line(uri)}: {why}", file=err)
    if policy == "refuse":
        print(
            "refusing to evaluate a stale index: re-index it (bookindex index), or pass "
            "--stale reindex (re-index those documents now) or --stale allow (evaluate as is)",
            file=err,
        )
        return None, ""
    if policy == "reindex":
        return config, f"{len(stale)} document(s) indexed by another build were re-indexed first."
    kept = config.model_copy(
        update={"index": config.index.model_copy(update={"stale_build": "warn"})}
    )
    return kept, (
        f"**Stale index** (--stale allow): {len(stale)} document(s) were indexed by another "
        "build and evaluated as they are; these numbers are not this build's."
    )


def check_mixed(index: Path, allow: bool, err: TextIO | None = None) -> str | None:
    """The summary's note on an index whose documents differ in what ran when they were
    indexed ("" when they agree); None (the differences printed to ``err``) when not
    ``allow``."""
    from bookindex.pipelines import provenance

    err = err or sys.stderr
    mixed = provenance.mixed_runtime(provenance.stored_builds(index))
    if not mixed:
        return ""
    lines = provenance.mixed_lines(mixed)
    print(f"the documents of {index} differ in what ran when they were indexed:", file=err)
    for line in lines:
        print(f"  {line}", file=err)
    if not allow:
        print(
            "refusing to evaluate a mixed index: re-index it with one configuration on one kind "
            "of machine, or pass --allow-mixed (evaluate as is)",
            file=err,
        )
        return None
    return "**Mixed index** (--allow-mixed): " + "; ".join(lines) + "."


def markdown(metrics: dict[str, dict], corpus: str, questions: str) -> str:
    lines = [
        f"# Retrieval evaluation\n\ncorpus: `{corpus}`  \nquestions: `{questions}`\n",
        "| method | " + " | ".join(f"recall@{k}" for k in KS) + " | s/query |",
        "|---|" + "---|" * (len(KS) + 1),
    ]
    for method, m in metrics.items():
        cells = " | ".join(f"{100 * m[f'recall@{k}']:.1f}" for k in KS)
        lines.append(f"| {method} | {cells} | {m['seconds_per_query']:.3f} |")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    return job_parser(sys.modules[__name__])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", help="passage corpus (JSONL)")
    source.add_argument("--docs", help="PDF QA: directory of the questions' PDFs")
    parser.add_argument("--questions", required=True, help="questions (JSONL)")
    parser.add_argument(
        "--method",
        default=None,
        help=f"comma-separated; passages (default {','.join(evaluated(PASSAGE))}): "
        f"{describe(PASSAGE)}. PDFs (default {','.join(evaluated(QUERY))}): {describe(QUERY)}",
    )
    parser.add_argument("--k", type=int, default=None, help="PDF QA: evidence units (query.k)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--index", default=None, help="index directory (default: OUT/index)")
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument(
        "--split",
        default=None,
        metavar="FILE",
        help="PDF QA: a JSON file of document splits ({set: {part: [file names]}}), with --part",
    )
    parser.add_argument(
        "--part",
        default=None,
        help="PDF QA: the part of --split to ask (e.g. tune or report): only its documents' "
        "questions",
    )
    parser.add_argument(
        "--judge-url",
        default=None,
        help="PDF QA: the judge's OpenAI-compatible endpoint (judge.base_url), apart from the "
        "answering model: it extracts short answers and judges them (LLM-judged accuracy); "
        "without one answers are extracted by rule and the judged accuracy is not computed",
    )
    parser.add_argument("--judge-model", default=None, help="the judge's model (judge.model)")
    parser.add_argument("--batch", type=int, default=64, help="queries per retrieval batch")
    parser.add_argument("--device", default=None, help="walk engine: auto, cpu or gpu")
    parser.add_argument(
        "--stale",
        choices=("refuse", "reindex", "allow"),
        default="refuse",
        help="an index holding documents another build made (pipelines/provenance.py): "
        "refuse (default), re-index them first, or evaluate them as they are",
    )
    parser.add_argument(
        "--allow-mixed",
        action="store_true",
        help="evaluate an index whose documents differ in what ran when they were indexed "
        "(section filter, embedder runtime, int8 instructions); refused by default",
    )
    add_config_arguments(parser)


def main(argv: list[str] | None = None) -> int:
    return run_job(sys.modules[__name__], argv)


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        config = config_from_args(
            args,
            {
                "walk": {"device": args.device},
                "judge": {"base_url": args.judge_url, "model": args.judge_model},
            },
        )
    except (ConfigError, OSError, ValueError) as exc:
        console.error(str(exc))
        return 2
    for path in (args.questions, args.docs or args.corpus):
        if not Path(path).exists():
            console.error(f"no such file or directory: {one_line(path)}")
            return 2
    from bookindex.pipelines.index_pipeline import show_ray_output

    show_ray_output(console.verbose)
    with console.libraries_to_log("eval"):
        try:
            return _evaluate(args, config, console)
        except BaseException:
            console.failed = True
            raise


def _evaluate(args: argparse.Namespace, config: BookindexConfig, console: Console) -> int:
    if args.docs:
        return main_pdf(args, config, console)
    from bookindex.pipelines.index_pipeline import run_index
    from bookindex.pipelines.store.reader import open_engine

    methods = parse_methods(args.method, PASSAGE, console.err)
    if methods is None:
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    index = Path(args.index) if args.index else out / "index"
    questions = read_questions(args.questions, args.limit)
    index_config, stale_note = check_build(index, config, args.stale, console.err)
    if index_config is None:
        return 2
    summary = run_index([args.corpus], index, index_config, progress=console.progress)
    console.note(summary.line())
    mixed_note = check_mixed(index, args.allow_mixed, console.err)
    if mixed_note is None:
        return 2
    engine = open_engine(index, config)
    started = time.perf_counter()
    engine.warm_up(methods)  # once per process: models loaded, lazy indexes built
    warm_up_s = time.perf_counter() - started
    console.note(f"warm-up (models, walk graph, indexes): {warm_up_s:.1f}s")
    rows = {
        method: evaluate_method(
            engine.retrieval, questions, method, args.batch, console.progress_stream
        )
        for method in methods
    }
    metrics = {method: summarise(method_rows) for method, method_rows in rows.items()}
    report = markdown(metrics, args.corpus, args.questions)
    report += index_notes(
        index, PASSAGE, methods, "\n\n".join(filter(None, [stale_note, mixed_note]))
    )
    report += (
        f"\nwarm-up before the timed batches (models, walk graph, indexes): {warm_up_s:.1f} s\n"
    )
    write_outputs(out, rows, metrics, report, console, PASSAGE, args.questions)
    return 0


def main_pdf(args: argparse.Namespace, config: BookindexConfig, console: Console) -> int:
    from bookindex.operators.eval.answer_judge import AnswerScorer, judge_backend
    from bookindex.operators.eval.pdf_qa import (
        Baselines,
        evaluate_pdf_method,
        pdf_markdown,
        per_kind,
        summarise_pdf,
    )
    from bookindex.pipelines.index_pipeline import run_index
    from bookindex.pipelines.store.reader import open_engine

    methods = parse_methods(args.method, QUERY, console.err)
    if methods is None:
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    index = Path(args.index) if args.index else out / "index"
    questions = read_questions(args.questions, None, key="doc")
    kinds: dict[str, str] = {}  # figures per kind of document, where the split names kinds
    if args.split or args.part:
        try:
            questions = split_questions(questions, args.split, args.part)
            kinds = document_kinds(args.split)  # checked before any work: none lost to it
        except (OSError, ValueError, KeyError) as exc:
            console.error(f"--split/--part: {exc}")
            return 2
    questions = questions[: args.limit] if args.limit else questions
    wanted = sorted({q["doc"] for q in questions})
    missing = [d for d in wanted if not (Path(args.docs) / d).is_file()]
    if missing:
        console.error(f"{len(missing)} question document(s) not in {args.docs}: {missing[:5]}")
        return 2
    index_config, stale_note = check_build(index, config, args.stale, console.err)
    if index_config is None:
        return 2
    pdfs = [str(Path(args.docs) / d) for d in wanted]
    summary = run_index(pdfs, index, index_config, progress=console.progress)
    console.note(summary.line())
    mixed_note = check_mixed(index, args.allow_mixed, console.err)
    if mixed_note is None:
        return 2
    engine = open_engine(index, config)
    k = config.query.k if args.k is None else args.k
    baselines = Baselines(engine)  # each question's baselines, asked once for every method
    scorer = AnswerScorer(judge_backend(config.judge))  # no judge: rule extraction, unjudged
    rows, judge_tokens = {}, {}
    for method in methods:
        before = scorer.usage
        rows[method] = evaluate_pdf_method(
            engine, questions, method, k, baselines, stream=console.progress_stream, scorer=scorer
        )
        after = scorer.usage
        if before is not None and after is not None:
            judge_tokens[method] = {key: after[key] - before[key] for key in after}
    metrics = {method: summarise_pdf(method_rows) for method, method_rows in rows.items()}
    if kinds:  # figures per kind of document, as held-back documents of a kind are read
        for method, method_rows in rows.items():
            metrics[method]["per_kind"] = per_kind(method_rows, kinds)
    for method, used in judge_tokens.items():  # the judge's own, apart from the method's
        metrics[method]["judge_tokens"] = used
    report = pdf_markdown(metrics, args.questions)
    report += index_notes(
        index, QUERY, [*methods, "dense"], "\n\n".join(filter(None, [stale_note, mixed_note]))
    )
    write_outputs(out, rows, metrics, report, console, QUERY, args.questions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
