"""Second-stage features of the learned section filter: what the rest of the document says
about a heading candidate, given the first stage's heading probabilities.

The first stage (``heading_features``) scores each pool member from its own evidence. Whether a
style is a heading level, and which level, is a property of the document: a style whose
members the first stage mostly keeps is a heading style; the kept styles, ordered by
prominence, are the book's levels; numbering that continues the previous number at its depth
is a heading sequence. These columns are appended to the first-stage row and feed the second
heading model and the level model (``operators.structure.learned_filter``). All are relative to
the document (ranks, shares, continuity), none is an absolute size, so they carry from book to
book.

Plain Python and numpy only: the product computes these at index time.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from bookindex.operators.structure.heading_features import FEATURE_NAMES

CONTEXT_FEATURE_NAMES: tuple[str, ...] = (
    "ctx_p",  # first-stage probability
    "ctx_style_mean_p",  # mean first-stage probability over the member's style
    "ctx_style_kept_share",  # share of the style's members the first stage keeps
    "ctx_style_kept",  # how many of the style's members it keeps
    "ctx_kept_size_rank",  # rank of the size among the kept members' sizes (0: largest)
    "ctx_kept_size_rank_rel",  # the same over the number of kept sizes
    "ctx_kept_style_rank",  # rank of the style among the kept styles by prominence
    "ctx_kept_style_rank_rel",
    "ctx_n_kept_styles",
    "ctx_n_kept_sizes",
    "ctx_depth_rel",  # numbering depth minus the smallest numbered depth kept (-1: none)
    "ctx_num_continues",  # the number continues the previous one of its kind and depth
    "ctx_num_starts",  # a first number (1, I, A) under a kept member
    "ctx_prev_kept_rank",  # style rank of the previous kept member (-1: none)
    "ctx_rank_vs_prev",  # own style rank minus the previous kept member's
    "ctx_page_first_kept",  # the first kept member on its page
)
ALL_FEATURE_NAMES: tuple[str, ...] = FEATURE_NAMES + CONTEXT_FEATURE_NAMES
_F = {name: i for i, name in enumerate(FEATURE_NAMES)}
_C = {name: i for i, name in enumerate(CONTEXT_FEATURE_NAMES)}

_DOTTED_NUM = re.compile(r"^(\d{1,3}(?:\.\d{1,3}){0,5})\.?(?:\s|$|(?=[A-Z]))")
_WORD_NUM = re.compile(
    r"^(chapter|part|section|appendix|annex|article|book)\s+([0-9]+|[ivxlc]+|[a-z])\b", re.I
)
_ROMAN_NUM = re.compile(r"^([IVXL]{1,6})[.)]?\s+\S")
_LETTER_NUM = re.compile(r"^\(?(([A-Z])\2?|([a-z])\3?)[.)]\s+\S")
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}


def _roman(text: str) -> int | None:
    total, prev = 0, 0
    for ch in reversed(text.lower()):
        v = _ROMAN_VALUES.get(ch)
        if v is None:
            return None
        total = total - v if v < prev else total + v
        prev = max(prev, v)
    return total or None


def numbering_key(text: str) -> tuple[str, tuple[int, ...], int] | None:
    """(kind, parent numbers, own number) of a heading's leading number: "2.3 Title" →
    ("dotted", (2,), 3); "Chapter 4" → ("chapter", (), 4); "IV. Title" → ("roman", (), 4);
    "B. Title" → ("LETTER", (), 2); "bb) Title" → ("letter2", (), 2). None when the text is not
    numbered."""
    text = text.strip()
    m = _WORD_NUM.match(text)
    if m:
        label, num = m.group(1).lower(), m.group(2)
        n = int(num) if num.isdigit() else _roman(num) or (ord(num.lower()) - 96)
        return (label, (), n)
    m = _DOTTED_NUM.match(text)
    if m:
        parts = tuple(int(p) for p in m.group(1).split("."))
        return ("dotted", parts[:-1], parts[-1])
    m = _ROMAN_NUM.match(text)
    if m and (n := _roman(m.group(1))) is not None:
        return ("roman", (), n)
    m = _LETTER_NUM.match(text)
    if m:
        label = m.group(1)
        kind = ("LETTER" if label.isupper() else "letter") + ("2" if len(label) == 2 else "")
        return (kind, (), ord(label[0].lower()) - 96)
    return None


def row_style(row: np.ndarray) -> tuple:
    """A feature row's style key: size against the body (to 0.01), bold, italic, capitals,
    the typeface's share of the text (to 0.01), and whether the line opens with a bold (an
    italic) run while the whole is not bold (italic): "Commissioner v. Glenshaw Glass Co." in
    bold before its citation in roman is not the body's style."""
    bold, italic = bool(row[_F["bold"]]), bool(row[_F["italic"]])
    return (
        round(float(row[_F["size_ratio"]]), 2),
        bold,
        italic,
        bool(row[_F["caps"]]),
        round(float(row[_F["face_share"]]), 2),
        not bold and bool(row[_F["lead_bold"]] > 0),
        not italic and bool(row[_F["lead_italic"]] > 0),
    )


