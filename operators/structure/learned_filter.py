"""The learned section filter: gradient-boosted trees over the candidates' features decide
which title candidates are headings and at what level; the rules are features and fallback.

``LearnedSectionFilter`` runs the rule deciders (``LayoutSectionFilter``, and
``OutlineSectionFilter`` when the outline is used), computes the feature rows
(``operators.structure.heading_features``) and scores them with the committed model
``section_model.json`` (trained by ``python -m benchmarks.train_section_model``, see there):
one binary model "is this candidate a heading" and one multiclass model "its relative level"
per mode (outline off / on). The model file is plain JSON (trees as arrays) evaluated with
numpy here: loading it needs neither scikit-learn nor pickle. With the outline off, where the
model file says ``consensus`` (training sets it when its inner CV favours it), the kept headings
of one style share one level (``style_consensus``). Which score decides "is a heading" (stage 1's,
stage 2's or their mean: ``stage`` in the model file) is also chosen by training's inner CV.

With the outline on, the outline's entries keep the outline's levels (the model may still drop
an entry it scores as furniture), outline entries no block carries are kept as the outline
filter places them, and the candidates the model keeps between them get levels below the
outline heading they follow: deeper levels the bookmarks omit.

``section_filter(outline, use_outline)`` returns the learned filter, or, when the model file is
missing or unreadable, the rule filter (``choose_filter``) with a warning.
"""

from __future__ import annotations

import functools
import json
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bookindex.operators.kinds import MAX_LEVEL
from bookindex.operators.structure.heading_context import (
    ALL_FEATURE_NAMES,
    STEP_FEATURE_NAMES,
    context_features,
    numbering_key,
    row_style,
    step_features,
    upright_style,
)
from bookindex.operators.structure.heading_features import (
    FEATURE_NAMES,
    SHORT_RUN_CAP,
    candidate_features,
    heading_pool,
    pool_decisions,
)
from bookindex.operators.structure.numbering_levels import nest_by_numbering
from bookindex.operators.structure.outline_filter import OutlineSectionFilter, choose_filter
from bookindex.operators.structure.part_levels import nest_in_parts
from bookindex.operators.structure.sections import (
    CONTINUES,
    Candidate,
    Decision,
    LayoutSectionFilter,
    SectionContext,
    SectionDecisions,
    SectionFilter,
)

log = logging.getLogger(__name__)

MODEL_PATH = Path(__file__).with_name("section_model.json")
MODEL_FORMAT = "bookindex-section-model/3"
# The rules' verdicts for the document's title and its title page: the title is the tree's
# root, never a section, whatever the model scores (some gold tables of contents list the
# book's title as an entry; the product's convention is the root).
ROOT_REASONS = ("document title", "title page")
LEARNED = "learned"
LEARNED_NOT_TITLE = "learned: not a title"
LEARNED_SIBLING = "learned: continues a kept sibling"


_ROWS_AT_ONCE = 2048  # rows a stacked tree walk takes at once (TreeEnsemble.raw)


class ModelFileError(ValueError):
    """The model file is missing, unreadable or not a section model."""


