"""The answer every query method ends with (``operators.query.answering``): offline the
extractive answer, said to be extractive; with a generative model one request per question over
the method's own evidence, numbered with its coordinates, its citations checked against what was
sent; a failing or unusable model leaves the extractive answer on record. Answering never
changes the evidence. The model is a scripted double (``ScriptedModel``); the index is the real
paper built in memory (conftest.py)."""

from __future__ import annotations

import pytest

from bookindex.operators.models import ModelError
from bookindex.operators.query.answering import ANSWER_UNITS, cited_answer
from bookindex.operators.query.bookrag import fallbacks
from bookindex.operators.query.engine import QueryEngine
from bookindex.operators.query.read_model import ReadModel
from bookindex.operators.query.registry import QUERY_METHODS
from tests.conftest import PAPER
from tests.unit.query.test_query_generative import ScriptedModel

QUESTION = "Which datasets are used in the experiments?"
COORDINATES = ("doc", "page", "sec_id", "para_idx")
CITED = {"answer": "Amazon", "sentences": [{"text": "Amazon data.", "cites": [1, 3, 0, "x"]}]}
RETRIEVING = ("zoom", "dense", "hybrid")  # no model step before the answer


def _where(row: dict) -> dict:
    return {k: row[k] for k in COORDINATES}


@pytest.mark.parametrize("method", [m for m in QUERY_METHODS if m != "auto"])
def test_offline_every_method_answers_extractively_without_citations(engine, method):
    result = engine.answer(QUESTION, method, PAPER, k=4)
    assert result["error"] is None and result["evidence"]
    assert result["answer"] and result["answer_type"] == "extractive"
    assert result["citations"] == []
    assert result["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "requests": 0}
    assert not any(s["op"] == "Cited_Answer" for s in result["trace"])


@pytest.mark.parametrize("method", [*RETRIEVING, "bookrag", "bookrag_paper"])
def test_answering_leaves_the_evidence_as_the_offline_retrieval_has_it(
    paper_tables, config, engine, method
):
    """Only the answering request is scripted (every other model step fails and its rules
    stand): the evidence is the offline backend's, unit for unit and score for score."""
    model = ScriptedModel({"sentences": CITED})
    answering = QueryEngine(ReadModel.from_tables(paper_tables, model), config)
    offline = engine.answer(QUESTION, method, PAPER, k=4)
    answered = answering.answer(QUESTION, method, PAPER, k=4)
    assert answered["evidence"] == offline["evidence"]
    assert answered["answer"] == "Amazon" and answered["answer_type"] == "generated"
    # cites 1 and 3 are units sent; 0 and "x" are not: dropped and on record
    evidence = answered["evidence"]
    assert answered["citations"] == [_where(evidence[0]), _where(evidence[2])]
    step = next(s for s in answered["trace"] if s.get("cited"))
    assert step["cited"] == [1, 3] and step["dropped_citations"] == [0, "x"]
    answers = [m for m, schema in model.calls if "sentences" in schema["properties"]]
    assert len(answers) == 1  # one answering request for the question
    sent = answers[0][1]["content"]
    for number, row in enumerate(evidence, 1):
        head = f"[{number}] ({row['doc']}, page {row['page']}, section {row['sec_id']}, "
        assert head + f"paragraph {row['para_idx']})" in sent
    assert f"[{len(evidence) + 1}]" not in sent


@pytest.mark.parametrize("method", ["deepread", "ladrag"])
def test_the_agents_evidence_is_the_same_with_and_without_an_answer(paper_tables, config, method):
    """The agents read what the model asks for; the answering request comes after: with it
    scripted or failing, the evidence is the same."""
    action = {
        "deepread": {"thought": "t", "action": "retrieve", "query": "datasets used"},
        "ladrag": {"thought": "t", "action": "semantic_search", "query": "datasets used"},
    }[method]
    done = {"thought": "d", "action": "answer", "answer": "Amazon"}
    results = []
    for script in ({"action": [action, done]}, {"action": [action, done], "sentences": CITED}):
        engine = QueryEngine(ReadModel.from_tables(paper_tables, ScriptedModel(script)), config)
        results.append(engine.answer(QUESTION, method, PAPER, k=4))
    failed, answered = results
    assert failed["evidence"] and failed["evidence"] == answered["evidence"]
    assert answered["citations"] and failed["citations"] == []
    assert failed["answer"] == "Amazon" and failed["answer_type"] == "generated"  # the agent's
    assert fallbacks(failed["trace"])[0]["fallback"] == "the agent's uncited answer"


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (ModelError("no valid JSON answer after 2 attempt(s)"), "ModelError: no valid JSON"),
        ({"answer": 7, "sentences": []}, "ValueError: the reply has no answer string"),
        ({"answer": "x"}, "ValueError: the reply has no list of sentences"),
        (["not", "an", "object"], "ValueError: the reply has no answer string"),
    ],
    ids=["model-error", "number", "no-sentences", "list"],
)
def test_an_unusable_answer_falls_back_to_the_extractive_one(
    paper_tables, config, engine, reply, error
):
    model = ScriptedModel({"sentences": reply})
    answering = QueryEngine(ReadModel.from_tables(paper_tables, model), config)
    for method in RETRIEVING:
        offline = engine.answer(QUESTION, method, PAPER, k=4)
        result = answering.answer(QUESTION, method, PAPER, k=4)
        assert result["error"] is None and result["evidence"] == offline["evidence"]
        assert result["answer"] == offline["answer"] and result["answer_type"] == "extractive"
        assert result["citations"] == []
        [fallback] = fallbacks(result["trace"])
        assert fallback["step"] == "Cited_Answer" and fallback["error"].startswith(error)


