"""The Ray Serve application: an HTTP/JSON ingress (FastAPI, OpenAPI at /docs) in front of the
retrieval engine deployment, which holds the index and the walk graph once and batches
concurrent requests into one step (``@serve.batch``).

    POST /retrieve {"query": "..." | "queries": [...], "k": 10, "method": "zoom|bm25|dense"}
    POST /query    {"question": "...", "method": "auto|bookrag|deepread|zoom|ladrag|dense",
                    "doc": "file.pdf" (optional), "k": 5}
                   → the answer (extractive offline), evidence with doc, page, sec_id,
                     para_idx, text and score, the plan or tool trace, timings
                     (pipelines/query_engine.py; an unknown doc is a 404, a malformed body 422)
    GET  /health
    POST /admin/reload   reopen the index when its ``documents`` table changed

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
from dataclasses import asdict
from pathlib import Path
from typing import Literal

import ray
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from ray import serve
from ray.serve.handle import DeploymentHandle

MAX_QUERY_CHARS = 2000
MAX_QUESTION_CHARS = 4000
MAX_QUERIES = 256
MAX_K = 100
MAX_BATCH = 64

api = FastAPI(
    title="bookindex",
    description="Question answering over a bookindex index: the BookRAG agent, DeepRead, "
    "ZoomRAG and LAD-RAG (/query); ZoomRAG walks, BM25 and dense retrieval (/retrieve).",
)


class RetrieveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str | None = Field(None, description="one question")
    queries: list[str] | None = Field(None, description=f"up to {MAX_QUERIES} questions")
    k: int = Field(10, ge=1, le=MAX_K, description="documents per question")
    method: Literal["zoom", "bm25", "dense"] = "zoom"

    @field_validator("query")
    @classmethod
    def _one_query(cls, value: str | None) -> str | None:
        return None if value is None else _check_query(value)

    @field_validator("queries")
    @classmethod
    def _many_queries(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not 1 <= len(value) <= MAX_QUERIES:
            raise ValueError(f"queries must hold 1 to {MAX_QUERIES} questions")
        return [_check_query(v) for v in value]

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
    method: Literal["auto", "bookrag", "deepread", "zoom", "ladrag", "dense", "bookrag_paper"] = (
        "auto"
    )
    doc: str | None = Field(None, description="ask inside one document (file name or doc_id)")
    k: int = Field(5, ge=1, le=MAX_K, description="evidence units")

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        return _check_query(value, MAX_QUESTION_CHARS, "the question")


def _check_query(value: str, limit: int = MAX_QUERY_CHARS, what: str = "a query") -> str:
    value = value.strip()
    if not value:
        raise ValueError(f"{what} must not be empty")
    if len(value) > limit:
        raise ValueError(f"{what} must be at most {limit} characters")
    return value


def index_version(index_dir: str) -> int:
    """The Lance version of ``documents``: it changes with every committed index update."""
    import lance

    path = Path(index_dir) / "documents.lance"
    return lance.dataset(str(path)).version if path.exists() else 0


# Serve's default of 5 ongoing requests per replica would cap every batch at 5.
@serve.deployment(ray_actor_options={"num_cpus": 1}, max_ongoing_requests=4 * MAX_BATCH)
class RetrievalEngine:
    """Holds the index and the Doc-Zoom graph once; concurrent requests share one step."""

    def __init__(self, index_dir: str, device: str = "auto", reload_interval_s: float = 0) -> None:
        self.index_dir = index_dir
        self.device = device
        self.version = index_version(index_dir)
        started = time.perf_counter()
        self.retrieval = self._open()
        self.load_s = time.perf_counter() - started
        self.batches = 0
        self.max_batch = 0
        self.reloads = 0
        self._reload_lock = threading.Lock()
        self._query_lock = threading.Lock()
        self.query_engine = None  # pipelines.query_engine.QueryEngine, opened on first /query
        if reload_interval_s > 0:
            threading.Thread(target=self._watch, args=(reload_interval_s,), daemon=True).start()

    def _open(self):
        from pipelines.retrieval import Retrieval

        retrieval = Retrieval.open(self.index_dir, device=self.device)
        _ = retrieval.engine  # build the walk graph now, not on the first request
        retrieval.retrieve(["warm up"], "dense", 1)
        return retrieval

    async def reload(self, force: bool = False) -> dict:
        """Reopen the index if ``documents`` changed (or ``force``); requests keep being
        answered from the open index meanwhile."""
        return await asyncio.to_thread(self._reload, force)

    def _reload(self, force: bool = False) -> dict:
        with self._reload_lock:
            version = index_version(self.index_dir)
            reloaded = force or version != self.version
            if reloaded:
                started = time.perf_counter()
                self.retrieval = self._open()  # one assignment: a batch sees old or new
                self.query_engine = None  # the next /query opens the new index
                self.version, self.reloads = version, self.reloads + 1
                self.load_s = time.perf_counter() - started
            return {
                "reloaded": reloaded,
                "index_version": self.version,
                "documents": self.retrieval.corpus.n_docs,
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
        run side by side in threads, each on the index that was open when it started)."""
        return await asyncio.to_thread(self._query, request)

    def _query(self, request: dict) -> dict:
        engine = self._query_engine()
        return engine.answer(request["question"], request["method"], request["doc"], request["k"])

    def _query_engine(self):
        with self._query_lock:
            if self.query_engine is None:
                from pipelines.query_engine import QueryEngine

                engine = QueryEngine.open(self.index_dir, device=self.device)
                for method in ("bookrag", "zoom"):  # build the lazy parts before threads share them
                    engine.answer("warm up", method)
                self.query_engine = engine
            return self.query_engine

    @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=0.005)
    async def retrieve(self, items: list[tuple[str, str, int]]) -> list[dict]:
        """Items (query, method, k) → results; one retrieval call per method in the batch."""
        self.batches += 1
        self.max_batch = max(self.max_batch, len(items))
        return await asyncio.to_thread(self._run, items)

    def _run(self, items: list[tuple[str, str, int]]) -> list[dict]:
        retrieval = self.retrieval  # the whole batch from one index, even during a reload
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
        corpus = self.retrieval.corpus
        return {
            "status": "ok",
            "index": self.index_dir,
            "documents": corpus.n_docs,
            "entities": len(corpus.entity_ids),
            "device": self.retrieval.engine.device,
            "load_s": round(self.load_s, 2),
            "batches": self.batches,
            "max_batch": self.max_batch,
            "index_version": self.version,
            "reloads": self.reloads,
        }


@serve.deployment(max_ongoing_requests=1024)
@serve.ingress(api)
class Ingress:
    def __init__(self, engine: DeploymentHandle) -> None:
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
    """Application builder: ``args`` = {"index": DIR, "device": "auto|cpu|gpu",
    "reload_interval_s": 0}. ``device: gpu`` asks Ray for one GPU per engine replica (the CuPy
    walk engine on a GPU worker); ``auto`` uses a GPU only where one is visible."""
    if not args.get("index"):
        raise ValueError("the serve application needs args.index: the index directory")
    device = str(args.get("device", "auto"))
    deployment = RetrievalEngine
    if device == "gpu":
        deployment = RetrievalEngine.options(ray_actor_options={"num_cpus": 1, "num_gpus": 1})
    engine = deployment.bind(
        str(args["index"]), device, float(args.get("reload_interval_s", 0) or 0)
    )
    return Ingress.bind(engine)


def serve_forever(args: dict, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Start a local Ray, serve ``build_app(args)`` at host:port, and block until Ctrl-C."""
    import time

    ray.init(include_dashboard=False)
    serve.start(http_options={"host": host, "port": port})
    serve.run(build_app(args))
    print(f"serving {args['index']} at http://{host}:{port} (OpenAPI: /docs)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
