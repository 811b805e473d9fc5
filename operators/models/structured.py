"""Structured output: JSON answers from generative models, repaired, checked and asked for again.

Shared by the generative backends (``openai_compatible``, ``vllm_local``) and the Ray Data LLM
processor (``pipelines.llm_processors``):

- ``parse_json_answer``: JSON from an answer, repairing the usual damage (code fences, prose
  around the object, trailing commas);
- ``check_answer``: the answer is an object holding the schema's top-level ``required`` keys;
- ``complete_json``: one request, then at most ``max_retries`` more with the invalid answer and
  ``prompts.RETRY_PROMPT`` appended; then ``ModelError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from bookindex.operators.models.base import ModelError
from bookindex.operators.models.prompts import RETRY_PROMPT

ECHO_CHARS = 2000  # how much of an invalid answer is sent back with the retry request
_PROBLEM_CHARS = 200
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def parse_json_answer(text: str) -> Any:
    """JSON from a model answer, repairing the usual damage: code fences, prose around the
    object, trailing commas. Raises ValueError when nothing parseable is left."""
    text = (text or "").strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("\n") + 1 :] if "\n" in text else text
        text = text.rsplit("```", 1)[0]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise ValueError(f"no JSON in model answer: {text[:120]!r}")
    start = min(starts)
    end = max(text.rfind("}"), text.rfind("]"))
    candidate = text[start : end + 1]
    for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
        try:
            return json.loads(attempt)
        except json.JSONDecodeError:
            continue
    raise ValueError(f"invalid JSON in model answer: {text[:120]!r}")


def check_answer(answer: Any, schema: dict) -> None:
    """Raise ValueError unless ``answer`` is an object holding the schema's required keys."""
    if schema.get("type", "object") == "object" and not isinstance(answer, dict):
        raise ValueError(f"expected a JSON object, got {type(answer).__name__}")
    missing = [k for k in schema.get("required") or [] if k not in answer]
    if missing:
        raise ValueError(f"missing required keys {missing}")


def checked_answer(text: str, schema: dict) -> Any:
    """The parsed answer, checked against ``schema`` (ValueError when it is not usable)."""
    answer = parse_json_answer(text)
    check_answer(answer, schema)
    return answer


def retry_conversation(messages: list[dict], answer: str, problem: str) -> list[dict]:
    """The request asking again: the first messages, the invalid answer, what was wrong."""
    return [
        *messages,
        {"role": "assistant", "content": answer[:ECHO_CHARS]},
        {"role": "user", "content": RETRY_PROMPT.format(problem=problem[:_PROBLEM_CHARS])},
    ]


def complete_json(
    generate: Callable[[list[dict]], str], messages: list[dict], schema: dict, max_retries: int
) -> Any:
    """``generate(conversation) -> text`` until an answer parses and checks against ``schema``:
    one attempt and at most ``max_retries`` more, each showing the model its invalid answer."""
    conversation = list(messages)
    attempts = 1 + max(0, max_retries)
    problem = ""
    for _ in range(attempts):
        text = generate(conversation)
        try:
            return checked_answer(text, schema)
        except ValueError as e:
            problem = str(e)
        conversation = retry_conversation(messages, text, problem)
    raise ModelError(f"no valid JSON answer after {attempts} attempt(s): {problem}")
