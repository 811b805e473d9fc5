"""Index a corpus of PDFs into Lance tables.

    python -m jobs.index_corpus INPUT... --out DIR [--force] [--strict] [--no-outline]
        [--no-enrich] [--models offline|openai|vllm] [--model-config FILE.json]

INPUT may be directories (searched recursively for *.pdf), files or globs; a ``.jsonl`` file is
a passage corpus (one ``{"id", "title", "text"}`` per line, each passage a document).
Models: the offline CPU default, or an OpenAI-compatible endpoint / vLLM configured by a JSON
file of ``operators.models.base.ModelConfig`` fields or by BOOKINDEX_* environment variables. Runs locally (a local
Ray is started) or on a cluster via ``ray job submit --working-dir . -- python -m jobs.index_corpus``.
Exits 0 with a summary; with --strict, exits 1 when any input failed.
"""

from __future__ import annotations

import argparse
import sys

from operators.models import BACKENDS, ModelConfig, load_backend
from pipelines.index_pipeline import IndexOptions, run_index


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.index_corpus", description=__doc__)
    parser.add_argument("inputs", nargs="+", help="directories, PDF files or globs")
    parser.add_argument("--out", required=True, help="index directory (Lance tables)")
    parser.add_argument("--force", action="store_true", help="re-index unchanged files too")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any input failed")
    parser.add_argument(
        "--no-outline", action="store_true", help="ignore PDF outlines; layout evidence only"
    )
    parser.add_argument(
        "--pages-per-task",
        type=int,
        default=64,
        help="pages per task for a book long enough to be split (others run whole)",
    )
    parser.add_argument("--workers", type=int, default=None, help="parse parallelism")
    parser.add_argument(
        "--no-enrich", action="store_true", help="structure only: no vectors, no entities"
    )
    parser.add_argument("--models", choices=BACKENDS, default=None, help="model backend")
    parser.add_argument("--model-config", default=None, help="JSON file of ModelConfig fields")
    parser.add_argument(
        "--model-gpus",
        type=float,
        default=None,
        help="GPUs per model task (default: 1 with --models vllm, else 0)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.model_config:
        model_config = ModelConfig.from_file(args.model_config)
    else:
        model_config = ModelConfig.from_env()
    if args.models:
        model_config.backend = args.models
    if model_config.backend != "offline" and not args.no_enrich:
        load_backend(model_config)  # one clear error now, not one per worker later
    options = IndexOptions(
        use_outline=not args.no_outline,
        pages_per_task=args.pages_per_task,
        force=args.force,
        parse_workers=args.workers,
        enrich=not args.no_enrich,
        model_config=model_config,
        model_gpus=args.model_gpus,
    )
    summary = run_index(args.inputs, args.out, options)
    for failure in summary.failures:
        print(f"  {failure['stage']:>8}  {failure['uri']}: {failure['error']}", file=sys.stderr)
    print(summary.line())
    return 1 if args.strict and summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
