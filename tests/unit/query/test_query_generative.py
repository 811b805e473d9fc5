"""The query methods with a generative backend: the planner, Decompose, Map, Reduce, the DeepRead
ReAct loop and the cited answer call ``complete`` with JSON schemas and act on the answers; an
unusable answer falls back to the rules. The model is a scripted double (the test is about the agents, not the model);
embeddings stay the offline model's, as in the index (built in memory, conftest.py)."""

from __future__ import annotations

import json

import pytest

from bookindex.operators.models import ModelConfig, ModelError
from bookindex.operators.models.offline import OfflineBackend
from bookindex.operators.query.bookrag import fallbacks
from bookindex.operators.query.deepread import shown_documents
from bookindex.operators.query.engine import QueryEngine
from bookindex.operators.query.read_model import ReadModel
from tests.conftest import PAPER


class ScriptedModel(OfflineBackend):
    """Offline embeddings; ``complete`` answers from a script keyed by the schema's fields."""

    name = "openai"

    def __init__(self, script: dict) -> None:
        super().__init__(ModelConfig())
        self.script = script
        self.calls: list[tuple[list[dict], dict | None]] = []

    def complete(self, messages: list[dict], schema: dict | None = None):
        self.calls.append((messages, schema))
        key = next((k for k in self.script if k in (schema or {}).get("properties", {})), None)
        if key is None:
            raise ModelError("no scripted answer for this schema")
        answer = self.script[key]
        if isinstance(answer, list):  # one answer per call, in order
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def _engine(paper_tables, config, script: dict) -> tuple[QueryEngine, ScriptedModel]:
    model = ScriptedModel(script)
    return QueryEngine(ReadModel.from_tables(paper_tables, model), config), model


def test_react_loop_reads_what_the_model_asks_and_answers(paper_tables, config, index):
    doc = index.find_document(PAPER)
    section = next(e["sec_id"] for e in index.toc(doc) if e["title"].startswith("3.3"))
    actions = [
        {"thought": "find it", "action": "retrieve", "query": "dataset statistics items"},
        {"thought": "bad call", "action": "read_section", "sec_id": 9999},
        {"thought": "read", "action": "read_section", "sec_id": section, "start": 1, "end": 3},
        {"thought": "done", "action": "answer", "answer": "8980"},
    ]
    cited = {"answer": "8980 items", "sentences": [{"text": "8980.", "cites": [2, 99]}]}
    engine, model = _engine(paper_tables, config, {"action": actions, "sentences": cited})
    result = engine.answer("How many items in the Amazon datasets?", "deepread", PAPER, k=3)
    assert [s["op"] for s in result["trace"]] == [
        "retrieve",
        "read_section",
        "read_section",
        "Answer",
        "Cited_Answer",
    ]
    # the agent's answer went to the one answering request as a draft; its answer cites unit 2
    assert result["answer"] == "8980 items" and result["answer_type"] == "generated"
    second = result["evidence"][1]
    assert result["citations"] == [{k: second[k] for k in ("doc", "page", "sec_id", "para_idx")}]
    assert result["trace"][-1]["dropped_citations"] == [99]  # 99 was never sent
    read = {(e["sec_id"], e["para_idx"]) for e in result["evidence"]}
    assert {(section, 1), (section, 2)} <= read
    agent = [messages for messages, schema in model.calls if "action" in schema["properties"]]
    observations = [m["content"] for m in agent[-1] if m["role"] == "user"]
    assert any("no section 9999" in o for o in observations)  # the error went back as a tool result
    request = model.calls[-1][0][1]["content"]
    assert "draft answer: 8980" in request and f"[2] ({PAPER}, page {second['page']}" in request
    assert len(agent) == len(model.calls) - 1


def test_react_loop_stops_at_the_round_limit(paper_tables, config):
    script = {"action": [{"thought": "again", "action": "retrieve", "query": "x"}]}
    rounds = config.model_copy(
        update={"query": config.query.model_copy(update={"deepread_max_rounds": 4})}
    )
    engine, _ = _engine(paper_tables, rounds, script)
    out = engine.answer("anything?", "deepread", PAPER)
    assert [s["op"] for s in out["trace"]] == ["retrieve"] * 4 + ["Reduce", "Cited_Answer"]
    assert out["answer_type"] == "extractive" and out["answer"] and out["citations"] == []
    # the script has no answer: the cited answer failed and the rules' answer stands, on record
    assert fallbacks(out["trace"]) == [
        {
            "step": "Cited_Answer",
            "error": "ModelError: no scripted answer for this schema",
            "fallback": "extractive",
        }
    ]


