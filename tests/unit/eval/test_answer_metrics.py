"""The papers' answer metrics (``operators.eval.answer_metrics``, ``answer_judge``,
``pdf_qa.summarise_answers``) on hand-worked cases — empty, unanswerable, list answers,
numbers, punctuation, aliases — each expected figure worked out beside it, and on real
MMLongBench questions (their gold answers and formats as the data set writes them)."""

from __future__ import annotations

import json

import pytest

from bookindex.operators.eval.answer_judge import (
    EXTRACT_SCHEMA,
    JUDGE_SCHEMA,
    AnswerScorer,
)
from bookindex.operators.eval.answer_metrics import (
    NOT_ANSWERABLE,
    answer_em_f1,
    inclusion,
    is_unanswerable,
    list_items,
    rule_extract,
    says_unanswerable,
)
from bookindex.operators.eval.pdf_qa import answer_usage, summarise_answers
from bookindex.operators.models import ModelError


def test_rule_extraction_by_hand():
    assert rule_extract("") == "" and rule_extract(None) == ""
    assert rule_extract("The answer is 42. It appears on page 3 [2].", "Int") == "42"
    assert rule_extract("About 18.29 % of the population [1].", "Float") == "18.29%"
    assert rule_extract("Answer: Paris. The capital is large.", "Str") == "Paris"
    assert rule_extract("4,087 employees (page 12).", "Int") == "4,087"
    assert rule_extract("The figure shows 3.5 million users.", "Float") == "3.5"
    assert rule_extract("Green and yellow [1][2]\nSee also Figure 1.", "Str") == "Green and yellow"
    assert rule_extract("The axes are ['Context Length', 'F1'] [3].", "List") == (
        "['Context Length', 'F1']"
    )
    assert rule_extract("The report does not mention 2024 figures.", "None") == NOT_ANSWERABLE
    assert rule_extract("This cannot be answered from the document.") == NOT_ANSWERABLE
    # no number in a numeric question's answer: the sentence stays
    assert rule_extract("Several of them.", "Int") == "Several of them"


def test_unanswerable_is_said_and_recognised():
    assert is_unanswerable(["Not answerable"]) and is_unanswerable(["not answerable."])
    assert not is_unanswerable(["42"]) and not is_unanswerable([])
    assert says_unanswerable("The document does not provide this.")
    assert says_unanswerable("Not answerable")
    assert not says_unanswerable("Paris is the capital.") and not says_unanswerable("")


def test_em_and_f1_after_extraction_by_hand():
    assert answer_em_f1("Paris", ["paris"]) == {"em": 1.0, "f1": 1.0}
    assert answer_em_f1("NYC", ["New York City", "NYC"]) == {"em": 1.0, "f1": 1.0}  # aliases
    assert answer_em_f1("U.S.A.", ["USA"]) == {"em": 1.0, "f1": 1.0}  # punctuation
    assert answer_em_f1("4,087", ["4087"], "Int") == {"em": 1.0, "f1": 1.0}  # numbers
    assert answer_em_f1("18.3%", ["18.29%"], "Float") == {"em": 0.0, "f1": 0.0}  # 183 ≠ 1829
    # pred {no, leans}, gold {no, leans, who, are, male}: P 1, R 2/5, F1 = 0.8/1.4 = 4/7
    scored = answer_em_f1("no leans", ["no leans who are male"], "Str")
    assert scored["em"] == 0.0 and scored["f1"] == pytest.approx(4 / 7)
    assert answer_em_f1("", ["Paris"]) == {"em": 0.0, "f1": 0.0}  # empty answer
    assert answer_em_f1("Paris", []) == {}  # no gold: not scored
    assert answer_em_f1("Paris", ["", " "]) == {}


def test_unanswerable_questions_are_scored_as_mmlongbench_does():
    gold = ["Not answerable"]
    assert answer_em_f1(NOT_ANSWERABLE, gold, "None") == {"em": 1.0, "f1": 1.0}
    assert answer_em_f1("The report does not say.", gold) == {"em": 1.0, "f1": 1.0}
    assert answer_em_f1("42", gold, "None") == {"em": 0.0, "f1": 0.0}
    assert answer_em_f1("", gold) == {"em": 0.0, "f1": 0.0}
    # declining an answerable question is wrong, even if words overlap
    assert answer_em_f1("Not answerable", ["answerable"]) == {"em": 0.0, "f1": 0.0}


