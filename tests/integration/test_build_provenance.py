"""Build provenance end to end (pipelines/provenance.py): a run with another build re-indexes
exactly the documents that build makes otherwise (or, with ``stale_build="warn"``, keeps them
and says so); an index from before builds were recorded is re-indexed whole; ``jobs.evaluate``
refuses a stale index. Structure only (no enrich) to keep it fast: the build options used are
real ones (outline use, enrich), and a renewed stage fingerprint stands for a code upgrade."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import lance
import polars as pl

from bookindex.jobs import evaluate
from bookindex.operators.config import BookindexConfig
from bookindex.pipelines import stage_fingerprints
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
    monkeypatch.setitem(stage_fingerprints.recorded(), "passages", "0" * 16)
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


CHAPTER = "6-traditional-medicines-law-and-the-dis-ordering-of-temporalities.pdf"


def _scratch_checkout(root: Path) -> Path:
    """A copy of this checkout's code (the package links kept) to break things in."""
    repo = Path(__file__).resolve().parents[2]
    skip = shutil.ignore_patterns(
        ".venv", ".git", "data", "build", "dist", "*.egg-info", "__pycache__"
    )
    return Path(shutil.copytree(repo, root / "scratch", symlinks=True, ignore=skip))


def test_a_broken_section_model_is_recorded_and_the_mixed_index_refused(
    ray_session, shared_data, tmp_path, capsys
):
    """The paper indexed with the committed model; then, by a scratch copy of the code whose
    model file is corrupt, the chapter: its build says the rules decided, and why, and a
    failure row says so; ``show`` reports the mixed index and ``eval`` refuses it."""
    import os
    import subprocess
    import sys

    from bookindex.jobs import show_index

    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(shared_data / "mmlongbench" / "documents" / PAPER, docs / PAPER)
    shutil.copy(shared_data / "hips" / "PDFs" / CHAPTER, docs / CHAPTER)
    out = tmp_path / "index"
    first = run_index([str(docs / PAPER)], out, _config())
    assert first.ok == 1, first.failures

    scratch = _scratch_checkout(tmp_path)
    (scratch / "operators" / "structure" / "section_model.json").write_text("{not json")
    env = dict(os.environ, RAY_ADDRESS="local", PYTHONPATH=str(scratch))
    job = [sys.executable, "-m", "bookindex.jobs.index_corpus", str(docs), "--out", str(out)]
    flags = ["--no-enrich", "--keep-stale", "--workers", "1"]
    done = subprocess.run(
        [*job, *flags], cwd=scratch, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]

    ran = {Path(u).name: b.get("runtime", {}) for u, b in _builds(out).items()}
    assert ran[PAPER]["section_filter"] == "learned"
    fell_back = ran[CHAPTER]["section_filter"]
    assert fell_back.startswith("rules (fallback: cannot read section model ")
    failures = lance_store.read_table(out, "failures").to_pylist()
    assert [(Path(f["uri"]).name, f["stage"]) for f in failures] == [(CHAPTER, "sections")]
    assert fell_back in failures[0]["error"]

    assert show_index.main([str(out), "--set", "index.enrich=false"]) == 0
    shown = capsys.readouterr().out
    assert "Mixed index" in shown and f"1 document(s) {fell_back}" in shown

    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        json.dumps({"id": "q", "question": "what?", "answers": ["x"], "doc": PAPER})
    )
    argv = ["--docs", str(docs), "--questions", str(questions), "--index", str(out)]
    argv += ["--out", str(tmp_path / "eval"), "--method", "dense", "--stale", "allow"]
    assert evaluate.main(argv) == 2
    assert "refusing to evaluate a mixed index" in capsys.readouterr().err
    assert evaluate.check_mixed(out, allow=True).startswith("**Mixed index** (--allow-mixed)")