def test_planner_and_reduce_use_the_model(paper_tables, config):
    script = {
        "category": [{"category": "global"}, {"category": "single-hop"}],
        "filters": {
            "filters": [{"filter_type": "table", "filter_value": None}],
            "operation": "COUNT",
        },
        "entities": {"entities": ["Amazon-beauty"]},
        "sections": {"sections": []},
        "keep": {"keep": [1, 2, 3, 4, 5, 6]},
        "answer": [
            {"answer": "6", "sentences": [{"text": "Six tables.", "cites": [1, 6]}]},
            {"answer": "Table 3", "sentences": [{"text": "In Table 3.", "cites": [1]}]},
        ],
    }
    engine, model = _engine(paper_tables, config, script)
    counted = engine.answer("Tables, please: how many?", "bookrag", PAPER)
    assert counted["query_class"] == "global" and counted["answer"] == "6"
    assert counted["answer_type"] == "generated" and len(counted["evidence"]) == 6
    ends = [counted["evidence"][i] for i in (0, 5)]
    assert counted["citations"] == [
        {k: e[k] for k in ("doc", "page", "sec_id", "para_idx")} for e in ends
    ]
    steps = {s["op"]: s for s in counted["trace"]}
    assert steps["Map"]["by"] == "model" and steps["Reduce"]["by"] == "model"
    # Map: one request over the filtered tables; Reduce: the count of the check went with them
    checks = [m for m, schema in model.calls if "keep" in schema["properties"]]
    assert len(checks) == 1 and checks[0][1]["content"].count("] table, page") == 6
    reduce = next(m for m, schema in model.calls if "sentences" in schema["properties"])
    assert "the check kept 6" in reduce[1]["content"]
    single = engine.answer("Where are the dataset statistics?", "bookrag", PAPER)
    assert single["query_class"] == "single-hop" and single["answer"] == "Table 3"
    assert single["answer_type"] == "generated" and len(single["citations"]) == 1
    asked = [set((schema or {}).get("properties", {})) for _, schema in model.calls]
    assert {"category"} in asked and {"answer", "sentences"} in asked and {"entities"} in asked
    # BookRAG's Reduce is the answering request: one per question, none from the engine after it
    assert sum("sentences" in a for a in asked) == 2


GARBAGE = {
    "category": {"category": "banana"},
    "filters": {"filters": "all of them", "operation": "DANCE"},
    "entities": {"entities": 5},
    "sections": {"sections": "first"},
    "answer": {"answer": "whatever"},
}
FAILING = {key: ModelError("not JSON after 2 retries") for key in GARBAGE}


@pytest.mark.parametrize("script", [FAILING, GARBAGE], ids=["model-error", "garbage"])
def test_an_unusable_model_answer_falls_back_to_the_rules(paper_tables, config, script):
    engine, _ = _engine(paper_tables, config, dict(script))
    result = engine.answer("How many tables are on page 4?", "bookrag", PAPER)
    assert result["error"] is None and result["query_class"] == "global"
    assert result["answer"] == "3"
    assert json.dumps(result)  # the whole result is plain JSON
    # each model call that fell back is in the trace, on the step that made it, with its error
    by_step = {s["op"]: s.get("fallbacks", []) for s in result["trace"]}
    assert [f["step"] for f in by_step["Classify"]] == ["Classify"]
    assert [f["step"] for f in by_step["Plan_Filters"]] == ["Plan_Filters"]
    expected = "ModelError: not JSON after 2 retries" if script is FAILING else "unknown class"
    assert by_step["Classify"][0]["error"].startswith(expected)
    # Map (no scripted check) and Reduce (an answer without sentences) fell back too
    assert [f["step"] for f in fallbacks(result["trace"])] == [
        "Classify",
        "Plan_Filters",
        "Map",
        "Reduce",
    ]
    assert by_step["Map"][0]["error"] == "ModelError: no scripted answer for this schema"
    answering = [s["by"] for s in result["trace"] if s["op"] in ("Map", "Reduce")]
    assert by_step["Map"] and answering == ["rules", "rules"]


