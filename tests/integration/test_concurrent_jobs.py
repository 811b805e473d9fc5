"""Two index jobs on one ``--out`` at once (issue 19 §2): the second waits on the index lock
(pipelines/store/index_lock.py) while the first writes; the first is killed mid-write (its
nodes on disk, its documents not committed); the second breaks the dead job's lock, recovers
and indexes; every table then equals the tables of one uninterrupted run."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bookindex.pipelines.index_pipeline import run_index
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.index_lock import LOCK_FILE
from bookindex.pipelines.store.schemas import DOCUMENTS, NODES
from tests.integration.test_fault_tolerance import ENRICHED, REPO, _kill_tree, _snapshot
from tests.integration.test_fault_tolerance import hotpot_split as hotpot_split  # a fixture


def _job(inputs: list[str], out, *extra: str, log=subprocess.PIPE) -> subprocess.Popen:
    env = dict(os.environ, RAY_ADDRESS="local", PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "bookindex.jobs.index_corpus", *inputs, "--out", str(out)]
    return subprocess.Popen(
        [*cmd, "--workers", "1", "--set", "index.enrich_workers=1", *extra],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=log,
        stderr=log,
    )


def _wait_for(condition, job: subprocess.Popen, what: str, seconds: float = 400) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert job.poll() is None, f"{what}: the job exited"
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(0.01)


@pytest.mark.slow
def test_two_jobs_one_out_one_killed_mid_write_equal_an_uninterrupted_run(
    ray_session, hotpot_split, sample_corpus, tmp_path
):
    a, b, _ = hotpot_split
    inputs = [str(a), str(b), str(sample_corpus / "sample_01.pdf")]
    reference, shared = tmp_path / "reference", tmp_path / "shared"
    summary = run_index(inputs, reference, ENRICHED)  # uninterrupted
    assert summary.ok == 25 and summary.entities > 0

    log = open(tmp_path / "first.log", "wb")  # noqa: SIM115  (a pipe could fill and block it)
    first = _job(inputs, shared, log=log)
    _wait_for(lambda: (shared / LOCK_FILE).exists(), first, "first job takes the lock")
    second = _job(inputs, shared, "--set", "index.lock_wait_s=900")
    # the first writes its nodes; its documents (the commit) come after entity resolution
    _wait_for(lambda: lance_store.exists(shared, NODES), first, "first job writes nodes")
    _kill_tree(first)
    log.close()
    assert not lance_store.exists(shared, DOCUMENTS), "the kill came after the commit"
    if second.poll() is not None:  # it should wait: nothing of it runs while the lock is held
        raise AssertionError(second.communicate()[1].decode()[-3000:])

    out, err = second.communicate(timeout=900)
    assert second.returncode == 0, err.decode()[-3000:]
    assert f"its process {first.pid} on this host is gone" in err.decode()
    assert "documents ok=25" in out.decode()
    assert not (shared / LOCK_FILE).exists()
    got, want = _snapshot(shared), _snapshot(reference)
    assert sorted(got) == sorted(want)
    for table in want:
        assert got[table] == want[table], table
