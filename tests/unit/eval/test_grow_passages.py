"""The passage corpus generator of the serving benchmark (benchmarks/grow_passages.py), on the
shared MuSiQue and HotpotQA passages."""

from __future__ import annotations

import json
import statistics

import pytest

from benchmarks.grow_passages import grow, main, real_passages, sentences
from tests.conftest import missing_shared_data


@pytest.fixture(scope="module")
def real(shared_data) -> list[dict]:
    if not (shared_data / "multihop" / "hotpotqa" / "corpus.jsonl").is_file():
        missing_shared_data("multihop corpora not found")
    return real_passages(shared_data)


def test_real_passages_are_both_sets_with_unique_ids(real):
    assert len(real) == 1890 + 994
    assert len({p["id"] for p in real}) == len(real)
    assert {p["id"].split(":")[0] for p in real} == {"musique", "hotpotqa"}


def test_small_sizes_are_real_passages_unchanged(real):
    sample = grow(real, 1000, seed=3)
    assert len(sample) == 1000 and len({p["id"] for p in sample}) == 1000
    assert all(p in real for p in sample)
    assert grow(real, 1000, seed=3) == sample
    assert grow(real, 1000, seed=4) != sample


def test_grown_corpus_size_ids_and_determinism(real):
    corpus = grow(real, 6000, seed=0)
    assert len(corpus) == 6000
    assert corpus[: len(real)] == real
    assert len({p["id"] for p in corpus}) == 6000
    assert len({p["title"] for p in corpus[len(real) :]}) == 6000 - len(real)
    assert grow(real, 6000, seed=0) == corpus
    assert grow(real, 6000, seed=1)[len(real) :] != corpus[len(real) :]


def test_grown_passages_are_real_shaped(real):
    corpus = grow(real, 2 * len(real), seed=0)
    grown = corpus[len(real) :]
    firsts: dict[str, set[str]] = {}
    for r in real:
        firsts.setdefault(r["title"], set()).add(sentences(r["text"])[0])
    rests = {" ".join(sentences(r["text"])[1:] or sentences(r["text"])) for r in real}
    for p in grown:
        # the base's title and first sentence, then a donor's other sentences: real text only
        first = next(
            f for f in firsts[p["title"].rsplit(" (grown ", 1)[0]] if p["text"].startswith(f)
        )
        assert p["text"][len(first) + 1 :] in rests
    # the lengths follow the real distribution (medians within 25 %)
    real_median = statistics.median(len(p["text"]) for p in real)
    grown_median = statistics.median(len(p["text"]) for p in grown)
    assert 0.75 * real_median <= grown_median <= 1.25 * real_median


def test_command_writes_jsonl_the_index_job_reads(real, shared_data, tmp_path):
    out = tmp_path / "p.jsonl"
    main(["--size", "3000", "--out", str(out), "--shared-data", str(shared_data)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3000
    assert all(set(r) == {"id", "title", "text"} for r in rows)


def test_questions_name_their_gold_passages_as_the_grown_corpus_does(real, shared_data, tmp_path):
    out = tmp_path / "p.jsonl"
    args = ["--size", "3000", "--out", str(out), "--shared-data", str(shared_data)]
    main([*args, "--questions-out", str(tmp_path)])
    ids = {json.loads(line)["id"] for line in out.read_text().splitlines()}
    for name in ("musique", "hotpotqa"):
        lines = (tmp_path / f"questions_{name}.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines]
        assert len(rows) == 100
        gold = {g for r in rows for g in r["gold_ids"]}
        assert gold <= ids and all(g.startswith(f"{name}:") for g in gold)