def test_a_failing_model_in_every_step_leaves_a_trace_entry_and_the_rules_answer(
    paper_tables, config, engine
):
    """Single- and multi-hop plans with a backend whose every completion fails: the answer is
    the rules' (extractive, with evidence), and each step that asked the model says so."""
    failing = {key: ModelError("endpoint down") for key in (*GARBAGE, "sub_questions")}
    offline = engine  # conftest: the offline backend, which never asks a model
    engine, _ = _engine(paper_tables, config, failing)
    question = "Where are the dataset statistics and which datasets are used?"
    for method in ("bookrag", "bookrag_paper"):
        result = engine.answer(question, method, PAPER)
        assert result["error"] is None and result["answer_type"] == "extractive"
        assert result["answer"] and result["evidence"]
        steps = {f["step"] for f in fallbacks(result["trace"])}
        assert {"Classify", "Extract", "Reduce"} <= steps, steps
        assert all(f["error"] == "ModelError: endpoint down" for f in fallbacks(result["trace"]))
        if method == "bookrag":  # the rules' evidence and answer: the offline backend's
            alone = offline.answer(question, method, PAPER)
            assert not fallbacks(alone["trace"])
            assert [e["node_id"] for e in result["evidence"]] == [
                e["node_id"] for e in alone["evidence"]
            ]
            assert result["answer"] == alone["answer"]


# ---- LAD-RAG's agent ----------------------------------------------------------------------------
def _rounds(config, **query):
    return config.model_copy(update={"query": config.query.model_copy(update=query)})


def test_ladrag_agent_filters_contextualizes_and_keeps_what_it_names(paper_tables, config, index):
    doc = index.find_document(PAPER)
    table = next(
        p
        for p in index.leaves(doc).tolist()
        if index.kind[p] == "table" and index.page_start[p] == 4
    )
    actions = [
        {"thought": "tables on page 4", "action": "graph_filter",
         "spec": {"kinds": ["table"], "page_from": 4, "page_to": 4}},
        {"thought": "its caption", "action": "contextualize", "node_id": index.node_ids[table]},
        {"thought": "and by meaning", "action": "semantic_search", "query": "Receptiviti scores"},
        {"thought": "done", "action": "answer", "answer": "three",
         "node_ids": [index.node_ids[table], "no-such-node"]},
    ]  # fmt: skip
    engine, model = _engine(paper_tables, config, {"action": actions})
    result = engine.answer("Which tables are on page 4?", "ladrag", PAPER, k=3)
    ops = " ".join(s["op"] for s in result["trace"])
    assert ops == "graph_filter contextualize semantic_search answer Cited_Answer"
    assert result["trace"][0]["out"] == 3  # the three tables of page 4 (test_query_api)
    assert result["answer"] == "three" and result["answer_type"] == "generated"
    # the node it kept (the unknown id dropped), nothing else
    assert [e["node_id"] for e in result["evidence"]] == [index.node_ids[table]]
    first = model.calls[0][0]
    assert first[0]["role"] == "system" and "graph_filter" in first[0]["content"]
    assert PAPER in first[1]["content"] and "Which tables are on page 4?" in first[1]["content"]


