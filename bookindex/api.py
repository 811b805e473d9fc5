"""The Python API: index documents, open an index, ask it questions, read its structure.

    import bookindex

    stats = bookindex.index(["papers/", "report.pdf"], "my_index")
    print(stats.line)                                   # documents ok=... | pages=... | ...s
    with bookindex.open_index("my_index") as idx:
        for doc in idx.documents():
            print(doc["name"], doc["title"], doc["n_pages"])
        toc = idx.toc("report.pdf")                     # [{sec_id, level, title, page, ...}]
        nodes = idx.read_section("report.pdf", sec_id=3)  # the heading, then its paragraphs
        answer = idx.ask("How many tables are in Section 3?", method="auto")
        print(answer.answer, [(e.doc, e.page, e.sec_id, e.para_idx) for e in answer.evidence])

A configuration is the ``bookindex config`` one: pass ``config=`` a ``BookindexConfig``, a
file's path (JSON, YAML or TOML) or a mapping of sections, and override single sections with
keywords (``index={"enrich": False}``, ``models={"backend": "openai", ...}``). An index opens
without loading a model; the first question loads the models and the read model once, and the
same ``Index`` answers any number of questions (``ask_many`` answers a batch in one pass).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bookindex.operators.config import BookindexConfig
from bookindex.operators.config import load_config as _load_config
from bookindex.pipelines.run_stats import StageProgress
from bookindex.pipelines.store import catalog

ConfigLike = BookindexConfig | str | Path | Mapping[str, Mapping[str, Any]] | None


def load_config(config: ConfigLike = None, **sections: Mapping[str, Any]) -> BookindexConfig:
    """The configuration: ``config`` (a ``BookindexConfig``, a file's path, or sections by
    name), then ``BOOKINDEX_*`` environment variables, then ``sections`` (``walk={"alpha":
    0.7}``). ``ConfigError`` names a field that does not validate."""
    if isinstance(config, BookindexConfig):
        merged = config.model_dump()
        merged["models"]["api_key"] = config.models.api_key
        for name, values in sections.items():
            merged.setdefault(name, {}).update(values)
        return _load_config(env={}, overrides=merged)
    if isinstance(config, Mapping):
        merged = {name: dict(values) for name, values in config.items()}
        for name, values in sections.items():
            merged.setdefault(name, {}).update(values)
        return _load_config(overrides=merged)
    return _load_config(config, overrides=sections)


@dataclass(frozen=True)
class Evidence:
    """One evidence unit of an answer, at DeepRead's coordinates: document, page, section
    (``sec_id``) and paragraph (``para_idx``)."""

    doc: str  # file name (a passage: its id)
    doc_id: str
    node_id: str
    kind: str  # text, list, table, image, caption, formula, section
    page: int
    page_end: int
    sec_id: int
    para_idx: int
    text: str
    score: float


@dataclass(frozen=True)
class Answer:
    """An answer: ``answer`` (extractive with the offline models), the ``evidence``, the plan
    or tool trace, timings, and ``error`` for a bad or unanswerable request (never raised)."""

    question: str
    method: str
    query_class: str | None
    answer: str | None
    answer_type: str | None
    evidence: list[Evidence]
    plan: list[str]
    trace: list[dict]
    timings: dict
    error: str | None
    doc: str | None = None

    @classmethod
    def of(cls, result: Mapping[str, Any]) -> Answer:
        return cls(
            question=result["question"],
            method=result["method"],
            query_class=result.get("query_class"),
            answer=result.get("answer"),
            answer_type=result.get("answer_type"),
            evidence=[Evidence(**e) for e in result.get("evidence", [])],
            plan=list(result.get("plan") or []),
            trace=list(result.get("trace") or []),
            timings=dict(result.get("timings") or {}),
            error=result.get("error"),
            doc=result.get("doc"),
        )

    def to_dict(self) -> dict:
        """The answer as ``POST /query`` returns it (JSON-ready)."""
        return asdict(self)


@dataclass(frozen=True)
class IndexStats:
    """What an index run did: documents by outcome, pages, nodes, entities, seconds, the
    failure rows, and the summary line the command prints."""

    ok: int
    failed: int
    skipped: int
    needs_ocr: int
    pages: int
    passages: int
    nodes: int
    entities: int
    seconds: float
    rebuilt: int
    stale_kept: int
    failures: list[dict] = field(default_factory=list)
    stages: dict = field(default_factory=dict)  # stats.json's per-stage figures
    line: str = ""


def index(
    paths: Iterable[str | Path],
    out: str | Path,
    config: ConfigLike = None,
    progress: Callable[[StageProgress], None] | None = None,
    **sections: Mapping[str, Any],
) -> IndexStats:
    """Index ``paths`` (PDF files, directories searched for PDFs, globs, ``.jsonl`` passage
    corpora) into the index at ``out``: only new or changed files are processed; a bad file
    becomes a failure row, never an exception. Runs on the Ray of ``index.ray_address`` or
    ``RAY_ADDRESS``, else a local one. ``progress`` hears each stage's progress.
    ``ValueError`` when the paths name nothing to index."""
    from bookindex.operators.parsing.discovery import unusable_inputs
    from bookindex.pipelines.index_pipeline import run_index

    inputs = [str(p) for p in paths]
    problem = unusable_inputs(inputs)
    if problem:
        raise ValueError(problem)
    summary = run_index(inputs, out, load_config(config, **sections), progress=progress)
    counts = summary.counts()
    return IndexStats(
        **counts,
        failures=list(summary.failures),
        stages=dict(summary.stats.get("stages", {})),
        line=summary.line(),
    )


class Index:
    """An index on disk (``open_index``): its documents and structure, read without a model,
    and a query engine over it, built on the first question."""

    def __init__(self, path: str | Path, config: ConfigLike = None, **sections: Any) -> None:
        self.path = catalog.check_index(path)
        self.config = load_config(config, **sections)
        self._engine = None

    # ---- structure (no model) -----------------------------------------------------------------
    def documents(self) -> list[dict]:
        """Every document: doc_id, uri, name, title, status, error, n_pages, n_sections,
        n_nodes, ocr_pages, outline_used, indexed_at."""
        return catalog.documents(self.path)

    def toc(self, doc: str) -> list[dict]:
        """The table of contents of ``doc`` (file name, title or doc_id): per heading its
        ``sec_id``, ``level``, ``title``, ``page`` and ``n_paragraphs``."""
        return catalog.toc(self.path, doc)

    def read_section(self, doc: str, sec_id: int, para_idx: int | None = None) -> list[dict]:
        """The nodes at DeepRead's coordinates: section ``sec_id`` of ``doc`` (its heading,
        then its paragraphs, tables and figures) or only its paragraph ``para_idx``; each with
        kind, title, text, pages, bbox, sec_id and para_idx."""
        return catalog.section(self.path, doc, sec_id, para_idx)

    def failures(self) -> list[dict]:
        """The failure rows: each input or step that failed, and why."""
        return catalog.failures(self.path)

    # ---- questions --------------------------------------------------------------------------
    @property
    def engine(self):
        """The query engine (``operators.query.engine.QueryEngine``), loaded on first use."""
        if self._engine is None:
            from bookindex.pipelines.store.reader import open_engine

            self._engine = open_engine(self.path, self.config)
        return self._engine

    def ask(
        self, question: str, method: str = "auto", doc: str | None = None, k: int | None = None
    ) -> Answer:
        """One question; ``method``: auto, bookrag, deepread, zoom, ladrag, dense or
        bookrag_paper; ``doc`` keeps it inside one document; ``k`` evidence units."""
        return self.ask_many([question], method, doc, k)[0]

    def ask_many(
        self,
        questions: Iterable[str],
        method: str = "auto",
        doc: str | None = None,
        k: int | None = None,
    ) -> list[Answer]:
        """Several questions as one batch (one embedding call; dense and zoom in one pass)."""
        requests = [{"question": q, "method": method, "doc": doc, "k": k} for q in questions]
        return [Answer.of(r) for r in self.engine.answer_many(requests)]

    def close(self) -> None:
        self._engine = None

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r})"


def open_index(path: str | Path, config: ConfigLike = None, **sections: Any) -> Index:
    """The index at ``path`` (FileNotFoundError when there is none; nothing is created)."""
    return Index(path, config, **sections)
