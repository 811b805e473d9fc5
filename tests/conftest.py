"""Shared fixtures: the shared data directory, one Ray session, the sample corpus and
its index.

Outside CI a test whose shared data is missing skips (``missing_shared_data``). Under CI
(``CI=true``) a run without the data is no test of the code: the session stops at once with
one message naming the folder and what is missing, and a test that still finds a file
missing fails instead of skipping."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("BOOKINDEX_SHARED_DATA") or REPO.parent / "shared" / "data")
IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
# The shared data's folders the tests read (../shared/data/README.md).
NEEDED = ("hips", "hips_extra", "mmlongbench", "multihop", "docugami", "syllabusqa", "pdf_fixtures")


def missing_shared_data(reason: str) -> NoReturn:
    """Skip the test for data missing from the shared data directory; fail it under CI."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: the shared data must be there)", pytrace=False)
    pytest.skip(reason)


def pytest_sessionstart(session: pytest.Session) -> None:
    missing = [name for name in NEEDED if not (SHARED_DATA / name).is_dir()]
    if IN_CI and missing:
        pytest.exit(
            f"CI=true and the shared data at {SHARED_DATA} lacks {', '.join(missing)}: "
            "the tests that read it would be skipped. Put ../shared/data beside the "
            "checkout or set BOOKINDEX_SHARED_DATA to it.",
            returncode=1,
        )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        missing_shared_data(f"shared data not found at {SHARED_DATA} (set BOOKINDEX_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def hotpot(shared_data) -> dict[str, dict]:
    """The HotpotQA passages by id."""
    path = shared_data / "multihop" / "hotpotqa" / "corpus.jsonl"
    if not path.is_file():
        missing_shared_data(f"{path} not found")
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole run (ray.init costs seconds), object store capped."""
    import ray

    if not ray.is_initialized():
        ray.init(
            address="local",  # a Ray of its own: never join another cluster on this machine
            num_cpus=2,
            object_store_memory=400 * 1024 * 1024,
            include_dashboard=False,
            log_to_driver=False,
        )
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def sample_corpus(tmp_path_factory) -> Path:
    from bookindex.operators.eval.sample_corpus import build_sample_corpus

    out = tmp_path_factory.mktemp("sample_corpus")
    build_sample_corpus(out)
    return out


@pytest.fixture(scope="session")
def sample_index(ray_session, sample_corpus, tmp_path_factory) -> tuple[Path, object]:
    """The sample corpus indexed once per session (default configuration) from a copy of its
    own (``corpus`` beside ``index``), and the run's summary. Read it, never write it: a test
    that changes an index takes a copy of ``index`` (its documents stay in ``corpus``)."""
    import shutil

    from bookindex.pipelines.index_pipeline import run_index

    root = tmp_path_factory.mktemp("sample_index")
    shutil.copytree(sample_corpus, root / "corpus")
    summary = run_index([str(root / "corpus")], root / "index")
    return root / "index", summary


PAPER = "2303.05039v2.pdf"  # MMLongBench: a 9-page paper with tables, figures and captions


@pytest.fixture(scope="session")
def paper_index(ray_session, shared_data, tmp_path_factory) -> Path:
    """An enriched index (vectors, entities, layout graph) of one real paper, shared by the
    query tests and the Serve /query test."""
    import shutil

    from bookindex.pipelines.index_pipeline import run_index

    root = tmp_path_factory.mktemp("paper")
    shutil.copy(shared_data / "mmlongbench" / "documents" / PAPER, root / PAPER)
    out = root / "index"
    summary = run_index([str(root / PAPER)], out)
    assert summary.ok == 1, summary.failures
    return out


HOTPOT_FIRST = 12  # passages of the shared HotpotQA index


@pytest.fixture(scope="session")
def hotpot_corpus(shared_data, tmp_path_factory) -> Path:
    """The first 12 HotpotQA passages as a corpus file of their own."""
    root = tmp_path_factory.mktemp("hotpot_first")
    corpus = shared_data / "multihop" / "hotpotqa" / "corpus.jsonl"
    first = corpus.read_text(encoding="utf-8").splitlines()[:HOTPOT_FIRST]
    (root / "corpus.jsonl").write_text("\n".join(first) + "\n", encoding="utf-8")
    return root / "corpus.jsonl"


@pytest.fixture(scope="session")
def hotpot_built(ray_session, hotpot_corpus) -> Path:
    """``hotpot_corpus`` indexed once per session (default configuration: vectors, entities).
    Read it, never write it: a test that changes its index takes a copy (``hotpot_index``)."""
    from bookindex.pipelines.index_pipeline import run_index

    out = hotpot_corpus.parent / "index"
    summary = run_index([str(hotpot_corpus)], out)
    assert (summary.ok, summary.failed) == (HOTPOT_FIRST, 0), summary.failures
    assert summary.entities > 0
    return out


@pytest.fixture(scope="session")
def hotpot_index(hotpot_built, tmp_path_factory):
    """``hotpot_index(name)``: a copy of ``hotpot_built`` in a directory of its own (each
    caller may change or damage its copy). The index job runs once for all callers; a copy
    of its directory is the same tables (its documents point at ``hotpot_corpus``)."""
    import shutil

    def copy(name: str) -> Path:
        root = tmp_path_factory.mktemp(name)
        shutil.copytree(hotpot_built, root / "index")
        return root / "index"

    return copy


@pytest.fixture(scope="session")
def hotpot_questions_index(ray_session, shared_data, tmp_path_factory) -> tuple[Path, list[dict]]:
    """The gold passages of the first three HotpotQA questions, then the first 24 passages
    (25 in all, p0-p24), indexed once per session (default configuration: vectors, entities),
    and those questions. Shared by the Serve test and the query-side test; read it, never
    write it."""
    from bookindex.pipelines.index_pipeline import run_index

    root = tmp_path_factory.mktemp("hotpot_questions")
    folder = shared_data / "multihop" / "hotpotqa"
    questions = [json.loads(line) for line in (folder / "questions.jsonl").open()][:3]
    gold = {str(g) for q in questions for g in q["gold_ids"]}
    lines = (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    picked = [ln for ln in lines if str(json.loads(ln)["id"]) in gold] + lines[:24]
    (root / "corpus.jsonl").write_text("\n".join(dict.fromkeys(picked)) + "\n")
    index = root / "index"
    summary = run_index([str(root / "corpus.jsonl")], index)
    assert (summary.ok, summary.failed) == (len(dict.fromkeys(picked)), 0), summary.failures
    return index, questions
