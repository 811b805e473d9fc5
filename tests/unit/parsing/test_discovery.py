"""Input discovery (operators/parsing/discovery.py): linear over symlink loops, a failure row for
each loop, broken link, special file and undecodable name; problems keyed by the path as named."""

from __future__ import annotations

import os
import shutil

import pytest

from bookindex.operators.parsing.discovery import discover


@pytest.fixture
def tree(shared_data, tmp_path):
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    shutil.copy(shared_data / "pdf_fixtures" / "pypdf" / "pdflatex-outline.pdf", root / "a.pdf")
    shutil.copy(root / "a.pdf", root / "sub" / "B.PDF")
    (root / "notes.txt").write_text("not an input")
    return root


def test_a_directory_gives_its_pdfs_recursively(tree):
    found = discover([str(tree)])
    assert sorted(found.files) == [str(tree / "a.pdf"), str(tree / "sub" / "B.PDF")]
    assert found.problems == []


def test_symlink_loops_are_linear_and_each_a_problem(tree, monkeypatch):
    for i in range(12):  # 12 loops: a walk that follows them is 12-fold exponential
        (tree / "sub" / f"loop{i}").symlink_to("..")
    listed: list[str] = []  # every directory listing, not the seconds it took
    scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: listed.append(str(path)) or scandir(path))
    found = discover([str(tree), str(tree / "**" / "*.pdf")])
    entries = sum(len(dirs) + len(files) for _, dirs, files in os.walk(tree))
    # linear: a few listings per entry over both inputs (a walk that followed the loops would
    # list 2^12 directories)
    assert len(listed) <= 2 * entries, listed
    assert len(found.files) == 2
    loops = [p for p in found.problems if "symlink loop" in p.error]
    assert sorted(p.uri for p in loops) == sorted(str(tree / "sub" / f"loop{i}") for i in range(12))


def test_broken_links_self_loops_fifos_and_undecodable_names_are_problems(tree):
    (tree / "broken.pdf").symlink_to("missing.pdf")
    (tree / "self.pdf").symlink_to("self.pdf")
    os.mkfifo(tree / "pipe.pdf")  # never opened: it would block
    with open(os.path.join(os.fsencode(tree), b"caf\xe9.pdf"), "wb") as handle:
        handle.write(b"%PDF-1.4")
    found = discover([str(tree)])
    errors = {p.uri.rsplit("/", 1)[1]: p.error for p in found.problems}
    assert errors["broken.pdf"].startswith("broken symlink")
    assert errors["self.pdf"].startswith("symlink loop")
    assert errors["pipe.pdf"] == "not a regular file: a FIFO (named pipe); not read"
    assert errors["caf\\xe9.pdf"].startswith("file name is not valid UTF-8")
    assert all(p.stage == "discover" for p in found.problems)
    assert len(found.files) == 2


def test_a_link_to_a_changing_target_is_keyed_by_its_own_name(tree):
    (tree / "mem.pdf").symlink_to("/proc/self/mem")
    first, second = discover([str(tree)]), discover([str(tree)])
    named = {v for v in first.files.values() if v.endswith("mem.pdf")}
    assert named == {str(tree / "mem.pdf")}  # the name a failure row is keyed by
    assert set(first.files.values()) == set(second.files.values())


def test_two_names_of_one_file_are_one_input_and_globs_match_paths(tree):
    (tree / "alias.pdf").symlink_to(tree / "a.pdf")
    found = discover([str(tree / "alias.pdf"), str(tree / "*.pdf"), str(tree / "**" / "*.PDF")])
    assert sorted(found.files) == [str(tree / "a.pdf"), str(tree / "sub" / "B.PDF")]
    assert discover([str(tree / "nothing*.pdf")]).problems[0].error.startswith("no such file")
