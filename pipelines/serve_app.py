"""The Ray Serve application: an HTTP/JSON ingress (FastAPI, OpenAPI at /docs) in front of the
engine deployment, whose replicas each hold one query engine (``operators.query.engine``: one
read model of the index, one walk engine, one model backend) serving both endpoints, and batch
concurrent ``/retrieve`` and ``/query`` requests, each endpoint into one step of its own
(``@serve.batch``).

    POST /retrieve {"query": "..." | "queries": [...], "k": 10, "method": "zoom|bm25|dense"}
    POST /query    {"question": "...", "method": "auto|bookrag|deepread|zoom|ladrag|dense|
                    bookrag_paper", "doc": "file.pdf" (optional), "k": 5}
                   → the answer (extractive offline), evidence with doc, page, sec_id,
                     para_idx, text and score, the plan or tool trace, timings
                     (an unknown doc is a 404, a malformed body 422)
    GET  /health         "ok" (200) or "failing" (503); with the bearer token, each
                         component (index and its files, engine, query engine, last
                         reload) and the counters
    GET  /viewer         the web viewer: corpus, heading trees, pages with their nodes'
                         boxes, questions with their evidence (pipelines/viewer, docs/viewer.md)
    POST /admin/reload   reopen the index when its ``documents`` table changed (rate-limited
                         for the whole application: ``ReloadGate``, one replica every engine
                         replica asks)

Every endpoint but /health, the API's documentation (/docs, /openapi.json: the schema, with
the bearer scheme so that /docs can send the token) and the viewer's page and assets needs ``Authorization: Bearer <token>``
(``serve.auth``, token from
``serve.token_file`` or ``$BOOKINDEX_SERVE_TOKEN``); bodies over ``serve.max_body_bytes`` are
refused; error bodies name the field and the problem, never the input
(``pipelines.serve_guard``). Every string the schema accepts is valid UTF-8 (no lone
surrogates) and ``k`` an integer (NaN and Infinity are refused).
In a ``@serve.batch`` a query that fails is retried alone, so it fails by itself (its own 500)
and the others in the batch are answered; each such retry, each failed request and each answer
in which a model step fell back to the rules is counted (``/health`` with the token) and logged.
Without the token ``/health`` says only ``ok`` or ``failing``: no path, no error text.

The methods are those of ``operators.query.registry``; the limits (k, question and query length,
queries per request, batch size) and defaults come from the configuration's query and serve
sections, the model backend from its models section.

Reloading: the engine keeps answering from the index it opened; ``POST /admin/reload`` (after an
index job) makes the engine replica that takes it reopen the index when the Lance version of
``documents`` (the commit marker, pipelines/store/recovery.py) changed, in a thread, and swap it in
between batches — no restart of the ingress, no request refused. With ``reload_interval_s`` > 0
every engine replica also checks that version on its own (needed with several replicas).

Started by ``bookindex serve --index DIR`` or ``serve run serve_config.yaml``
(``build_app`` is the application builder both use).
"""

# No ``from __future__ import annotations`` here: FastAPI inside a Serve replica must see the
# request model as a class, not a forward reference.
import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

import ray
from fastapi import FastAPI, Request, Security
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from ray import serve
from ray.serve.handle import DeploymentHandle

from bookindex.operators.config import SECTIONS, BookindexConfig, load_config
from bookindex.operators.query.bookrag import fallbacks
from bookindex.operators.query.registry import PASSAGE_METHODS, QUERY_METHODS
from bookindex.pipelines.ports import free_port
from bookindex.pipelines.serve_guard import (
    GuardSettings,
    RequestGuard,
    authorized,
    error_response,
    guard_settings,
    install_error_handlers,
)
from bookindex.pipelines.viewer.routes import ViewerState, install_viewer, viewer_state

if TYPE_CHECKING:
    from bookindex.operators.query.engine import QueryEngine