def test_at_most_answer_units_are_sent_and_only_they_can_be_cited(paper_tables, index):
    positions = index.leaves(index.find_document(PAPER)).tolist()[: ANSWER_UNITS + 5]
    last = {"answer": "a", "sentences": [{"text": "s", "cites": [ANSWER_UNITS, ANSWER_UNITS + 1]}]}
    model = ScriptedModel({"sentences": last})
    answered = cited_answer(ReadModel.from_tables(paper_tables, model), QUESTION, positions)
    assert answered.step["not_sent"] == 5 and answered.step["cited"] == [ANSWER_UNITS]
    assert answered.step["dropped_citations"] == [ANSWER_UNITS + 1]
    page = int(index.page_start[positions[ANSWER_UNITS - 1]])
    assert [c["page"] for c in answered.citations] == [page]


def test_without_generate_no_answering_request_is_sent(paper_tables, config, engine):
    """Serve's health probe asks with ``generate=False``: the extractive answer, no request to
    the model."""
    model = ScriptedModel({"sentences": CITED})
    answering = QueryEngine(ReadModel.from_tables(paper_tables, model), config)
    probe = answering.answer(QUESTION, "dense", None, 1, generate=False)
    assert probe["answer_type"] == "extractive" and model.calls == []
    assert probe["evidence"] == engine.answer(QUESTION, "dense", None, 1)["evidence"]


def test_a_multi_hop_map_is_one_request_for_all_sub_questions(paper_tables, config):
    subs = ["Which datasets are used?", "How many items does each have?", "Who collected them?"]
    script = {
        "category": {"category": "multi-hop"},
        "sub_questions": {"sub_questions": [{"question": q, "type": "retrieval"} for q in subs]},
        "answers": {"answers": ["Amazon", "8980", "the authors"]},
        "sentences": CITED,
    }
    model = ScriptedModel(script)
    engine = QueryEngine(ReadModel.from_tables(paper_tables, model), config)
    result = engine.answer("Which datasets are used and how many items do they have?", "bookrag")
    steps = {s["op"]: s for s in result["trace"]}
    assert steps["Map"]["by"] == "model" and steps["Map"]["in"] == 3
    maps = [m for m, schema in model.calls if "answers" in schema["properties"]]
    assert len(maps) == 1  # one request over the kept nodes for the three sub-questions
    assert all(q in maps[0][1]["content"] for q in subs) and "[1] (" in maps[0][1]["content"]
    [reduce] = [m for m, schema in model.calls if "sentences" in schema["properties"]]
    assert "- Amazon\n- 8980\n- the authors" in reduce[1]["content"]
    assert result["answer"] == "Amazon" and result["citations"]
