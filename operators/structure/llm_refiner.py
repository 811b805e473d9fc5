"""LLM-based section filtering (BookRAG §4.2.2): a generative model reviews the title candidates.

``LLMSectionFilter(backend, base)`` first runs the base decider (layout or outline), then sends
the candidates to the model in batches, in document order. Each candidate goes with its index,
text, font size, bold, page and the level the base decider proposes (0: not a title); each
batch also carries the last headings decided in earlier batches, so that levels stay
consistent across the book. The model answers ``{"decisions": [{"index", "level"}]}`` with
level 1..6, or 0 for "not a title" (the prompt and the schema: ``operators.models.prompts``).

When the base decider is the learned filter (``operators.structure.learned_filter``), its
probabilities travel with the candidates (``p_title``) and the least certain candidates go to
the model first (batches in order of ``|p - threshold|``, each batch in document order, with the
headings decided before its first candidate as context); ``max_candidates`` then bounds how
many the model reviews: the confident rest keep the learned decision.

The model's answers replace the base decisions; a candidate the model does not answer, and
every candidate of a batch whose call fails, keeps the base decision. Failures are recorded in
``errors``, never raised. Titles the base decider split over two blocks ("continues the title
above") are sent as one candidate (the leader, with the follower's text appended) and keep
their continuation decision. The outline-only headings and promoted blocks of the base result
are passed through unchanged.
"""

from __future__ import annotations

import json

from operators.models import ModelBackend, ModelError, NoGeneration
from operators.models.prompts import SECTION_PROMPT, SECTION_SCHEMA, chat
from operators.structure.sections import (
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


class LLMSectionFilter:
    """A ``SectionFilter`` that lets a generative model refine a base filter's decisions."""

    def __init__(
        self,
        backend: ModelBackend,
        base: SectionFilter,
        batch_size: int = 40,
        max_candidates: int | None = None,
        threshold: float = 0.5,
    ) -> None:
        self.backend = backend
        self.base = base
        self.batch_size = max(1, batch_size)
        self.max_candidates = max_candidates
        self.threshold = threshold
        self.errors: list[str] = []
        self.n_calls = 0
        self.n_changed = 0

    def decide(self, candidates: list[Candidate], context: SectionContext) -> SectionDecisions:
        result = self.base.decide(candidates, context)
        decisions = list(result.decisions)
        groups = _title_groups(candidates, decisions)
        probs = result.probabilities
        if probs is not None:
            # The least certain first; the model reviews at most max_candidates of them.
            groups.sort(key=lambda g: (abs(probs[g[0]] - self.threshold), g[0]))
            if self.max_candidates is not None:
                groups = groups[: self.max_candidates]
        batches = [
            sorted(groups[start : start + self.batch_size])
            for start in range(0, len(groups), self.batch_size)
        ]
        earlier: list[tuple[int, str]] = []
        for batch in batches:
            if probs is not None:  # batches are not in document order: context from before
                earlier = _headings_before(batch[0][0], candidates, decisions)
            try:
                answers = self._ask(batch, candidates, decisions, earlier, context, probs)
            except NoGeneration as e:  # the backend cannot generate: keep every base decision
                self.errors.append(f"no generation: {e}")
                break
            for pos, level in (answers or {}).items():
                new = Decision(level, MODEL_REASON) if level else Decision(None, MODEL_NOT_TITLE)
                if new.level != decisions[pos].level:
                    self.n_changed += 1
                decisions[pos] = new
            for pos, followers in batch:
                if decisions[pos].level is not None:
                    earlier.append((decisions[pos].level, _group_text(pos, followers, candidates)))
        return SectionDecisions(
            decisions=decisions,
            outline_only=result.outline_only,
            promoted=result.promoted,
            probabilities=probs,
        )

    def _ask(
        self,
        batch: list[tuple[int, list[int]]],
        candidates: list[Candidate],
        decisions: list[Decision],
        earlier: list[tuple[int, str]],
        context: SectionContext,
        probs: list[float] | None = None,
    ) -> dict[int, int] | None:
        """Candidate position → level (0: not a title) for one batch; None when the call
        failed (the failure is recorded). ``NoGeneration`` is raised to stop the loop."""
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
        messages = chat(SECTION_PROMPT, json.dumps(payload, ensure_ascii=False))
        first, last = candidates[batch[0][0]].page, candidates[batch[-1][0]].page
        self.n_calls += 1
        try:
            answer = self.backend.complete(messages, SECTION_SCHEMA)
        except NoGeneration:
            raise
        except (ModelError, ValueError) as e:
            self.errors.append(f"model error (pages {first}-{last}): {e}")
            return None
        by_block = {candidates[pos].index: pos for pos, _ in batch}
        rows = answer.get("decisions") if isinstance(answer, dict) else None
        if not isinstance(rows, list):
            self.errors.append(f"bad answer (pages {first}-{last}): no decisions list")
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