# The limits requests are checked against: the defaults here, the application's configuration
# in every replica (``RetrievalEngine.__init__``).
_limits = BookindexConfig()
# Serve needs these at class definition; a replica applies the configured values at start.
DEFAULT_MAX_BATCH = BookindexConfig().serve.max_batch
DEFAULT_BATCH_WAIT = BookindexConfig().serve.batch_wait_s

api = FastAPI(
    title="bookindex",
    description="Question answering over a bookindex index: the BookRAG agent, DeepRead, "
    "ZoomRAG and LAD-RAG (/query); ZoomRAG walks, BM25 and dense retrieval (/retrieve). "
    "Every endpoint but /health and this documentation needs 'Authorization: Bearer <token>' "
    "(Authorize, above).",
)
# The token and body limit of this replica (``RetrievalEngine.__init__``); until it is set, the
# guard refuses every request.
_guard: GuardSettings | None = None
api.add_middleware(RequestGuard, settings=lambda: _guard)
install_error_handlers(api)
# The web viewer (/viewer: pipelines/viewer), reading this replica's engine; None until the
# replica starts, or with serve.viewer off.
_viewer: ViewerState | None = None
install_viewer(api, lambda: _viewer)
# The bearer scheme as OpenAPI declares it, so that /docs has an Authorize button: the token is
# entered once there and sent with every request it makes. The check itself is RequestGuard's.
BEARER = [Security(HTTPBearer(auto_error=False, description="serve.token_file's token"))]


class RetrieveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str | None = Field(None, description="one question")
    queries: list[str] | None = Field(None, description="questions (serve.max_queries at most)")
    k: int = Field(
        default_factory=lambda: _limits.query.retrieve_k,
        ge=1,
        description="documents per question (default query.retrieve_k, at most query.max_k)",
    )
    method: Literal[PASSAGE_METHODS] = "zoom"  # type: ignore[valid-type]

    @field_validator("query")
    @classmethod
    def _one_query(cls, value: str | None) -> str | None:
        return None if value is None else _check_query(value)

    @field_validator("queries")
    @classmethod
    def _many_queries(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        most = _limits.serve.max_queries
        if not 1 <= len(value) <= most:
            raise ValueError(f"queries must hold 1 to {most} questions")
        return [_check_query(v) for v in value]

    @field_validator("k")
    @classmethod
    def _k(cls, value: int) -> int:
        return _check_k(value)

    @model_validator(mode="after")
    def _exactly_one(self) -> "RetrieveRequest":
        if (self.query is None) == (self.queries is None):
            raise ValueError("give exactly one of 'query' or 'queries'")
        return self

    def all_queries(self) -> list[str]:
        return [self.query] if self.query is not None else list(self.queries or [])


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(..., description="the question")
    method: Literal[QUERY_METHODS] = "auto"  # type: ignore[valid-type]
    doc: str | None = Field(None, description="ask inside one document (file name or doc_id)")
    k: int = Field(
        default_factory=lambda: _limits.query.k,
        ge=1,
        description="evidence units (default query.k, at most query.max_k)",
    )

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        return _check_query(value, _limits.query.max_question_chars, "the question")

    @field_validator("doc")
    @classmethod
    def _doc(cls, value: str | None) -> str | None:
        return None if value is None else _check_query(value, what="doc")

    @field_validator("k")
    @classmethod
    def _k(cls, value: int) -> int:
        return _check_k(value)


def _check_query(value: str, limit: int | None = None, what: str = "a query") -> str:
    limit = _limits.serve.max_query_chars if limit is None else limit
    value = value.strip()
    if not value:
        raise ValueError(f"{what} must not be empty")
    if len(value) > limit:
        raise ValueError(f"{what} must be at most {limit} characters")
    try:  # JSON's "\ud800" escape parses to a lone surrogate, which pydantic lets through
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} must be valid UTF-8 text (it holds a lone surrogate)") from None
    return value


