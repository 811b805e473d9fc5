"""benchmarks/gpu_enrich_check.py, the GPU check of the enrich worker, runs here on CPU on a
tiny batch, so that it cannot rot before a GPU machine runs it: it completes, prints the CPU's
nodes/s and the GPU side as skipped, and imports neither Ray nor Lance (the GPU machine has
neither)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.conftest import SHARED_DATA, missing_shared_data

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "gpu_enrich_check.py"
MUSIQUE = SHARED_DATA / "multihop" / "musique" / "corpus.jsonl"


def test_the_gpu_enrich_check_runs_on_cpu_without_ray_or_lance(tmp_path, capsys) -> None:
    from benchmarks.gpu_enrich_check import main

    if not MUSIQUE.is_file():
        missing_shared_data(f"{MUSIQUE} not found")

    # the rows are made here (shared data, PyMuPDF) and read there, as on a GPU machine
    corpus, rows = tmp_path / "corpus.jsonl", tmp_path / "rows.pkl"
    with open(MUSIQUE, encoding="utf-8") as f:
        corpus.write_text("".join(next(f) for _ in range(6)), encoding="utf-8")
    assert main(["--corpus", str(corpus), "--save-rows", str(rows)]) == 0
    assert f"wrote 6 {corpus} documents' rows to {rows}" in capsys.readouterr().out
    probe = (
        "import runpy, sys, json; sys.argv = [sys.argv[1], *sys.argv[2:]]\n"
        "try:\n"
        "    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "else:\n"
        "    code = 0\n"
        "watched = ('ray', 'lance', 'lancedb', 'pymupdf')\n"
        "print('IMPORTED', json.dumps([m for m in watched if m in sys.modules]), code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(SCRIPT), "--rows", str(rows), "--per-batch", "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"^inputs: 6 documents \(.*rows\.pkl\), \d+ nodes, 4 a batch", out, re.M), out
    found = re.search(
        r"^cpu: (\d+) nodes in [\d.]+ s: ([\d.]+) nodes/s .*runtime onnx on cpu", out, re.M
    )
    assert found and int(found[1]) > 0 and float(found[2]) > 0, out
    stages = re.search(
        r"^cpu stages: embed ([\d.]+) s, entities ([\d.]+) s, resolve_document ([\d.]+) s$",
        out,
        re.M,
    )
    assert stages and float(stages[1]) > 0 and float(stages[2]) > 0, out
    assert re.search(r"^gpu: skipped \(no CUDA: ", out, re.M), out
    assert "agreement: not measured (one device ran)" in out
    imported, code = re.search(r"^IMPORTED (\[.*\]) (\S+)$", out, re.M).groups()
    assert json.loads(imported) == [] and code == "0", out


def test_the_agreement_measures(capsys) -> None:
    from benchmarks.gpu_enrich_check import agreement, cosines, graph_differences

    a = np.array([[1.0, 0.0], [0.6, 0.8]], np.float32)
    assert np.allclose(cosines(a, a), 1.0)
    assert np.allclose(cosines(a, np.array([[0.0, 1.0], [0.6, 0.8]])), [0.0, 1.0])
    rows = [{"doc_id": "d", "entities": "[]", "relations": "[]"}]
    other = [{"doc_id": "d", "entities": '[{"name": "Ada"}]', "relations": "[]"}]
    assert graph_differences(rows, rows) == [] and graph_differences(rows, other) == ["d"]

    def row(vectors: list[list[float]], entities: str = "[]") -> dict:
        raw = np.asarray(vectors, np.float32).tobytes()
        return dict(
            rows[0], vector_width=2, node_vectors=raw, sentence_vectors=b"", entities=entities
        )

    same = [row([[1.0, 0.0], [0.6, 0.8]])]
    assert agreement(same, same, 0.9999) == 0
    printed = capsys.readouterr().out
    assert "node vectors gpu vs cpu: min cosine 1.000000" in printed
    assert "entities and relations: agree (0 of 1 documents differ)" in printed
    turned = [row([[1.0, 0.02], [0.6, 0.8]], '[{"name": "Ada"}]')]
    assert agreement(same, turned, 0.9999) == 1
    printed = capsys.readouterr().out
    assert (
        "FAIL: min node-vector cosine 0.99980" in printed
        and "1 of 1 documents differ: d" in printed
    )
