"""Second-stage (document context) features of the learned section filter."""

from __future__ import annotations

import numpy as np

from bookindex.operators.structure.heading_context import (
    CONTEXT_FEATURE_NAMES,
    context_features,
    numbering_key,
)
from bookindex.operators.structure.heading_features import FEATURE_NAMES


def test_numbering_keys():
    assert numbering_key("2.3 Scope of the Act") == ("dotted", (2,), 3)
    assert numbering_key("4 Remedies") == ("dotted", (), 4)
    assert numbering_key("Chapter 4: Remedies") == ("chapter", (), 4)
    assert numbering_key("Part IV") == ("part", (), 4)
    assert numbering_key("XIV. Transfer of data") == ("roman", (), 14)
    assert numbering_key("B. Research Activities") == ("LETTER", (), 2)
    assert numbering_key("(c) Liability") == ("letter", (), 3)
    assert numbering_key("The Role of Courts") is None


def _rows(sizes: list[float], depths: list[int]) -> np.ndarray:
    x = np.zeros((len(sizes), len(FEATURE_NAMES)))
    x[:, FEATURE_NAMES.index("size_ratio")] = sizes
    x[:, FEATURE_NAMES.index("numbering_depth")] = depths
    return x


def test_kept_styles_rank_by_prominence_and_numbering_continues():
    texts = ["1 Introduction", "1.1 Scope", "Body-like line", "1.2 Terms", "2 Remedies"]
    x = _rows([1.6, 1.3, 1.0, 1.3, 1.6], [1, 2, 0, 2, 1])
    p = np.array([0.9, 0.8, 0.1, 0.7, 0.95])
    ctx = context_features(x, texts, [1, 1, 2, 2, 3], p, 0.5)
    col = {name: i for i, name in enumerate(CONTEXT_FEATURE_NAMES)}
    assert ctx[:, col["ctx_kept_style_rank"]].tolist() == [0, 1, 2, 1, 0]
    assert ctx[:, col["ctx_n_kept_styles"]].tolist() == [2] * 5
    assert ctx[:, col["ctx_depth_rel"]].tolist() == [0, 1, -1, 1, 0]
    # "1.2" continues "1.1", "2" continues "1"; the first ones continue nothing
    assert ctx[:, col["ctx_num_continues"]].tolist() == [0, 0, 0, 1, 1]
    assert ctx[:, col["ctx_num_starts"]].tolist() == [0, 1, 0, 0, 0]
    assert ctx[:, col["ctx_style_kept_share"]].tolist() == [1, 1, 0, 1, 1]
    assert ctx[:, col["ctx_page_first_kept"]].tolist() == [1, 0, 0, 1, 1]


def test_no_rows():
    assert context_features(np.zeros((0, len(FEATURE_NAMES))), [], [], np.zeros(0), 0.5).shape == (
        0,
        len(CONTEXT_FEATURE_NAMES),
    )


def test_step_features_compare_a_heading_with_the_kept_one_before():
    from bookindex.operators.structure.heading_context import (
        ALL_FEATURE_NAMES,
        PAIR_FEATURE_NAMES,
        STEP_FEATURE_NAMES,
        step_features,
    )

    texts = ["1 Introduction", "1.1 Scope", "Body-like line", "2 Remedies"]
    x = _rows([1.6, 1.3, 1.0, 1.6], [1, 2, 0, 1])
    p = np.array([0.9, 0.8, 0.1, 0.95])
    xa = np.hstack([x, context_features(x, texts, [1, 1, 2, 9], p, 0.5)])
    out = step_features(xa, texts, [1, 1, 2, 9], [0, 1, 3])
    assert out.shape == (3, len(STEP_FEATURE_NAMES))
    pair = {name: out[:, len(ALL_FEATURE_NAMES) + i] for i, name in enumerate(PAIR_FEATURE_NAMES)}
    assert pair["pair_first"].tolist() == [1, 0, 0]
    assert pair["pair_depth_diff"].tolist() == [0, 1, -1]
    assert pair["pair_style_rank_diff"].tolist() == [0, 1, -1]
    assert pair["pair_same_kind"].tolist() == [0, 1, 1]
    assert pair["pair_page_gap"].tolist() == [0, 0, 8]
    assert np.allclose(pair["pair_size_diff"], [0, -0.3, 0.3])
