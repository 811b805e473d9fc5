"""BookRAG's Map step through a generative model (§5.2, eq. 11–12), one request per question:

- ``map_partials``: a multi-hop question's sub-questions answered together from the kept
  evidence (one request over the nodes, not one per node or per sub-question);
- ``map_check``: a global question's filtered nodes checked together (which are real instances
  of what the question counts or lists), at most ``MAP_UNITS`` in the request; the nodes past
  them are checked by the rules and the step says how many.

Each returns None when the model call fails or answers unusably (recorded in ``fallbacks``);
the caller then runs the rules (``bookrag_ops.best_sentence``, ``bookrag_ops.passes_check``)
and names them in the trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bookindex.operators.models import ModelError
from bookindex.operators.models.prompts import (
    CHECK_PROMPT,
    CHECK_SCHEMA,
    PARTIALS_PROMPT,
    PARTIALS_SCHEMA,
    chat,
)
from bookindex.operators.query.answering import evidence_text
from bookindex.operators.query.bookrag_ops import Fallbacks, record_fallback

if TYPE_CHECKING:
    from bookindex.operators.query.read_model import ReadModel

MAP_UNITS = 60  # filtered nodes one check request shows at most
PARTIAL_UNITS = 8  # evidence units the sub-questions are answered from
LINE_CHARS = 200  # characters of a checked node's text shown


def map_partials(
    index: ReadModel, sub_questions: list[str], positions: list[int], fallbacks: Fallbacks = None
) -> list[str] | None:
    """One answer per sub-question from the first ``PARTIAL_UNITS`` evidence units."""
    numbered = "\n".join(f"{i}. {q}" for i, q in enumerate(sub_questions, 1))
    evidence = evidence_text(index, list(positions[:PARTIAL_UNITS]))
    messages = chat(PARTIALS_PROMPT, f"Sub-questions:\n{numbered}\n\nEvidence:\n{evidence}")
    try:
        answers = index.backend.complete(messages, schema=PARTIALS_SCHEMA)["answers"]
        if not isinstance(answers, list):
            raise TypeError("answers is not a list")
    except (ModelError, KeyError, TypeError) as exc:
        record_fallback(fallbacks, "Map", exc)
        return None
    answers = [str(a or "") for a in answers[: len(sub_questions)]]
    return answers + [""] * (len(sub_questions) - len(answers))


def map_check(
    index: ReadModel, question: str, positions: list[int], fallbacks: Fallbacks = None
) -> list[int] | None:
    """The first ``MAP_UNITS`` filtered nodes the model keeps, in their order (the rest are
    the caller's to check)."""
    shown = list(positions[:MAP_UNITS])
    if not shown:
        return []
    lines = []
    for number, p in enumerate(shown, 1):
        x0, y0, x1, y1 = (float(v) for v in index.bbox[p])
        text = (index.title[p] or "") + " | " + index.text[p][:LINE_CHARS]
        size = f"{x1 - x0:.0f}x{y1 - y0:.0f} pt"
        lines.append(f"[{number}] {index.kind[p]}, page {index.page_start[p]}, {size}: {text}")
    messages = chat(CHECK_PROMPT, f"Question: {question}\n\nItems:\n" + "\n".join(lines))
    try:
        keep = index.backend.complete(messages, schema=CHECK_SCHEMA)["keep"]
        numbers = {int(n) for n in keep if not isinstance(n, bool)}
    except (ModelError, KeyError, TypeError, ValueError) as exc:
        record_fallback(fallbacks, "Map", exc)
        return None
    return [p for number, p in enumerate(shown, 1) if number in numbers]
