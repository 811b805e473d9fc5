"""Build provenance end to end (pipelines/provenance.py): a run with another build re-indexes
exactly the documents that build makes otherwise (or, with ``stale_build="warn"``, keeps them
and says so); an index from before builds were recorded is re-indexed whole; ``jobs.evaluate``
refuses a stale index. Structure only (no enrich) to keep it fast: the build options used are
real ones (outline use, enrich), and a stage's BUILD_VERSION bump stands for a code upgrade."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import lance
import polars as pl

from bookindex.jobs import evaluate
from bookindex.operators.config import BookindexConfig
from bookindex.operators.structure import passages as passages_stage
from bookindex.pipelines.index_pipeline import run_index
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import DOCUMENTS, NODES
from tests.conftest import PAPER

N_PASSAGES = 6


def _inputs(shared_data: Path, root: Path) -> list[str]:
    pdf = root / PAPER
    shutil.copy(shared_data / "mmlongbench" / "documents" / PAPER, pdf)
    corpus = shared_data / "multihop" / "hotpotqa" / "corpus.jsonl"
    lines = corpus.read_text(encoding="utf-8").splitlines()[:N_PASSAGES]
    jsonl = root / "passages.jsonl"
    jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [str(pdf), str(jsonl)]


def _builds(out: Path) -> dict[str, dict]:
    docs = lance_store.read_table(out, DOCUMENTS, ["uri", "build"]).to_pylist()
    return {d["uri"]: json.loads(d["build"]) for d in docs}


def _config(**index) -> BookindexConfig:
    return BookindexConfig(index={"enrich": False, **index})


def test_another_build_reindexes_the_documents_it_changes(
    ray_session, shared_data, tmp_path, monkeypatch
):
    inputs = _inputs(shared_data, tmp_path)
    out = tmp_path / "index"
    first = run_index(inputs, out, _config())
    assert (first.ok, first.rebuilt) == (1 + N_PASSAGES, 0), first.failures
    builds = _builds(out)
    pdf_uri = next(u for u in builds if u.endswith(PAPER))
    options, stages = builds[pdf_uri]["options"], builds[pdf_uri]["stages"]
    assert (options["use_outline"], options["enrich"]) == (True, False)
    assert {"parse", "structure", "layout_graph"} <= stages.keys() and "enrich" not in stages

    again = run_index(inputs, out, _config())
    assert (again.ok, again.skipped, again.rebuilt) == (0, 1 + N_PASSAGES, 0)

    # Outline off changes a PDF's tree, not a passage: the PDF alone is re-indexed.
    no_outline = run_index(inputs, out, _config(use_outline=False))
    assert (no_outline.ok, no_outline.rebuilt, no_outline.skipped) == (1, 1, N_PASSAGES)
    assert list(no_outline.stale) == [pdf_uri]
    assert "options.use_outline True → False" in no_outline.stale[pdf_uri]
    after = _builds(out)
    assert after[pdf_uri]["options"]["use_outline"] is False
    assert {u: b for u, b in after.items() if u != pdf_uri} == {
        u: b for u, b in builds.items() if u != pdf_uri
    }
    nodes = pl.from_arrow(lance_store.read_table(out, NODES, ["doc_id", "node_id"]))
    assert nodes["node_id"].n_unique() == nodes.height  # the old tree's rows are gone
    assert len(lance_store.read_table(out, DOCUMENTS, ["doc_id"])) == 1 + N_PASSAGES

    # A code upgrade of the passage stage: the passages are re-indexed, the PDF is not.
    monkeypatch.setattr(passages_stage, "BUILD_VERSION", passages_stage.BUILD_VERSION + 1)
    upgraded = run_index(inputs, out, _config(use_outline=False))
    assert (upgraded.ok, upgraded.rebuilt) == (N_PASSAGES, N_PASSAGES)

    # "warn": another build is reported and kept.
    kept = run_index(inputs, out, _config(stale_build="warn"))
    assert (kept.ok, kept.stale_kept, kept.rebuilt) == (0, 1, 0)
    assert _builds(out)[pdf_uri]["options"]["use_outline"] is False

    # An index from before builds were recorded: every document is re-indexed.
    lance.dataset(lance_store.table_path(out, DOCUMENTS)).drop_columns(["build"])
    old = run_index(inputs, out, _config(use_outline=False))
    assert (old.ok, old.rebuilt) == (1 + N_PASSAGES, 1 + N_PASSAGES)
    assert all(b["id"] for b in _builds(out).values())

    # jobs.evaluate's build (enrich on: vectors and entities) is not this index's: refused.
    questions = tmp_path / "questions.jsonl"
    first_id = json.loads(Path(inputs[1]).read_text().splitlines()[0])["id"]
    questions.write_text(json.dumps({"id": "q", "question": "who?", "gold_ids": [first_id]}))
    report = tmp_path / "eval"
    argv = ["--corpus", inputs[1], "--questions", str(questions), "--index", str(out)]
    code = evaluate.main([*argv, "--out", str(report), "--method", "bm25"])
    assert code == 2
    assert not (report / "metrics.json").exists()
    assert _builds(out)[pdf_uri]["options"]["enrich"] is False  # nothing was re-indexed

    # Told to, it evaluates the stale index as it is, and its summary says so.
    code = evaluate.main([*argv, "--out", str(report), "--method", "bm25", "--stale", "allow"])
    assert code == 0
    summary = (report / "summary.md").read_text()
    assert "**Stale index** (--stale allow): 7 document(s)" in summary
    assert "- bm25: each passage's title and text (words)" in summary
    assert summary.count("no build recorded") == 0
    # the PDF's build as it was made: outline off, no enrich (other options, e.g. OCR, between)
    assert re.search(r"options enrich=False, [^;]*use_outline=False;", summary)
    # report.html plots metrics.json as written: bm25's recall@2/5/10
    metrics = json.loads((report / "metrics.json").read_text())["bm25"]
    html = (report / "report.html").read_text()
    for k in (2, 5, 10):
        assert f'data-method="bm25" data-k="{k}" data-value="{metrics[f"recall@{k}"]:.6f}"' in html
