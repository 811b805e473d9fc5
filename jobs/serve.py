"""Serve an index over HTTP with Ray Serve.

    BOOKINDEX_SERVE_TOKEN=... python -m jobs.serve --index DIR [--host 127.0.0.1] [--port 8000]
        [--device auto] [--reload-interval-s 0] [--token-file FILE] [--no-auth]
        [--config FILE] [--set SECTION.FIELD=VALUE ...]

The configuration (``operators.config``: the models section picks the model backend, the query
and serve sections the limits) goes to every replica. The same application runs from a config
file: ``serve run serve_config.yaml``. Endpoints: POST /retrieve, POST /query, GET /health,
POST /admin/reload, OpenAPI at /docs.

Every endpoint but /health needs ``Authorization: Bearer <token>``: the token is the first line
of ``--token-file`` (``serve.token_file``) or ``$BOOKINDEX_SERVE_TOKEN`` (16 characters at least);
without one the job refuses to start. ``--no-auth`` (``serve.auth=off``) is allowed only on a
loopback host, and then answers only clients on this machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from operators.config import ConfigError, ServeConfig, add_config_arguments, config_from_args
from pipelines.serve_guard import TokenError, is_loopback, read_token


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.serve", description=__doc__)
    parser.add_argument("--index", default=None, help="index directory (serve.index)")
    parser.add_argument("--host", default=None, help="HTTP host (serve.host)")
    parser.add_argument("--port", type=int, default=None, help="HTTP port (serve.port)")
    parser.add_argument("--device", default=None, choices=["auto", "cpu", "gpu"])
    parser.add_argument(
        "--reload-interval-s",
        type=float,
        default=None,
        help="check the index for new documents this often (0: only on POST /admin/reload)",
    )
    parser.add_argument("--token-file", default=None, help="bearer token file (serve.token_file)")
    parser.add_argument(
        "--no-auth", action="store_true", help="no token; only on 127.0.0.1 (serve.auth=off)"
    )
    add_config_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    index = str(Path(args.index).resolve()) if args.index else None
    serve_flags = {"index": index, "host": args.host, "port": args.port}
    serve_flags["reload_interval_s"] = args.reload_interval_s
    serve_flags["token_file"] = args.token_file
    serve_flags["auth"] = "off" if args.no_auth else None
    try:
        config = config_from_args(args, {"serve": serve_flags, "walk": {"device": args.device}})
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not (Path(config.serve.index) / "documents.lance").exists():
        print(
            f"no index at {config.serve.index}: run python -m jobs.index_corpus first",
            file=sys.stderr,
        )
        return 2
    problem = auth_problem(config.serve)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from pipelines.serve_app import portable, serve_forever

    serve_forever(portable(config), host=config.serve.host, port=config.serve.port)
    return 0


def auth_problem(serve: ServeConfig) -> str | None:
    """Why this serve section must not start: auth off on a non-loopback host, or no token."""
    if serve.auth == "off":
        if not is_loopback(serve.host):
            return f"serve.auth=off (--no-auth) only on a loopback host, not {serve.host}"
        return None
    try:
        read_token(serve.token_file)
    except TokenError as exc:
        return str(exc)
    return None


if __name__ == "__main__":
    sys.exit(main())
