"""Shared fixtures: the shared data directory, one Ray session, the sample corpus."""

from __future__ import annotations

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
    from operators.sample_corpus import build_sample_corpus

    out = tmp_path_factory.mktemp("sample_corpus")
    build_sample_corpus(out)
    return out