def _check_k(value: int) -> int:
    if value > _limits.query.max_k:
        raise ValueError(f"k must be less than or equal to {_limits.query.max_k}")
    return value


def app_config(args: Mapping[str, Any]) -> BookindexConfig:
    """The configuration of an application's ``args``: configuration sections by name
    (``models``, ``walk``, ``query``, ``serve``, ...), an optional ``config`` file, and the
    short keys ``index`` (a directory: ``serve.index``), ``device`` (``walk.device``) and
    ``reload_interval_s`` (``serve.reload_interval_s``)."""
    sections: dict[str, dict] = {}
    for name in SECTIONS:
        value = args.get(name)
        if isinstance(value, Mapping):
            sections[name] = dict(value)
    short = {"index": ("serve", "index"), "device": ("walk", "device")}
    short["reload_interval_s"] = ("serve", "reload_interval_s")
    for key, (section, field) in short.items():
        value = args.get(key)
        if value is not None and not isinstance(value, Mapping):
            sections.setdefault(section, {})[field] = value
    return load_config(args.get("config"), overrides=sections)


def portable(config: BookindexConfig) -> dict:
    """The configuration as plain sections for a replica's ``load_config`` (the API key stays
    out: a replica reads it from its environment)."""
    values = config.model_dump()
    values["models"].pop("api_key")
    values["judge"].pop("api_key")
    return values


PROBE = "health check"


def _probe(engine) -> dict:
    """The retrieval engine (a BM25 and a dense query) and the query engine (a dense answer with
    its evidence read from the index, extractive: a health check never waits on the model)
    each answering one probe question."""
    out = {}
    try:
        for method in ("bm25", "dense"):
            engine.retrieval.retrieve([PROBE], method, 1)
        out["engine"] = {"status": "ok", "device": engine.walk.device}
    except Exception as exc:
        out["engine"] = {"status": "failing", "error": _problem(exc)}
    try:
        result = engine.answer(PROBE, "dense", None, 1, generate=False)
        failing = result["error"] and not result["error"].startswith("nothing in the index")
        out["query_engine"] = (
            {"status": "failing", "error": result["error"][:200]}
            if failing
            else {"status": "ok", "backend": engine.config.models.backend}
        )
    except Exception as exc:
        out["query_engine"] = {"status": "failing", "error": _problem(exc)}
    return out


def _json(content: dict) -> JSONResponse:
    """``content`` as a JSON response without FastAPI's ``jsonable_encoder`` walk over every
    value (the answers are plain JSON types already); a value ``json`` cannot write (a numpy
    scalar, a dataclass) goes through the encoder."""
    try:
        return JSONResponse(content)
    except TypeError:
        return JSONResponse(jsonable_encoder(content))


def _walk_graph(engine: "QueryEngine") -> dict:
    """How the open engine got ZoomRAG's walk graph: read from the index directory, grown there
    by the new documents, or built (``operators.walks.graph_store``), and in how many seconds;
    and its passages' title links, read there or built (``operators.graph.title_link_store``)."""
    zoom = engine.zoom
    return {
        "from": zoom.engine_source,
        "s": round(zoom.timings.get("engine_build_s", 0.0), 2),
        "title_links": zoom.view.title_links_source,
    }


