"""The enrich worker's model process imports spaCy without torch (thinc would import it, a
CPU-second per process, and the packaged pipeline never calls it): the same entities and
relations on real MuSiQue passages as with torch loaded, and torch still importable after."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bookindex.operators.config import ModelConfig
from bookindex.operators.models.offline import spacy_needs_torch
from tests.conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[3]
CORPUS = SHARED_DATA / "multihop" / "musique" / "corpus.jsonl"

_SCRIPT = """
import dataclasses, json, sys
if sys.argv[1] == "torch-first":
    import torch  # noqa: F401
from bookindex.operators.config import ModelConfig
from bookindex.operators.models.offline import OfflineBackend
from bookindex.operators.structure.passages import read_passages
texts = [p.text for p in read_passages(sys.argv[2])[:120]]
backend = OfflineBackend(ModelConfig())
found = backend.extract_entities_batch(texts)
had_torch = "torch" in sys.modules
import torch  # importable afterwards (the ONNX export, the bf16 and torch runtimes use it)
print(json.dumps({"torch": had_torch, "dim": int(torch.ones(3).shape[0]),
                  "found": [[[dataclasses.astuple(e) for e in ents], [dataclasses.astuple(r) for r in rels]]
                            for ents, rels in found]}))
"""


def _run(mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode, str(CORPUS)],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_packaged_pipeline_needs_no_torch() -> None:
    assert not spacy_needs_torch(ModelConfig().spacy_model)
    assert spacy_needs_torch("no_such_spacy_package")  # unknown: assume it does


def test_entities_without_torch_are_those_with_torch() -> None:
    without, with_torch = _run("spacy-first"), _run("torch-first")
    assert without["torch"] is False and with_torch["torch"] is True
    assert without["dim"] == 3
    found = without["found"]
    assert sum(len(ents) for ents, _ in found) > 100 and any(rels for _, rels in found)
    assert found == with_torch["found"]
