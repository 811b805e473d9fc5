"""Bring an index written by an older index job up to today's tables, without re-indexing
(``pipelines.store.migrate``): today, the vectors of a passage corpus's sentences, which
ZoomRAG's Chunk-Zoom reads instead of embedding them at query time.

    python -m jobs.migrate_index DIR [--config FILE] [--set SECTION.FIELD=VALUE ...]

The configured embedding model (the models section) must be the one the index was built with.
"""

from __future__ import annotations

import argparse
import sys
import time

from operators.config import ConfigError, add_config_arguments, config_from_args
from operators.models import ModelError, load_backend


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.migrate_index", description=__doc__)
    parser.add_argument("index", help="index directory")
    add_config_arguments(parser)
    args = parser.parse_args(argv)
    from pipelines.store.migrate import add_sentence_vectors

    started = time.perf_counter()
    try:
        config = config_from_args(args, {})
        done = add_sentence_vectors(args.index, load_backend(config.models))
    except (ConfigError, ModelError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"{args.index}: sentence vectors of {done['passages']} passages "
        f"({done['leaves']} leaves, {done['sentences']} sentences) in "
        f"{time.perf_counter() - started:.1f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
