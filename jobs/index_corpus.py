"""Index a corpus of PDFs into Lance tables.

    python -m jobs.index_corpus INPUT... --out DIR [--strict] [--config FILE]
        [--set SECTION.FIELD=VALUE ...] [--force] [--keep-stale] [--no-outline] [--pages-per-task N]
        [--workers N] [--no-enrich] [--no-ocr] [--models offline|openai|vllm] [--model-config FILE.json]
        [--model-gpus G]

INPUT may be directories (searched recursively for *.pdf), files or globs; a ``.jsonl`` file is
a passage corpus (one ``{"id", "title", "text"}`` per line, each passage a document).
Configuration (``operators.config``; ``python -m jobs.show_config`` lists every field): the
defaults, then ``--config FILE``, then ``BOOKINDEX_*`` environment variables, then ``--set``,
then the named flags, each a field of the index or models section (``--workers`` is
``index.parse_workers``, ``--model-config`` a JSON file of models fields). Models: the offline
CPU default, or an OpenAI-compatible endpoint / vLLM. Runs locally (a local Ray is started) or
on a cluster via ``ray job submit --working-dir . -- python -m jobs.index_corpus``. Exits 0
with a summary; with --strict, exits 1 when any input failed; 2 on a configuration or an output
directory that cannot work (checked before any work, without loading a model: ``--out`` must be
new, empty or an undamaged index, and writable); 3 when another index job holds the index's
lock (``--set index.lock_wait_s=SECONDS`` waits for it).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from operators.config import BACKENDS, ConfigError, add_config_arguments, config_from_args
from operators.models import ModelError
from pipelines.index_pipeline import run_index
from pipelines.store.index_lock import IndexLocked


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.index_corpus", description=__doc__)
    parser.add_argument("inputs", nargs="+", help="directories, PDF files or globs")
    parser.add_argument("--out", required=True, help="index directory (Lance tables)")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any input failed")
    add_config_arguments(parser)
    # Named flags: each sets one configuration field; not given (None), it leaves it alone.
    flag = parser.add_argument
    flag("--force", action="store_true", default=None, help="index.force: re-index all")
    flag(
        "--keep-stale",
        dest="stale_build",
        action="store_const",
        const="warn",
        help='index.stale_build="warn": keep documents indexed by another build (other stage '
        "versions, models or options), with a warning, instead of re-indexing them",
    )
    flag("--pages-per-task", type=int, help="index.pages_per_task (books long enough to split)")
    flag("--workers", type=int, help="index.parse_workers: parse parallelism")
    for name, field, what in (
        ("--no-outline", "use_outline", "ignore PDF outlines, layout evidence only"),
        ("--no-enrich", "enrich", "structure only, no vectors, no entities"),
        ("--no-ocr", "ocr", "pages without a text layer stay unread (status needs_ocr)"),
    ):
        flag(
            name,
            dest=field,
            action="store_false",
            default=None,
            help=f"index.{field}=false: {what}",
        )
    flag("--models", choices=BACKENDS, help="models.backend")
    flag("--model-config", help="a JSON file of models fields (operators.config.ModelConfig)")
    flag("--model-gpus", type=float, help="index.model_gpus: GPUs per model worker")
    return parser


def flag_values(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The named flags as configuration sections (``config_from_args`` drops the None ones)."""
    models: dict[str, Any] = {}
    if args.model_config:
        with open(args.model_config, encoding="utf-8") as f:
            models.update(json.load(f))
    if args.models:
        models["backend"] = args.models
    index = {
        "force": args.force,
        "stale_build": args.stale_build,
        "use_outline": args.use_outline,
        "pages_per_task": args.pages_per_task,
        "parse_workers": args.workers,
        "enrich": args.enrich,
        "ocr": args.ocr,
        "model_gpus": args.model_gpus,
    }
    return {"index": index, "models": models}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = config_from_args(args, flag_values(args))
        summary = run_index(args.inputs, args.out, config)
    except (ConfigError, ModelError) as exc:
        print(f"index_corpus: {exc}", file=sys.stderr)
        return 2
    except IndexLocked as exc:
        print(f"index_corpus: {exc}", file=sys.stderr)
        return 3
    for note in summary.lock_notes:
        print(f"index_corpus: {note}", file=sys.stderr)
    for failure in summary.failures:
        print(f"  {failure['stage']:>8}  {failure['uri']}: {failure['error']}", file=sys.stderr)
    for uri, why in list(summary.stale.items())[:10]:
        print(f"  built otherwise: {uri}: {why}", file=sys.stderr)
    if summary.stale_kept:
        print(
            f"warning: {summary.stale_kept} document(s) were indexed by another build and kept "
            "(--keep-stale); their rows are not what this build makes",
            file=sys.stderr,
        )
    if summary.rebuilt:
        print(f"{summary.rebuilt} document(s) indexed by another build were re-indexed")
    print(summary.line())
    return 1 if args.strict and summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
