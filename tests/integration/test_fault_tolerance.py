"""Fault tolerance (issue 6 §4): a Ray worker killed mid-job, a job killed outright and started
again, Lance writes seen whole or not at all (``documents`` is the commit marker,
pipelines/store/recovery.py), and the Serve app answering during an index update and seeing the new
documents after ``POST /admin/reload`` without a restart of the ingress."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import lance
import psutil
import pyarrow as pa
import pytest

from bookindex.operators.config import BookindexConfig, IndexConfig
from bookindex.pipelines.index_pipeline import run_index
from bookindex.pipelines.ports import free_port
from bookindex.pipelines.store import lance_store, recovery
from bookindex.pipelines.store.schemas import (
    DOCUMENTS,
    ENTITIES,
    FAILURES,
    MENTIONS,
    NODES,
    schema_for,
)

REPO = Path(__file__).resolve().parents[2]
# Columns that differ between two runs over the same input by design (clocks).
VOLATILE = {"indexed_at", "failed_at", "decided_at", "stage_timings"}
# enrich_workers=1: one process loads the models; the outcome does not depend on it.
ENRICHED = BookindexConfig(index=IndexConfig(enrich_workers=1, parse_workers=1))
# Ray worker names while they parse: whole books, or page ranges of long ones.
PARSE_WORKERS = ("ray::MapBatches(index_documents)", "ray::Map(parse_range)")


def _snapshot(index_dir: Path) -> dict[str, list[str]]:
    """Every Lance table as sorted rows (JSON), without the volatile columns."""
    tables = {}
    for path in sorted(index_dir.glob("*.lance")):
        rows = lance.dataset(str(path)).to_table().to_pylist()
        tables[path.stem] = sorted(
            json.dumps({k: v for k, v in r.items() if k not in VOLATILE}, sort_keys=True)
            for r in rows
        )
    return tables


def _doc_ids(index_dir: Path, table: str) -> set[str]:
    return set(lance_store.read_table(index_dir, table, ["doc_id"])["doc_id"].to_pylist())


def _version(index_dir: Path, table: str) -> int:
    if not lance_store.exists(index_dir, table):
        return 0
    return lance.dataset(lance_store.table_path(index_dir, table)).version


@pytest.fixture(scope="module")
def hotpot_split(shared_data, hotpot_corpus, tmp_path_factory) -> tuple[Path, Path, list[dict]]:
    """Two passage corpora: A (indexed first: the session's ``hotpot_corpus``, passages 0-11)
    and B (the update, passages 12-23)."""
    root = tmp_path_factory.mktemp("passages")
    lines = (shared_data / "multihop" / "hotpotqa" / "corpus.jsonl").read_text().splitlines()
    assert hotpot_corpus.read_text().splitlines() == lines[:12]
    b = root / "b.jsonl"
    b.write_text("\n".join(lines[12:24]) + "\n")
    return hotpot_corpus, b, [json.loads(line) for line in lines[12:24]]


@pytest.fixture(scope="module")
def base_index(hotpot_built) -> Path:
    """Corpus A indexed with entities (a committed state the later runs start from): the
    session's ``hotpot_built``, which the tests copy before they change anything. (Built
    with the default workers; the outcome does not depend on them, see ENRICHED.)"""
    return hotpot_built


# ---- (a) a worker killed mid-job -------------------------------------------------------------


@pytest.mark.slow
def test_a_worker_killed_mid_job_every_document_indexed_once(ray_session, sample_corpus, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for pdf in sorted(sample_corpus.glob("*.pdf")):
        shutil.copy(pdf, corpus / pdf.name)
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.7\n this is not a PDF body\n")
    out = tmp_path / "index"
    result: dict = {}

    def job() -> None:
        try:
            result["summary"] = run_index(
                [str(corpus)], out, BookindexConfig(index=IndexConfig(enrich=False))
            )
        except BaseException as exc:  # reported by the assertion below
            result["error"] = exc

    thread = threading.Thread(target=job)
    thread.start()
    killed = None
    deadline = time.monotonic() + 300
    while thread.is_alive() and killed is None and time.monotonic() < deadline:
        for proc in psutil.Process().children(recursive=True):
            try:
                parsing = proc.name().startswith(PARSE_WORKERS)
            except psutil.Error:
                continue
            if parsing:  # a Ray worker in the middle of probing/parsing a document
                proc.kill()
                killed = proc.pid
                break
        time.sleep(0.01)
    thread.join(timeout=300)
    assert killed is not None, "no parse worker was seen running"
    assert not psutil.pid_exists(killed) or psutil.Process(killed).status() == "zombie"
    assert "error" not in result, result.get("error")
    summary = result["summary"]
    assert (summary.ok, summary.failed) == (4, 1)

    docs = lance_store.read_table(out, DOCUMENTS).to_pylist()
    assert len(docs) == len({d["doc_id"] for d in docs}) == 5
    manifest = json.loads((sample_corpus / "manifest.json").read_text())["documents"]
    ok = {Path(d["uri"]).name: d for d in docs if d["status"] == "ok"}
    assert sorted(ok) == sorted(d["file"] for d in manifest)
    nodes = lance_store.read_table(out, NODES, ["doc_id", "node_id"]).to_pylist()
    assert len(nodes) == len({n["node_id"] for n in nodes}) == summary.nodes  # no duplicates
    per_doc: dict[str, int] = {}
    for n in nodes:
        per_doc[n["doc_id"]] = per_doc.get(n["doc_id"], 0) + 1
    assert per_doc == {d["doc_id"]: d["n_nodes"] for d in ok.values()}
    assert summary.pages == sum(d["n_pages"] for d in ok.values())


# ---- (b) a job killed outright resumes to the tables of an uninterrupted run -----------------


@pytest.mark.slow
def test_b_job_killed_outright_resumes_to_the_uninterrupted_tables(
    ray_session, hotpot_split, base_index, tmp_path
):
    a, b, _ = hotpot_split
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    shutil.copytree(base_index, reference)
    shutil.copytree(base_index, killed)
    run_index([str(a), str(b)], reference, ENRICHED)  # uninterrupted

    # The same update as a job of its own (its own local Ray), killed with every process it
    # started as soon as it has written the new documents' first entity rows: nodes, mentions
    # and maybe relations, decisions and the rewritten entities exist, documents not yet.
    committed_before = _doc_ids(killed, DOCUMENTS)
    mentions_before = _version(killed, MENTIONS)
    entities_before = _version(killed, ENTITIES)
    env = dict(os.environ, RAY_ADDRESS="local", PYTHONPATH=str(REPO))
    cmd = [
        sys.executable,
        "-m",
        "bookindex.jobs.index_corpus",
        str(a),
        str(b),
        "--out",
        str(killed),
    ]
    job = subprocess.Popen(
        [*cmd, "--workers", "1"],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 400
    while _version(killed, MENTIONS) == mentions_before:
        assert job.poll() is None, job.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, "the job never wrote its mentions"
        time.sleep(0.01)
    _kill_tree(job)
    entities_rewritten = _version(killed, ENTITIES) != entities_before

    # What a reader sees after the kill: only committed documents.
    assert _doc_ids(killed, DOCUMENTS) == committed_before, "the kill came after the commit"
    orphans = _doc_ids(killed, NODES) - committed_before
    assert len(orphans) == 12  # B's nodes are on disk ...
    visible = recovery.read_committed(killed, NODES, ["node_id", "doc_id"])
    assert set(visible["doc_id"].to_pylist()) == committed_before  # ... and invisible
    from bookindex.pipelines.store.reader import open_read_model

    model = open_read_model(killed)  # the query side's reader: the same commit rule
    assert len(model.documents) == 12 and {d.doc_id for d in model.documents} == committed_before
    assert {model.documents[int(d)].doc_id for d in set(model.doc.tolist())} <= committed_before

    summary = run_index([str(a), str(b)], killed, ENRICHED)  # started again
    assert (summary.ok, summary.skipped) == (12, 12)
    recovered = summary.stats["stages"]["recover"]
    assert recovered["orphans"][NODES] > 0 and recovered["orphans"][MENTIONS] > 0
    assert (ENTITIES in recovered["restored"]) == entities_rewritten
    got, want = _snapshot(killed), _snapshot(reference)
    assert sorted(got) == sorted(want)
    for table in want:
        assert got[table] == want[table], table
    print(f"resume: kill after entities rewrite={entities_rewritten}; recovered {recovered}")


def _kill_tree(job: subprocess.Popen) -> None:
    """SIGKILL the job and every process it started (its Ray), by pid."""
    procs = [psutil.Process(job.pid)]
    with contextlib.suppress(psutil.Error):
        procs += procs[0].children(recursive=True)
    for proc in procs:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            continue
    job.wait(timeout=60)
    psutil.wait_procs(procs, timeout=30)


# ---- (c) readers see whole documents; recovery after an interrupted run --------------------


def _write(index_dir: Path, table: str, rows: list[dict], mode: str = "append") -> None:
    data = pa.Table.from_pylist(rows, schema=schema_for(table, 384))
    if mode == "append" and not lance_store.exists(index_dir, table):
        mode = "create"
    lance.write_dataset(data, lance_store.table_path(index_dir, table), mode=mode)


def _entity(entity_id: str, name: str) -> dict:
    return {"entity_id": entity_id, "name": name, "type": "PERSON", "description": "",
            "aliases": [], "vector": [0.0] * 384, "n_mentions": 1, "n_documents": 1,
            "doc_id": ""}  # fmt: skip


def test_c_uncommitted_rows_are_invisible_and_removed_by_recovery(tmp_path):
    out = tmp_path / "index"
    # committed: d1, with its entity; then an interrupted run wrote d2's rows and rewrote
    # the entities, but never appended d2 to documents.
    _write(out, NODES, [{"doc_id": "d1", "node_id": "d1:0", "kind": "root"}])
    _write(out, MENTIONS, [{"entity_id": "e1", "doc_id": "d1", "node_id": "d1:0", "name": "A"}])
    _write(out, ENTITIES, [_entity("e1", "A")])
    _write(out, FAILURES, [{"uri": "gone.pdf", "doc_id": "", "stage": "read", "error": "x"}])
    _write(out, DOCUMENTS, [{"doc_id": "d1", "uri": "d1.pdf", "status": "ok"}])
    recovery.mark_committed(out)
    committed = _snapshot(out)
    _write(out, NODES, [{"doc_id": "d2", "node_id": f"d2:{i}", "kind": "text"} for i in range(3)])
    _write(out, MENTIONS, [{"entity_id": "e2", "doc_id": "d2", "node_id": "d2:1", "name": "B"}])
    _write(out, FAILURES, [{"uri": "d2.pdf", "doc_id": "d2", "stage": "parse", "error": "y"}])
    _write(out, ENTITIES, [_entity("e1", "A"), _entity("e2", "B")], mode="overwrite")

    assert recovery.read_committed(out, NODES, ["node_id"])["node_id"].to_pylist() == ["d1:0"]
    assert set(recovery.read_committed(out, FAILURES)["uri"].to_pylist()) == {"gone.pdf"}
    from bookindex.pipelines.store.reader import read_index

    seen = read_index(out)  # the query side reads every table through the same rule
    assert seen.nodes["node_id"].to_pylist() == ["d1:0"]
    assert seen.mentions["entity_id"].to_pylist() == ["e1"]
    found = recovery.recover(out)
    assert found.orphans == {NODES: 3, MENTIONS: 1, FAILURES: 1}
    assert set(found.restored) == {ENTITIES}
    assert _snapshot(out) == committed  # the discovery failure (no doc_id) stays
    again = recovery.recover(out)
    assert not again.interrupted and not again.restored


def test_c_uncommitted_data_files_are_removed_by_recovery(tmp_path):
    """A job killed after its tasks wrote a fragment and before the driver committed it
    (store/fragments.py) leaves a data file no version references: recovery deletes it and
    nothing else; every version still reads as before."""
    from lance.fragment import LanceFragment

    out = tmp_path / "index"
    _write(out, NODES, [{"doc_id": "d1", "node_id": "d1:0", "kind": "root"}])
    _write(out, DOCUMENTS, [{"doc_id": "d1", "uri": "d1.pdf", "status": "ok"}])
    _write(out, NODES, [{"doc_id": "d1", "node_id": "d1:1", "kind": "text"}])
    path = Path(lance_store.table_path(out, NODES))
    committed = sorted(f.name for f in (path / "data").iterdir())
    rows = pa.Table.from_pylist(
        [{"doc_id": "d2", "node_id": "d2:0", "kind": "root"}], schema=schema_for(NODES, 384)
    )
    LanceFragment.create(str(path), rows)  # written, never committed
    assert len(list((path / "data").iterdir())) == len(committed) + 1
    before = {v["version"]: lance.dataset(str(path), version=v["version"]).to_table()
              for v in lance.dataset(str(path)).versions()}  # fmt: skip
    found = recovery.recover(out)
    assert found.removed_files == {NODES: 1} and not found.interrupted
    assert sorted(f.name for f in (path / "data").iterdir()) == committed
    for version, table in before.items():
        assert lance.dataset(str(path), version=version).to_table().equals(table)
    assert recovery.recover(out).removed_files == {}


def test_c_first_run_interrupted_leaves_nothing_visible(tmp_path):
    out = tmp_path / "index"
    _write(out, NODES, [{"doc_id": "d1", "node_id": "d1:0", "kind": "root"}])
    _write(out, ENTITIES, [_entity("e1", "A")])
    assert recovery.read_committed(out, NODES).num_rows == 0
    found = recovery.recover(out)
    assert found.orphans == {NODES: 1} and found.restored == {ENTITIES: 0}
    assert lance_store.read_table(out, ENTITIES).num_rows == 0


# ---- (d) Serve answers during an index update and reloads without a restart ----------------


@pytest.mark.slow
def test_d_serve_answers_during_an_update_and_sees_new_documents_after_reload(
    ray_session, hotpot_split, base_index, tmp_path
):
    import httpx
    from ray import serve

    from bookindex.pipelines.serve_app import RetrievalEngine

    a, b, new_passages = hotpot_split
    index = tmp_path / "index"
    shutil.copytree(base_index, index)
    # Replicas reserve no CPU here, so the update's Ray Data stages get the session's 2 CPUs.
    no_cpu = {"ray_actor_options": {"num_cpus": 0}}
    # two reloads in a row below; 127.0.0.1 clients only, no token
    serve_section = {"serve": {"reload_min_interval_s": 0, "auth": "off"}}
    engine = RetrievalEngine.options(**no_cpu).bind(str(index), "cpu", 0, serve_section)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        serve.run(engine, name="reload", route_prefix="/")
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
        engine_pid = _replica_pid("RetrievalEngine")
        new = new_passages[3]
        question = {"query": new["title"] + " " + new["text"][:120], "k": 3, "method": "bm25"}
        before = client.post("/retrieve", json=question).json()["results"][0]["documents"]
        assert new["id"] not in {d["id"] for d in before}

        codes: list[int] = []
        stop = threading.Event()

        def ask() -> None:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as c:
                while not stop.is_set():
                    codes.append(
                        c.post("/retrieve", json=dict(question, method="dense")).status_code
                    )

        asker = threading.Thread(target=ask)
        asker.start()
        try:
            summary = run_index([str(a), str(b)], index, ENRICHED)  # the update
            assert summary.ok == 12
        finally:
            stop.set()
            asker.join(timeout=120)
        assert len(codes) >= 3 and set(codes) == {200}, codes  # answered all along
        health = client.get("/health").json()
        assert health["documents"] == 12  # the open index, until reload
        assert health["walk_graph"]["from"] in ("built", "read")  # kept in the index directory
        assert len(list(index.glob("walk_graph-*.npz"))) == 1
        assert health["bm25"]["documents"] in ("built", "read")  # and so are the BM25 indexes
        assert len(list(index.glob("bm25-documents-*"))) == 1

        reloaded = client.post("/admin/reload").json()
        assert reloaded["reloaded"] and reloaded["documents"] == 24
        assert reloaded["walk_graph"]["from"] == "grown"  # only the 12 new documents' rows
        assert reloaded["bm25"]["documents"] == "built"  # new texts: indexed again, once
        assert len(list(index.glob("bm25-documents-*"))) == 1
        assert client.post("/admin/reload").json()["reloaded"] is False  # nothing new
        health = client.get("/health").json()
        assert health["documents"] == 24 and health["reloads"] == 1
        after = client.post("/retrieve", json=question).json()["results"][0]["documents"]
        assert after[0]["id"] == new["id"]
        assert _replica_pid("RetrievalEngine") == engine_pid  # the same replica throughout
    finally:
        serve.shutdown()


def _replica_pid(deployment: str) -> int:
    pids = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if f"ServeReplica:reload:{deployment}" in " ".join(p.info.get("cmdline") or [])
    ]
    assert len(pids) == 1, pids
    return pids[0]
