"""``bookindex ask``: ask an index one question or many, in one process.

    bookindex ask QUESTION... --index DIR [--file FILE] [--method auto|bookrag|deepread|zoom|
        ladrag|dense|hybrid|bookrag_paper|M1,M2,...|all] [--doc NAME] [--k K] [--models offline|openai|vllm]
        [--model-config FILE.json] [--device auto|cpu|gpu] [--config FILE]
        [--set SECTION.FIELD=VALUE ...] [--json] [--quiet] [--verbose]

Questions come from the arguments, from ``--file`` (one a line; ``-`` reads standard input) or,
with neither, from standard input when it is not a terminal. The index and the models load
once; the questions are answered as one batch (``QueryEngine.answer_many``), each by every
method ``--method`` names (several, comma-separated, or ``all``: side by side). Each answer prints
with its evidence: document, page, section (``sec_id``), paragraph (``para_idx``), kind and
score, then the plan or tool trace and the timings. ``--json`` prints one JSON object a line
per question: the object ``POST /query`` returns. ``--doc`` takes a file name, a title or a
doc_id (12 characters of it suffice).

Exit codes: 0 every question answered or found nothing; 2 a bad request (no index there, an
empty question, an unknown method or document, a method the index lacks the inputs of).

Example: ``bookindex ask "How many tables are in Chapter 2?" --index my_index``
"""

from __future__ import annotations

import argparse
import json
import sys

from bookindex.jobs.console import Console, job_parser, run_job
from bookindex.operators.config import ConfigError, add_config_arguments, config_from_args
from bookindex.operators.models import BACKENDS, ModelError
from bookindex.operators.query.registry import QUERY, QUERY_METHODS, describe

# a result's error that says the request itself was bad (exit 2), not that nothing matched
BAD_REQUEST_PREFIXES = (
    "the question",
    "unknown method",
    "no document",
    "more than one document",
    "k must",
    "the index",
)


COMMAND = "ask"  # bookindex ask


def build_parser() -> argparse.ArgumentParser:
    return job_parser(sys.modules[__name__])


def methods_arg(value: str) -> list[str]:
    """``--method``: one method, several separated by commas, or ``all`` (every method)."""
    if value.strip() == "all":
        return list(QUERY_METHODS)
    methods = [m.strip() for m in value.split(",") if m.strip()]
    unknown = [m for m in methods if m not in QUERY_METHODS]
    if not methods or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown method {', '.join(unknown) or repr(value)}: one of {', '.join(QUERY_METHODS)}"
            " (several separated by commas), or all"
        )
    return methods


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("questions", nargs="*", metavar="QUESTION", help="one or more questions")
    parser.add_argument("--index", required=True, help="the index directory")
    parser.add_argument(
        "--file", default=None, help="more questions, one a line (- reads standard input)"
    )
    parser.add_argument(
        "--method",
        type=methods_arg,
        default=["auto"],
        help="a method, several separated by commas (each question answered by each, side by "
        "side), or all; default auto. " + describe(QUERY),
    )
    parser.add_argument(
        "--doc", default=None, help="ask inside one document: its file name, title or doc_id"
    )
    parser.add_argument("--k", type=int, default=None, help="evidence units (default query.k: 5)")
    parser.add_argument(
        "--models", choices=BACKENDS, default=None, help="model backend (default offline)"
    )
    parser.add_argument("--model-config", default=None, help="a JSON file of models fields")
    parser.add_argument(
        "--device", default=None, help="the ZoomRAG walk engine: auto (default), cpu or gpu"
    )
    add_config_arguments(parser)


def render(result: dict) -> str:
    lines = [f"method: {result['method']}  class: {result['query_class'] or '-'}"]
    if result["error"]:
        lines.append(f"error: {result['error']}")
    if result["answer"] is not None:
        lines.append(f"answer ({result['answer_type']}): {result['answer']}")
    for c in result.get("citations") or []:
        lines.append(f"  cites {c['doc']} p.{c['page']} sec {c['sec_id']} ¶{c['para_idx']}")
    if result["plan"]:
        lines.append("plan: " + " → ".join(result["plan"]))
    for unit in result["evidence"]:
        text = " ".join(unit["text"].split())
        lines.append(
            f"  [{unit['score']:.3f}] {unit['doc']} p.{unit['page']} "
            f"sec {unit['sec_id']} ¶{unit['para_idx']} {unit['kind']}: {text[:160]}"
        )
    lines.append("timings: " + json.dumps(result["timings"]))
    if (result.get("usage") or {}).get("requests"):
        lines.append("usage: " + json.dumps(result["usage"]))
    return "\n".join(lines)


def read_questions(args: argparse.Namespace) -> list[str]:
    """The questions of the arguments, then of ``--file`` (or of a piped standard input)."""
    questions = list(args.questions)
    source = args.file
    if source is None and not questions and not sys.stdin.isatty():
        source = "-"
    if source == "-":
        questions += [line.rstrip("\n") for line in sys.stdin if line.strip()]
    elif source is not None:
        with open(source, encoding="utf-8") as handle:
            questions += [line.rstrip("\n") for line in handle if line.strip()]
    return questions


def main(argv: list[str] | None = None) -> int:
    return run_job(sys.modules[__name__], argv)


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        questions = read_questions(args)
    except OSError as exc:
        console.error(f"cannot read the questions: {exc}")
        return 2
    if not questions:
        console.error("no question: give one or more, --file FILE, or pipe them in")
        return 2
    models = {}
    try:
        if args.model_config:
            with open(args.model_config, encoding="utf-8") as handle:
                models = json.load(handle)
        models["backend"] = args.models
        config = config_from_args(args, {"models": models, "walk": {"device": args.device}})
    except (ConfigError, OSError, ValueError) as exc:
        console.error(str(exc))
        return 2
    from bookindex.pipelines.store.catalog import check_index

    try:
        check_index(args.index)  # before any model loads; nothing is created
    except FileNotFoundError as exc:
        console.error(str(exc))
        return 2
    with console.libraries_to_log("ask"):
        from bookindex.pipelines.store.reader import open_engine

        try:
            engine = open_engine(args.index, config)
        except (FileNotFoundError, ModelError) as exc:
            console.failed = True
            console.error(str(exc))
            return 2
        requests = [
            {"question": q, "method": method, "doc": args.doc, "k": args.k}
            for q in questions
            for method in args.method
        ]
        results = engine.answer_many(requests)
    bad = False
    for number, result in enumerate(results, 1):
        if console.json_out:
            print(json.dumps(result), file=console.out, flush=True)
        else:
            header = f"[{number}/{len(results)}] {result['question']}\n" if len(results) > 1 else ""
            console.result(header + render(result) + ("\n" if number < len(results) else ""))
        bad = bad or bool(result["error"] and result["error"].startswith(BAD_REQUEST_PREFIXES))
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
