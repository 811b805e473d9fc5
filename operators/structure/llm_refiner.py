"""LLM-based section filtering (BookRAG §4.2.2): a generative model reviews the title candidates.

``LLMSectionFilter(backend, base)`` first runs the base decider (layout or outline), then sends
the candidates to the model in windows (``review_windows``), in document order. Each candidate
goes with its index, text, font size, bold, page and the level the base decider proposes (0: not
a title); each window also carries the last headings the base decider found before it, so that
levels stay consistent across the book and the windows are independent requests: the index job
sends them all at once through a ``ray.data.llm`` processor (pipelines/model_requests.py) and
hands the answers back as ``decided``. The model answers ``{"decisions": [{"index", "level"}]}`` with
level 1..6, or 0 for "not a title" (the prompt and the schema: ``operators.models.prompts``).

When the base decider is the learned filter (``operators.structure.learned_filter``), its
probabilities travel with the candidates (``p_title``) and the least certain candidates go to
the model first (windows in order of ``|p - threshold|``, each window in document order); ``max_candidates`` then bounds how
many the model reviews: the confident rest keep the learned decision.

The model's answers replace the base decisions; a candidate the model does not answer, and
every candidate of a window whose call fails, keeps the base decision. Failures are recorded in
``errors``, never raised. Titles the base decider split over two blocks ("continues the title
above") are sent as one candidate (the leader, with the follower's text appended) and keep
their continuation decision. The outline-only headings and promoted blocks of the base result
are passed through unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bookindex.operators.models import ModelBackend, ModelError, NoGeneration
from bookindex.operators.models.prompts import SECTION_PROMPT, SECTION_SCHEMA, chat
from bookindex.operators.structure.sections import (
    CONTINUES,
    MAX_LEVEL,
    Candidate,
    Decision,
    SectionContext,
    SectionDecisions,
    SectionFilter,
)

TEXT_CHARS = 120  # as SECTION_PROMPT tells the model
CONTEXT_HEADINGS = 30
MODEL_REASON = "model"
MODEL_NOT_TITLE = "model: not a title"


def _clip(text: str, n: int = TEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


@dataclass
class Window:
    """One request of the refiner: a window of candidate groups (leader position, follower
    positions), in document order, and its chat messages. Windows are independent of each
    other: each carries the rule-based headings decided before its first candidate."""

    number: int
    groups: list[tuple[int, list[int]]]
    messages: list[dict]


@dataclass
class Review:
    """One candidate the model reviewed (a row of the ``section_decisions`` table)."""

    block_index: int
    text: str
    page: int
    rule_level: int  # 0: not a title
    probability: float | None
    window: int
    model_level: int | None = None  # None: no usable answer; 0: not a title
    error: str = ""


class LLMSectionFilter:
    """A ``SectionFilter`` that lets a generative model refine a base filter's decisions.

    The candidates go to the model in independent windows (``windows``), so they can all be
    asked at once: by ``backend`` here, one window after the other, or by a ``ray.data.llm``
    processor in the index job, whose answers come back as ``decided`` (block index → level,
    0: not a title) and replace the base decisions. Without either, the base decisions stand
    and the windows wait in ``self.windows`` for the processor. ``self.reviews``: what the
    model was asked and answered, per candidate."""

    def __init__(
        self,
        backend: ModelBackend | None,
        base: SectionFilter,
        batch_size: int = 40,
        max_candidates: int | None = None,
        threshold: float = 0.5,
        decided: dict[int, int] | None = None,
        window_errors: dict[int, str] | None = None,
    ) -> None:
        self.backend = backend
        self.base = base
        self.batch_size = max(1, batch_size)
        self.max_candidates = max_candidates
        self.threshold = threshold
        self.decided = decided
        self.window_errors = window_errors or {}
        self.errors: list[str] = []
        self.windows: list[Window] = []
        self.reviews: list[Review] = []
        self.n_calls = 0
        self.n_changed = 0

    def decide(self, candidates: list[Candidate], context: SectionContext) -> SectionDecisions:
        result = self.base.decide(candidates, context)
        decisions = list(result.decisions)
        probs = result.probabilities
        self.windows = review_windows(
            candidates, result, context, self.batch_size, self.max_candidates, self.threshold
        )
        self.reviews = [
            Review(
                block_index=candidates[pos].index,
                text=_group_text(pos, followers, candidates),
                page=candidates[pos].page,
                rule_level=decisions[pos].level or 0,
                probability=None if probs is None else round(float(probs[pos]), 4),
                window=window.number,
                error=self.window_errors.get(window.number, ""),
            )
            for window in self.windows
            for pos, followers in window.groups
        ]
        answers: dict[int, int] = {}  # candidate position → level
        if self.backend is not None:
            answers = self._ask_all(candidates)
        elif self.decided is not None:
            position = {c.index: pos for pos, c in enumerate(candidates)}
            answers = {position[i]: lv for i, lv in self.decided.items() if i in position}
        by_position = {c.index: pos for pos, c in enumerate(candidates)}
        for review in self.reviews:
            pos = by_position[review.block_index]
            if pos in answers:
                review.model_level = answers[pos]
        for pos in sorted(answers):
            level = answers[pos]
            new = Decision(level, MODEL_REASON) if level else Decision(None, MODEL_NOT_TITLE)
            if new.level != decisions[pos].level:
                self.n_changed += 1
            decisions[pos] = new
        return SectionDecisions(
            decisions=decisions,
            outline_only=result.outline_only,
            promoted=result.promoted,
            probabilities=probs,
            titles=result.titles,
        )

    def _ask_all(self, candidates: list[Candidate]) -> dict[int, int]:
        """Every window asked through ``self.backend``, one after the other."""
        answers: dict[int, int] = {}
        for window in self.windows:
            first = candidates[window.groups[0][0]].page
            last = candidates[window.groups[-1][0]].page
            self.n_calls += 1
            try:
                answer = self.backend.complete(window.messages, SECTION_SCHEMA)
            except NoGeneration as e:  # the backend cannot generate: keep every base decision
                self.errors.append(f"no generation: {e}")
                break
            except (ModelError, ValueError) as e:
                self.errors.append(f"model error (pages {first}-{last}): {e}")
                continue
            found = window_answer(window, candidates, answer)
            if found is None:
                self.errors.append(f"bad answer (pages {first}-{last}): no decisions list")
                continue
            answers.update(found)
        return answers


def review_windows(
    candidates: list[Candidate],
    result: SectionDecisions,
    context: SectionContext,
    batch_size: int = 40,
    max_candidates: int | None = None,
    threshold: float = 0.5,
) -> list[Window]:
    """The refiner's requests over a base decider's ``result``: candidate groups in windows
    of ``batch_size``, in document order (with the learned filter's probabilities: the least
    certain first, at most ``max_candidates`` of them, each window in document order). Each
    window's context is the base decisions' headings before its first candidate, so the
    windows do not depend on each other's answers."""
    decisions = list(result.decisions)
    groups = _title_groups(candidates, decisions)
    probs = result.probabilities
    if probs is not None:
        groups.sort(key=lambda g: (abs(probs[g[0]] - threshold), g[0]))
        if max_candidates is not None:
            groups = groups[:max_candidates]
    windows = []
    for number, start in enumerate(range(0, len(groups), max(1, batch_size))):
        batch = sorted(groups[start : start + batch_size])
        earlier = _headings_before(batch[0][0], candidates, decisions)
        messages = _messages(batch, candidates, decisions, earlier, context, probs)
        windows.append(Window(number, batch, messages))
    return windows


