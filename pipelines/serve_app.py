"""The Ray Serve application: an HTTP/JSON ingress (FastAPI, OpenAPI at /docs) in front of the
engine deployment, whose replicas each hold one query engine (``operators.query.engine``: one
read model of the index, one walk engine, one model backend) serving both endpoints, and batch
concurrent ``/retrieve`` requests into one step (``@serve.batch``).

    POST /retrieve {"query": "..." | "queries": [...], "k": 10, "method": "zoom|bm25|dense"}
    POST /query    {"question": "...", "method": "auto|bookrag|deepread|zoom|ladrag|dense|
                    bookrag_paper", "doc": "file.pdf" (optional), "k": 5}
                   → the answer (extractive offline), evidence with doc, page, sec_id,
                     para_idx, text and score, the plan or tool trace, timings
                     (an unknown doc is a 404, a malformed body 422)
    GET  /health
    POST /admin/reload   reopen the index when its ``documents`` table changed

The methods are those of ``operators.query.registry``; the limits (k, question and query length,
queries per request, batch size) and defaults come from the configuration's query and serve
sections, the model backend from its models section.

Reloading: the engine keeps answering from the index it opened; ``POST /admin/reload`` (after an
index job) makes the engine replica that takes it reopen the index when the Lance version of
``documents`` (the commit marker, pipelines/store/recovery.py) changed, in a thread, and swap it in
between batches — no restart of the ingress, no request refused. With ``reload_interval_s`` > 0
every engine replica also checks that version on its own (needed with several replicas).

Started by ``python -m jobs.serve --index DIR`` or ``serve run serve_config.yaml``
(``build_app`` is the application builder both use).
"""

# No ``from __future__ import annotations`` here: FastAPI inside a Serve replica must see the
# request model as a class, not a forward reference.
import asyncio
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, Literal

import ray
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from ray import serve
from ray.serve.handle import DeploymentHandle

from operators.config import SECTIONS, BookindexConfig, load_config
from operators.query.registry import PASSAGE_METHODS, QUERY_METHODS

# The limits requests are checked against: the defaults here, the application's configuration
# in every ingress replica (``Ingress.__init__``).
_limits = BookindexConfig()
# Serve needs these at class definition; a replica applies the configured values at start.
DEFAULT_MAX_BATCH = BookindexConfig().serve.max_batch

api = FastAPI(
    title="bookindex",
    description="Question answering over a bookindex index: the BookRAG agent, DeepRead, "
    "ZoomRAG and LAD-RAG (/query); ZoomRAG walks, BM25 and dense retrieval (/retrieve).",
)


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
    return values


# Serve's default of 5 ongoing requests per replica would cap every batch at 5.
@serve.deployment(ray_actor_options={"num_cpus": 1}, max_ongoing_requests=4 * DEFAULT_MAX_BATCH)
class RetrievalEngine:
    """Holds one query engine (read model, walk graph, model backend) for both endpoints;
    concurrent /retrieve requests share one step."""

    def __init__(
        self,
        index_dir: str,
        device: str = "auto",
        reload_interval_s: float = 0,
        config: dict | None = None,
    ) -> None:
        overrides = dict(config or {})
        overrides["serve"] = dict(overrides.get("serve", {}), index=index_dir)
        overrides["walk"] = dict(overrides.get("walk", {}), device=device)
        self.config = load_config(overrides=overrides)
        self.index_dir = index_dir
        self.retrieve.set_max_batch_size(self.config.serve.max_batch)
        self.version = _index_version(index_dir)
        started = time.perf_counter()
        self.engine = self._open()
        self.load_s = time.perf_counter() - started
        self.batches = 0
        self.max_batch = 0
        self.reloads = 0
        self._reload_lock = threading.Lock()
        if reload_interval_s > 0:
            threading.Thread(target=self._watch, args=(reload_interval_s,), daemon=True).start()

    def _open(self):
        from pipelines.store.reader import open_engine

        engine = open_engine(self.index_dir, self.config)
        engine.warm_up()  # the walk graph, BM25 indexes and linkers, before threads share them
        return engine

    async def reload(self, force: bool = False) -> dict:
        """Reopen the index if ``documents`` changed (or ``force``); requests keep being
        answered from the open index meanwhile."""
        return await asyncio.to_thread(self._reload, force)

    def _reload(self, force: bool = False) -> dict:
        with self._reload_lock:
            version = _index_version(self.index_dir)
            reloaded = force or version != self.version
            if reloaded:
                started = time.perf_counter()
                self.engine = self._open()  # one assignment: a request sees old or new
                self.version, self.reloads = version, self.reloads + 1
                self.load_s = time.perf_counter() - started
            return {
                "reloaded": reloaded,
                "index_version": self.version,
                "documents": len(self.engine.model.documents),
                "load_s": round(self.load_s, 2),
            }

    def _watch(self, interval_s: float) -> None:
        while True:
            time.sleep(interval_s)
            try:
                self._reload()
            except Exception:  # keep serving the open index; try again next time
                logging.getLogger("ray.serve").exception("index reload failed")

    async def query(self, request: dict) -> dict:
        """One question through the query API (the agents run one question at a time; requests
        run side by side in threads, each on the engine that was open when it started)."""
        engine = self.engine
        return await asyncio.to_thread(
            engine.answer, request["question"], request["method"], request["doc"], request["k"]
        )

    @serve.batch(max_batch_size=DEFAULT_MAX_BATCH, batch_wait_timeout_s=0.005)
    async def retrieve(self, items: list[tuple[str, str, int]]) -> list[dict]:
        """Items (query, method, k) → results; one retrieval call per method in the batch."""
        self.batches += 1
        self.max_batch = max(self.max_batch, len(items))
        return await asyncio.to_thread(self._run, items)

    def _run(self, items: list[tuple[str, str, int]]) -> list[dict]:
        retrieval = self.engine.retrieval  # the whole batch from one index, even during a reload
        out: list[dict | None] = [None] * len(items)
        for method in sorted({m for _, m, _ in items}):
            picked = [i for i, (_, m, _) in enumerate(items) if m == method]
            k = max(items[i][2] for i in picked)
            started = time.perf_counter()
            hits = retrieval.retrieve([items[i][0] for i in picked], method, k)
            seconds = time.perf_counter() - started
            for i, found in zip(picked, hits, strict=True):
                out[i] = {
                    "query": items[i][0],
                    "documents": [asdict(h) for h in found[: items[i][2]]],
                    "batch_size": len(picked),
                    "seconds": round(seconds, 4),
                }
        return out  # type: ignore[return-value]

    def health(self) -> dict:
        engine = self.engine
        view = engine.zoom.view
        return {
            "status": "ok",
            "index": self.index_dir,
            "documents": view.n_docs,
            "entities": len(view.entity_ids),
            "device": engine.walk.device,
            "models": engine.config.models.backend,
            "load_s": round(self.load_s, 2),
            "batches": self.batches,
            "max_batch": self.max_batch,
            "index_version": self.version,
            "reloads": self.reloads,
        }


