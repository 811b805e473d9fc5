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

from bookindex.pipelines.ports import free_port

ROOT = Path(__file__).resolve().parents[1]


# the port was taken: by the time serve checks it, or by the time Ray Serve's proxy binds it
BIND_FAILED = ("cannot serve on 127.0.0.1", "Failed to bind to address")
STARTS = 3  # a port free when picked may be taken before Serve binds it: picked again


@contextmanager
def bookindex_serve(index: Path, log_path: Path, token: str, *extra: str) -> Iterator[str]:
    """Serve ``index`` on a free 127.0.0.1 port with ``token``; the base URL once it answers.
    Its output goes to ``log_path``; it is stopped (Ctrl-C) on the way out. A port that another
    process took between ``free_port`` and Serve's bind is replaced by another, up to
    ``STARTS`` times."""
    for start in range(1, STARTS + 1):
        port = free_port()
        server, log = _start(index, log_path, token, port, extra)
        try:
            if _wait_serving(server, log_path, last=start == STARTS):
                yield f"http://127.0.0.1:{port}"
                return
        finally:
            _stop(server, log)


def _start(index: Path, log_path: Path, token: str, port: int, extra: tuple[str, ...]):
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
    return server, log


def _wait_serving(server: subprocess.Popen, log_path: Path, last: bool) -> bool:
    """True once the server says it is serving; False when its port was taken (and not
    ``last``); a failed test otherwise."""
    deadline = time.monotonic() + 300
    while "serving" not in (text := log_path.read_text()):
        if any(said in text for said in BIND_FAILED) and not last:
            return False
        if server.poll() is not None or time.monotonic() > deadline:
            pytest.fail("bookindex serve did not start:\n" + text[-3000:])
        time.sleep(1)
    return True


def _stop(server: subprocess.Popen, log) -> None:
    server.send_signal(signal.SIGINT)
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    log.close()