def test_ladrag_agent_returns_errors_as_observations_and_stops_at_the_round_limit(
    paper_tables, config
):
    actions = [
        {"thought": "bad spec", "action": "graph_filter", "spec": {"kinds": ["tabel"]}},
        {"thought": "code", "action": "graph_filter", "spec": "[n for n in doc_graph]"},
        {"thought": "who?", "action": "contextualize", "node_id": "nowhere"},
        {"thought": "no query", "action": "semantic_search"},
        {"thought": "dance", "action": "dance"},
        {"thought": "search", "action": "semantic_search", "query": "dataset statistics"},
    ]
    engine, model = _engine(paper_tables, _rounds(config, ladrag_max_rounds=8), {"action": actions})
    result = engine.answer("What are the dataset statistics?", "ladrag", PAPER, k=3)
    ops = [s["op"] for s in result["trace"]]
    assert ops == ["graph_filter", "graph_filter", "contextualize", "semantic_search", "dance"] + [
        "semantic_search"
    ] * 3 + [
        "Cited_Answer"
    ]  # the last action repeats until the 8-round limit; then the answer (unscripted: rules)
    agent = [messages for messages, schema in model.calls if "action" in schema["properties"]]
    assert len(agent) == 8 and result["error"] is None  # then Reduce asks (unscripted: rules)
    observations = [m["content"] for m in agent[-1] if m["role"] == "user"][1:]
    assert "kinds" in observations[0] and "JSON object" in observations[1]
    assert "no node 'nowhere'" in observations[2] and "query" in observations[3]
    assert "unknown action 'dance'" in observations[4]
    assert result["evidence"] and result["answer_type"] == "extractive"  # no answer: Reduce
    assert len(result["evidence"]) <= config.query.ladrag_budget * 3


def test_ladrag_agent_stops_when_the_model_fails(paper_tables, config):
    script = {"action": [{"thought": "s", "action": "semantic_search", "query": "datasets"},
                         ModelError("not JSON after 2 retries")]}  # fmt: skip
    engine, model = _engine(paper_tables, config, script)
    result = engine.answer("What datasets are used?", "ladrag", PAPER, k=3)
    assert [s["op"] for s in result["trace"]] == ["semantic_search", "error", "Cited_Answer"]
    assert sum("action" in schema["properties"] for _, schema in model.calls) == 2
    assert result["evidence"]


def test_a_failed_ladrag_final_answer_call_is_traced(paper_tables, config):
    """The agent never answers; the final answer's model call (Cited_Answer) fails: the
    rules' answer stands, and the trace says which call failed and why."""
    script = {
        "action": [{"thought": "s", "action": "semantic_search", "query": "datasets"}],
        "answer": ModelError("HTTP 500 from the endpoint"),
    }
    engine, model = _engine(paper_tables, _rounds(config, ladrag_max_rounds=2), script)
    result = engine.answer("What datasets are used?", "ladrag", PAPER, k=3)
    assert [s["op"] for s in result["trace"]] == ["semantic_search"] * 2 + ["Cited_Answer"]
    assert result["answer_type"] == "extractive" and result["answer"]
    [failed] = fallbacks(result["trace"])
    assert failed["step"] == "Cited_Answer" and "HTTP 500 from the endpoint" in failed["error"]
    answered = [s for _, s in model.calls if s and "answer" in s["properties"]]
    assert answered  # the model was asked for the final answer


def test_a_corpus_question_shows_the_configured_documents_and_traces_the_rest():
    trace: list[dict] = []
    assert shown_documents(12, None, 5, trace) == [0, 1, 2, 3, 4]
    assert trace == [
        {"op": "Documents", "args": {"shown": 5, "left_out": 7, "limit": 5}, "out": 5, "s": 0.0}
    ]
    trace = []
    assert shown_documents(12, None, 12, trace) == list(range(12))
    assert trace[0]["args"]["left_out"] == 0
    trace = []
    assert shown_documents(3, None, 5, trace) == [0, 1, 2] and trace[0]["args"]["left_out"] == 0
    trace = []
    assert shown_documents(12, 7, 5, trace) == [7] and trace == []  # the question's document


@pytest.mark.parametrize("method", ["deepread", "ladrag"])
def test_agents_on_a_corpus_question_say_how_many_documents_they_were_shown(
    paper_tables, config, method
):
    script = {"action": [{"thought": "done", "action": "answer", "answer": "x", "node_ids": []}]}
    engine, model = _engine(paper_tables, config, script)
    result = engine.answer("What datasets are used?", method, None, k=3)
    assert result["trace"][0] == {
        "op": "Documents",
        "args": {"shown": 1, "left_out": 0, "limit": config.query.agent_toc_documents},
        "out": 1,
        "s": 0.0,
    }
    assert PAPER in model.calls[0][0][1]["content"]  # its table of contents was shown