def test_list_answers_by_hand():
    gold = ["['green', 'yellow']"]
    assert list_items(gold[0]) == ["green", "yellow"]
    assert list_items("[16, 19, 25]") == ["16", "19", "25"]
    assert list_items("green, blue and yellow") == ["green", "blue", "yellow"]
    assert list_items("green") is None and list_items("[]") == []
    assert answer_em_f1("['yellow', 'green']", gold, "List") == {"em": 1.0, "f1": 1.0}  # a set
    # {green} of {green, yellow}: P 1, R 1/2 → F1 2/3
    one = answer_em_f1("['green']", gold, "List")
    assert one["em"] == 0.0 and one["f1"] == pytest.approx(2 / 3)
    # {green, blue, yellow} against {green, yellow}: P 2/3, R 1 → F1 0.8
    three = answer_em_f1("green, blue and yellow", gold, "List")
    assert three["em"] == 0.0 and three["f1"] == pytest.approx(0.8)
    assert answer_em_f1("16, 19 and 25", ["[16, 19, 25]"], "List") == {"em": 1.0, "f1": 1.0}
    assert answer_em_f1("[]", ["[]"], "List") == {"em": 1.0, "f1": 1.0}  # the empty list
    assert answer_em_f1("red", ["[]"], "List") == {"em": 0.0, "f1": 0.0}


def test_inclusion_by_hand():
    assert inclusion("It was Paris, France.", ["paris"]) == 1.0
    assert inclusion("Parisian food", ["Paris"]) == 0.0  # on word boundaries
    assert inclusion("about 18.29% of voters", ["18.29%"]) == 1.0
    assert inclusion("", ["x"]) == 0.0 and inclusion(None, ["x"]) == 0.0
    assert inclusion("It is 42.", ["41", "42"]) == 1.0  # any alias
    assert inclusion("This is not mentioned in the report (42 is not).", ["42"]) == 0.0
    assert inclusion("The report does not mention it.", ["Not answerable"]) == 1.0
    assert inclusion("It is 42.", ["Not answerable"]) == 0.0
    colours = ["['green', 'yellow']"]
    assert inclusion("The colours are yellow and green.", colours, "List") == 1.0
    assert inclusion("Only green.", colours, "List") == 0.0  # every item must occur
    assert inclusion("Paris", []) == 0.0


def test_real_mmlongbench_questions(shared_data):
    path = shared_data / "mmlongbench" / "questions.jsonl"
    questions = {q["id"]: q for q in map(json.loads, path.read_text().splitlines())}
    scorer = AnswerScorer()  # no judge: the rule extracts, nothing is judged
    float_q, none_q, list_q = questions["mmlb-0"], questions["mmlb-1"], questions["mmlb-6"]
    assert float_q["answers"] == ["18.29%"] and none_q["answers"] == ["Not answerable"]
    row = scorer.score(float_q, "Democrats who voted were 18.29% of the population [1].")
    assert row == {
        "extracted": "18.29%",
        "extraction": "rule",
        "em": 1.0,
        "f1": 1.0,
        "inclusion": 1.0,
    }
    row = scorer.score(none_q, "The report has no information on 2024.")
    assert row["extracted"] == NOT_ANSWERABLE and row["em"] == 1.0 and "judge" not in row
    row = scorer.score(list_q, "RAPTOR retrieves nodes [16, 19, 25] for both questions.")
    assert row["extracted"] == "[16, 19, 25]" and row["em"] == 1.0 and row["inclusion"] == 1.0
    assert scorer.score(float_q, None) == {}  # the method gave no answer: not scored


class Judge:
    """A scripted judge backend: ``complete`` answers extraction and verdict by schema, or
    raises; ``usage`` as the OpenAI-compatible backend keeps it."""

    def __init__(self, extracted="42", verdict=True, fail: str = "") -> None:
        self.extracted, self.verdict, self.fail = extracted, verdict, fail
        self.usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self.asked: list[list[dict]] = []

    def complete(self, messages, schema=None):
        self.usage["requests"] += 1
        self.usage["prompt_tokens"] += 10
        self.usage["completion_tokens"] += 2
        self.asked.append(messages)
        if self.fail and self.fail in schema["properties"]:
            raise ModelError("endpoint down")
        if schema == EXTRACT_SCHEMA:
            return {"answer": self.extracted}
        assert schema == JUDGE_SCHEMA
        return {"correct": self.verdict}


