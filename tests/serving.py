"""``bookindex serve`` started as a user starts it, for the tests that talk to a real server
process: its own local Ray, Ray Serve's direct ingress, the token from the environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bookindex.pipelines.serve_app import free_port

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def bookindex_serve(index: Path, log_path: Path, token: str, *extra: str) -> Iterator[str]:
    """Serve ``index`` on a free 127.0.0.1 port with ``token``; the base URL once it answers.
    Its output goes to ``log_path``; it is stopped (Ctrl-C) on the way out."""
    port = free_port()
    env = dict(os.environ, BOOKINDEX_SERVE_TOKEN=token, PYTHONPATH=str(ROOT))
    env.pop("RAY_ADDRESS", None)
    command = [str(Path(sys.executable).with_name("bookindex")), "serve", "--index", str(index)]
    command += ["--port", str(port), *extra]
    log = log_path.open("w")
    server = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        # Ctrl-C stops it even where pytest itself runs with SIGINT ignored (started in the
        # background: `cmd &`); there the stop below ran into its 60 s timeout and a kill
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 300
        while "serving" not in log_path.read_text():
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail("bookindex serve did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
