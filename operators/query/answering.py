"""The answer every query method ends with when a generative model is configured: one request
that gets the question and the method's own evidence, numbered, each unit with its document,
page, section and paragraph; the model answers with sentences that cite evidence numbers.

    answered = cited_answer(index, question, positions, notes=["partial answers ..."])
    answered.answer, answered.citations   # [{"doc", "page", "sec_id", "para_idx"}, ...]
    answered.step                         # the trace entry (op "Cited_Answer")

The citations are checked against the evidence actually sent: a number that was not sent is
dropped and listed in the step (``dropped_citations``). A model call that fails (invalid JSON
after the backend's retries, a timeout, an unusable object) comes back as ``answer`` None with
the error in the step's ``fallbacks``; the caller keeps its extractive answer. Offline nothing
here is called: the methods' extractive answers stay (``answer_type`` "extractive" / "count").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bookindex.operators.models import ModelError
from bookindex.operators.models.prompts import CITED_ANSWER_PROMPT, CITED_ANSWER_SCHEMA, chat

if TYPE_CHECKING:
    from bookindex.operators.query.read_model import ReadModel

ANSWER_UNITS = 20  # evidence units sent at most (the step records how many were not)
UNIT_CHARS = 1500  # characters of one unit's text sent at most
NOT_ANSWERABLE = "Not answerable"


@dataclass
class Answered:
    answer: str | None  # None: the model call failed (see step["fallbacks"])
    citations: list[dict] = field(default_factory=list)
    step: dict = field(default_factory=dict)


def coordinates(index: ReadModel, position: int) -> dict:
    """Where an evidence unit is: its document's name, first page, section and paragraph."""
    return {
        "doc": index.documents[int(index.doc[position])].name,
        "page": int(index.page_start[position]),
        "sec_id": int(index.sec_id[position]),
        "para_idx": int(index.para_idx[position]),
    }


def evidence_text(index: ReadModel, positions: list[int]) -> str:
    """The numbered evidence block: ``[n] (doc, page p, section s, paragraph q)`` and the
    unit's text (at most ``UNIT_CHARS``), numbered from 1 in the order given."""
    blocks = []
    for number, position in enumerate(positions, 1):
        where = coordinates(index, position)
        head = (
            f"[{number}] ({where['doc']}, page {where['page']}, section {where['sec_id']}, "
            f"paragraph {where['para_idx']})"
        )
        blocks.append(head + "\n" + index.node_text(position)[:UNIT_CHARS])
    return "\n\n".join(blocks)


def answer_messages(index: ReadModel, question: str, positions: list[int], notes=()) -> list:
    """The request: the instruction, then the question, any notes (partial answers, the
    rules' count) and the numbered evidence."""
    parts = [f"Question: {question}"]
    if notes:
        parts.append("Notes:\n" + "\n".join(str(n) for n in notes))
    parts.append("Evidence:\n" + evidence_text(index, positions))
    return chat(CITED_ANSWER_PROMPT, "\n\n".join(parts))


def cited_answer(
    index: ReadModel, question: str, positions: list[int], notes: list[str] | tuple = ()
) -> Answered:
    """One model call over the first ``ANSWER_UNITS`` of ``positions`` (best first); the
    answer and its checked citations, or ``answer`` None with the error on record."""
    started = time.perf_counter()
    sent = [int(p) for p in positions[:ANSWER_UNITS]]
    step: dict[str, Any] = {"op": "Cited_Answer", "in": len(positions), "by": "model"}
    if len(positions) > len(sent):
        step["not_sent"] = len(positions) - len(sent)
    try:
        reply = index.backend.complete(
            answer_messages(index, question, sent, notes), schema=CITED_ANSWER_SCHEMA
        )
        answer, sentences, dropped = _checked(reply, len(sent))
    except (ModelError, ValueError, KeyError, TypeError, AttributeError) as exc:
        error = f"{type(exc).__name__}: {exc}"[:300]
        step.update(out=0, s=round(time.perf_counter() - started, 4))
        step["fallbacks"] = [{"step": "Cited_Answer", "error": error, "fallback": "extractive"}]
        return Answered(None, [], step)
    cited = list(dict.fromkeys(n for s in sentences for n in s["cites"]))
    citations = [coordinates(index, sent[n - 1]) for n in cited]
    step.update(out=1, cited=cited, sentences=sentences)
    if dropped:
        step["dropped_citations"] = dropped
    step["s"] = round(time.perf_counter() - started, 4)
    return Answered(answer, citations, step)


def _checked(reply: Any, n_sent: int) -> tuple[str, list[dict], list]:
    """(answer, sentences with their valid evidence numbers, numbers dropped): a cite that is
    not the number of a unit sent is dropped; a reply without a string answer is an error."""
    if not isinstance(reply, dict) or not isinstance(reply.get("answer"), str):
        raise ValueError("the reply has no answer string")
    if not isinstance(reply.get("sentences"), list):
        raise ValueError("the reply has no list of sentences")
    answer = reply["answer"].strip()
    sentences, dropped = [], []
    for sentence in reply["sentences"]:
        if not isinstance(sentence, dict):
            continue
        cites = sentence.get("cites")
        valid = []
        for cite in cites if isinstance(cites, list) else [cites]:
            number = _number(cite)
            if number is not None and 1 <= number <= n_sent:
                valid.append(number)
            elif cite is not None:
                dropped.append(cite)
        sentences.append({"text": str(sentence.get("text") or "")[:600], "cites": valid})
    return answer, sentences, dropped


def _number(cite: Any) -> int | None:
    if isinstance(cite, bool):
        return None
    if isinstance(cite, int):
        return cite
    if isinstance(cite, str) and cite.strip().strip("[]").isdigit():
        return int(cite.strip().strip("[]"))
    return None
