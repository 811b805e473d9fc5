"""The query side with ``--models openai`` against a local OpenAI-compatible server
(``tests.fakes.FakeOpenAI`` with ``evidence_echo``: it answers from the evidence it is sent), on
an index of a real MMLongBench paper: ``jobs.query`` (``bookindex ask``) and the Serve app, every
method answering with citations checked against the evidence; the server's request and token
counts are the results' ``usage``; a model that answers invalid JSON or stalls past the client's
timeout gives the extractive answer with the fallback on record (exit 0, HTTP 200), never a
failure."""

from __future__ import annotations

import json
import secrets

import httpx
import pytest

from bookindex.jobs import query as query_job
from bookindex.operators.query.bookrag import fallbacks
from bookindex.operators.query.registry import QUERY_METHODS
from bookindex.pipelines.ports import free_port
from tests.conftest import PAPER
from tests.fakes import FakeOpenAI, evidence_echo, word_tokens

QUESTION = "Which datasets are used in the experiments?"
COUNTING = "How many tables are in the paper?"
WHERE = ("doc", "page", "sec_id", "para_idx")


@pytest.fixture(scope="module")
def fake():
    server = FakeOpenAI(evidence_echo, tokens=word_tokens)
    server.stall_s = 4.0  # past the client's 1 s timeout
    yield server
    server.close()


@pytest.fixture(scope="module")
def models(fake) -> dict:
    return {"base_url": fake.url, "model": "fake", "timeout_s": 1.0, "max_retries": 0}


@pytest.fixture
def healthy(fake):
    fake.fault = None
    yield fake
    fake.fault = None


def _ask(paper_index, tmp_path, capsys, models, *args: str) -> tuple[int, list[dict]]:
    config = tmp_path / "models.json"
    config.write_text(json.dumps(models), encoding="utf-8")
    argv = [*args, "--index", str(paper_index), "--doc", PAPER, "--json"]
    argv += ["--models", "openai", "--model-config", str(config), "--set", "query.k=3"]
    code = query_job.main(argv)
    lines = capsys.readouterr().out.splitlines()
    return code, [json.loads(line) for line in lines if line.startswith("{")]


def _check_cited(result: dict, fake: FakeOpenAI) -> None:
    """Answered by the model from the evidence it was sent, citing units 1 and 2 (the 99 it
    also cited was never sent: dropped and on record)."""
    assert result["error"] is None and result["answer_type"] == "generated", result["trace"]
    evidence = [{k: e[k] for k in WHERE} for e in result["evidence"]]
    assert result["citations"] == evidence[:2]
    step = next(s for s in result["trace"] if "dropped_citations" in s)
    assert step["dropped_citations"] == [99] and step["cited"] == [1, 2][: len(evidence)]
    first = " ".join(result["evidence"][0]["text"].split("\n")[0].split())[:40]
    assert " ".join(result["answer"].split()).startswith(first[: len(result["answer"])][:20])
    assert not fallbacks(result["trace"])


def test_ask_answers_with_checked_citations_and_the_servers_token_counts(
    paper_index, tmp_path, capsys, models, healthy
):
    """``bookindex ask --method all``: every method answers the question in one process."""
    before = dict(healthy.served)
    code, results = _ask(paper_index, tmp_path, capsys, models, QUESTION, "--method", "all")
    assert code == 0
    assert [r["method"] for r in results] == ["bookrag", *QUERY_METHODS[1:]]  # auto: bookrag
    for result in results:
        _check_cited(result, healthy)
    served = {k: healthy.served[k] - before[k] for k in before}
    used = {k: sum(r["usage"][k] for r in results) for k in before}
    assert used == served and all(r["usage"]["requests"] >= 1 for r in results)
    for result in results:  # each answer request numbered its units with their coordinates
        unit = f"[1] ({PAPER}, page {result['evidence'][0]['page']}, section"
        assert any(unit in json.dumps(b) for b in healthy.chats if "Evidence:" in json.dumps(b))