def _messages(
    batch: list[tuple[int, list[int]]],
    candidates: list[Candidate],
    decisions: list[Decision],
    earlier: list[tuple[int, str]],
    context: SectionContext,
    probs: list[float] | None = None,
) -> list[dict]:
    """The chat messages of one window (SECTION_PROMPT and its JSON payload)."""
    items = []
    for pos, followers in batch:
        c = candidates[pos]
        item = {
            "index": c.index,
            "text": _clip(_group_text(pos, followers, candidates)),
            "font_size": round(c.font_size, 1),
            "bold": c.bold,
            "page": c.page,
            "proposed_level": decisions[pos].level or 0,
        }
        if decisions[pos].reason == "outline entry":
            item["in_pdf_outline"] = True
        if probs is not None:
            item["p_title"] = round(probs[pos], 2)
        items.append(item)
    payload = {
        "body_font_size": round(context.body.font_size, 1),
        "earlier_headings": [
            {"level": lv, "title": _clip(t, 80)} for lv, t in earlier[-CONTEXT_HEADINGS:]
        ],
        "candidates": items,
    }
    return chat(SECTION_PROMPT, json.dumps(payload, ensure_ascii=False))


def window_answer(
    window: Window, candidates: list[Candidate], answer: object
) -> dict[int, int] | None:
    """Candidate position → level (0: not a title) from a window's parsed JSON answer; None
    when it holds no decisions list. Unknown indices and malformed rows are skipped, levels
    clamped to 1..MAX_LEVEL."""
    by_block = {candidates[pos].index: pos for pos, _ in window.groups}
    rows = answer.get("decisions") if isinstance(answer, dict) else None
    if not isinstance(rows, list):
        return None
    out: dict[int, int] = {}
    for row in rows:
        if not isinstance(row, dict):
            continue
        index, level = row.get("index"), row.get("level")
        if isinstance(index, bool) or isinstance(level, bool):
            continue
        try:
            index, level = int(index), int(level)
        except (TypeError, ValueError):
            continue
        if index in by_block and level >= 0:
            out[by_block[index]] = min(level, MAX_LEVEL)
    return out


def block_levels(window_blocks: list[int], answer: object) -> dict[int, int] | None:
    """Block index → level from a window's parsed JSON answer, for the candidates whose
    block indices are ``window_blocks`` (the index job's side of ``window_answer``)."""
    candidates = [Candidate(i, "", 0, 0.0, False, False, 1, 0.0) for i in window_blocks]
    window = Window(0, [(pos, []) for pos in range(len(window_blocks))], [])
    found = window_answer(window, candidates, answer)
    return None if found is None else {window_blocks[pos]: lv for pos, lv in found.items()}


def _title_groups(
    candidates: list[Candidate], decisions: list[Decision]
) -> list[tuple[int, list[int]]]:
    """(leader position, follower positions): a title split over consecutive candidates is
    one group, so the model sees it whole and never breaks the continuation."""
    groups: list[tuple[int, list[int]]] = []
    for pos, decision in enumerate(decisions):
        if (
            decision.reason == CONTINUES
            and groups
            and groups[-1][0] + len(groups[-1][1]) == (pos - 1)
        ):
            groups[-1][1].append(pos)
        else:
            groups.append((pos, []))
    return [g for g in groups if decisions[g[0]].reason != CONTINUES]


def _headings_before(
    first: int, candidates: list[Candidate], decisions: list[Decision]
) -> list[tuple[int, str]]:
    """(level, text) of the headings decided before candidate position ``first``."""
    out = [
        (decisions[pos].level, candidates[pos].text)
        for pos in range(first)
        if decisions[pos].level is not None
    ]
    return out[-CONTEXT_HEADINGS:]


def _group_text(pos: int, followers: list[int], candidates: list[Candidate]) -> str:
    return " ".join([candidates[pos].text, *(candidates[f].text for f in followers)])
