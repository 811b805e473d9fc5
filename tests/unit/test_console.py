"""What the commands print and where (jobs/console.py): one progress line per stage, nothing
with --quiet, and the libraries' own standard error (C and Python alike) kept out of the
terminal in a log file that is named when the command fails and removed when it succeeds."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

from bookindex.jobs.console import Console, duration, stage_line
from bookindex.pipelines.run_stats import StageProgress


def _events() -> list[StageProgress]:
    return [
        StageProgress("identify", seconds=0.01, finished=True, facts={"rows_out": 3}),
        StageProgress("parse", 0, 3),  # the start: nothing done yet
        StageProgress("parse", 1, 3, 22, 2.0),
        StageProgress("parse", 2, 3, 40, 3.0),  # within 10 s of the last line
        StageProgress("parse", 3, 3, 57, 4.0, finished=True),
        StageProgress("recover", seconds=0.0, finished=True),  # a phase users do not see
    ]


def test_without_a_terminal_each_stage_prints_its_first_progress_and_its_end():
    err = io.StringIO()
    console = Console(err=err)
    for event in _events():
        console.progress(event)
    lines = err.getvalue().splitlines()
    assert lines == [
        "identify  3 files, 0.0s",
        "parse     1/3 documents, 22 pages, 11.0 pages/s, ~4.0s left",
        "parse     3/3 documents, 57 pages, 14.2 pages/s, 4.0s",
    ]


def test_quiet_prints_no_progress_but_errors():
    err = io.StringIO()
    console = Console(quiet=True, err=err)
    for event in _events():
        console.progress(event)
    console.note("a note")
    console.error("a problem")
    assert err.getvalue() == "error: a problem\n"


def test_json_results_go_to_stdout_as_one_document():
    out = io.StringIO()
    Console(json_out=True, out=out).result("text", {"ok": 1})
    assert out.getvalue() == '{\n  "ok": 1\n}\n'


def test_stage_line_and_durations():
    running = StageProgress("enrich", 30, 120, 812, 60.0)
    assert stage_line(running) == "30/120 documents, 812 pages, 13.5 pages/s, ~3m00s left"
    assert [duration(s) for s in (0.42, 42, 190, 7500)] == ["0.4s", "42s", "3m10s", "2h05m"]


CHILD = textwrap.dedent(
    """
    import os, sys
    from bookindex.jobs.console import Console
    console = Console(capture=True)
    with console.libraries_to_log("probe"):
        os.write(2, b"noise from C\\n")
        print("noise from Python", file=sys.stderr)
        console.note("our line")
        console.failed = sys.argv[1] == "fail"
    print("log:", console.log_path, os.path.exists(console.log_path))
    """
)


def _child(outcome: str, tmp_path) -> subprocess.CompletedProcess:
    env = {"BOOKINDEX_LOG_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", CHILD, outcome], capture_output=True, text=True, env=env
    )


def test_the_libraries_output_goes_to_a_log_removed_on_success(tmp_path):
    done = _child("ok", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "our line\n"  # the noise did not reach the terminal
    assert done.stdout.strip().endswith("False")  # the log is gone
    assert list((tmp_path / "bookindex").iterdir()) == []


def test_a_failed_command_keeps_and_names_its_log(tmp_path):
    done = _child("fail", tmp_path)
    (log,) = (tmp_path / "bookindex").iterdir()
    assert "noise from C" in log.read_text() and "noise from Python" in log.read_text()
    assert done.stderr.splitlines() == ["our line", f"the libraries' output of this run: {log}"]
    assert done.stdout.strip().endswith("True")
