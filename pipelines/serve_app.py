"""The Ray Serve application: an HTTP/JSON ingress (FastAPI, OpenAPI at /docs) in front of the
retrieval engine deployment, which holds the index and the walk graph once and batches
concurrent requests into one step (``@serve.batch``).

    POST /retrieve {"query": "..." | "queries": [...], "k": 10, "method": "zoom|bm25|dense"}
    GET  /health

Started by ``python -m jobs.serve --index DIR`` or ``serve run serve_config.yaml``
(``build_app`` is the application builder both use).
"""

# No ``from __future__ import annotations`` here: FastAPI inside a Serve replica must see the
# request model as a class, not a forward reference.
import asyncio
import time
from dataclasses import asdict
from typing import Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from ray import serve
from ray.serve.handle import DeploymentHandle

MAX_QUERY_CHARS = 2000
MAX_QUERIES = 256
MAX_K = 100
MAX_BATCH = 64

api = FastAPI(
    title="bookindex",
    description="Retrieval over a bookindex index: ZoomRAG walks, BM25 and dense baselines.",
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


def _check_query(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("a query must not be empty")
    if len(value) > MAX_QUERY_CHARS:
        raise ValueError(f"a query must be at most {MAX_QUERY_CHARS} characters")
    return value


# Serve's default of 5 ongoing requests per replica would cap every batch at 5.
@serve.deployment(ray_actor_options={"num_cpus": 1}, max_ongoing_requests=4 * MAX_BATCH)
class RetrievalEngine:
    """Holds the index and the Doc-Zoom graph once; concurrent requests share one step."""

    def __init__(self, index_dir: str, device: str = "auto") -> None:
        from pipelines.retrieval import Retrieval

        started = time.perf_counter()
        self.retrieval = Retrieval.open(index_dir, device=device)
        _ = self.retrieval.engine  # build the walk graph now, not on the first request
        self.retrieval.retrieve(["warm up"], "dense", 1)
        self.index_dir = index_dir
        self.load_s = time.perf_counter() - started
        self.batches = 0
        self.max_batch = 0

    @serve.batch(max_batch_size=MAX_BATCH, batch_wait_timeout_s=0.005)
    async def retrieve(self, items: list[tuple[str, str, int]]) -> list[dict]:
        """Items (query, method, k) → results; one retrieval call per method in the batch."""
        self.batches += 1
        self.max_batch = max(self.max_batch, len(items))
        return await asyncio.to_thread(self._run, items)

    def _run(self, items: list[tuple[str, str, int]]) -> list[dict]:
        out: list[dict | None] = [None] * len(items)
        for method in sorted({m for _, m, _ in items}):
            picked = [i for i, (_, m, _) in enumerate(items) if m == method]
            k = max(items[i][2] for i in picked)
            started = time.perf_counter()
            hits = self.retrieval.retrieve([items[i][0] for i in picked], method, k)
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

    @api.get("/health")
    async def health(self) -> dict:
        return await self.engine.health.remote()


def build_app(args: dict) -> serve.Application:
    """Application builder: ``args`` = {"index": DIR, "device": "auto|cpu|gpu"}."""
    if not args.get("index"):
        raise ValueError("the serve application needs args.index: the index directory")
    engine = RetrievalEngine.bind(str(args["index"]), str(args.get("device", "auto")))
    return Ingress.bind(engine)
