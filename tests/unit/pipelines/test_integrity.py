"""An index's data files on disk against its manifests (pipelines/store/integrity.py): what the
Serve application checks on every non-forced reload and health probe."""

from __future__ import annotations

import lance
import pyarrow as pa

from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.integrity import damaged_files
from bookindex.pipelines.store.schemas import DOCUMENTS, NODES


def _index(tmp_path):
    out = tmp_path / "index"
    for table, rows in (
        (NODES, [{"doc_id": "d1"}, {"doc_id": "d2"}]),
        (DOCUMENTS, [{"doc_id": "d1"}]),
    ):
        lance.write_dataset(pa.Table.from_pylist(rows), lance_store.table_path(out, table))
    lance.dataset(lance_store.table_path(out, NODES)).delete("doc_id = 'd2'")  # a deletion file
    return out


def test_an_undamaged_index_has_no_problem(tmp_path):
    assert damaged_files(_index(tmp_path)) == []


def test_a_missing_truncated_or_unopenable_file_is_named_without_the_index_path(tmp_path):
    out = _index(tmp_path)
    nodes = lance.dataset(lance_store.table_path(out, NODES))
    (fragment,) = nodes.get_fragments()
    data = out / f"{NODES}.lance" / "data" / fragment.data_files()[0].path
    deletion = out / f"{NODES}.lance" / fragment.deletion_file()
    data.write_bytes(data.read_bytes()[:-10])
    deletion.unlink()
    (out / f"{DOCUMENTS}.lance" / "_versions").rename(out / "aside")
    found = damaged_files(out)
    assert found == [
        f"{DOCUMENTS}: cannot be opened (ValueError)",
        f"{NODES}: {data.name} holds {data.stat().st_size} bytes, its manifest records "
        f"{data.stat().st_size + 10}",
        f"{NODES}: {deletion.name} is missing",
    ]
    assert not any(str(tmp_path) in problem for problem in found)
