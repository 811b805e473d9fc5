"""``jobs.migrate_index`` (pipelines/store/migrate.add_sentence_vectors) gives an index that
lacks ``nodes.sentence_vectors`` the vectors the index job writes: a passage's sentences read
from its paragraph's run, as ``pipelines.enrich_worker.embed_batch`` reads them."""

from __future__ import annotations

import lance
import numpy as np

from bookindex.operators.config import BookindexConfig
from bookindex.operators.models import load_backend
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.migrate import add_sentence_vectors
from bookindex.pipelines.store.schemas import NODES


def test_migration_writes_the_index_jobs_sentence_vectors(hotpot_index) -> None:
    index = hotpot_index("migrate")
    path = lance_store.table_path(index, NODES)
    nodes = lance.dataset(path).to_table()
    written = {
        n: v for n, v in zip(nodes["node_id"].to_pylist(),
                             nodes["sentence_vectors"].to_pylist(), strict=True) if v
    }  # fmt: skip
    assert written
    lance.write_dataset(nodes.drop_columns(["sentence_vectors"]), path, mode="overwrite")

    done = add_sentence_vectors(index, load_backend(BookindexConfig().models))
    assert done["sentences"] == sum(len(v) for v in written.values())
    migrated = lance.dataset(path).to_table(columns=["node_id", "sentence_vectors"])
    again = {
        n: v for n, v in zip(migrated["node_id"].to_pylist(),
                             migrated["sentence_vectors"].to_pylist(), strict=True) if v
    }  # fmt: skip
    assert again.keys() == written.keys()
    for node, vectors in written.items():
        cosines = (np.asarray(vectors) * np.asarray(again[node])).sum(axis=1)
        assert cosines.min() > 0.9999, node
    assert add_sentence_vectors(index, load_backend(BookindexConfig().models))["sentences"] == 0
