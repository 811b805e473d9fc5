"""The wheel: one top-level package, ``bookindex``, with the design's folders under it as real
files (operators, pipelines, jobs), its data files, the ``bookindex`` command, and nothing of
the repository's tests or benchmarks; installed apart from the checkout, it imports and runs
from there."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    (found,) = out.glob("bookindex-*.whl")
    return found


def test_the_wheel_holds_one_package_and_its_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"bookindex"}
    for needed in (
        "bookindex/cli.py",
        "bookindex/api.py",
        "bookindex/operators/config.py",
        "bookindex/pipelines/index_pipeline.py",
        "bookindex/jobs/index_corpus.py",
        "bookindex/operators/structure/section_model.json",
        "bookindex/operators/models/minilm_calibration.txt",
        "bookindex/pipelines/viewer/routes.py",  # the viewer and the assets its page loads
        "bookindex/pipelines/viewer/static/index.html",
        "bookindex/pipelines/viewer/static/viewer.js",
        "bookindex/pipelines/viewer/static/viewer.css",
        "bookindex/operators/view/pages.py",
        "bookindex/pipelines/stage_fingerprints.json",
    ):
        assert needed in names, needed
    assert not any(n.startswith(("bookindex/tests", "bookindex/benchmarks")) for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "bookindex = bookindex.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_wheel_runs_outside_the_checkout(wheel, tmp_path):
    """Installed into a folder of its own (the dependencies are this environment's), run from
    a directory that is not the checkout: the package, its data and the command are the
    wheel's own files."""
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
        + [str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTHONPATH=str(target))
    code = (
        "import bookindex, bookindex.operators.config as config\n"
        "from bookindex.operators.structure.learned_filter import load_model\n"
        "print(bookindex.__file__)\n"
        "print(config.__file__)\n"
        "print(load_model() is not None)\n"
        "from importlib import resources\n"
        "static = resources.files('bookindex.pipelines.viewer') / 'static'\n"
        "print(all(b'/viewer/' in (static / n).read_bytes() for n in ('index.html', 'viewer.js')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    package, module, model, viewer = done.stdout.split()
    assert Path(package).is_relative_to(target) and Path(module).is_relative_to(target)
    assert model == "True" and viewer == "True"
    version = subprocess.run(
        [sys.executable, "-m", "bookindex", "--version"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert version.returncode == 0 and version.stdout.startswith("bookindex ")
