"""What stands in front of the Serve endpoints: the bearer-token check, the request-body limit,
and error bodies that name the field and the problem without echoing the input.

    api.add_middleware(RequestGuard, settings=lambda: current)   # GuardSettings or None
    install_error_handlers(api)

``RequestGuard`` is a plain ASGI middleware, so it sees every request before FastAPI parses it:

- ``auth="token"``: every path but ``OPEN_PATHS`` (``/health``, the API's documentation and
  the viewer's page and assets, which hold no data) needs ``Authorization: Bearer <token>`` (compared
  in constant time); a missing or wrong token is a 401, before the body is read.
  ``auth="off"``: only clients on a loopback address are served; any other gets a 403 — so an
  application bound to 0.0.0.0 without a token answers nobody outside the machine.
- the body is read up to ``max_body_bytes``; a larger one (by Content-Length or by counting) is a
  413 and the rest is never read.
- until the settings exist (the ingress replica has not started), every request is refused
  (503): the guard fails closed.

The token comes from the file ``serve.token_file`` or else the environment variable
``BOOKINDEX_SERVE_TOKEN`` (``read_token``); it never travels in the application's arguments.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

TOKEN_ENV = "BOOKINDEX_SERVE_TOKEN"
MIN_TOKEN_CHARS = 16
# /health, and the API's documentation: the Swagger page and its schema, which hold nothing
# secret (the routes and request models this package defines) and carry the bearer scheme, so
# that a browser's /docs asks for the token once (Authorize) and sends it with each call. The
# viewer's page and its script and style (pipelines/viewer) likewise: the page asks for the
# token and sends it with every request for data (/viewer/api/..., which needs it).
OPEN_PATHS = frozenset(
    {
        "/health",
        "/docs",
        "/docs/oauth2-redirect",
        "/openapi.json",
        "/viewer",
        "/viewer/",
        "/viewer/viewer.js",
        "/viewer/viewer.css",
    }
)
# Error bodies: at most this many problems, each location part and message cut to these lengths.
MAX_ERRORS = 8
MAX_LOC_CHARS = 64
MAX_MSG_CHARS = 200


class TokenError(RuntimeError):
    """No usable bearer token although ``serve.auth`` is ``token``."""


@dataclass(frozen=True)
class GuardSettings:
    auth: str  # "token" or "off"
    token: str  # empty when auth is off
    max_body_bytes: int


def read_token(token_file: str = "", env: dict[str, str] | None = None) -> str:
    """The bearer token: the first line of ``token_file`` when given, else ``$BOOKINDEX_SERVE_TOKEN``.
    Raises ``TokenError`` when there is none or it is shorter than 16 characters."""
    env = os.environ if env is None else env
    if token_file:
        path = Path(token_file).expanduser()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise TokenError(f"serve.token_file {path}: {exc.strerror or exc}") from exc
        token, where = (lines[0].strip() if lines else ""), f"serve.token_file {path}"
    else:
        token, where = env.get(TOKEN_ENV, "").strip(), TOKEN_ENV
    if not token:
        raise TokenError(
            f"serve.auth is 'token' but {where} holds no token: put one there "
            f"(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'), "
            f"or serve on 127.0.0.1 with serve.auth=off"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise TokenError(f"the token in {where} is shorter than {MIN_TOKEN_CHARS} characters")
    return token


def guard_settings(serve: Any) -> GuardSettings:
    """The guard of a ``ServeConfig``: reads the token when ``serve.auth`` is ``token``."""
    token = read_token(serve.token_file) if serve.auth == "token" else ""
    return GuardSettings(auth=serve.auth, token=token, max_body_bytes=serve.max_body_bytes)


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _BodyTooLarge(Exception):
    pass


class RequestGuard:
    """ASGI middleware: authentication, then the body limit (see the module docstring)."""

    def __init__(self, app: Any, settings: Callable[[], GuardSettings | None]) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = self.settings()
        if settings is None:
            await _reply(send, 503, "the service is starting")
            return
        path = scope.get("path", "")
        path = path.removeprefix(scope.get("root_path", "")) or "/"
        if path not in OPEN_PATHS:
            refused = _refusal(scope, settings)
            if refused:
                await _reply(send, *refused)
                return
        try:
            body = await _read_body(scope, receive, settings.max_body_bytes)
        except _BodyTooLarge:
            limit = settings.max_body_bytes
            await _reply(send, 413, f"the request body is larger than {limit} bytes")
            return
        await self.app(scope, _replay(body, receive), send)


def authorized(scope: dict, settings: GuardSettings) -> bool:
    """Whether the request of ``scope`` passes the check the guarded paths get: the bearer
    token, or with ``auth`` off a client on this machine (``/health`` shows its details to
    such a caller only)."""
    return _refusal(scope, settings) is None


def _refusal(scope: dict, settings: GuardSettings) -> tuple[int, str, dict] | None:
    if settings.auth == "off":
        client = scope.get("client")
        if not is_loopback(client[0] if client else None):
            return 403, "this server answers only clients on this machine (serve.auth=off)", {}
        return None
    given = dict(scope.get("headers") or []).get(b"authorization", b"")
    scheme, _, token = given.partition(b" ")
    expected = settings.token.encode()
    if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), expected):
        return None
    problem = "missing bearer token" if not given else "wrong bearer token"
    return 401, problem, {"www-authenticate": 'Bearer realm="bookindex"'}


async def _read_body(scope: dict, receive: Callable, limit: int) -> bytes:
    headers = dict(scope.get("headers") or [])
    length = headers.get(b"content-length", b"")
    if length.isdigit() and int(length) > limit:
        raise _BodyTooLarge
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Callable) -> Callable:
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _reply(send: Callable, status: int, message: str, headers: dict | None = None) -> None:
    body = json.dumps({"detail": message}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _printable(value: Any, limit: int) -> str:
    """``value`` as text of at most ``limit`` characters that encodes as UTF-8."""
    text = str(value)
    cut = text[:limit] + ("..." if len(text) > limit else "")
    return cut.encode("utf-8", "backslashreplace").decode("utf-8")


def bounded_errors(errors: list[dict]) -> list[dict]:
    """Pydantic/FastAPI validation errors without the input: location, message and type of at
    most ``MAX_ERRORS`` problems, each part cut short."""
    out = []
    for error in errors[:MAX_ERRORS]:
        out.append(
            {
                "loc": [_printable(p, MAX_LOC_CHARS) for p in error.get("loc", ())][:6],
                "msg": _printable(error.get("msg", ""), MAX_MSG_CHARS),
                "type": _printable(error.get("type", ""), MAX_LOC_CHARS),
            }
        )
    if len(errors) > MAX_ERRORS:
        out.append({"loc": [], "msg": f"and {len(errors) - MAX_ERRORS} more", "type": "more"})
    return out


def error_response(status: int, field: str, message: str) -> JSONResponse:
    """A 4xx/5xx body naming the field and the problem (never the input)."""
    detail = [{"loc": ["body", field], "msg": message, "type": "request"}]
    return JSONResponse(status_code=status, content={"error": message, "detail": detail})


def install_error_handlers(api: FastAPI) -> None:
    """422 bodies without the input (FastAPI's default echoes it, and fails with a 500 when the
    input holds NaN or a lone surrogate)."""

    @api.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": bounded_errors(exc.errors())})
