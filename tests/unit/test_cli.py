"""The ``bookindex`` command without Ray: its subcommands and their help, the mistakes a user
makes (exit 2 with a message naming the problem, nothing created), and the generated reference
pages (docs/configuration.md, docs/tables.md) kept current."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bookindex import __version__
from bookindex.cli import COMMANDS, build_parser, job_module, main
from bookindex.pipelines.store.schemas import TABLES, schema_for
from bookindex.pipelines.store.table_docs import COLUMNS_DOC, TABLES_DOC

REPO = Path(__file__).resolve().parents[2]
BOOKINDEX = Path(sys.executable).with_name("bookindex")


def test_the_installed_command_prints_its_version_and_commands():
    """The console script of the editable install (``make venv``), as a user runs it."""
    done = subprocess.run([str(BOOKINDEX), "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"bookindex {__version__}"
    listed = subprocess.run([str(BOOKINDEX), "--help"], capture_output=True, text=True).stdout
    for name in ("index", "ask", "serve", "show", "eval", "config", "migrate"):
        assert f"    {name} " in listed, name


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_subcommand_states_its_arguments_and_an_example(name, capsys):
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert f"bookindex {name}" in text and "Example" in text
    for flag in ("--json", "--quiet", "--verbose"):
        assert flag in text


def test_index_names_an_input_that_names_nothing_and_creates_nothing(tmp_path, capsys):
    out = tmp_path / "idx"
    assert main(["index", str(tmp_path / "missing.pdf"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no such file, directory or glob match" in err and "missing.pdf" in err
    assert not out.exists()
    assert main(["index", str(tmp_path / "nothing-*.pdf"), "--out", str(out)]) == 2
    assert "nothing-*.pdf" in capsys.readouterr().err


def test_index_refuses_inputs_without_a_pdf(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a PDF")
    out = tmp_path / "idx"
    assert main(["index", str(empty), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no PDF or JSONL files in" in err and str(empty) in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "{path}"],
        ["show", "{path}", "--doc", "a.pdf"],
        ["ask", "a question", "--index", "{path}"],
        ["migrate", "{path}"],
    ],
)
def test_read_only_commands_on_a_wrong_path_say_so_and_create_nothing(argv, tmp_path, capsys):
    wrong = tmp_path / "no" / "index"
    assert main([a.format(path=wrong) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"no index at {wrong}" in err and "Traceback" not in err
    assert not (tmp_path / "no").exists()


def test_serve_on_a_port_another_process_holds_says_so_before_starting_ray(
    tmp_path, capsys, monkeypatch
):
    import socket

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "documents.lance").mkdir()  # what serve checks an index by
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        argv = ["serve", "--index", str(tmp_path), "--port", str(port), "--no-auth"]
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"cannot serve on 127.0.0.1:{port}" in err and "--port" in err
    assert "Traceback" not in err


def test_ask_without_a_question_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", open(__file__))  # noqa: SIM115 (closed by pytest)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    assert main(["ask", "--index", str(tmp_path)]) == 2
    assert "no question" in capsys.readouterr().err


def test_config_prints_json_and_refuses_a_bad_value(capsys):
    assert main(["config", "--set", "walk.alpha=0.7", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["walk"]["alpha"] == 0.7
    assert main(["config", "--set", "walk.alpha=7"]) == 2
    assert "walk.alpha" in capsys.readouterr().err


def test_the_reference_pages_are_what_the_commands_print(capsys):
    """docs/configuration.md and docs/tables.md are generated (``make docs``): a change to a
    setting or a column that does not regenerate them fails here."""
    for argv, page in (
        (["config", "--markdown"], "configuration.md"),
        (["schema", "--markdown"], "tables.md"),
    ):
        assert main(argv) == 0
        printed = capsys.readouterr().out
        assert printed == (REPO / "docs" / page).read_text(encoding="utf-8"), (
            f"docs/{page} is out of date: run make docs"
        )


def test_every_column_of_every_table_is_described_and_nothing_else():
    assert set(TABLES_DOC) == set(TABLES) == set(COLUMNS_DOC)
    for table in TABLES:
        names = [f.name for f in schema_for(table, 384)]
        assert list(COLUMNS_DOC[table]) == names, table
        assert all(text.strip() for text in COLUMNS_DOC[table].values())
    assert "sentence_vectors" in COLUMNS_DOC["nodes"] and "ocr_pages" in COLUMNS_DOC["documents"]


def test_the_parser_has_one_subcommand_per_job():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")  # noqa: SLF001
    assert list(commands.choices) == list(COMMANDS)
    assert all(name == job_module(name).COMMAND for name in COMMANDS)


def test_a_subcommand_imports_its_own_job_only():
    """``bookindex show`` and ``bookindex config`` do not pay for the index job's imports (Ray
    Data, Lance's dataset layer, PyMuPDF's layout model): seconds on every call."""
    code = (
        "import sys\n"
        "from bookindex.cli import main\n"
        "assert main(['config', '--json']) == 0\n"
        "loaded = [m for m in ('bookindex.jobs.index_corpus', 'bookindex.jobs.serve', 'ray')"
        " if m in sys.modules]\n"
        "print('loaded', loaded, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "loaded []" in done.stderr


def test_names_read_from_the_input_print_as_one_line():
    """A newline (or an escape sequence) in a file name, a PDF's title or a heading cannot forge
    lines in what a job prints (jobs/console.one_line; show's TOC lines use it)."""
    from bookindex.jobs.console import one_line
    from bookindex.jobs.show_index import toc_lines

    assert one_line("new\nline.pdf\r\x1b[2J ok") == "new\\nline.pdf\\r\\x1b[2J ok"
    entry = {"level": 1, "sec_id": 3, "title": "Real\n  [4] forged (p1, 0 paragraphs)", "page": 2}
    (line,) = toc_lines([dict(entry, n_paragraphs=1)], None)
    assert line == "  [3] Real\\n  [4] forged (p1, 0 paragraphs) (p2, 1 paragraphs)"
