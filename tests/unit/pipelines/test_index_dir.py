"""The output directory checked before any work (pipelines/store/index_dir.py): a file, a
read-only directory, a directory that is not an index, a stray table file and a table missing
a data file are each refused with what is wrong and what to do."""

from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest

from bookindex.jobs import index_corpus
from bookindex.pipelines.store import lance_store, recovery
from bookindex.pipelines.store.index_dir import IndexDirError, check_index_dir
from bookindex.pipelines.store.schemas import DOCUMENTS, FAILURES, schema_for


def _index(path):
    row = {"uri": "a.pdf", "doc_id": "", "stage": "read", "error": "x"}
    rows = pa.Table.from_pylist([row], schema=schema_for(FAILURES))
    lance_store.append(path, FAILURES, rows)
    return path


def test_new_empty_and_index_directories_pass(tmp_path):
    check_index_dir(tmp_path / "new" / "deeper")
    check_index_dir(tmp_path)
    check_index_dir(_index(tmp_path / "index"))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("file", "is a file, not a directory"),
        ("not_index", r"is neither empty nor an index \(it holds notes.txt\)"),
        ("stray_table_file", "damaged index: table documents.lance in .* is a file"),
        ("missing_data", "damaged index: table failures.lance in .* is missing its data file"),
        ("unreadable_table", "damaged index: table failures.lance in .* cannot be opened"),
    ],
)
def test_damage_is_named_with_what_to_do(tmp_path, damage, message):
    out = tmp_path / "out"
    if damage == "file":
        out.write_text("x")
    elif damage == "not_index":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    elif damage == "stray_table_file":
        _index(out)
        (out / f"{DOCUMENTS}.lance").write_text("")
    else:
        _index(out)
        table = lance.dataset(lance_store.table_path(out, FAILURES))
        data = out / f"{FAILURES}.lance" / "data"
        if damage == "missing_data":
            os.unlink(data / table.get_fragments()[0].data_files()[0].path)
        else:
            for manifest in (out / f"{FAILURES}.lance" / "_versions").glob("*.manifest"):
                manifest.write_bytes(b"not a manifest")
    with pytest.raises(IndexDirError, match=message) as raised:
        check_index_dir(out)
    assert "Traceback" not in str(raised.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_a_read_only_directory_is_refused(tmp_path):
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    with pytest.raises(IndexDirError, match="is not writable"):
        check_index_dir(out)


def test_a_table_whose_first_write_never_committed_is_removed_not_damage(tmp_path):
    out = _index(tmp_path / "index")
    killed = out / f"{DOCUMENTS}.lance" / "data"  # data files, no manifest: a killed first write
    killed.mkdir(parents=True)
    (killed / "part.lance").write_bytes(b"half")
    assert recovery.remove_uncommitted_tables(out) == [DOCUMENTS]
    check_index_dir(out)
    assert recovery.remove_uncommitted_tables(out) == []  # the committed table stays
    assert lance_store.read_table(out, FAILURES).num_rows == 1


def test_the_job_exits_2_with_the_message_before_any_work(tmp_path, capsys):
    out = tmp_path / "out"
    out.write_text("a file")
    assert index_corpus.main([str(tmp_path), "--out", str(out), "--no-enrich"]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a directory" in err and "Traceback" not in err
