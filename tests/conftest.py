"""Shared fixtures: the shared data directory, one Ray session, the sample corpus."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("BOOKINDEX_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (set BOOKINDEX_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def hotpot(shared_data) -> dict[str, dict]:
    """The HotpotQA passages by id."""
    path = shared_data / "multihop" / "hotpotqa" / "corpus.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole run (ray.init costs seconds), object store capped."""
    import ray

    if not ray.is_initialized():
        ray.init(
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
    from operators.eval.sample_corpus import build_sample_corpus

    out = tmp_path_factory.mktemp("sample_corpus")
    build_sample_corpus(out)
    return out


PAPER = "2303.05039v2.pdf"  # MMLongBench: a 9-page paper with tables, figures and captions


@pytest.fixture(scope="session")
def paper_index(ray_session, shared_data, tmp_path_factory) -> Path:
    """An enriched index (vectors, entities, layout graph) of one real paper, shared by the
    query tests and the Serve /query test."""
    import shutil

    from pipelines.index_pipeline import run_index

    root = tmp_path_factory.mktemp("paper")
    shutil.copy(shared_data / "mmlongbench" / "documents" / PAPER, root / PAPER)
    out = root / "index"
    summary = run_index([str(root / PAPER)], out)
    assert summary.ok == 1, summary.failures
    return out


@pytest.fixture(scope="session")
def hotpot_index(ray_session, shared_data, tmp_path_factory):
    """``hotpot_index(name)``: a fresh index of the first 12 HotpotQA passages in a directory of
    its own (each caller may change or damage its copy)."""
    from pipelines.index_pipeline import run_index

    def build(name: str) -> Path:
        root = tmp_path_factory.mktemp(name)
        corpus = shared_data / "multihop" / "hotpotqa" / "corpus.jsonl"
        first = corpus.read_text(encoding="utf-8").splitlines()[:12]
        (root / "corpus.jsonl").write_text("\n".join(first) + "\n", encoding="utf-8")
        run_index([str(root / "corpus.jsonl")], root / "index")
        return root / "index"

    return build
