"""The LLM section refiner in two passes, as the index job runs it (no Ray, no model): the
structure stage plans independent windows and keeps the blocks; the answers, applied by block
index, rebuild the tree; windows without an answer keep the rules' decisions."""

from __future__ import annotations

import json
import os

import pyarrow as pa

from bookindex.pipelines.rows import from_json
from bookindex.pipelines.structure_stage import (
    apply_section_answers,
    index_documents,
    probe_document,
)

PDF = "mmlongbench/documents/2303.05039v2.pdf"


def _planned(shared_data, window: int) -> dict:
    uri = str(shared_data / PDF)
    probed = probe_document({"doc_id": "d", "uri": uri, "size": os.path.getsize(uri)})
    probed.update(start=0, stop=probed["n_pages"])
    return index_documents(pa.Table.from_pylist([probed]), True, review=window).to_pylist()[0]


def _apply(row: dict, answers: dict, window: int) -> dict:
    row = dict(row, section_answers=json.dumps(answers))
    return apply_section_answers(pa.Table.from_pylist([row]), True, window=window).to_pylist()[0]


def test_windows_are_independent_and_answers_rebuild_the_tree(shared_data) -> None:
    row = _planned(shared_data, window=6)
    review = from_json(row["section_review"])
    windows = review["windows"]
    assert len(windows) >= 3 and len(from_json(row["section_blocks"])) > 100
    sent = [c for w in windows for c in json.loads(w["messages"][1]["content"])["candidates"]]
    assert [c["index"] for c in sent] == [b for w in windows for b in w["blocks"]]
    # each window's context: the rules' headings before its first candidate (none are answers)
    for w in windows[1:]:
        context = json.loads(w["messages"][1]["content"])["earlier_headings"]
        first = w["blocks"][0]
        before = [r for r in review["reviews"] if r["block_index"] < first and r["rule_level"]]
        assert len(context) == min(len(before), 30)
    answers = {}
    for w in windows:
        if w["number"] == 1:
            answers["1"] = ["", "invalid JSON answer: no JSON object", 2]
            continue
        cands = json.loads(w["messages"][1]["content"])["candidates"]
        decisions = [{"index": c["index"], "level": 0} for c in cands]  # nothing is a title
        answers[str(w["number"])] = [json.dumps({"decisions": decisions}), "", 1]
    out = _apply(row, answers, window=6)
    assert "section_review" not in out and "section_blocks" not in out
    decisions = from_json(out["section_decisions"])
    assert len(decisions) == len(sent)
    for r in decisions:
        if r["window"] == 1:
            assert r["model_level"] is None and "2 attempt(s)" in r["error"]
        else:
            assert r["model_level"] == 0 and r["error"] == ""
    assert from_json(out["section_errors"]) == [
        "sections window 1: invalid JSON answer: no JSON object (2 attempt(s))"
    ]
    # of the reviewed candidates only the unanswered window's headings are left (candidates the
    # filter is sure of are not sent, and keep its decision)
    titles = [n["title"] for n in from_json(out["nodes"]) if n["kind"] == "section"]
    kept_titles = [r["text"] for r in decisions if r["window"] == 1 and r["rule_level"]]
    assert 0 < out["n_sections"] < row["n_sections"]
    reviewed = [r["text"] for r in decisions]
    for title in titles:  # every reviewed section left is one the unanswered window's rules kept
        if any(text.startswith(title[:20]) for text in reviewed):
            assert any(text.startswith(title[:20]) for text in kept_titles)
    assert any(any(t.startswith(title[:20]) for t in kept_titles) for title in titles)
    answered = [r["text"] for r in decisions if r["window"] != 1 and r["rule_level"]]
    assert answered and not set(answered) & set(titles)
    # deterministic: the same blocks and answers make the same rows
    again = _apply(_planned(shared_data, window=6), answers, window=6)
    assert again["nodes"] == out["nodes"] and again["section_decisions"] == out["section_decisions"]


def test_answers_that_agree_with_the_rules_keep_the_tree(shared_data) -> None:
    row = _planned(shared_data, window=40)
    windows = from_json(row["section_review"])["windows"]
    answers = {}
    for w in windows:
        cands = json.loads(w["messages"][1]["content"])["candidates"]
        decisions = [{"index": c["index"], "level": c["proposed_level"]} for c in cands]
        answers[str(w["number"])] = [json.dumps({"decisions": decisions}), "", 1]
    out = _apply(row, answers, window=40)
    assert out["nodes"] == row["nodes"] and out["section_errors"] == "[]"
    assert all(r["model_level"] == r["rule_level"] for r in from_json(out["section_decisions"]))
