"""Each index stage's output fingerprint (pipelines/stage_fingerprints.py): the recorded values
are what the code writes for the probe set now, and a change of one stage's output moves that
stage's fingerprint and no other, so no change of behaviour keeps an old build id."""

from __future__ import annotations

import pytest

from bookindex.pipelines import stage_fingerprints
from bookindex.pipelines.stage_fingerprints import RENEW, STAGES, compute


@pytest.fixture(scope="module")
def current(shared_data) -> dict[str, str]:
    return compute(shared_data)


def test_every_stage_writes_what_its_recorded_fingerprint_says(current):
    changed = stage_fingerprints.changed(current)
    assert not changed, (
        f"the output of {', '.join(changed)} changed and its fingerprint was not renewed: if the "
        f"change is meant, run `{RENEW}` and commit stage_fingerprints.json (every index built "
        "before is then stale for those stages and re-indexed by the next index job)"
    )
    assert set(stage_fingerprints.recorded()) == set(STAGES)


def test_a_changed_rule_moves_its_stages_fingerprint_and_no_other(
    shared_data, current, monkeypatch
):
    """A layout-graph rule (how many words a paragraph needs to continue on the next page) and
    a structure rule (what reads as an author's address) changed on purpose: each moves the
    fingerprints of the stages whose output it changes (the learned filter reads the rules'
    decisions), never the parse's nor the passages'."""
    import re

    from bookindex.operators.graph import layout_graph
    from bookindex.operators.structure import blocks

    monkeypatch.setattr(layout_graph, "_MIN_CONTINUED_WORDS", 1)
    graph = compute(shared_data)
    assert [s for s in STAGES if graph[s] != current[s]] == ["layout_graph/pdf"]
    monkeypatch.undo()
    monkeypatch.setattr(blocks, "_ADDRESS", re.compile(r"(?!)"))  # nothing is an address
    rule = compute(shared_data)
    assert [s for s in STAGES if rule[s] != current[s]] == ["structure", "learned_filter"]


def test_fingerprints_need_the_probe_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="probe files missing"):
        compute(tmp_path)
