"""Ask an index a question.

    python -m jobs.query "How many tables are in Section 3?" --index DIR \\
        [--method auto|bookrag|deepread|zoom|ladrag|dense|bookrag_paper] [--doc NAME] [--k K]
        [--json] [--models offline|openai|vllm] [--model-config FILE.json] [--device auto]
        [--config FILE] [--set SECTION.FIELD=VALUE ...]

Prints the answer (extractive with the offline models), the evidence with document, page,
sec_id, para_idx and score, the plan or tool trace and the timings; ``--json`` prints the whole
result object (the same one ``POST /query`` returns). Exits 0 when the question was answered
or found nothing, 2 when the request itself was bad (empty question, unknown method or doc).
"""

from __future__ import annotations

import argparse
import json
import sys

from operators.config import ConfigError, add_config_arguments, config_from_args
from operators.models import BACKENDS
from operators.query.registry import QUERY, QUERY_METHODS, describe

BAD_REQUEST_PREFIXES = ("the question", "unknown method", "no document", "k must", "the index")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.query", description=__doc__)
    parser.add_argument("question", help="the question")
    parser.add_argument("--index", required=True, help="index directory")
    parser.add_argument("--method", choices=QUERY_METHODS, default="auto", help=describe(QUERY))
    parser.add_argument("--doc", default=None, help="ask inside one document (file name)")
    parser.add_argument("--k", type=int, default=None, help="evidence units (default query.k)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--models", choices=BACKENDS, default=None, help="model backend")
    parser.add_argument("--model-config", default=None, help="JSON file of ModelConfig fields")
    parser.add_argument("--device", default=None, help="walk engine: auto, cpu or gpu")
    add_config_arguments(parser)
    return parser


def render(result: dict) -> str:
    lines = [f"method: {result['method']}  class: {result['query_class'] or '-'}"]
    if result["error"]:
        lines.append(f"error: {result['error']}")
    if result["answer"] is not None:
        lines.append(f"answer ({result['answer_type']}): {result['answer']}")
    if result["plan"]:
        lines.append("plan: " + " → ".join(result["plan"]))
    for unit in result["evidence"]:
        text = " ".join(unit["text"].split())
        lines.append(
            f"  [{unit['score']:.3f}] {unit['doc']} p.{unit['page']} "
            f"sec {unit['sec_id']} ¶{unit['para_idx']} {unit['kind']}: {text[:160]}"
        )
    lines.append("timings: " + json.dumps(result["timings"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pipelines.store.reader import open_engine

    models = {}
    if args.model_config:
        with open(args.model_config, encoding="utf-8") as handle:
            models = json.load(handle)
    models["backend"] = args.models
    try:
        config = config_from_args(args, {"models": models, "walk": {"device": args.device}})
        engine = open_engine(args.index, config)
    except (ConfigError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = engine.answer(args.question, args.method, args.doc, args.k)
    print(json.dumps(result, indent=2) if args.json else render(result))
    bad = result["error"] and result["error"].startswith(BAD_REQUEST_PREFIXES)
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
