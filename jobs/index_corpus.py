"""``bookindex index``: index PDFs and passage corpora into Lance tables.

    bookindex index INPUT... --out DIR [--strict] [--force] [--keep-stale] [--no-outline]
        [--no-enrich] [--no-ocr] [--workers N] [--pages-per-task N] [--models offline|openai|vllm]
        [--model-config FILE.json] [--model-gpus G] [--config FILE] [--set SECTION.FIELD=VALUE ...]
        [--json] [--quiet] [--verbose]

INPUT: directories (searched recursively for *.pdf), files or globs; a ``.jsonl`` file is a
passage corpus (one ``{"id", "title", "text"}`` per line, each passage a document). A re-run
indexes only new or changed files. Configuration (``bookindex config`` lists every field): the
defaults, then ``--config FILE``, then ``BOOKINDEX_*`` environment variables, then ``--set``,
then the named flags. On a cluster: ``ray job submit -- bookindex index ...`` (docs/cluster.md).

Exit codes: 0 done (a bad file is a failure row, never a failed job); 1 with ``--strict`` when an
input failed; 2 an input that names nothing, inputs without any PDF or JSONL file, or a
configuration or ``--out`` that cannot work (all checked before any work); 3 another job holds
the index's lock (``--set index.lock_wait_s=SECONDS`` waits for it).

Example: ``bookindex index papers/ extra.pdf --out my_index``
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bookindex.jobs.console import Console, job_parser, one_line, run_job
from bookindex.operators.config import BACKENDS, ConfigError, add_config_arguments, config_from_args
from bookindex.operators.models import ModelError
from bookindex.operators.parsing.discovery import unusable_inputs
from bookindex.pipelines.index_pipeline import run_index, show_ray_output
from bookindex.pipelines.store.index_dir import check_index_dir
from bookindex.pipelines.store.index_lock import IndexLocked

COMMAND = "index"  # bookindex index


def build_parser() -> argparse.ArgumentParser:
    return job_parser(sys.modules[__name__])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The index command's arguments (its parser, or ``bookindex index``'s)."""
    parser.add_argument(
        "inputs", nargs="+", metavar="INPUT", help="directories, PDF or .jsonl files, or globs"
    )
    parser.add_argument("--out", required=True, help="the index directory (Lance tables)")
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
    return run_job(sys.modules[__name__], argv)


def run(args: argparse.Namespace, console: Console) -> int:
    """Index the inputs; the exit code (module docstring)."""
    try:
        check_index_dir(args.out, tables=False)  # --out first: a file, not writable, ...
    except ConfigError as exc:
        console.error(str(exc))
        return 2
    problem = unusable_inputs(args.inputs)
    if problem:
        console.error(problem)
        return 2
    try:
        config = config_from_args(args, flag_values(args))
    except (ConfigError, ModelError, OSError, ValueError) as exc:
        console.error(str(exc))
        return 2
    show_ray_output(console.verbose)
    try:
        with console.libraries_to_log("index"):
            try:
                summary = run_index(args.inputs, args.out, config, progress=console.progress)
            except BaseException:
                console.failed = True
                raise
    except (ConfigError, ModelError) as exc:
        console.error(str(exc))
        return 2
    except IndexLocked as exc:
        console.error(str(exc))
        return 3
    for note in summary.lock_notes:
        console.note(note)
    for failure in summary.failures:
        console.note(
            f"  {failure['stage']:>8}  {one_line(failure['uri'])}: {one_line(failure['error'])}"
        )
    for uri, why in list(summary.stale.items())[:10]:
        console.note(f"  built otherwise: {one_line(uri)}: {why}")
    if summary.stale_kept:
        console.warn(
            f"{summary.stale_kept} document(s) were indexed by another build and kept "
            "(--keep-stale); their rows are not what this build makes"
        )
    if summary.rebuilt:
        console.note(f"{summary.rebuilt} document(s) indexed by another build were re-indexed")
    data = {"index": str(args.out), **summary.counts(), "failures": summary.failures}
    console.result(summary.line(), data)
    return 1 if args.strict and summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