def _problem(exc: BaseException) -> str:
    """An exception as a short line without the input it may hold: its type, and its message
    cut to 160 characters and made encodable."""
    text = str(exc)[:160].encode("utf-8", "backslashreplace").decode("utf-8")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _index_version(index_dir: str) -> int:
    from bookindex.pipelines.store.reader import index_version

    return index_version(index_dir)


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1024)
class ReloadGate:
    """The reload rate limit of the whole application, held in one place: one replica that
    every engine replica (each its own HTTP ingress) asks before it reloads, so that
    ``serve.reload_min_interval_s`` holds across replicas (with per-replica state, N engine
    replicas would take N reloads per interval). ``admit`` runs on the replica's event loop
    without awaiting, so two concurrent asks never both pass."""

    def __init__(self, min_interval_s: float) -> None:
        self.min_interval_s = min_interval_s
        self.last_admitted = float("-inf")
        self.admitted = self.refused = 0

    async def admit(self) -> dict:
        """``{"admitted": True}``, or ``{"refused", "retry_after_s"}`` within the interval of
        the last admitted reload."""
        now = time.monotonic()
        wait = self.last_admitted + self.min_interval_s - now
        if wait > 0:
            self.refused += 1
            return {"refused": "reloads are rate-limited", "retry_after_s": round(wait, 1)}
        self.last_admitted = now
        self.admitted += 1
        return {"admitted": True}

    async def counts(self) -> dict:
        return {"admitted": self.admitted, "refused": self.refused}


# Serve's default of 5 ongoing requests per replica would cap every batch at 5; every HTTP
# request in flight is one ongoing request of the replica (the proxy queues the rest).
MAX_ONGOING_REQUESTS = 1024


