"""The typed configuration: defaults, file ← environment ← flags precedence, clear errors."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bookindex.operators.config import (
    BookindexConfig,
    ConfigError,
    ModelConfig,
    add_config_arguments,
    config_from_args,
    describe,
    load_config,
)

REPO = Path(__file__).resolve().parents[3]


def test_defaults_are_the_papers_parameters():
    config = BookindexConfig()
    assert (config.walk.steps, config.walk.alpha, config.walk.beta) == (5, 0.8, 0.9)
    assert (config.walk.top_docs, config.walk.keep_fraction) == (10, 0.7)
    assert (config.resolver.g, config.resolver.top_k) == (0.6, 10)
    assert config.query.deepread_max_rounds == 50 and config.query.deepread_scan_window == (1, 1)
    assert config.models.backend == "offline"


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".toml"])
def test_file_then_environment_then_overrides(tmp_path, suffix):
    path = tmp_path / f"config{suffix}"
    if suffix == ".toml":
        path.write_text("[walk]\nalpha = 0.6\nsteps = 7\n[query]\nk = 8\n")
    elif suffix == ".yaml":
        path.write_text("walk:\n  alpha: 0.6\n  steps: 7\nquery:\n  k: 8\n")
    else:
        path.write_text(json.dumps({"walk": {"alpha": 0.6, "steps": 7}, "query": {"k": 8}}))
    env = {"BOOKINDEX_WALK__STEPS": "9", "BOOKINDEX_QUERY__K": "6", "UNRELATED": "x"}
    config = load_config(path, env=env, overrides={"query": {"k": 3}})
    assert config.walk.alpha == 0.6  # the file
    assert config.walk.steps == 9  # the environment over the file
    assert config.query.k == 3  # the overrides over both
    assert config.walk.beta == 0.9  # untouched: the default


def test_invalid_values_name_the_field():
    with pytest.raises(ConfigError, match=r"walk\.alpha"):
        load_config(env={}, overrides={"walk": {"alpha": 1.5}})
    with pytest.raises(ConfigError, match=r"query\.no_such_field"):
        load_config(env={}, overrides={"query": {"no_such_field": 1}})
    with pytest.raises(ConfigError, match="unknown configuration section"):
        load_config(env={}, overrides={"nonsense": {"a": 1}})


def test_page_ranker_s_shares_outside_0_1_and_negative_pages_per_unit_are_refused():
    for field, bad in (("page_repeat", 1.5), ("page_repeat", -0.1), ("page_floor", 1.5)):
        with pytest.raises(ConfigError, match=rf"relevance\.{field}"):
            load_config(env={}, overrides={"relevance": {field: bad}})
    with pytest.raises(ConfigError, match=r"relevance\.pages_per_unit"):
        load_config(env={}, overrides={"relevance": {"pages_per_unit": -1}})
    assert (
        load_config(env={}, overrides={"relevance": {"page_repeat": 1}}).relevance.page_repeat == 1
    )


def test_bm25_s_scope_is_a_document_or_the_index_and_nothing_else():
    with pytest.raises(ConfigError, match=r"relevance\.bm25_scope.*'document' or 'index'"):
        load_config(env={}, overrides={"relevance": {"bm25_scope": "pages"}})
    assert BookindexConfig().relevance.bm25_scope == "document"
    scope = load_config(env={}, overrides={"relevance": {"bm25_scope": "index"}})
    assert scope.relevance.bm25_scope == "index"


def test_zoom_s_seed_reads_relevance_or_similarity_at_a_positive_temperature():
    with pytest.raises(ConfigError, match=r"walk\.seed_scores.*'relevance' or 'similarity'"):
        load_config(env={}, overrides={"walk": {"seed_scores": "bm25"}})
    with pytest.raises(ConfigError, match=r"walk\.relevance_temperature"):
        load_config(env={}, overrides={"walk": {"relevance_temperature": 0}})
    assert BookindexConfig().walk.seed_scores == "relevance"
    seed = load_config(env={}, overrides={"walk": {"seed_scores": "similarity"}})
    assert seed.walk.seed_scores == "similarity"


def test_set_flags_and_named_flags():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    args = parser.parse_args(["--set", "walk.alpha=0.5", "--set", "index.use_outline=false"])
    config = config_from_args(args, flags={"query": {"k": 4, "max_question_chars": None}})
    assert config.walk.alpha == 0.5 and config.index.use_outline is False
    assert config.query.k == 4 and config.query.max_question_chars == 4000
    with pytest.raises(ConfigError, match="SECTION.FIELD=VALUE"):
        config_from_args(parser.parse_args(["--set", "alpha=0.5"]))


def test_model_section_reads_the_flat_variables(monkeypatch):
    monkeypatch.setenv("BOOKINDEX_MODEL_BACKEND", "openai")
    monkeypatch.setenv("BOOKINDEX_MAX_RETRIES", "4")
    config = load_config(env={})
    assert config.models.backend == "openai" and config.models.max_retries == 4
    assert ModelConfig(api_key="secret").to_dict()["api_key"] == ""


def test_show_config_prints_every_field_and_hides_the_key():
    text = describe(BookindexConfig(models=ModelConfig(api_key="sk-test-123")))
    assert "sk-test-123" not in text
    assert "api_key = '***'" in text
    for section in ("models", "index", "resolver", "walk", "relevance", "query", "serve"):
        assert f"[{section}]" in text
    done = subprocess.run(
        [sys.executable, "-m", "bookindex.jobs.show_config", "--set", "walk.alpha=0.7", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["walk"]["alpha"] == 0.7
    bad = subprocess.run(
        [sys.executable, "-m", "bookindex.jobs.show_config", "--set", "walk.alpha=7"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "walk.alpha" in bad.stderr
