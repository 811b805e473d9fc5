"""Serve an index over HTTP with Ray Serve.

    python -m jobs.serve --index DIR [--host 127.0.0.1] [--port 8000] [--device auto]

The same application runs from a config file: ``serve run serve_config.yaml``.
Endpoints: POST /retrieve, GET /health, POST /admin/reload, OpenAPI at /docs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.serve", description=__doc__)
    parser.add_argument("--index", required=True, help="index directory")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"])
    parser.add_argument(
        "--reload-interval-s",
        type=float,
        default=0,
        help="check the index for new documents this often (0: only on POST /admin/reload)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not (Path(args.index) / "documents.lance").exists():
        print(f"no index at {args.index}: run python -m jobs.index_corpus first", file=sys.stderr)
        return 2
    from pipelines.serve_app import serve_forever

    app_args = {
        "index": str(Path(args.index).resolve()),
        "device": args.device,
        "reload_interval_s": args.reload_interval_s,
    }
    serve_forever(app_args, host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
