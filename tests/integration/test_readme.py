"""The README's examples, run as written: the quickstart's commands, the server with its curl
requests, and the Python API example, in a temporary directory with the installed ``bookindex``
command first on PATH. A README example that breaks fails here.

The blocks run are those under an HTML comment that names this test. The harness adds only
what a reader does by hand: it waits for the server a line started with ``&`` to answer
``/health`` before the next line, and stops it at the end (SIGTERM).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- the README test"
BIN = Path(sys.executable).parent


def readme_blocks() -> list[tuple[str, str]]:
    """(language, code) of every fenced block right under a comment naming this test."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.startswith(MARKER) and lines[i + 1].startswith("```"):
            language = lines[i + 1].strip("`").strip()
            end = lines.index("```", i + 2)
            blocks.append((language, "\n".join(lines[i + 2 : end])))
    return blocks


def commands(code: str) -> list[str]:
    """A shell block's commands: continuation lines joined, comments and blanks dropped."""
    joined = code.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = re.sub(r"\s+#[^'\"]*$", "", line).strip()  # a trailing comment (no quotes in it)
        if line and not line.startswith("#"):
            out.append(line)
    return out


def script(code: str) -> str:
    """A bash script of the block's commands, each one's output between markers, with a wait
    for a server a line started in the background, and that server stopped at the end."""
    parts = ["set -euo pipefail"]
    for number, command in enumerate(commands(code)):
        parts.append(f"printf '\\n@@ {number}\\n'")
        if command.endswith("&"):
            parts.append(command)
            parts.append("SERVER=$!")
            parts.append(
                "for _ in $(seq 300); do curl -sf http://127.0.0.1:8000/health >/dev/null "
                "&& break; kill -0 $SERVER || exit 9; sleep 1; done"
            )
        else:
            parts.append(command)
    parts.append("printf '\\n@@ end\\n'")
    parts.append('if [ -n "${SERVER:-}" ]; then kill -TERM $SERVER; wait $SERVER || true; fi')
    return "\n".join(parts) + "\n"


def run_block(code: str, cwd: Path, timeout: int = 900) -> list[str]:
    """Run a shell block; each command's standard output, in order."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        ["bash", "-c", script(code)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    outputs = re.split(r"^@@ \w+\n", done.stdout, flags=re.MULTILINE)[1:]
    assert len(outputs) == len(commands(code)) + 1
    return outputs[:-1]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("readme")


def test_the_readme_marks_its_runnable_examples():
    languages = [language for language, _ in readme_blocks()]
    assert languages == ["bash", "bash", "python"]


def test_the_quickstart_runs_as_written(workdir):
    quickstart = readme_blocks()[0][1]
    outputs = run_block(quickstart, workdir)
    cmds = commands(quickstart)
    by_command = dict(zip(cmds, outputs, strict=True))
    index_line = next(o for c, o in by_command.items() if c.startswith("bookindex index"))
    assert re.search(r"documents ok=4 failed=0 .* pages=73 ", index_line), index_line
    show = next(o for c, o in by_command.items() if c.startswith("bookindex show"))
    assert "4 documents" in show and "0 failure rows" in show
    asked = [o for c, o in by_command.items() if c.startswith("bookindex ask")]
    assert "answer (count): 4" in asked[0]
    assert asked[1].count("answer (extractive)") == 2 and "[2/2]" in asked[1]


def test_the_server_and_curl_examples_run_as_written(workdir):
    if not (workdir / "my_index").is_dir():
        pytest.skip("needs the quickstart's index (test_the_quickstart_runs_as_written)")
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 8000)) == 0:
            pytest.fail("port 8000, which the README's examples use, is taken")
    served = readme_blocks()[1][1]
    outputs = run_block(served, workdir)
    query, retrieve = (json.loads(o) for o in outputs if o.strip().startswith("{"))
    assert query["answer"] == "4" and query["method"] == "bookrag"
    kinds = [e["kind"] for e in query["evidence"]]  # the four counted, then k's fifth filled
    assert kinds[:4] == ["table"] * 4 and len(kinds) == 5 and query["plan"][-1] == "Fill"
    assert len(retrieve["results"][0]["documents"]) == 2


def test_the_python_api_example_runs_as_written(workdir):
    if not (workdir / "my_index").is_dir():
        pytest.skip("needs the quickstart's index (test_the_quickstart_runs_as_written)")
    code = readme_blocks()[2][1]
    (workdir / "api_example.py").write_text(code, encoding="utf-8")
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "api_example.py"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("documents ok=1 failed=0")
    assert "sample_00.pdf" in done.stdout and "What does heapq do? ->" in done.stdout
    assert any(line.startswith("4 [") for line in lines)  # the count and its evidence
