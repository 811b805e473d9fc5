"""The model calls of answer scoring, through an evaluation endpoint configured apart from the
answering model (``JudgeConfig``: ``bookindex eval --judge-url URL --judge-model NAME``, any
OpenAI-compatible endpoint), so that the answering model's tokens stay the method's own:

- **answer extraction** (BookRAG, MMLongBench): the short answer of a long generated answer,
  asked of the judge model (EXTRACT_PROMPT, JSON ``{"answer": ...}``); without a judge
  endpoint, or when its call fails (the failure counted), ``answer_metrics.rule_extract``;
- **LLM-judged accuracy** (DeepRead): the judge model says whether the generated answer is
  correct given the gold answers (JUDGE_PROMPT, JSON ``{"correct": true|false}``); without a
  judge endpoint the metric is not computed (absent from the row and the summary, which says
  so), and a failed call leaves the question unjudged (``judge_error``), never guessed.

``AnswerScorer.score`` gives one row's answer metrics; ``usage`` tallies the judge's tokens.
"""

from __future__ import annotations

from typing import Any

from bookindex.operators.config import JudgeConfig, ModelConfig
from bookindex.operators.eval.answer_metrics import (
    NOT_ANSWERABLE,
    answer_em_f1,
    inclusion,
    rule_extract,
)
from bookindex.operators.models import ModelError

EXTRACT_PROMPT = (
    "You extract the short answer from a long answer to a question about a document. Reply "
    'with JSON {"answer": ...}: only the answer itself — a number (with its unit or %% sign '
    "when given), a name, a short phrase, or for several items a list like ['a', 'b']. If the "
    f"long answer says the question cannot be answered from the document, reply "
    f'{{"answer": "{NOT_ANSWERABLE}"}}. Expected format: %s.'
)
EXTRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
JUDGE_PROMPT = (
    "You grade an answer to a question about a document against the gold answer(s). The "
    "answer is correct when it states the gold answer (or an equivalent: the same number, the "
    "same entity, the same items), even with more words around it; it is wrong when it "
    "contradicts, misses or only partly gives it. A gold answer 'Not answerable' means the "
    "document does not answer the question: then only an answer that says so is correct. "
    'Reply with JSON {"correct": true} or {"correct": false}.'
)
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"correct": {"type": "boolean"}},
    "required": ["correct"],
    "additionalProperties": False,
}


def judge_backend(judge: JudgeConfig):
    """The OpenAI-compatible backend of the judge endpoint; None when none is configured."""
    if not judge.configured:
        return None
    from bookindex.operators.models.openai_compatible import OpenAIBackend

    return OpenAIBackend(
        ModelConfig(
            backend="openai",
            base_url=judge.base_url,
            api_key=judge.api_key,
            model=judge.model,
            timeout_s=judge.timeout_s,
            max_retries=judge.max_retries,
            temperature=0.0,
        )
    )


class AnswerScorer:
    """Scores generated answers (``score``): extraction then EM/F1, inclusion, and with a judge
    backend the judge's verdict. ``backend``: the judge endpoint's (``judge_backend``) or None."""

    def __init__(self, backend=None) -> None:
        self.backend = backend

    @property
    def judged(self) -> bool:
        return self.backend is not None

    @property
    def usage(self) -> dict[str, int] | None:
        """The judge endpoint's tokens and requests so far (None: no judge)."""
        if self.backend is None:
            return None
        used = self.backend.usage
        keys = ("prompt_tokens", "completion_tokens", "requests")
        return {k: int(used.get(k, 0)) for k in keys}

    def extract(self, question: dict, generated: str) -> tuple[str, str, str]:
        """(short answer, how: "model" or "rule", the model's error or "")."""
        answer_format = str(question.get("answer_format") or "")
        if self.backend is None or not generated.strip():
            return rule_extract(generated, answer_format), "rule", ""
        shown = answer_format or "any"
        messages = [
            {"role": "system", "content": EXTRACT_PROMPT % shown},
            {
                "role": "user",
                "content": f"Question: {question['question']}\n\nLong answer: {generated}",
            },
        ]
        try:
            return str(self.backend.complete(messages, EXTRACT_SCHEMA)["answer"]), "model", ""
        except (ModelError, KeyError, TypeError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:300]
            return rule_extract(generated, answer_format), "rule", error

    def judge(self, question: dict, generated: str, answers: list[str]) -> tuple[float | None, str]:
        """(1.0 correct, 0.0 wrong, None unjudged; the error of a failed call or "")."""
        if self.backend is None:
            return None, ""
        gold = " | ".join(answers)
        messages = [
            {"role": "system", "content": JUDGE_PROMPT},
            {
                "role": "user",
                "content": f"Question: {question['question']}\nGold answer(s): {gold}\n"
                f"Answer: {generated}",
            },
        ]
        try:
            verdict = self.backend.complete(messages, JUDGE_SCHEMA)["correct"]
        except (ModelError, KeyError, TypeError) as exc:
            return None, f"{type(exc).__name__}: {exc}"[:300]
        if not isinstance(verdict, bool):
            return None, f"no boolean verdict: {verdict!r}"[:300]
        return float(verdict), ""

    def score(self, question: dict, generated: str | None) -> dict:
        """The answer metrics of one question's generated answer ({} without an answer or a
        gold answer): ``extracted``, ``extraction``, ``em``, ``f1``, ``inclusion``, with a judge
        ``judge`` (or ``judge_error``), and ``extraction_error`` when the model's failed."""
        answers = [str(a) for a in question.get("answers") or [] if str(a).strip()]
        if generated is None or not answers:
            return {}
        answer_format = str(question.get("answer_format") or "")
        extracted, how, error = self.extract(question, generated)
        row: dict = {"extracted": extracted, "extraction": how}
        if error:
            row["extraction_error"] = error
        row.update(answer_em_f1(extracted, answers, answer_format))
        row["inclusion"] = inclusion(generated, answers, answer_format)
        verdict, error = self.judge(question, generated, answers)
        if verdict is not None:
            row["judge"] = verdict
        elif error:
            row["judge_error"] = error
        return row