def test_the_judge_extracts_and_judges_and_its_failures_are_not_guessed():
    question = {"question": "How many?", "answers": ["42"], "answer_format": "Int"}
    judge = Judge(extracted="42", verdict=False)
    row = AnswerScorer(judge).score(question, "There were forty-two, that is 42, in total.")
    assert row == {
        "extracted": "42",
        "extraction": "model",
        "em": 1.0,
        "f1": 1.0,
        "inclusion": 1.0,
        "judge": 0.0,  # the judge's verdict as it gave it
    }
    assert "How many?" in judge.asked[1][1]["content"] and "42" in judge.asked[1][1]["content"]
    assert AnswerScorer(judge).usage == {"prompt_tokens": 20, "completion_tokens": 4, "requests": 2}
    # a failed extraction call: the rule's extraction, the error on record
    row = AnswerScorer(Judge(fail="answer")).score(question, "42 [1].")
    assert row["extraction"] == "rule" and row["extracted"] == "42"
    assert row["extraction_error"] == "ModelError: endpoint down" and row["judge"] == 1.0
    # a failed verdict: unjudged, never counted right or wrong
    row = AnswerScorer(Judge(fail="correct")).score(question, "42")
    assert "judge" not in row and row["judge_error"] == "ModelError: endpoint down"
    assert AnswerScorer().usage is None  # no judge: no judge tokens


def test_summarise_answers_by_hand():
    rows = [
        {"em": 1.0, "f1": 1.0, "inclusion": 1.0, "judge": 1.0, "extraction": "model",
         "usage": {"prompt_tokens": 100, "completion_tokens": 10, "requests": 1}},
        {"em": 0.0, "f1": 0.5, "inclusion": 1.0, "judge_error": "x", "extraction": "rule",
         "usage": {"prompt_tokens": 300, "completion_tokens": 30, "requests": 3},
         "curve_usage": {"prompt_tokens": 5, "completion_tokens": 1, "requests": 1}},
        {"error": "no answer"},  # no answer: not scored, no tokens measured
    ]  # fmt: skip
    out = summarise_answers(rows)
    assert out["answered"] == 2
    assert out["em"] == 0.5 and out["f1"] == 0.75 and out["inclusion"] == 1.0
    assert out["judge"] == 1.0 and out["judged"] == 1 and out["judge_errors"] == 1
    assert out["extracted_by_model"] == 1
    assert out["tokens"] == {
        "prompt_tokens": 400,
        "completion_tokens": 40,
        "requests": 4,
        "measured": 2,
        "prompt_tokens_per_question": 200.0,
        "completion_tokens_per_question": 20.0,
    }
    assert out["curve_tokens"] == {"prompt_tokens": 5, "completion_tokens": 1, "requests": 1}
    unmeasured = summarise_answers([{"em": 1.0, "f1": 1.0, "inclusion": 1.0}])
    assert unmeasured["tokens"] is None and "judge" not in unmeasured  # not measured, not judged
    assert summarise_answers([]) == {
        "answered": 0,
        "judged": 0,
        "judge_errors": 0,
        "extracted_by_model": 0,
        "tokens": None,
    }


def test_answer_usage_prefers_the_backends_tally_then_the_results_own():
    class Tallied:
        usage = {"requests": 5, "prompt_tokens": 70, "completion_tokens": 9}

    before = {"requests": 3, "prompt_tokens": 50, "completion_tokens": 4}
    own = {"usage": {"prompt_tokens": 1, "completion_tokens": 2, "requests": 3}}
    spent = {"prompt_tokens": 20, "completion_tokens": 5, "requests": 2}
    assert answer_usage(own, Tallied(), before) == spent  # every request, the batch's too
    assert answer_usage({}, Tallied(), before) == spent
    assert answer_usage(own, object(), None) == own["usage"]  # no tally: the result's own
    assert answer_usage({}, object(), None) is None  # the offline backend: not measured