def _index_version(index_dir: str) -> int:
    from pipelines.store.reader import index_version

    return index_version(index_dir)


@serve.deployment(max_ongoing_requests=1024)
@serve.ingress(api)
class Ingress:
    def __init__(self, engine: DeploymentHandle, config: dict | None = None) -> None:
        global _limits
        _limits = load_config(overrides=config or {})  # the request limits of this replica
        self.engine = engine

    @api.post("/retrieve")
    async def retrieve(self, request: RetrieveRequest) -> dict:
        started = time.perf_counter()
        queries = request.all_queries()
        results = await asyncio.gather(
            *[self.engine.retrieve.remote((q, request.method, request.k)) for q in queries]
        )
        return {
            "method": request.method,
            "k": request.k,
            "results": list(results),
            "seconds": round(time.perf_counter() - started, 4),
        }

    @api.post("/query")
    async def query(self, request: QueryRequest):
        result = await self.engine.query.remote(request.model_dump())
        if result["error"] and result["error"].startswith("no document"):
            return JSONResponse(status_code=404, content=result)
        return result

    @api.get("/health")
    async def health(self) -> dict:
        return await self.engine.health.remote()

    @api.post("/admin/reload")
    async def reload(self, force: bool = False) -> dict:
        """Reopen the index after an index job (see the module docstring)."""
        return await self.engine.reload.remote(force)


def build_app(args: dict) -> serve.Application:
    """Application builder. ``args``: the configuration (``app_config``: sections such as
    ``models``, ``walk``, ``query``, ``serve``, a ``config`` file, and the short keys ``index``,
    ``device``, ``reload_interval_s``); the index directory is required. ``device: gpu`` asks
    Ray for one GPU per engine replica (the CuPy walk engine on a GPU worker); ``auto`` uses a
    GPU only where one is visible."""
    config = app_config(args)
    if "index" not in config.serve.model_fields_set:
        raise ValueError("the serve application needs args.index: the index directory")
    options: dict = {"max_ongoing_requests": 4 * config.serve.max_batch}
    if config.walk.device == "gpu":
        options["ray_actor_options"] = {"num_cpus": 1, "num_gpus": 1}
    engine = RetrievalEngine.options(**options).bind(
        config.serve.index, config.walk.device, config.serve.reload_interval_s, portable(config)
    )
    return Ingress.bind(engine, portable(config))


def serve_forever(args: dict, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Start a local Ray, serve ``build_app(args)`` at host:port, and block until Ctrl-C."""
    ray.init(include_dashboard=False)
    serve.start(http_options={"host": host, "port": port})
    serve.run(build_app(args))
    index = app_config(args).serve.index
    print(f"serving {index} at http://{host}:{port} (OpenAPI: /docs)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
