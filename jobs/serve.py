"""``bookindex serve``: serve an index over HTTP with Ray Serve.

    bookindex serve --index DIR [--host 127.0.0.1] [--port 8000] [--device auto|cpu|gpu]
        [--reload-interval-s 0] [--token-file FILE] [--no-auth] [--config FILE]
        [--set SECTION.FIELD=VALUE ...] [--quiet] [--verbose]

Endpoints: ``POST /query`` (an answer with evidence, any method), ``POST /retrieve`` (passage
retrieval), ``GET /health``, ``POST /admin/reload``, the API's documentation at ``/docs``.
Every endpoint but /health and /docs needs ``Authorization: Bearer <token>``: the token is the
first line of ``--token-file`` (``serve.token_file``) or ``$BOOKINDEX_SERVE_TOKEN`` (16
characters at least); without one the server refuses to start. ``--no-auth``
(``serve.auth=off``) is allowed only on a loopback host, and then answers only clients on this
machine. The configuration (the models section picks the model backend, the query and serve
sections the limits) goes to every replica; the same application runs from a config file:
``serve run serve_config.yaml`` (docs/serving.md).

Example::

    export BOOKINDEX_SERVE_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')
    bookindex serve --index my_index
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bookindex.jobs.console import Console, job_parser, run_job
from bookindex.operators.config import (
    ConfigError,
    ServeConfig,
    add_config_arguments,
    config_from_args,
)
from bookindex.pipelines.ports import port_taken
from bookindex.pipelines.serve_guard import TokenError, is_loopback, read_token

COMMAND = "serve"  # bookindex serve


def build_parser() -> argparse.ArgumentParser:
    return job_parser(sys.modules[__name__])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", default=None, help="the index directory (serve.index)")
    parser.add_argument("--host", default=None, help="HTTP host (serve.host, 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="HTTP port (serve.port, 8000)")
    parser.add_argument(
        "--device", default=None, choices=["auto", "cpu", "gpu"], help="walk engine (auto)"
    )
    parser.add_argument(
        "--reload-interval-s",
        type=float,
        default=None,
        help="check the index for new documents this often (default 0: only on POST /admin/reload)",
    )
    parser.add_argument("--token-file", default=None, help="bearer token file (serve.token_file)")
    parser.add_argument(
        "--no-auth", action="store_true", help="no token; only on 127.0.0.1 (serve.auth=off)"
    )
    add_config_arguments(parser)


def main(argv: list[str] | None = None) -> int:
    return run_job(sys.modules[__name__], argv)


def run(args: argparse.Namespace, console: Console) -> int:
    index = str(Path(args.index).resolve()) if args.index else None
    serve_flags = {"index": index, "host": args.host, "port": args.port}
    serve_flags["reload_interval_s"] = args.reload_interval_s
    serve_flags["token_file"] = args.token_file
    serve_flags["auth"] = "off" if args.no_auth else None
    try:
        config = config_from_args(args, {"serve": serve_flags, "walk": {"device": args.device}})
    except (ConfigError, OSError, ValueError) as exc:
        console.error(str(exc))
        return 2
    if not (Path(config.serve.index) / "documents.lance").exists():
        console.error(f"no index at {config.serve.index}: build one with bookindex index")
        return 2
    problem = auth_problem(config.serve)
    if problem:
        console.error(problem)
        return 2
    taken = (
        None if os.environ.get("RAY_ADDRESS") else port_taken(config.serve.host, config.serve.port)
    )
    if taken:  # (a cluster's Serve may hold its own port already: it is not checked)
        console.error(taken)
        return 2
    from bookindex.pipelines.serve_app import portable, serve_forever

    with console.libraries_to_log("serve"):
        if console.log_path is not None:
            console.note(f"Ray's own output goes to {console.log_path}")
        serve_forever(
            portable(config),
            host=config.serve.host,
            port=config.serve.port,
            announce=console.note if not console.quiet else lambda _line: None,
            ray_logs=console.verbose,
        )
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