@serve.deployment(ray_actor_options={"num_cpus": 1}, max_ongoing_requests=MAX_ONGOING_REQUESTS)
@serve.ingress(api)
class RetrievalEngine:
    """The HTTP ingress and the engine in one replica: holds one query engine (read model, walk
    graph, model backend) for both endpoints; concurrent /retrieve requests share one step, and
    so do concurrent /query requests. The routes call the batched methods in-process: a
    request crosses one hop (Serve's proxy → this replica), not two (proxy → ingress replica →
    engine replica), which halves the Serve work per request on a small machine."""

    def __init__(
        self,
        index_dir: str,
        device: str = "auto",
        reload_interval_s: float = 0,
        config: dict | None = None,
        gate: DeploymentHandle | None = None,
    ) -> None:
        global _limits, _guard, _viewer
        self.gate = gate  # the application's reload rate limit (None: this replica's own)
        _limits = load_config(overrides=config or {})  # the request limits of this replica
        _guard = guard_settings(_limits.serve)  # no token with auth=token: the replica fails
        overrides = dict(config or {})
        overrides["serve"] = dict(overrides.get("serve", {}), index=index_dir)
        overrides["walk"] = dict(overrides.get("walk", {}), device=device)
        if device == "gpu":  # the replica has a GPU: the embeddings run there too
            overrides["models"] = dict(overrides.get("models", {}), embed_device="cuda")
        self.config = load_config(overrides=overrides)
        self.index_dir = index_dir
        for batched in (self.retrieve, self.query):
            batched.set_max_batch_size(self.config.serve.max_batch)
            batched.set_batch_wait_timeout_s(self.config.serve.batch_wait_s)
        self.query_batches = self.max_query_batch = 0
        self.version = _index_version(index_dir)
        started = time.perf_counter()
        self.engine = self._open()
        self.load_s = time.perf_counter() - started
        self.batches = 0
        self.max_batch = 0
        self.reloads = 0
        self.reload_failure: dict | None = None  # the last reload's error until one succeeds
        self.failed_requests = 0
        if self.config.serve.viewer:  # reads the engine open now (a reload swaps it)
            _viewer = viewer_state(index_dir, lambda: self.engine.model, self.config.serve)
        self.group_retries = 0  # @serve.batch groups that failed and were answered item by item
        self.model_fallbacks = 0  # /query answers in which a model step fell back to the rules
        self.damaged: list[str] = []  # the index's files that are missing or of another size
        self._reload_lock = threading.Lock()
        self._last_asked_reload = float("-inf")
        self._probes: tuple[float, dict] | None = None
        if reload_interval_s > 0:
            threading.Thread(target=self._watch, args=(reload_interval_s,), daemon=True).start()

    def _open(self):
        from bookindex.pipelines.store.reader import open_engine

        engine = open_engine(self.index_dir, self.config)
        engine.warm_up()  # the walk graph, BM25 indexes and linkers, before threads share them
        return engine

    async def reload(self, force: bool = False) -> dict:
        """Reopen the index if ``documents`` changed (or ``force``); requests keep being
        answered from the open index meanwhile. Refused (``retry_after_s``) while a reload runs
        or within ``serve.reload_min_interval_s`` of the last asked one."""
        now = time.monotonic()
        wait = self._last_asked_reload + self.config.serve.reload_min_interval_s - now
        if wait > 0:
            return {"refused": "reloads are rate-limited", "retry_after_s": round(wait, 1)}
        if not self._reload_lock.acquire(blocking=False):
            return {"refused": "a reload is running", "retry_after_s": 1.0}
        self._last_asked_reload = now
        try:
            return await asyncio.to_thread(self._reload_held, force)
        finally:
            self._reload_lock.release()

    def _reload(self, force: bool = False) -> dict:
        with self._reload_lock:
            return self._reload_held(force)

    def _reload_held(self, force: bool) -> dict:
        try:
            version = _index_version(self.index_dir)
            reloaded = force or version != self.version
            if reloaded:
                started = time.perf_counter()
                self.engine = self._open()  # one assignment: a request sees old or new
                self.version, self.reloads = version, self.reloads + 1
                self.load_s = time.perf_counter() - started
        except Exception as exc:  # keep serving the open index; /health says so
            self.reload_failure = {"error": _problem(exc), "at": time.time()}
            self._probes = None
            logging.getLogger("ray.serve").exception("index reload failed")
            return {"reloaded": False, "error": self.reload_failure["error"]}
        self.reload_failure = None
        self._probes = None
        self._check_files()  # reloaded or not: are the open index's files still all there?
        out = {
            "reloaded": reloaded,
            "index_version": self.version,
            "documents": len(self.engine.model.documents),
            "load_s": round(self.load_s, 2),
            "walk_graph": _walk_graph(self.engine),
            "bm25": self.engine.bm25_sources(),
        }
        return out | ({"damaged": self.damaged[:10]} if self.damaged else {})

    def _check_files(self) -> None:
        """Whether every data file of the open index's tables is on disk with its recorded
        size (``store.integrity.damaged_files``); the problems for /health, logged once."""
        from bookindex.pipelines.store.integrity import damaged_files

        found = damaged_files(self.index_dir)
        if found and found != self.damaged:
            logging.getLogger("ray.serve").error("index files damaged: %s", "; ".join(found[:5]))
        self.damaged = found

    def _watch(self, interval_s: float) -> None:
        while True:
            time.sleep(interval_s)
            self._reload()  # a failure is recorded in reload_failure and logged

    @serve.batch(max_batch_size=DEFAULT_MAX_BATCH, batch_wait_timeout_s=DEFAULT_BATCH_WAIT)
    async def query(self, requests: list[dict]) -> list[dict]:
        """Concurrent /query requests as one batch through the query API (``answer_many``:
        one embedding call, dense and zoom questions scored together, the agents one after
        another), on the engine that was open when the batch started. When the batch fails,
        each request alone: a failure is that request's own (``{"failed": ...}``)."""
        self.query_batches += 1
        self.max_query_batch = max(self.max_query_batch, len(requests))
        engine = self.engine
        try:
            answers = await asyncio.to_thread(engine.answer_many, requests)
        except Exception:
            self.group_retries += 1
            logging.getLogger("ray.serve").exception("query batch failed; answering alone")
            answers = [await self._query_alone(engine, request) for request in requests]
        for answer in answers:
            self._count_fallbacks(answer)
        return answers

    def _count_fallbacks(self, answer: dict) -> None:
        """An answer in which a model step failed and the rules answered: counted and logged."""
        steps = [f["step"] for f in fallbacks(answer.get("trace") or [])]
        if steps:
            self.model_fallbacks += 1
            logging.getLogger("ray.serve").warning(
                "a model step fell back to the rules (%s)", ", ".join(steps)
            )

    async def _query_alone(self, engine, request: dict) -> dict:
        try:
            return await asyncio.to_thread(
                engine.answer, request["question"], request["method"], request["doc"], request["k"]
            )
        except Exception as exc:
            self.failed_requests += 1
            logging.getLogger("ray.serve").exception("query failed")
            return {"failed": _problem(exc)}

    @serve.batch(max_batch_size=DEFAULT_MAX_BATCH, batch_wait_timeout_s=DEFAULT_BATCH_WAIT)
    async def retrieve(self, items: list[tuple[str, str, int]]) -> list[dict]:
        """Items (query, method, k) → results; one retrieval call per method in the batch.
        An item that fails gets ``{"failed": ...}``; the others their results."""
        self.batches += 1
        self.max_batch = max(self.max_batch, len(items))
        return await asyncio.to_thread(self._run, items)

    def _run(self, items: list[tuple[str, str, int]]) -> list[dict]:
        retrieval = self.engine.retrieval  # the whole batch from one index, even during a reload
        out: list[dict | None] = [None] * len(items)
        for method in sorted({m for _, m, _ in items}):
            picked = [i for i, (_, m, _) in enumerate(items) if m == method]
            for i, result in zip(picked, self._run_group(retrieval, items, picked), strict=True):
                out[i] = result
        return out  # type: ignore[return-value]

    def _run_group(self, retrieval, items: list[tuple[str, str, int]], picked: list[int]):
        """One method's items in one call; when that call fails, each item alone, so that a
        poisonous query fails by itself and its neighbours are answered."""
        method = items[picked[0]][1]
        try:
            return self._retrieve(retrieval, items, picked, method)
        except Exception as exc:
            if len(picked) == 1:
                return [self._failed(exc, 1)]
            self.group_retries += 1
            logging.getLogger("ray.serve").warning(
                "retrieval group of %d (%s) failed, answering item by item: %s",
                len(picked),
                method,
                _problem(exc),
            )
        results = []
        for i in picked:
            try:
                results.extend(self._retrieve(retrieval, items, [i], method))
            except Exception as exc:
                results.append(self._failed(exc, len(picked)))
        return results

    def _retrieve(self, retrieval, items, picked: list[int], method: str) -> list[dict]:
        k = max(items[i][2] for i in picked)
        started = time.perf_counter()
        hits = retrieval.retrieve([items[i][0] for i in picked], method, k)
        seconds = time.perf_counter() - started
        return [
            {
                "query": items[i][0],
                "documents": [asdict(h) for h in found[: items[i][2]]],
                "batch_size": len(picked),
                "seconds": round(seconds, 4),
            }
            for i, found in zip(picked, hits, strict=True)
        ]

    def _failed(self, exc: BaseException, batch_size: int) -> dict:
        """A failed item: the problem (for the log) and the size of the batch it failed in."""
        self.failed_requests += 1
        logging.getLogger("ray.serve").error("retrieval failed: %s", _problem(exc))
        return {"failed": _problem(exc), "batch_size": batch_size}

    # ---- HTTP routes (the replica is the ingress; each calls a batched method in-process) ----

    @api.post("/retrieve", dependencies=BEARER)
    async def retrieve_http(self, request: RetrieveRequest):
        started = time.perf_counter()
        queries = request.all_queries()
        if len(queries) == 1:
            results = [await self.retrieve((queries[0], request.method, request.k))]
        else:
            results = await asyncio.gather(
                *[self.retrieve((q, request.method, request.k)) for q in queries]
            )
        failed = [i for i, r in enumerate(results) if "failed" in r]
        if failed:
            field = "query" if request.query is not None else f"queries.{failed[0]}"
            return error_response(500, field, "retrieval failed on this query (see server log)")
        return _json(
            {
                "method": request.method,
                "k": request.k,
                "results": list(results),
                "seconds": round(time.perf_counter() - started, 4),
            }
        )

    @api.post("/query", dependencies=BEARER)
    async def query_http(self, request: QueryRequest):
        result = await self.query(request.model_dump())
        if "failed" in result:
            return error_response(500, "question", "answering failed (see server log)")
        if result["error"] and result["error"].startswith("no document"):
            return error_response(404, "doc", "no document with this file name or doc_id")
        return _json(result)

    @api.get("/health")
    async def health_http(self, request: Request):
        """The status, "ok" (200) or "failing" (503, also when the engine does not answer
        within 30 s); each component's state and the counters only to a caller with the bearer
        token (with ``serve.auth`` off: a client on this machine), since they hold the index's
        path and error text."""
        try:
            report = await asyncio.wait_for(self.health(), timeout=30)
        except Exception as exc:
            engine = {"status": "failing", "error": f"no answer: {type(exc).__name__}"}
            report = {"status": "failing", "components": {"engine": engine}}
        code = 200 if report["status"] == "ok" else 503
        if _guard is None or not authorized(request.scope, _guard):
            report = {"status": report["status"]}
        return JSONResponse(status_code=code, content=report)

    @api.post("/admin/reload", dependencies=BEARER)
    async def reload_http(self, force: bool = False):
        """Reopen the index after an index job (see the module docstring); 429 while one runs
        or within serve.reload_min_interval_s of the last (of any replica: ``ReloadGate``),
        503 when it failed."""
        result = await self.gate.admit.remote() if self.gate is not None else {}
        if "refused" not in result:
            result = await self.reload(force)
        if "refused" in result:
            headers = {"Retry-After": str(max(1, round(result["retry_after_s"])))}
            return JSONResponse(status_code=429, content=result, headers=headers)
        if "error" in result:
            return JSONResponse(status_code=503, content=result)
        return result

    async def health(self) -> dict:
        """Each component's state: the index (open and committed versions), the retrieval
        engine and the query engine (each answers a probe question, at most every
        ``serve.health_cache_s``), the last reload; ``status`` is "ok" only when all are."""
        engine = self.engine
        now = time.monotonic()
        if self._probes is None or now - self._probes[0] > self.config.serve.health_cache_s:
            await asyncio.to_thread(self._check_files)
            self._probes = (now, await asyncio.to_thread(_probe, engine))
        components = dict(self._probes[1])
        try:
            on_disk = _index_version(self.index_dir)
            index = {"status": "ok", "version": self.version, "committed_version": on_disk}
            if on_disk != self.version:
                index["note"] = "a newer commit is not loaded yet (POST /admin/reload)"
        except Exception as exc:
            index = {"status": "failing", "version": self.version, "error": _problem(exc)}
        if self.damaged:
            index.update(status="failing", damaged=self.damaged[:10])
        index["documents"] = len(engine.model.documents)
        components["index"] = index
        components["reload"] = (
            {"status": "ok", "reloads": self.reloads}
            if self.reload_failure is None
            else {"status": "failing", "reloads": self.reloads, **self.reload_failure}
        )
        ok = all(c["status"] == "ok" for c in components.values())
        view = engine.zoom.view
        return {
            "status": "ok" if ok else "failing",
            "components": components,
            "index": self.index_dir,
            "documents": view.n_docs,
            "entities": len(view.entity_ids),
            "device": engine.walk.device,
            "models": engine.config.models.backend,
            "load_s": round(self.load_s, 2),
            "walk_graph": _walk_graph(engine),
            "bm25": engine.bm25_sources(),
            "batches": self.batches,
            "max_batch": self.max_batch,
            "failed_requests": self.failed_requests,
            "group_retries": self.group_retries,
            "model_fallbacks": self.model_fallbacks,
            "query_batches": self.query_batches,
            "max_query_batch": self.max_query_batch,
            "index_version": self.version,
            "reloads": self.reloads,
        }


