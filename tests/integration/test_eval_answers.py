"""``bookindex eval --docs`` scores answers as the papers do, end to end on a real MMLongBench
paper (2303.05039v2.pdf, its 8 questions: Int, Float, Str, List and two "Not answerable"),
with ``--models openai`` against a local OpenAI-compatible server that answers from the
evidence it is sent (``tests.fakes.EvidenceEcho``) and a second one as the judge
(``tests.fakes.FakeJudge``): EM/F1 after extraction, inclusion accuracy and the judge's
accuracy are computed, and the answering model's tokens in metrics.json are exactly what its
server reported (the judge's apart, exactly what the judge's server reported). Without a judge
the judged accuracy is "not computed", never made up."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bookindex.jobs import evaluate
from bookindex.operators.eval.answer_metrics import answer_em_f1, inclusion
from tests.conftest import PAPER
from tests.fakes import EvidenceEcho, FakeJudge, FakeOpenAI

METHODS = ("bookrag", "deepread", "ladrag")
KEYS = ("prompt_tokens", "completion_tokens", "requests")


@pytest.fixture(scope="module")
def setup(paper_index, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("eval_answers")
    docs = root / "docs"
    docs.mkdir()
    shutil.copy(shared_data / "mmlongbench" / "documents" / PAPER, docs / PAPER)
    shutil.copytree(paper_index, root / "index")
    lines = (shared_data / "mmlongbench" / "questions.jsonl").read_text().splitlines()
    questions = [q for q in map(json.loads, lines) if q["doc"] == PAPER]
    (root / "questions.jsonl").write_text("\n".join(map(json.dumps, questions)) + "\n")
    return root, questions


def _contains(answer: str, gold: list[str]) -> bool:
    return bool(inclusion(answer, gold))


def _argv(root: Path, url: str, out: str, methods: str) -> list[str]:
    return [
        "--docs", str(root / "docs"), "--questions", str(root / "questions.jsonl"),
        "--index", str(root / "index"), "--out", str(root / out), "--method", methods,
        "--stale", "allow",  # the shared index is the offline build's: evaluated as it is
        "--set", "models.backend=openai", "--set", f"models.base_url={url}",
        "--set", "models.model=fake-answerer", "--set", "models.max_retries=0",
    ]  # fmt: skip


def test_answers_are_scored_and_tokens_are_the_servers(setup):
    root, questions = setup
    golds = {q["question"]: q["answers"] for q in questions}
    answerer = FakeOpenAI(EvidenceEcho(), count_tokens=True)
    judge = FakeOpenAI(FakeJudge(golds, _contains), count_tokens=True)
    try:
        argv = _argv(root, answerer.url, "out", ",".join(METHODS))
        argv += ["--judge-url", judge.url, "--judge-model", "fake-judge"]
        assert evaluate.main(argv) == 0
    finally:
        answerer.close()
        judge.close()
    metrics = json.loads((root / "out" / "metrics.json").read_text())
    assert set(metrics) == set(METHODS)
    by_id = {q["id"]: q for q in questions}

    # the answering model's tokens: per question and the curves' extra asks, exactly the server's
    answering = {k: 0 for k in KEYS}
    judged_rows = 0
    for method in METHODS:
        m = metrics[method]
        assert m["questions"] == len(questions)
        for k in KEYS:
            answering[k] += m["tokens"][k] + m.get("curve_tokens", {}).get(k, 0)
        assert m["tokens"]["measured"] == len(questions)
        rows = [json.loads(line) for line in (root / "out" / f"results_{method}.jsonl").open()]
        answered = [r for r in rows if r["answer"] is not None]
        assert m["answered"] == len(answered) > 0
        for row in answered:  # each figure is the metric of the row's own answer
            gold, fmt = by_id[row["id"]]["answers"], by_id[row["id"]]["answer_format"]
            assert row["extraction"] == "model"
            expected = gold[0] if _contains(row["answer"], gold) else None
            if expected is not None:
                assert row["extracted"] == expected
            assert {k: row[k] for k in ("em", "f1")} == answer_em_f1(row["extracted"], gold, fmt)
            assert row["inclusion"] == inclusion(row["answer"], gold, fmt)
            assert row["judge"] == float(_contains(row["answer"], gold))
            judged_rows += 1
        for key in ("em", "f1", "inclusion", "judge"):
            assert m[key] == pytest.approx(sum(r[key] for r in answered) / len(answered))
        assert m["judged"] == len(answered) and m["judge_errors"] == 0
    assert answering == answerer.usage
    assert answering["requests"] == len(answerer.chats) > 0
    # the judge's tokens are its own, apart from the method's: exactly its server's
    judge_total = {k: sum(metrics[m]["judge_tokens"][k] for m in METHODS) for k in KEYS}
    assert judge_total == judge.usage
    assert judge.usage["requests"] == 2 * judged_rows  # one extraction and one verdict each
    # the unanswerable questions are scored too (declining is right)
    assert any(r for r in questions if r["answers"] == ["Not answerable"])

    summary = (root / "out" / "summary.md").read_text()
    assert "| method | answered | EM | F1 | inclusion | judge |" in summary
    assert "Short answers extracted by the judge model." in summary
    m = metrics["bookrag"]
    row = f"| bookrag | {m['answered']} of {len(questions)} | {100 * m['em']:.1f} | "
    assert row in summary
    html = (root / "out" / "report.html").read_text()
    assert f'data-method="bookrag" data-key="judge" data-value="{m["judge"]}"' in html
    per_q = m["tokens"]["prompt_tokens_per_question"]
    assert f'data-key="prompt_tokens_per_question" data-value="{per_q}"' in html


def test_without_a_judge_the_judged_accuracy_is_not_computed(setup):
    root, questions = setup
    answerer = FakeOpenAI(EvidenceEcho(), count_tokens=True)
    try:
        assert evaluate.main(_argv(root, answerer.url, "no_judge", "bookrag")) == 0
    finally:
        answerer.close()
    m = json.loads((root / "no_judge" / "metrics.json").read_text())["bookrag"]
    assert "judge" not in m and m["judged"] == 0 and "judge_tokens" not in m
    assert m["answered"] > 0 and "em" in m and "inclusion" in m  # extracted by the rule
    assert m["extracted_by_model"] == 0
    assert (
        m["tokens"]["requests"] + m.get("curve_tokens", {}).get("requests", 0)
        == (answerer.usage["requests"])
    )
    summary = (root / "no_judge" / "summary.md").read_text()
    assert "not computed" in summary and "Short answers extracted by rule" in summary
    html = (root / "no_judge" / "report.html").read_text()
    assert 'data-key="judge">not computed</td>' in html
