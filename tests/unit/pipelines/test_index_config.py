"""What the index job's driver decides from its configuration, without Ray and without loading a
model: the named CLI flags as configuration fields, the model checks, the embedding width (from
the configured model, from the stored tables, a mismatch refused), the row encoders."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

from bookindex.jobs.index_corpus import build_parser, flag_values
from bookindex.operators.config import (
    BookindexConfig,
    ConfigError,
    IndexConfig,
    ModelConfig,
    config_from_args,
)
from bookindex.operators.models import ModelError, check_config, embedding_width
from bookindex.pipelines.index_pipeline import check_index_config
from bookindex.pipelines.rows import decode_vectors, encode_vectors, from_json, to_json
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.document_writes import node_rows
from bookindex.pipelines.store.schemas import ENTITIES, NODES, nodes_schema, schema_for


def _config(argv: list[str]) -> BookindexConfig:
    args = build_parser().parse_args(argv)
    return config_from_args(args, flag_values(args))


def test_named_flags_set_configuration_fields_and_absent_ones_leave_them(tmp_path, monkeypatch):
    monkeypatch.delenv("BOOKINDEX_MODEL_BACKEND", raising=False)
    defaults = _config(["in", "--out", "x"])
    assert defaults.index == IndexConfig() and defaults.models.backend == "offline"
    models = tmp_path / "models.json"
    models.write_text('{"backend": "openai", "model": "m", "base_url": "http://h/v1"}')
    config = _config(
        ["in", "--out", "x", "--no-enrich", "--no-outline", "--workers", "3", "--force"]
        + ["--pages-per-task", "16", "--model-gpus", "0.5", "--model-config", str(models)]
        + ["--set", "resolver.floor=0.7", "--set", "index.enrich_workers=2"]
    )
    index = config.index
    assert (index.enrich, index.use_outline, index.parse_workers, index.force) == (
        False,
        False,
        3,
        True,
    )
    assert (index.pages_per_task, index.model_gpus, index.enrich_workers) == (16, 0.5, 2)
    assert config.resolver.floor == 0.7
    assert (config.models.backend, config.models.model) == ("openai", "m")
    assert (
        _config(
            ["in", "--out", "x", "--model-config", str(models), "--models", "vllm"]
        ).models.backend
        == "vllm"
    )


def test_model_configuration_is_checked_without_loading_a_model(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    check_config(ModelConfig())
    with pytest.raises(ModelError, match="needs an endpoint"):
        check_config(ModelConfig(backend="openai", model="m"))
    with pytest.raises(ModelError, match="needs a model name"):
        check_config(ModelConfig(backend="openai", base_url="http://h/v1"))
    with pytest.raises(ModelError, match="vllm_model_path"):
        check_config(ModelConfig(backend="vllm"))
    # the offline embedder's width comes from its package; an endpoint model's from embed_dim
    assert embedding_width(ModelConfig()) == 384
    assert embedding_width(ModelConfig(backend="vllm", vllm_model_path="/m")) == 384
    endpoint = ModelConfig(backend="openai", embed_model="e")
    assert embedding_width(endpoint) is None
    assert embedding_width(endpoint.model_copy(update={"embed_dim": 768})) == 768


def _index_with_width(path, dim: int) -> None:
    rows = nodes_schema(dim).empty_table()
    lance.write_dataset(rows, lance_store.table_path(path, NODES))


def test_the_index_keeps_its_vector_width_and_refuses_another(tmp_path):
    offline = BookindexConfig()
    assert check_index_config(offline, tmp_path / "new") == 384
    _index_with_width(tmp_path, 384)
    assert lance_store.vector_width(tmp_path) == 384
    assert check_index_config(offline, tmp_path) == 384
    other = tmp_path / "other"
    _index_with_width(other, 768)
    with pytest.raises(ConfigError, match="holds 768-dimensional vectors.*makes 384"):
        check_index_config(offline, other)
    # an endpoint embedder of unknown width: the stored width stands, a new index learns it
    endpoint = BookindexConfig(
        models=ModelConfig(backend="openai", base_url="http://h/v1", model="m", embed_model="e")
    )
    assert check_index_config(endpoint, other) == 768
    assert check_index_config(endpoint, tmp_path / "new") is None
    no_enrich = endpoint.model_copy(update={"index": IndexConfig(enrich=False)})
    with pytest.raises(ConfigError, match="embed_dim"):
        check_index_config(no_enrich, tmp_path / "new")


def test_schemas_are_built_for_a_width():
    assert nodes_schema(768).field("vector").type == pa.list_(pa.float32(), 768)
    assert schema_for(ENTITIES, 16).field("vector").type.list_size == 16
    assert schema_for(NODES).field("vector").type == pa.list_(pa.float32())  # empty reads


def test_rows_encode_vectors_and_json_once():
    vectors = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert (decode_vectors(encode_vectors(vectors), 2, 3) == vectors).all()
    assert decode_vectors(b"", 0, 3).shape == (0, 3)
    assert from_json(to_json([{"a": 1}])) == [{"a": 1}] and from_json("", []) == []
    nodes = [{"node_id": "n0", "kind": "text", "title": "", "text": "x"}]
    batch = pa.table(
        {
            "doc_id": ["d"],
            "nodes": [to_json(nodes)],
            "node_vectors": [encode_vectors(vectors[:1])],
        }
    )
    table = node_rows(batch, 3)
    assert table.schema.field("vector").type.list_size == 3
    assert table.column("vector").to_pylist() == [[0.0, 1.0, 2.0]]
    assert node_rows(batch.drop_columns(["node_vectors"]), 3).column("vector").to_pylist() == [None]


def test_the_job_joins_the_configured_or_the_job_apis_ray_and_never_a_stray_cluster():
    from bookindex.pipelines.index_pipeline import ray_address

    # no address anywhere: a Ray of its own ("local"), not ray.init()'s default, which joins
    # the cluster `ray start` left on this machine (another user's, another job's)
    assert ray_address(BookindexConfig(), environ={}) == "local"
    assert ray_address(BookindexConfig(), environ={"RAY_ADDRESS": ""}) == "local"
    # the Job API sets RAY_ADDRESS to the cluster the job was submitted to
    job = {"RAY_ADDRESS": "10.0.0.5:6379"}
    assert ray_address(BookindexConfig(), environ=job) == "10.0.0.5:6379"
    # the configuration wins (--set index.ray_address=auto, BOOKINDEX_INDEX__RAY_ADDRESS)
    configured = _config(["corpus", "--out", "idx", "--set", "index.ray_address=auto"])
    assert ray_address(configured, environ=job) == "auto"
