"""benchmarks.job_throughput: the whole job's table and its stage breakdown, read from the printed
output. In `make test`: the tables of the session's sample-index job (its real stats, no job of
its own). Marked slow (`make test-slow`, about 90 s): the benchmark itself, as a user runs it, on
its small mix (one HiPS book, one MMLongBench paper, 50 MuSiQue passages) in a subprocess with
its own Ray."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = 18 + 9  # 6-traditional-medicines and 2303.05039v2
PASSAGES = 50


def _value(out: str, label: str) -> float:
    found = re.search(rf"^{re.escape(label)}\s+\|\s+([-\d.]+)\s*$", out, re.MULTILINE)
    assert found, f"no row {label!r} in:\n{out}"
    return float(found.group(1))


def _stages(out: str) -> dict[str, float | None]:
    rows = re.findall(r"^((?:cpu|wall) {1,2}\S+)\s+\|\s+(\S+)\s+\|", out, re.MULTILINE)
    return {name: None if value == "-" else float(value) for name, value in rows}


def _tables_of(capsys, seconds: float, stats: dict) -> str:
    from benchmarks.job_throughput import Totals, print_tables

    totals = Totals()
    totals.add(
        {"seconds": seconds, "cpu": 1.0, "summary": stats["summary"], "stages": stats["stages"]}
    )
    print_tables({"this tree": totals})
    return capsys.readouterr().out


def _rounding(printed_values: int) -> float:
    """How far a sum of ``printed_values`` figures, each printed to two decimals, can stray from
    the same sum of the unrounded figures: half a hundredth each (a sum of three rows against a
    printed total can be 0.02 apart: 23.49 against 23.5 is no error)."""
    return 0.005 * printed_values + 1e-9


def test_the_tables_of_a_real_job_add_up(sample_index, capsys):
    """The session's sample-corpus job (4 PDFs, 73 pages, enrich on): its counts and the stage
    rows the breakdown reads from its stats."""
    _, summary = sample_index
    out = _tables_of(capsys, summary.seconds, summary.stats)
    assert _value(out, "pages") == 73 and _value(out, "passages") == 0
    assert _value(out, "nodes") == summary.nodes and _value(out, "failed documents") == 0
    stages = _stages(out)
    for name in ("probe", "parse", "assemble", "embed", "entities", "resolve_document"):
        assert stages[f"cpu {name}"] is not None and stages[f"cpu {name}"] > 0, name
    assert stages["cpu ocr"] is None  # the sample books all have a text layer
    top = [v for k, v in stages.items() if k.startswith("wall ") and not k.startswith("wall  ")]
    assert sum(v for v in top if v is not None) == pytest.approx(
        summary.seconds, abs=_rounding(len(top))
    )
    inner = sum(stages[f"wall  {n}"] for n in ("plan", "materialize", "enrich+fragments"))
    assert inner == pytest.approx(stages["wall ray_pipeline"], abs=_rounding(3 + 1))


@pytest.fixture(scope="module")
def small_run(shared_data) -> str:
    env = dict(os.environ, BOOKINDEX_SHARED_DATA=str(shared_data))
    command = [sys.executable, "-m", "benchmarks.job_throughput", "--mix", "small", "--no-warmup"]
    command.append("--tables")  # the run's index dumped table by table: one run, none differs
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_the_whole_job_counts_the_mix_and_its_rates(small_run):
    out = small_run
    assert _value(out, "pages") == PAGES
    assert _value(out, "passages") == PASSAGES
    assert _value(out, "failed documents") == 0
    nodes, wall = _value(out, "nodes"), _value(out, "job wall s")
    assert nodes > PASSAGES and wall > 0
    assert _value(out, "pages/s") == pytest.approx(PAGES / wall, abs=0.01)
    assert _value(out, "nodes/s") == pytest.approx(nodes / wall, abs=0.01)
    assert _value(out, "job CPU s") > 0
    assert "tables that differ between any two runs' indexes: none" in out


@pytest.mark.slow
def test_the_stage_breakdown_is_recorded_and_adds_up(small_run):
    stages = _stages(small_run)
    wall = _value(small_run, "job wall s")
    # every stage the job runs on this mix is recorded (no OCR page in it: no ocr row value)
    ran = ["probe", "parse", "assemble", "layout_graph", "embed", "entities", "resolve_document"]
    for name in ran:
        assert stages[f"cpu {name}"] is not None and stages[f"cpu {name}"] > 0, name
    assert stages["cpu ocr"] is None
    phases = ["ray_pipeline", "resolve", "write_nodes", "write_entities", "search_indexes"]
    for name in [*phases, " plan", " materialize", " enrich+fragments", "other"]:
        assert stages[f"wall {name}"] is not None and stages[f"wall {name}"] >= 0, name
    top = [v for k, v in stages.items() if k.startswith("wall ") and not k.startswith("wall  ")]
    # other: the rest of the job's wall time
    assert sum(top) == pytest.approx(wall, abs=_rounding(len(top) + 1))
    inner = sum(stages[f"wall  {n}"] for n in ("plan", "materialize", "enrich+fragments"))
    assert inner == pytest.approx(stages["wall ray_pipeline"], abs=_rounding(3 + 1))
    # the per-document stages ran on 2 workers within the pipeline's wall time
    worker = sum(v for k, v in stages.items() if k.startswith("cpu ") and v is not None)
    assert worker <= 2 * stages["wall ray_pipeline"] * 1.1