def upright_style(style: tuple) -> tuple:
    """A ``row_style`` key with its italics left out (the other six fields, in order)."""
    size, bold, _, caps, face_share, lead_bold, lead_italic = style
    return (size, bold, caps, face_share, lead_bold, lead_italic)


def _prominence(style: tuple) -> tuple:
    size, bold, italic, caps, face_share, lead_bold, lead_italic = style
    return (size, bold, caps, not italic, -face_share, lead_bold, lead_italic)


def context_features(
    x: np.ndarray, texts: list[str], pages: list[int], p_heading: np.ndarray, threshold: float
) -> np.ndarray:
    """(n, len(CONTEXT_FEATURE_NAMES)) columns for pool members in document order, given the
    first-stage feature rows ``x``, their texts and pages, and the first-stage probabilities."""
    n = len(x)
    out = np.zeros((n, len(CONTEXT_FEATURE_NAMES)), dtype=np.float64)
    if n == 0:
        return out
    kept = p_heading >= threshold
    styles = [row_style(row) for row in x]
    members: dict[tuple, list[int]] = defaultdict(list)
    for i, s in enumerate(styles):
        members[s].append(i)
    kept_styles = sorted({styles[i] for i in range(n) if kept[i]}, key=_prominence, reverse=True)
    style_rank = {s: r for r, s in enumerate(kept_styles)}
    kept_sizes = sorted({styles[i][0] for i in range(n) if kept[i]}, reverse=True)
    n_styles, n_sizes = len(kept_styles), len(kept_sizes)
    depths = x[:, _F["numbering_depth"]]
    kept_depths = depths[kept & (depths > 0)]
    min_depth = float(kept_depths.min()) if len(kept_depths) else 0.0
    style_stats = {}
    for s, idx in members.items():
        ps = p_heading[idx]
        style_stats[s] = (float(ps.mean()), float(kept[idx].mean()), float(kept[idx].sum()))
    last_number: dict[tuple, int] = {}
    prev_rank = -1
    kept_pages: set[int] = set()
    for i in range(n):
        row = out[i]
        s = styles[i]
        row[_C["ctx_p"]] = p_heading[i]
        mean_p, share, count = style_stats[s]
        row[_C["ctx_style_mean_p"]] = mean_p
        row[_C["ctx_style_kept_share"]] = share
        row[_C["ctx_style_kept"]] = count
        size_rank = sum(sz > s[0] + 1e-9 for sz in kept_sizes)
        row[_C["ctx_kept_size_rank"]] = size_rank
        row[_C["ctx_kept_size_rank_rel"]] = size_rank / max(n_sizes, 1)
        rank = style_rank.get(s)
        if rank is None:  # not a kept style: where its prominence would put it
            rank = sum(_prominence(k) > _prominence(s) for k in kept_styles)
        row[_C["ctx_kept_style_rank"]] = rank
        row[_C["ctx_kept_style_rank_rel"]] = rank / max(n_styles, 1)
        row[_C["ctx_n_kept_styles"]] = n_styles
        row[_C["ctx_n_kept_sizes"]] = n_sizes
        row[_C["ctx_depth_rel"]] = depths[i] - min_depth if depths[i] > 0 else -1.0
        key = numbering_key(texts[i])
        if key is not None:
            kind, parents, number = key
            seq = (kind, parents)
            row[_C["ctx_num_continues"]] = last_number.get(seq) == number - 1
            row[_C["ctx_num_starts"]] = number == 1 and prev_rank >= 0
            last_number[seq] = number
        row[_C["ctx_prev_kept_rank"]] = prev_rank
        row[_C["ctx_rank_vs_prev"]] = rank - prev_rank if prev_rank >= 0 else 0.0
        row[_C["ctx_page_first_kept"]] = kept[i] and pages[i] not in kept_pages
        if kept[i]:
            prev_rank = rank
            kept_pages.add(pages[i])
    return out