def build_app(args: dict) -> serve.Application:
    """Application builder. ``args``: the configuration (``app_config``: sections such as
    ``models``, ``walk``, ``query``, ``serve``, a ``config`` file, and the short keys ``index``,
    ``device``, ``reload_interval_s``); the index directory is required. ``device: gpu`` asks
    Ray for one GPU per engine replica, whose walks then run in CuPy and whose offline
    embedder runs on the GPU (``models.embed_device: cuda``); ``auto`` uses a GPU for the
    walks only where one is visible."""
    config = app_config(args)
    if "index" not in config.serve.model_fields_set:
        raise ValueError("the serve application needs args.index: the index directory")
    options: dict = {"max_ongoing_requests": max(MAX_ONGOING_REQUESTS, 4 * config.serve.max_batch)}
    if config.walk.device == "gpu":
        options["ray_actor_options"] = {"num_cpus": 1, "num_gpus": 1}
    gate = ReloadGate.bind(config.serve.reload_min_interval_s)
    return RetrievalEngine.options(**options).bind(
        config.serve.index,
        config.walk.device,
        config.serve.reload_interval_s,
        portable(config),
        gate,
    )


DRAIN_VARIABLE = "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"
DIRECT_INGRESS_DRAIN_S = 2.0


def direct_ingress_env(port: int) -> dict[str, str]:
    """The environment under which Ray Serve's direct ingress puts the HTTP server inside the
    ingress replica (this application's engine replica), on exactly ``port``: a request then
    costs one replica's work, without the proxy actor and its two actor calls per request (the
    request, and the replica fetching the body back from the proxy). Read by Ray when it
    starts (controller and replicas): set it before ``ray.init``/``ray start``. One ingress
    replica per node can hold the port.

    The replica's drain before it stops is ``DIRECT_INGRESS_DRAIN_S`` (Ray's default, 30 s, is
    for a load balancer's health checks to see it go; one local server has none, and Ctrl-C or
    SIGTERM then took over 30 s), unless the environment sets
    ``RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S`` itself. Requests in flight still finish:
    Serve waits for them within the deployment's graceful shutdown."""
    drain = os.environ.get(DRAIN_VARIABLE, str(DIRECT_INGRESS_DRAIN_S))
    return {
        "RAY_SERVE_ENABLE_DIRECT_INGRESS": "1",
        "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(port),
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(port + 1),  # Ray's bound is exclusive
        DRAIN_VARIABLE: drain,
    }


