"""The ports a server is started on: a free one (the proxy's port beside direct ingress, the
tests' servers) and whether a chosen one is taken (``bookindex serve`` says so before Ray
starts). No Ray here: the CLI imports it."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that nothing listens on now (the system's choice)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_taken(host: str, port: int) -> str | None:
    """Why ``port`` on ``host`` cannot be served on (another process listens there), or None:
    said before Ray starts, instead of Serve's deployment failing a minute later."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds it
        try:
            s.bind((host, port))
        except OSError as exc:
            return f"cannot serve on {host}:{port}: {exc.strerror or exc} (choose another --port)"
    return None