# Transition ("step") columns: a kept heading against the kept heading before it. With the
# row's own columns they feed the step model, which predicts the level difference between the
# two (``learned_filter.viterbi_levels`` combines it with the level model's probabilities).
PAIR_FEATURE_NAMES: tuple[str, ...] = (
    "pair_first",  # no kept heading before this one
    "pair_size_diff",  # size ratio minus the previous one's
    "pair_bold_diff",
    "pair_italic_diff",
    "pair_caps_diff",
    "pair_same_style",
    "pair_style_rank_diff",  # kept style rank minus the previous one's
    "pair_size_rank_diff",
    "pair_depth_diff",  # numbering depth minus the previous one's (0 when either is unnumbered)
    "pair_same_kind",  # the same numbering kind (dotted, chapter, roman, letter, ...)
    "pair_x0_diff",
    "pair_space_above_diff",
    "pair_page_gap",
    "pair_word_numbered_diff",
    "pair_part_diff",
    "pair_matter_prev",
    "pair_matter_diff",
    "pair_prev_p",
)
STEP_FEATURE_NAMES: tuple[str, ...] = ALL_FEATURE_NAMES + PAIR_FEATURE_NAMES
_A = {name: i for i, name in enumerate(ALL_FEATURE_NAMES)}
_P = {name: i for i, name in enumerate(PAIR_FEATURE_NAMES)}
_DIFFS = (
    ("pair_size_diff", "size_ratio"),
    ("pair_bold_diff", "bold"),
    ("pair_italic_diff", "italic"),
    ("pair_caps_diff", "caps"),
    ("pair_style_rank_diff", "ctx_kept_style_rank"),
    ("pair_size_rank_diff", "ctx_kept_size_rank"),
    ("pair_x0_diff", "x0_rel"),
    ("pair_space_above_diff", "space_above_em"),
    ("pair_word_numbered_diff", "word_numbered"),
    ("pair_part_diff", "is_part"),
    ("pair_matter_diff", "matter_name"),
)


def step_features(
    xa: np.ndarray, texts: list[str], pages: list[int], rows: list[int]
) -> np.ndarray:
    """Step-model rows for the headings ``rows`` (indexes into the augmented rows ``xa``, in
    document order): each row's own columns and ``PAIR_FEATURE_NAMES`` against the one
    before it in ``rows``."""
    out = np.zeros((len(rows), len(STEP_FEATURE_NAMES)), dtype=np.float64)
    base = len(ALL_FEATURE_NAMES)
    prev = -1
    for k, i in enumerate(rows):
        out[k, :base] = xa[i]
        pair = out[k, base:]
        if prev < 0:
            pair[_P["pair_first"]] = 1.0
        else:
            a, b = xa[i], xa[prev]
            for name, col in _DIFFS:
                pair[_P[name]] = a[_A[col]] - b[_A[col]]
            pair[_P["pair_same_style"]] = row_style(a[: len(FEATURE_NAMES)]) == row_style(
                b[: len(FEATURE_NAMES)]
            )
            da, db = a[_A["numbering_depth"]], b[_A["numbering_depth"]]
            pair[_P["pair_depth_diff"]] = da - db if da > 0 and db > 0 else 0.0
            ka, kb = numbering_key(texts[i]), numbering_key(texts[prev])
            pair[_P["pair_same_kind"]] = ka is not None and kb is not None and ka[0] == kb[0]
            pair[_P["pair_page_gap"]] = min(pages[i] - pages[prev], 50)
            pair[_P["pair_matter_prev"]] = b[_A["matter_name"]]
            pair[_P["pair_prev_p"]] = b[_A["ctx_p"]]
        prev = i
    return out
