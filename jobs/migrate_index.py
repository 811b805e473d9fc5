"""``bookindex migrate``: bring an index written by an older index job up to today's tables,
without re-indexing (``pipelines.store.migrate``): today, the vectors of a passage corpus's
sentences, which ZoomRAG's Chunk-Zoom reads instead of embedding them at query time.

    bookindex migrate INDEX [--config FILE] [--set SECTION.FIELD=VALUE ...]

The configured embedding model (the models section) must be the one the index was built with.

Example: ``bookindex migrate my_index``
"""

from __future__ import annotations

import argparse
import sys
import time

from bookindex.jobs.console import Console, job_parser, run_job
from bookindex.operators.config import ConfigError, add_config_arguments, config_from_args
from bookindex.operators.models import ModelError, load_backend

COMMAND = "migrate"  # bookindex migrate


def build_parser() -> argparse.ArgumentParser:
    return job_parser(sys.modules[__name__])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("index", metavar="INDEX", help="the index directory")
    add_config_arguments(parser)


def main(argv: list[str] | None = None) -> int:
    return run_job(sys.modules[__name__], argv)


def run(args: argparse.Namespace, console: Console) -> int:
    from bookindex.pipelines.store.catalog import check_index
    from bookindex.pipelines.store.migrate import add_sentence_vectors

    started = time.perf_counter()
    try:
        check_index(args.index)
        config = config_from_args(args, {})
        with console.libraries_to_log("migrate"):
            done = add_sentence_vectors(args.index, load_backend(config.models))
    except (ConfigError, ModelError, FileNotFoundError, ValueError) as exc:
        console.error(str(exc))
        return 2
    seconds = time.perf_counter() - started
    console.result(
        f"{args.index}: sentence vectors of {done['passages']} passages "
        f"({done['leaves']} leaves, {done['sentences']} sentences) in {seconds:.1f}s",
        {**done, "seconds": round(seconds, 3)},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
