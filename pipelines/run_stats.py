"""Per-run statistics of the index job, written as ``stats.json`` beside the tables.

Per stage: wall time (driver phases), CPU-seconds summed over documents (worker stages), rows in
and out, the peak resident memory of the processes that ran it, and model tokens when a model
was called. Per document: status, pages, nodes and its stage timings. The job's summary line is
printed from this file's content (``summary_line``), so the two never disagree.
"""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bookindex.pipelines.rows import from_json

STATS_FILE = "stats.json"
WORKER_STAGES = (
    "probe",
    "parse",
    "ocr",
    "assemble",
    "layout_graph",
    "embed",
    "entities",
    "resolve_document",
)


def peak_memory_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


@dataclass
class StageProgress:
    """Where one stage of the job stands, as its listener hears it: while it runs (documents
    done so far, of ``total``) and once when it ends (``finished``, with the stage's facts:
    rows in and out, and what it counted)."""

    stage: str  # a driver phase ("identify", "plan", "write_nodes", ...) or "parse"/"enrich"
    done: int = 0  # documents done
    total: int | None = None  # documents in the stage (None: not known)
    pages: int = 0  # pages of the documents done
    seconds: float = 0.0  # since the stage started
    finished: bool = False
    facts: dict = field(default_factory=dict)


ProgressListener = Callable[[StageProgress], None]


class DriverPhases:
    """Wall time, rows and memory of the phases the driver runs itself; each phase's end, and
    the documents the streaming stages finish, told to ``listener`` (the command line's
    progress lines) as ``StageProgress``."""

    def __init__(self, listener: ProgressListener | None = None) -> None:
        self.stages: dict[str, dict] = {}
        self.listener = listener

    @contextmanager
    def phase(self, name: str, **facts: int) -> Iterator[dict]:
        started = time.perf_counter()
        entry = self.stages.setdefault(name, {})
        entry.update(facts)
        try:
            yield entry
        finally:
            elapsed = time.perf_counter() - started
            entry["wall_s"] = round(entry.get("wall_s", 0) + elapsed, 3)
            entry["peak_memory_mb"] = peak_memory_mb()
            self.tell(StageProgress(name, seconds=elapsed, finished=True, facts=dict(entry)))

    def add(self, name: str, seconds: float) -> None:
        """``seconds`` of wall time to ``name``'s entry: a span that the driver times but does
        not run as a phase of its own (its listener hears it as the stage's progress)."""
        entry = self.stages.setdefault(name, {})
        entry["wall_s"] = round(entry.get("wall_s", 0) + seconds, 3)

    def tell(self, progress: StageProgress) -> None:
        """``progress`` to the listener, if any (a listener that fails never fails the job)."""
        if self.listener is not None:
            try:
                self.listener(progress)
            except Exception:  # noqa: BLE001 (output only: the job goes on)
                self.listener = None


def build_stats(summary: dict, doc_rows: list[dict], driver: DriverPhases) -> dict:
    stages: dict[str, dict] = {}
    for name in WORKER_STAGES:
        seconds = [from_json(r.get("stage_timings"), {}).get(name) for r in doc_rows]
        memory = [from_json(r.get("stage_memory"), {}).get(name) for r in doc_rows]
        tokens = [from_json(r.get("stage_tokens"), {}).get(name) for r in doc_rows]
        ran = [s for s in seconds if s is not None]
        if not ran:
            continue
        stages[name] = {
            "cpu_s": round(sum(ran), 3),
            "documents": len(ran),
            "peak_memory_mb": max((m for m in memory if m is not None), default=None),
            "tokens": sum(t for t in tokens if t) or 0,
        }
    if "parse" in stages:
        stages["parse"]["rows_in"] = sum(r.get("n_ranges", 1) for r in doc_rows)
    for name, entry in driver.stages.items():
        stages.setdefault(name, {}).update(entry)
    documents = [
        {
            "doc_id": r["doc_id"],
            "uri": r["uri"],
            "status": r["status"],
            "n_pages": r["n_pages"],
            "n_nodes": r["n_nodes"],
            "timings": from_json(r.get("stage_timings"), {}),
        }
        for r in sorted(doc_rows, key=lambda r: r["uri"])
    ]
    return {
        "finished_at": datetime.now(UTC).isoformat(),
        "summary": summary,
        "stages": stages,
        "documents": documents,
    }


def write_stats(out_dir: str | Path, stats: dict) -> Path:
    path = Path(out_dir) / STATS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(stats, indent=1))
    tmp.replace(path)  # readers never see half a file
    return path


def summary_line(stats: dict) -> str:
    """The job's summary; its rate in pages/s, and in passages/s where passages were indexed
    (a passage has no pages)."""
    s = stats["summary"]
    per_s = lambda n: n / s["seconds"] if s["seconds"] > 0 else 0.0  # noqa: E731
    passages = s.get("passages", 0)
    rates = [f"{per_s(s['pages']):.1f} pages/s"] if s["pages"] or not passages else []
    rates += [f"{per_s(passages):.1f} passages/s"] if passages else []
    counts = f"pages={s['pages']}" + (f" passages={passages}" if passages else "")
    return (
        f"documents ok={s['ok']} failed={s['failed']} skipped={s['skipped']} "
        f"needs_ocr={s['needs_ocr']} | {counts} nodes={s['nodes']} "
        f"entities={s['entities']} | {s['seconds']:.1f}s, {', '.join(rates)}"
    )