def serve_forever(
    args: dict,
    host: str = "127.0.0.1",
    port: int = 8000,
    announce: Callable[[str], None] | None = None,
    ray_logs: bool = True,
) -> None:
    """Start a local Ray (never a cluster another job started on this machine), serve
    ``build_app(args)`` at host:port, and block until Ctrl-C. With ``serve.direct_ingress``
    the engine replica answers on host:port itself and Serve's proxy listens on a free port
    (said too). ``announce`` hears the address once it answers (default: print);
    ``ray_logs``: Ray's own log lines below ERROR shown in this process."""
    direct = app_config(args).serve.direct_ingress
    proxy_port = port
    if direct:
        os.environ.update(direct_ingress_env(port))
        proxy_port = free_port(host)
    level = logging.INFO if ray_logs else logging.ERROR
    ray.init(address="local", include_dashboard=False, logging_level=level)
    serve.start(http_options={"host": host, "port": proxy_port})
    serve.run(build_app(args))
    index = app_config(args).serve.index
    via = f" (the engine replica; Serve's proxy at :{proxy_port})" if direct else ""
    line = f"serving {index} at http://{host}:{port}{via} (API docs: /docs)"
    (announce or (lambda text: print(text, flush=True)))(line)
    signal.signal(signal.SIGTERM, _stop)  # a service manager's stop: shut down as on Ctrl-C
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
        ray.shutdown()


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