@dataclass(frozen=True)
class TreeEnsemble:
    """Additive trees: per output column, a baseline plus the sum of one tree per round.

    Each tree is (feature, threshold, left, right, value) arrays over its nodes; a node with
    left == -1 is a leaf. A row goes left when ``x[feature] <= threshold``. ``raw`` walks
    every tree at once, over the trees' nodes stacked in one set of arrays (``stacked``):
    a few numpy steps per tree level, on the (row, tree) pairs not yet at a leaf, instead of
    per tree and level; ``raw_per_tree`` is the walk one tree at a time, which ``raw`` equals
    bit for bit (the same comparisons, each output column summed in the trees' order)."""

    baseline: np.ndarray  # (n_outputs,)
    trees: tuple[tuple[np.ndarray, ...], ...]  # per tree: feature, threshold, left, right, value
    output: tuple[int, ...]  # the output column each tree adds to
    classes: tuple[int, ...]  # multiclass labels (binary: (0, 1))

    @classmethod
    def from_json(cls, data: dict, n_features: int = len(ALL_FEATURE_NAMES)) -> TreeEnsemble:
        trees = []
        for t in data["trees"]:
            feature = np.asarray(t["feature"], dtype=np.int64)
            threshold = np.asarray(t["threshold"], dtype=np.float64)
            left = np.asarray(t["left"], dtype=np.int64)
            right = np.asarray(t["right"], dtype=np.int64)
            value = np.asarray(t["value"], dtype=np.float64)
            n = len(feature)
            if not (len(threshold) == len(left) == len(right) == len(value) == n and n >= 1):
                raise ModelFileError("a tree's arrays differ in length")
            inner = left >= 0
            if (left[inner] >= n).any() or (right[inner] >= n).any():
                raise ModelFileError("a tree points past its nodes")
            if (feature[inner] < 0).any() or (feature[inner] >= n_features).any():
                raise ModelFileError("a tree uses an unknown feature")
            trees.append((feature, threshold, left, right, value))
        output = tuple(int(o) for o in data["output"])
        baseline = np.asarray(data["baseline"], dtype=np.float64)
        if len(output) != len(trees) or any(not 0 <= o < len(baseline) for o in output):
            raise ModelFileError("a tree adds to an output the model does not have")
        return cls(
            baseline=baseline,
            trees=tuple(trees),
            output=output,
            classes=tuple(int(c) for c in data["classes"]),
        )

    @functools.cached_property
    def stacked(self) -> tuple[np.ndarray, ...]:
        """Every tree's nodes in one set of arrays: (roots, feature, threshold, left, right,
        value), child indexes global; a leaf's feature is 0 (never read) and its children are
        itself (a leaf is where ``left[node] == node``)."""
        sizes = [len(t[0]) for t in self.trees]
        roots = np.cumsum([0, *sizes[:-1]]).astype(np.int64)
        parts: list[list[np.ndarray]] = [[], [], [], [], []]
        for (feature, threshold, left, right, value), at in zip(self.trees, roots, strict=True):
            leaf = left < 0
            own = np.arange(len(feature), dtype=np.int64) + at
            parts[0].append(np.where(leaf, 0, feature))
            parts[1].append(threshold)
            parts[2].append(np.where(leaf, own, left + at))
            parts[3].append(np.where(leaf, own, right + at))
            parts[4].append(value)
        feature, threshold, left, right, value = (np.concatenate(p) for p in parts)
        return roots, feature, threshold, left, right, value

    def raw(self, x: np.ndarray) -> np.ndarray:
        """(n_rows, n_outputs) summed tree values."""
        if len(x) > _ROWS_AT_ONCE:  # (rows × trees) arrays of bounded size
            parts = [self.raw(x[at : at + _ROWS_AT_ONCE]) for at in range(0, len(x), _ROWS_AT_ONCE)]
            return np.vstack(parts)
        roots, feature, threshold, left, right, value = self.stacked
        n_rows, n_trees = len(x), len(roots)
        flat = np.ascontiguousarray(x, dtype=np.float64).ravel()
        # one entry per (row, tree): its node, and where its row starts in ``flat``
        node = np.tile(roots, n_rows)
        row_at = np.repeat(np.arange(n_rows, dtype=np.int64) * x.shape[1], n_trees)
        walking = np.flatnonzero(left[node] != node)
        while walking.size:  # each step moves the entries not yet at a leaf one level down
            at = node[walking]
            go_left = flat[row_at[walking] + feature[at]] <= threshold[at]
            node[walking] = below = np.where(go_left, left[at], right[at])
            walking = walking[left[below] != below]
        values = value[node].reshape(n_rows, n_trees)
        out = np.empty((len(x), len(self.baseline)))
        output = np.asarray(self.output)
        for col, base in enumerate(self.baseline):
            # baseline, then each tree's value in the trees' order: the per-tree sum's rounding
            terms = np.hstack([np.full((len(x), 1), base), values[:, output == col]])
            out[:, col] = np.add.accumulate(terms, axis=1)[:, -1]
        return out

    def raw_per_tree(self, x: np.ndarray) -> np.ndarray:
        """``raw``, walking one tree at a time (the reference ``raw`` is checked against)."""
        out = np.tile(self.baseline, (len(x), 1))
        rows = np.arange(len(x))
        for (feature, threshold, left, right, value), col in zip(
            self.trees, self.output, strict=True
        ):
            node = np.zeros(len(x), dtype=np.int64)
            while True:
                inner = left[node] >= 0
                if not inner.any():
                    break
                r, nd = rows[inner], node[inner]
                go_left = x[r, feature[nd]] <= threshold[nd]
                node[inner] = np.where(go_left, left[nd], right[nd])
            out[:, col] += value[node]
        return out

    def probability(self, x: np.ndarray) -> np.ndarray:
        """Binary: P(class 1) per row. Multiclass: (n_rows, n_classes) softmax."""
        raw = self.raw(x)
        if raw.shape[1] == 1:
            return 1.0 / (1.0 + np.exp(-raw[:, 0]))
        raw = raw - raw.max(axis=1, keepdims=True)
        e = np.exp(raw)
        return e / e.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class ModeModel:
    """One mode's models: the first-stage heading model (own evidence), the second-stage
    heading model and the level model (own evidence plus ``heading_context`` columns computed
    from the first stage's probabilities), the two thresholds, and (outline off) the step
    model: the level difference between a kept heading and the kept heading before it."""

    heading: TreeEnsemble
    heading2: TreeEnsemble
    level: TreeEnsemble
    threshold: float
    threshold2: float
    step: TreeEnsemble | None = None
    blend: bool = False  # the final score is the mean of both stages' (outline off)
    # the kept headings of one style share one level (``style_consensus``; outline off)
    consensus: bool = False
    # the final score is stage 1's (training's inner CV chose it over stage 2 and the blend)
    first_stage_only: bool = False

    def score(
        self,
        x: np.ndarray,
        texts: list[str],
        pages: list[int],
        layout: list[Decision],
        every_level: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Final heading probabilities and level probabilities of a document's pool rows: the
        level model scores only the rows a decision at ``threshold2`` reads
        (``_level_probabilities``), every row with ``every_level``.
        With a step model the kept rows' levels are decoded jointly (``viterbi_levels``) and
        their level probabilities are the decoded levels, one-hot; with ``consensus`` the kept
        rows of one style take the level their style's members agree on
        (``style_consensus``), one-hot."""
        p1 = first_stage(self.heading, x, layout, texts)
        xa = np.hstack([x, context_features(x, texts, pages, p1, self.threshold)])
        if self.first_stage_only:  # stage 2's trees are not walked: their score is not used
            p2 = p1
        else:
            p2 = np.where(p1 > 0.0, self.heading2.probability(xa), 0.0)
            if self.blend:  # stage 2 alone can demote a whole consistent run stage 1 is sure of
                p2 = (p1 + p2) / 2.0
        p2 = stated_scores(p2, x, p1 <= 0.0)  # p2 is 0 wherever p1 is
        level_probs = (
            self.level.probability(xa) if every_level else self._level_probabilities(xa, p2, texts)
        )
        if self.step is not None and len(p2):
            kept = np.flatnonzero(p2 >= self.threshold2)
            if len(kept):
                step_probs = self.step.probability(step_features(xa, texts, pages, list(kept)))
                decoded = viterbi_levels(
                    level_probs[kept], self.level.classes, step_probs, self.step.classes
                )
                level_probs[kept] = 0.0
                level_probs[kept, decoded] = 1.0
        elif self.consensus and len(p2):
            level_probs = style_consensus(level_probs, x, p2 >= self.threshold2)
        return p2, level_probs

    def _level_probabilities(self, xa: np.ndarray, p2: np.ndarray, texts: list[str]) -> np.ndarray:
        """The level model's probabilities for the rows whose level can be read: the rows
        kept (``p2`` at ``threshold2`` or above) and the rows numbered at depth two or more,
        which ``decide_with_scores`` keeps under the threshold where they continue a kept
        sibling (``_continues_sibling``, ``_opens_sibling_run``); NaN for the others, which no
        decision reads. Its trees are the largest of the three (a multiclass round per
        level), and most rows are body text scored far under the threshold."""
        read = (p2 >= self.threshold2) | np.array(
            [_dotted_below_top(numbering_key(t)) for t in texts], dtype=bool
        )
        out = np.full((len(xa), len(self.level.classes)), np.nan)
        if read.any():
            out[read] = self.level.probability(xa[read])
        return out


def _dotted_below_top(key: tuple[str, tuple[int, ...], int] | None) -> bool:
    """Whether a ``numbering_key`` is a dotted number of depth two or more ("2.3"): the
    numbers the sibling pass may keep under the threshold."""
    return key is not None and key[0] == "dotted" and bool(key[1])


def style_consensus(level_probs: np.ndarray, x: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Level probabilities where the kept rows of one style (``heading_context.row_style``:
    size against the body, weight, italics, capitals, typeface share) share one level: the
    level that maximises the summed log probability over the style's kept members, one-hot.
    A book sets each heading level in its own style, while the level model scores each row
    alone and splits one style over two levels where its evidence is thin (sections of one
    chapter at 3 and of the next at 4). Rows not kept are left as they are."""
    out = level_probs.copy()
    groups: dict[tuple, list[int]] = {}
    for i in np.flatnonzero(kept):
        groups.setdefault(row_style(x[i]), []).append(int(i))
    log_p = np.log(np.clip(level_probs, 1e-9, 1.0))
    for rows in groups.values():
        level = int(np.argmax(log_p[rows].sum(axis=0)))
        out[rows] = 0.0
        out[rows, level] = 1.0
    return out


def viterbi_levels(
    level_probs: np.ndarray,
    level_classes: tuple[int, ...],
    step_probs: np.ndarray,
    step_classes: tuple[int, ...],
) -> np.ndarray:
    """The most likely level sequence of consecutive kept headings (indexes into
    ``level_classes``): the level model's probability of each heading's level times the step
    model's probability of the difference from the level before (differences beyond the step
    classes count as the outermost class)."""
    n, m = level_probs.shape
    emit = np.log(np.clip(level_probs, 1e-9, 1.0))
    step_log = np.log(np.clip(step_probs, 1e-9, 1.0))
    levels = np.asarray(level_classes)
    lo, hi = min(step_classes), max(step_classes)
    col = {c: k for k, c in enumerate(step_classes)}
    # trans_col[a, b]: the step class of moving from level a to level b
    diff = np.clip(levels[None, :] - levels[:, None], lo, hi)
    trans_col = np.vectorize(lambda d: col.get(int(d), 0))(diff)
    score = emit[0].copy()
    back = np.zeros((n, m), dtype=np.int64)
    for k in range(1, n):
        total = score[:, None] + step_log[k][trans_col]  # (from, to)
        back[k] = np.argmax(total, axis=0)
        score = total[back[k], np.arange(m)] + emit[k]
    path = np.zeros(n, dtype=np.int64)
    path[-1] = int(np.argmax(score))
    for k in range(n - 1, 0, -1):
        path[k - 1] = back[k, path[k]]
    return path


_COLON = FEATURE_NAMES.index("ends_colon")
_UPPER = FEATURE_NAMES.index("upper_share")
_LOWER = FEATURE_NAMES.index("starts_lower")
_RULE_LEVEL = FEATURE_NAMES.index("rule_level")
_SHORT_RUN = FEATURE_NAMES.index("short_run")


def not_sections(x: np.ndarray, texts: list[str]) -> np.ndarray:
    """Rows the rules do not keep that are stated not to be sections, where the training data
    are too thin or too lopsided for the model to learn it:

    * run-in labels: a line in capitals ending in a colon ("SETTINGS:", "ISBN:"): 2 of ~41,000
      training rows, neither a heading;
    * a line that starts in lower case and is not numbered ("a)", "bb)" are numbers): it
      carries on a sentence (a run-on paragraph cut into lines); 0.7 % of ~8,900 training rows
      are headings, styled titles such as "a kind of mending";
    * a line in a full run of short lines set in one type (``short_run`` at its cap: ten or
      more in a row, a list such as sample_03's "Same as a == b.", "Same as a >= b.", …): 7 of
      the ~6,860 such training rows are headings (stop 10), and the model, which sees them
      rarely in a book's own body face, kept sample_03's at p 0.25 against 0.225."""
    if not len(x):
        return np.zeros(0, dtype=bool)
    not_kept = x[:, _RULE_LEVEL] == 0
    run_in = (x[:, _COLON] > 0) & (x[:, _UPPER] > 0.9)
    lower = (x[:, _LOWER] > 0) & np.array([numbering_key(t) is None for t in texts], dtype=bool)
    listed = x[:, _SHORT_RUN] >= SHORT_RUN_CAP
    return not_kept & (run_in | lower | listed)


_MATTER_NAME = FEATURE_NAMES.index("matter_name")
_SAME_TEXT = FEATURE_NAMES.index("same_text_count")
_IN_CONTENTS = FEATURE_NAMES.index("in_contents")
_ON_CONTENTS_PAGE = FEATURE_NAMES.index("on_contents_page")
RECURRING_MATTER_MIN = 3  # times a matter name recurs before its rows are stated sections


def recurring_matter(x: np.ndarray) -> np.ndarray:
    """Rows the rules keep whose text is a front- or back-matter name (``matter_name``:
    "Notes", "Introduction", "References") that the book sets at least
    ``RECURRING_MATTER_MIN`` times (``same_text_count``), off its contents pages and not
    listed there: each chapter's own notes, introduction or references. Over the 24 labelled
    books 260 of the 261 such rows, in 11 books, are gold headings (stop 13;
    ``python -m benchmarks.train_section_model --stated``). The model learns
    the pattern where such a heading wears a heading's face, but one book (access-controlled)
    sets its 40 chapters' "Notes" in the endnotes' own small type, a face no other book gives a
    heading, and run I's fold model dropped all 40. Stated, like ``not_sections``:
    these rows score 1."""
    if not len(x):
        return np.zeros(0, dtype=bool)
    return (
        (x[:, _RULE_LEVEL] > 0)
        & (x[:, _MATTER_NAME] > 0)
        & (x[:, _SAME_TEXT] >= RECURRING_MATTER_MIN)
        & (x[:, _IN_CONTENTS] == 0)
        & (x[:, _ON_CONTENTS_PAGE] == 0)
    )


def first_stage(
    heading: TreeEnsemble, x: np.ndarray, layout: list[Decision], texts: list[str]
) -> np.ndarray:
    """First-stage heading probabilities; 0 for the title's rows, continuation lines and the
    rows ``not_sections`` names, 1 for the rows ``recurring_matter`` names."""
    p = heading.probability(x)
    if not len(p):
        return p
    excluded = np.array([_excluded(d.reason) for d in layout], dtype=bool)
    return stated_scores(np.where(excluded | not_sections(x, texts), 0.0, p), x, excluded)


def stated_scores(p: np.ndarray, x: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """Heading scores with the rows ``recurring_matter`` names set to 1 (but for the rows
    ``excluded``: the title's and continuation lines)."""
    if not len(p):
        return p
    return np.where(recurring_matter(x) & ~excluded, 1.0, p)


def _excluded(reason: str) -> bool:
    return reason == CONTINUES or reason in ROOT_REASONS


@dataclass(frozen=True)
class SectionModel:
    """The two modes' models and the training record (data hashes, CV scores)."""

    off: ModeModel
    on: ModeModel
    training: dict

    def mode(self, outline_used: bool) -> ModeModel:
        return self.on if outline_used else self.off


def mode_from_json(data: dict) -> ModeModel:
    """One mode's ``ModeModel`` from its JSON object (``modes.off`` / ``modes.on`` of a model
    file); raises KeyError, TypeError or ValueError when it is malformed."""
    return ModeModel(
        heading=TreeEnsemble.from_json(data["heading"]),
        heading2=TreeEnsemble.from_json(data["heading2"]),
        level=TreeEnsemble.from_json(data["level"]),
        threshold=float(data["threshold"]),
        threshold2=float(data["threshold2"]),
        step=TreeEnsemble.from_json(data["step"], len(STEP_FEATURE_NAMES))
        if data.get("step")
        else None,
        blend=bool(data.get("blend", False)),
        consensus=bool(data.get("consensus", False)),
        first_stage_only=data.get("stage") == "first",
    )


def parse_model(data: dict) -> SectionModel:
    """A ``SectionModel`` from the JSON object of a model file; raises ``ModelFileError``."""
    if not isinstance(data, dict) or data.get("format") != MODEL_FORMAT:
        raise ModelFileError(f"not a {MODEL_FORMAT} file")
    if list(data.get("feature_names", [])) != list(ALL_FEATURE_NAMES):
        raise ModelFileError("the model was trained on other features than this code computes")
    try:
        modes = {name: mode_from_json(data["modes"][name]) for name in ("off", "on")}
    except (KeyError, TypeError, ValueError) as e:
        raise ModelFileError(f"malformed model: {type(e).__name__}: {e}") from e
    return SectionModel(off=modes["off"], on=modes["on"], training=data.get("training", {}))


def load_model(path: str | Path = MODEL_PATH) -> SectionModel:
    """Read and check a model file; raises ``ModelFileError``."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFileError(f"cannot read section model {path}: {e}") from e
    return parse_model(data)


@functools.lru_cache(maxsize=8)
def _cached_model(path: str) -> tuple[SectionModel | None, str]:
    """The model of the file at ``path`` and "", or None and why it cannot load (warned)."""
    try:
        return load_model(path), ""
    except ModelFileError as e:
        msg = f"learned section filter unavailable, using the layout rules: {e}"
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
        log.warning(msg)
        return None, str(e)


def unavailable(model_path: str | Path | None = None) -> str:
    """Why the learned filter cannot run ("" when its model file loads): what
    ``section_filter`` falls back to the rules for."""
    return _cached_model(str(model_path or MODEL_PATH))[1]


def decide_with_scores(
    candidates: list[Candidate],
    layout: list[Decision],
    outline: list[Decision] | None,
    p_heading: np.ndarray,
    level_probs: np.ndarray,
    level_classes: tuple[int, ...],
    threshold: float,
    numbering_pass: str = "parent",
    outline_levels: str = "style",
    prominences: list[tuple] | None = None,
    parts: bool = True,
    numbering_levels: bool = True,
    styles: list[tuple] | None = None,
) -> list[Decision]:
    """Decisions from the model's scores. Titles the rules split over two candidates stay
    merged; the document title is the root, not a section (``ROOT_REASONS``); outline entries
    keep the outline's level; a heading the model keeps after an outline entry goes below it
    (at least one level deeper). With ``numbering_pass`` "full" numbered headings are kept
    consistent with their numbers: "2.3" goes one level below the kept "2", and a number that
    continues a kept sibling ("2.4" after "2.3", "IV." after "III.") takes the sibling's level;
    "parent" does the first only; "off" neither.

    With ``outline_levels`` "below" a heading kept after an outline entry is put at least one
    level under it, at the level model's level otherwise. With "stack" the
    headings kept between two outline entries are levelled
    among themselves (``_below_outline``): the level model's levels order them, and they take
    consecutive levels under the entry, so a book whose bookmarks stop at chapters gets its
    sections at chapter + 1 and their subsections at + 2, whatever absolute level the model
    guessed; "style" (the default; "stack" without ``prominences``) does the same but orders
    the added headings by how prominently they are set (``prominences``, one key per
    candidate: ``row_prominences``) rather than by the level model: a style less prominent than
    another added one sits below it. "below" and "stack" are ablation rows of the grouped CV
    (``benchmarks.train_section_model``).

    Without the outline, ``parts`` nests the chapters of a book divided into numbered parts
    one level under them (``part_levels.nest_in_parts``; off: the CV's "no parts" row), and
    ``numbering_levels`` then levels the numbered headings by the order in which the book's
    numbering styles nest ("A." > "I." > "1." > "a)"; ``numbering_levels.nest_by_numbering``;
    off: the CV's "no num-levels" row).

    With ``styles`` (one ``heading_context.row_style`` key per candidate), a heading numbered
    at depth two or more that the model scores below the threshold is kept all the same where
    it continues a kept sibling set in the same style ("1.2.1.3" after the kept "1.2.1.2":
    ``_continues_sibling``), at that sibling's level, or where it opens a run of siblings in
    its style that the model keeps further on ("3.5.1.1" before the kept "3.5.1.2":
    ``_opens_sibling_run``, ``_kept_numbers``); without (the CV's "no siblings" row) the
    model's score alone decides."""
    decisions: list[Decision] = []
    # (kind, numbers) of a kept heading → (its level, its style or None, the level model's level)
    numbered: dict[tuple, tuple[int, tuple | None, int]] = {}
    relative = (
        [level_classes[int(k)] for k in np.argmax(level_probs, axis=1)] if len(level_probs) else []
    )
    if outline is not None and outline_levels == "style" and prominences is not None:
        relative = _style_ranks(relative, layout, outline, p_heading, threshold, prominences)
    keys = [numbering_key(c.text) if numbering_pass != "off" else None for c in candidates]
    kept_ahead = _kept_numbers(keys, layout, p_heading, threshold, styles)
    outline_level = 0  # level of the latest outline entry kept
    # the headings kept since that entry: (the level model's level, the level given), deepest last
    below: list[tuple[int, int]] = []
    for pos, _ in enumerate(candidates):
        p = float(p_heading[pos])
        if layout[pos].reason == CONTINUES:
            decisions.append(Decision(None, CONTINUES))
            continue
        if layout[pos].reason in ROOT_REASONS:
            decisions.append(Decision(None, f"{LEARNED_NOT_TITLE} (p={p:.2f})"))
            continue
        key = keys[pos]
        sibling = None
        if p < threshold:
            style = styles[pos] if styles else None
            sibling = _continues_sibling(key, style, numbered)
            if sibling is None and not _opens_sibling_run(key, style, pos, kept_ahead):
                decisions.append(Decision(None, f"{LEARNED_NOT_TITLE} (p={p:.2f})"))
                continue
        level = model_level = min(max(relative[pos], 1), MAX_LEVEL)
        by_number = False
        if sibling is not None:
            level, _, model_level = numbered[sibling]
            by_number = True
        elif key is not None:
            kind, parents, number = key
            if kind == "dotted" and parents and (kind, parents) in numbered:
                level, by_number = min(numbered[(kind, parents)][0] + 1, MAX_LEVEL), True
            elif numbering_pass == "full" and (kind, (*parents, number - 1)) in numbered:
                level, by_number = numbered[(kind, (*parents, number - 1))][0], True
        reason = f"{LEARNED} (p={p:.2f})" if p >= threshold else f"{LEARNED_SIBLING} (p={p:.2f})"
        if outline is not None:
            o = outline[pos]
            if o.reason == "outline entry" and o.level:
                outline_level = level = o.level
                below = []
                reason = f"{LEARNED} outline entry (p={p:.2f})"
            elif outline_level and outline_levels in ("stack", "style"):
                level = _below_outline(below, outline_level, model_level, level, by_number)
            elif outline_level:
                level = min(max(level, outline_level + 1), MAX_LEVEL)
        if key is not None:
            full = (*key[1], key[2])
            for stale in [k for k in numbered if k[0] == key[0] and len(k[1]) > len(full)]:
                del numbered[stale]  # "2.1" below this "3" is no longer the current sibling
            numbered[(key[0], full)] = (level, styles[pos] if styles else None, model_level)
        decisions.append(Decision(level, reason))
    if outline is None and (parts or numbering_levels):
        texts = [c.text for c in candidates]
        levels = [d.level for d in decisions]
        if parts:
            levels = nest_in_parts(texts, levels)
        if numbering_levels:
            levels = nest_by_numbering(texts, levels)
        decisions = [Decision(lv, d.reason) for lv, d in zip(levels, decisions, strict=True)]
    return decisions


def _continues_sibling(
    key: tuple[str, tuple[int, ...], int] | None,
    style: tuple | None,
    kept: dict[tuple, tuple[int, tuple | None, int]],
) -> tuple | None:
    """The kept heading a candidate's number continues, set in the candidate's style
    (``sibling_styles``): for "1.2.1.3" the kept "1.2.1.2" (``kept`` maps (kind, numbers) to
    (level, style, level model's level)), None otherwise. Dotted numbers of depth two or more
    only: a bare "2." may as well be a numbered paragraph after a heading "1.", and the first of
    a run ("1.2.2.1") has no sibling to continue."""
    if not _dotted_below_top(key) or style is None or key[2] < 2:
        return None
    kind, parents, number = key
    previous = (kind, (*parents, number - 1))
    found = kept.get(previous)
    return previous if found is not None and sibling_styles(found[1], style) else None


def _kept_numbers(
    keys: list[tuple[str, tuple[int, ...], int] | None],
    layout: list[Decision],
    p_heading: np.ndarray,
    threshold: float,
    styles: list[tuple] | None,
) -> dict[tuple, list[tuple[int, tuple]]]:
    """The dotted numbers of depth two or more kept ahead of each candidate: (kind, numbers) →
    [(candidate position, style)]. A number is kept where the model's score keeps it or where
    it opens a run whose next sibling is kept (``_opens_sibling_run``), so one backward pass
    carries a run back to its first member ("3.5.1.1", "3.5.1.2" under the threshold before
    the kept "3.5.1.3"), given each candidate's ``numbering_key`` (None throughout with the
    numbering pass off). Empty without ``styles``."""
    ahead: dict[tuple, list[tuple[int, tuple]]] = {}
    if styles is None:
        return ahead
    for pos in range(len(keys) - 1, -1, -1):
        if layout[pos].reason == CONTINUES or layout[pos].reason in ROOT_REASONS:
            continue
        key = keys[pos]
        if not _dotted_below_top(key):
            continue
        if p_heading[pos] >= threshold or _opens_sibling_run(key, styles[pos], pos, ahead):
            ahead.setdefault((key[0], (*key[1], key[2])), []).append((pos, styles[pos]))
    return ahead


def _opens_sibling_run(
    key: tuple[str, tuple[int, ...], int] | None,
    style: tuple | None,
    pos: int,
    kept_ahead: dict[tuple, list[tuple[int, tuple]]],
) -> bool:
    """Whether a candidate's number is followed by its next sibling among the headings the
    model keeps, set in the candidate's style ("3.5.1.1" before the kept "3.5.1.2":
    ``kept_ahead`` from ``_kept_numbers``): the first of a run, which ``_continues_sibling``
    cannot reach, and a heading the model missed between two it kept. Dotted numbers of depth
    two or more only, as there."""
    if not _dotted_below_top(key) or style is None:
        return False
    kind, parents, number = key
    after = kept_ahead.get((kind, (*parents, number + 1)), [])
    return any(later > pos and sibling_styles(later_style, style) for later, later_style in after)


def sibling_styles(a: tuple | None, b: tuple | None) -> bool:
    """Whether two ``heading_context.row_style`` keys set numbered siblings alike: the same
    keys but for italics. A line is italic only when every span is, so "2.1.1 The Concept of
    'Pollution'" with its number in bold roman before a bold-italic title reads upright, while
    its sibling "2.1.2", whose number the PDF puts on a line of its own, is joined to a title
    block that reads italic (climate-change-and-international-shipping): one style, two keys."""
    if a is None or b is None:
        return False
    return upright_style(a) == upright_style(b)


_SIZE_DIFF = FEATURE_NAMES.index("size_diff")
_BOLD = FEATURE_NAMES.index("bold")
_CAPS = FEATURE_NAMES.index("caps")
_ITALIC = FEATURE_NAMES.index("italic")


def row_prominences(x: np.ndarray) -> list[tuple]:
    """How prominently each feature row's candidate is set, as ``sections.prominence`` orders
    styles (size against the body to half a point, bold, capitals, upright), from the row."""
    return [
        (round(float(r[_SIZE_DIFF]) * 2) / 2, bool(r[_BOLD]), bool(r[_CAPS]), not r[_ITALIC])
        for r in x
    ]


def _style_ranks(
    relative: list[int],
    layout: list[Decision],
    outline: list[Decision],
    p_heading: np.ndarray,
    threshold: float,
    prominences: list[tuple],
) -> list[int]:
    """The level order of the headings kept that are not outline entries, by prominence: the
    most prominent style kept is 1, the next 2, and so on (outline entries keep theirs)."""
    kept = [
        pos
        for pos in range(len(relative))
        if p_heading[pos] >= threshold
        and layout[pos].reason != CONTINUES
        and layout[pos].reason not in ROOT_REASONS
        and outline[pos].reason != "outline entry"
    ]
    order = sorted({prominences[pos] for pos in kept}, reverse=True)
    rank = {key: k + 1 for k, key in enumerate(order)}
    out = list(relative)
    for pos in kept:
        out[pos] = min(rank[prominences[pos]], MAX_LEVEL)
    return out


def _below_outline(
    below: list[tuple[int, int]], outline_level: int, model_level: int, level: int, by_number: bool
) -> int:
    """The level of a heading kept after an outline entry of ``outline_level``, given the
    headings kept since that entry (``below``: (model level, level given), updated here): one
    level under the nearest earlier heading the model puts shallower than this one, else one
    under the entry; headings the model puts at the same level are siblings. A level fixed by
    the heading's number (``by_number``) is kept, at least one under the entry."""
    if by_number:
        level = max(level, outline_level + 1)
        while below and below[-1][1] >= level:
            below.pop()
    else:
        while below and below[-1][0] >= model_level:
            below.pop()
        level = (below[-1][1] if below else outline_level) + 1
    level = min(level, MAX_LEVEL)
    below.append((model_level, level))
    return level


class LearnedSectionFilter:
    """Rules as features, gradient-boosted trees as the decider (module docstring)."""

    def __init__(self, model: SectionModel, use_outline: bool) -> None:
        self.model = model
        self.use_outline = use_outline
        self.layout = LayoutSectionFilter()
        self.outline_filter = OutlineSectionFilter()

    def decide(self, candidates: list[Candidate], context: SectionContext) -> SectionDecisions:
        layout = self.layout.decide(candidates, context)
        outline_used = self.use_outline and len([e for e in context.outline if e[1].strip()]) >= 2
        outline = self.outline_filter.decide(candidates, context) if outline_used else None
        pool = heading_pool(candidates, context.blocks)
        if not pool.members:
            return outline or layout
        pool_layout = pool_decisions(pool, layout.decisions)
        pool_outline = (
            pool_decisions(pool, outline.decisions, outline.promoted) if outline else None
        )
        feats = candidate_features(pool.members, context, pool_layout, pool_outline)
        mode = self.model.mode(outline is not None)
        p_heading, level_probs = mode.score(
            feats.x, [c.text for c in pool.members], [c.page for c in pool.members], pool_layout
        )
        decided = decide_with_scores(
            pool.members,
            pool_layout,
            pool_outline,
            p_heading,
            level_probs,
            mode.level.classes,
            mode.threshold2,
            prominences=row_prominences(feats.x),
            styles=[row_style(r) for r in feats.x],
        )
        decisions = [Decision(None, "unset") for _ in candidates]
        probabilities = [0.0 for _ in candidates]
        in_pool = {c.index for c in pool.members}
        promoted = {
            i: d for i, d in (outline.promoted if outline else {}).items() if i not in in_pool
        }
        for member, pos, d, p in zip(
            pool.members, pool.candidate_pos, decided, p_heading, strict=True
        ):
            if pos is not None:
                decisions[pos] = d
                probabilities[pos] = float(p)
            elif d.level is not None:
                promoted[member.index] = d
        return SectionDecisions(
            decisions=decisions,
            outline_only=outline.outline_only if outline else [],
            promoted=promoted,
            probabilities=probabilities,
            titles=outline.titles if outline else {},
        )


def section_filter(
    outline: list[tuple[int, str, int]],
    use_outline: bool,
    model_path: str | Path | None = None,
) -> SectionFilter:
    """The learned filter, or the rule filter (with a warning) when the model cannot load
    (``unavailable`` says why). ``model_path``: default ``MODEL_PATH``, read at the call."""
    model, _ = _cached_model(str(model_path or MODEL_PATH))
    if model is None:
        return choose_filter(outline, use_outline)
    return LearnedSectionFilter(model, use_outline)