def test_a_count_question_reaches_the_model_in_map_and_reduce(
    paper_index, tmp_path, capsys, models, healthy
):
    code, [result] = _ask(paper_index, tmp_path, capsys, models, COUNTING, "--method", "bookrag")
    assert code == 0 and result["query_class"] == "global"
    steps = {s["op"]: s for s in result["trace"]}
    assert steps["Map"]["by"] == "model" and steps["Reduce"]["by"] == "model"
    assert result["answer_type"] == "generated" and result["citations"]
    # Map: one check request over the filtered tables, not one per table
    checks = [b for b in healthy.chats if "keep" in json.dumps(b.get("response_format"))]
    assert len(checks) == 1 and steps["Map"]["in"] >= 2


@pytest.mark.parametrize("fault", ["invalid_json", "stall"])
def test_a_broken_model_gives_the_extractive_answer_on_record(
    paper_index, tmp_path, capsys, models, healthy, fault
):
    healthy.fault = fault
    code, results = _ask(
        paper_index, tmp_path, capsys, models, QUESTION, "--method", "dense,zoom,bookrag"
    )
    assert code == 0 and [r["method"] for r in results] == ["dense", "zoom", "bookrag"]
    for result in results:
        method = result["method"]
        assert result["error"] is None and result["evidence"], method
        assert result["answer"] and result["answer_type"] == "extractive", method
        assert result["citations"] == []
        failed = fallbacks(result["trace"])
        answer_step = "Reduce" if method == "bookrag" else "Cited_Answer"
        assert answer_step in [f["step"] for f in failed], method
        expected = "no valid JSON" if fault == "invalid_json" else "failed"
        assert all(expected in f["error"] for f in failed), failed


@pytest.fixture(scope="module")
def served(paper_index, models, tmp_path_factory):
    from ray import serve

    from bookindex.pipelines.serve_app import build_app

    root = tmp_path_factory.mktemp("serve_openai")
    token = secrets.token_urlsafe(24)
    (root / "token").write_text(token, encoding="utf-8")
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    args = {"index": str(paper_index), "models": {"backend": "openai", **models}}
    serve.run(build_app({**args, "serve": {"token_file": str(root / "token")}}), name="bookindex")
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120, headers=auth) as client:
        yield client
    serve.shutdown()


def test_serve_answers_every_method_with_citations(served, healthy):
    for method in QUERY_METHODS:
        body = {"question": QUESTION, "method": method, "doc": PAPER, "k": 3}
        reply = served.post("/query", json=body)
        assert reply.status_code == 200, reply.text
        _check_cited(reply.json(), healthy)
        assert reply.json()["usage"]["requests"] >= 1


@pytest.mark.parametrize("fault", ["invalid_json", "stall"])
def test_serve_answers_200_with_a_traced_fallback_when_the_model_breaks(served, healthy, fault):
    healthy.fault = fault
    for method in ("dense", "bookrag"):
        body = {"question": QUESTION, "method": method, "doc": PAPER, "k": 3}
        reply = served.post("/query", json=body)
        assert reply.status_code == 200, reply.text
        result = reply.json()
        assert result["answer_type"] == "extractive" and result["answer"] and result["evidence"]
        assert fallbacks(result["trace"]), result["trace"]


def test_zoom_and_dense_answer_passage_questions_with_citations(
    hotpot_questions_index, models, healthy
):
    """The multi-hop sets' passage QA: HotpotQA questions over an index of passages, asked of
    the whole corpus; the answer cites the passages it was sent."""
    from bookindex.operators.config import BookindexConfig
    from bookindex.pipelines.store.reader import open_engine

    index, questions = hotpot_questions_index
    config = BookindexConfig()
    config.models = config.models.model_copy(update={"backend": "openai", **models})
    engine = open_engine(index, config)
    for method in ("zoom", "dense"):
        asked = [{"question": q["question"], "method": method, "k": 5} for q in questions]
        for result in engine.answer_many(asked):
            _check_cited(result, healthy)
            assert len({e["doc"] for e in result["evidence"]}) > 1  # passages of the corpus
