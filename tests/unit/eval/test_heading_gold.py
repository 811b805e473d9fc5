"""Tests of the heading-tree benchmark's gold loading and matching (operators.eval.heading_gold)."""

from __future__ import annotations

import pytest

from bookindex.operators.eval.heading_gold import (
    aggregate,
    clean_markdown_title,
    compact_title,
    iter_corpus,
    load_hips_gold,
    markdown_headings,
    match_headings,
    normalize_title,
    parse_toc_file,
    score,
    shared_data_dir,
    title_similarity,
)
from tests.conftest import missing_shared_data

DATA = shared_data_dir()
HIPS = DATA / "hips"
needs_hips = pytest.mark.skipif(
    not (HIPS / "GT_TOCs").is_dir(),
    reason=f"HiPS data not found at {HIPS} (set BOOKINDEX_SHARED_DATA to the shared data dir)",
)


# --------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("I. Introduction", "introduction"),
        ("IV. Novozymes may Create a Gap", "novozymes may create a gap"),
        ("Chapter 4 The Law", "the law"),
        ("CHAPTER 12: Results", "results"),
        ("Part II. 3.1 Scope", "scope"),
        ("1.2.3 Scope", "scope"),
        ("4. Methods", "methods"),
        ("A. The Glucoamylase", "the glucoamylase"),
        ("b) Remedies", "remedies"),
        ("Annex I: Sequences", "sequences"),
        ("CHAPTER ONE PREREQUISITES", "prerequisites"),  # a number spelled out
        ("Part Twenty-One: Scope", "scope"),
        ("CHAPTER TWENTYFOUR TUTORIAL", "tutorial"),
        ("§ 3 Rules", "rules"),
        ("(1) Patent Cooperation Treaty", "patent cooperation treaty"),
        ("(iv) Remedies", "remedies"),
        ("[a] Scope", "scope"),
        ("(dis)ordering of time", "dis ordering of time"),
        ("Progress’ as a tool – of dominance!", "progress as a tool of dominance"),
        ("  Modernities,   law and\tmedicine ", "modernities law and medicine"),
        ("ＦＵＬＬＷＩＤＴＨ ﬁeld", "fullwidth field"),  # NFKC
    ],
)
def test_normalize_strips_numbering_and_punctuation(raw, expected):
    assert normalize_title(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "a kind of mending",  # a lone "a" is only numbering when followed by . ) :
        "2019 Annual Report",  # years are not section numbers
        "Art history",  # keyword needs a number after it
        "Chapter oneness",  # a number word must end there
        "Civil rights",
        "Vitamins",
    ],
)
def test_normalize_keeps_non_numbering_prefixes(raw):
    assert normalize_title(raw) == " ".join(raw.lower().split())


def test_normalize_keeps_number_only_titles():
    assert normalize_title("1") == "1"
    assert normalize_title("IV.") == "iv"


def test_compact_title_ignores_spacing_artefacts():
    assert compact_title("re fl ect on it") == compact_title("reflect on it")


# --------------------------------------------------------------------------- fuzzy matching


def test_similarity_exact_after_normalisation():
    assert title_similarity("1 Introduction", "INTRODUCTION.") == 1.0
    assert title_similarity("II. Novozymes", "Novozymes") == 1.0


def test_similarity_fuzzy_threshold():
    # one-character typo in a long title: ratio well above 0.8
    assert title_similarity("The Regulation of Megabanks", "The Regulaton of Megabanks") > 0.9
    # unrelated short titles do not match
    assert title_similarity("US", "UK") == 0.0
    assert title_similarity("Introduction", "Conclusion") == 0.0


def test_similarity_prefix_rule():
    gold = "Traditional medicines, law and the (dis)ordering of temporalities"
    pred = gold + " Emilie Cloatre, Kent Law School"
    assert title_similarity(pred, gold) > 0.0
    # prefix too short a share of the longer title: no match
    assert title_similarity("Cases", "Cases and materials on the law of contract") == 0.0


def test_clean_markdown_title():
    assert clean_markdown_title("**_A. The Glucoamylase_**") == "A. The Glucoamylase"
    assert clean_markdown_title("Cloatre<sup>1</sup> , Kent") == "Cloatre , Kent"
    assert clean_markdown_title("re `fl` ect [link](http://x.y)") == "re fl ect link"


def test_markdown_headings():
    md = "# Title\n\ntext\n```\n# not a heading\n```\n## **Bold** ##\n####### seven\n#nospace\n"
    assert markdown_headings(md) == [(1, "Title"), (2, "Bold")]


# --------------------------------------------------------------------------- page tolerance


def test_page_tolerance_plus_minus_one():
    gold = [(1, "Introduction", 10)]
    for page, tp in [(9, 1), (10, 1), (11, 1), (8, 0), (12, 0)]:
        assert score([(1, "Introduction", page)], gold)["tp"] == tp, page
    assert score([(1, "Introduction", 12)], gold, page_tol=2)["tp"] == 1


# --------------------------------------------------------------------------- one-to-one matching


def test_one_to_one_each_gold_matched_once():
    gold = [(1, "Introduction", 5)]
    pred = [(1, "Introduction", 5), (1, "Introduction", 6)]  # duplicate (e.g. running header)
    s = score(pred, gold)
    assert (s["tp"], s["fp"], s["fn"]) == (1, 1, 0)
    assert s["precision"] == 0.5 and s["recall"] == 1.0


def test_greedy_prefers_best_similarity_then_nearest_page():
    gold = [(1, "Conclusions", 20), (1, "Conclusion", 21)]
    pred = [(1, "Conclusion", 20)]
    (m,) = match_headings(pred, gold)
    assert m.gold_idx == 1  # exact title beats the closer page
    gold = [(2, "Summary", 10), (2, "Summary", 11)]
    (m,) = match_headings([(2, "Summary", 11)], gold)
    assert (m.gold_idx, m.page_distance) == (1, 0)


def test_greedy_global_assignment():
    gold = [(1, "Methods", 3), (1, "Methods", 4)]
    pred = [(1, "Methods", 3), (1, "Methods", 4)]
    ms = match_headings(pred, gold)
    assert sorted((m.pred_idx, m.gold_idx) for m in ms) == [(0, 0), (1, 1)]


def test_scores_and_empty_inputs():
    gold = [(1, "A title", 1), (1, "Another title", 2), (2, "Third one", 3), (2, "Fourth", 4)]
    pred = [(1, "A title", 1), (1, "Nothing like it", 2), (2, "Third one", 3)]
    s = score(pred, gold)
    assert (s["tp"], s["fp"], s["fn"]) == (2, 1, 2)
    assert s["precision"] == pytest.approx(2 / 3)
    assert s["recall"] == pytest.approx(0.5)
    assert s["f1"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    empty = score([], gold)
    assert empty["f1"] == 0.0 and empty["level_acc"] is None and empty["fn"] == 4


# --------------------------------------------------------------------------- level accuracy


def test_level_accuracy_relative_depth():
    gold = [(1, "Part one", 1), (2, "Alpha", 2), (3, "Beta", 3), (2, "Gamma", 4)]
    # predictions numbered from 2 instead of 1, same shape: all correct
    pred = [(2, "Part one", 1), (3, "Alpha", 2), (4, "Beta", 3), (3, "Gamma", 4)]
    s = score(pred, gold)
    assert s["level_correct"] == 4 and s["level_acc"] == 1.0
    # flattening the tree gets only the top level right
    flat = [(1, t, p) for _, t, p in gold]
    assert score(flat, gold)["level_acc"] == pytest.approx(0.25)


def test_level_accuracy_min_over_matched_pairs_only():
    gold = [(1, "Book title", 1), (2, "Alpha", 5), (3, "Beta", 6)]
    # a method that misses the level-1 title but nests the rest correctly from level 1
    pred = [(1, "Alpha", 5), (2, "Beta", 6), (1, "Spurious cover text", 40)]
    s = score(pred, gold)
    assert s["tp"] == 2 and s["level_acc"] == 1.0


def test_aggregate_micro_and_macro():
    s1 = score([(1, "Alpha", 1)], [(1, "Alpha", 1)])  # f1 = 1
    s2 = score([(1, "Zulu", 1)], [(1, "Alpha", 1), (1, "Beta", 2), (1, "Gamma", 3)])  # f1 = 0
    a = aggregate([s1, s2])
    assert (a["tp"], a["n_pred"], a["n_gold"], a["n_docs"]) == (1, 2, 4, 2)
    assert a["precision"] == 0.5 and a["recall"] == 0.25
    assert a["macro_f1"] == 0.5
    assert a["level_acc"] == 1.0


# --------------------------------------------------------------------------- gold files


def test_parse_toc_file_handles_bom_quotes_and_bare_commas(tmp_path):
    p = tmp_path / "x.toc"
    p.write_bytes(
        '\ufeff1,"Traditional medicines, law",1\r\n'
        "2,FIJI, A CASE STUDY,179\r\n"
        '5,The Constitution Prohibits Only "Intentional" Discrimination,57\r\n'
        "2,no page,\r\n"
        "\r\n".encode()
    )
    assert parse_toc_file(p) == [
        (1, "Traditional medicines, law", 1),
        (2, "FIJI, A CASE STUDY", 179),
        (5, 'The Constitution Prohibits Only "Intentional" Discrimination', 57),
    ]


@needs_hips
def test_real_hips_gold_parses():
    stem = "a-kind-of-mending-restorative-justice-in-the-pacific-islands"
    path = HIPS / "GT_TOCs" / f"{stem}.toc"
    if not path.exists():
        missing_shared_data(f"{path} missing")
    n_lines = sum(1 for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip())
    gold = load_hips_gold(stem)
    assert len(gold) == n_lines
    assert all(isinstance(lv, int) and lv >= 1 for lv, _, _ in gold)
    assert all(isinstance(pg, int) and pg >= 1 for _, _, pg in gold)
    assert all(isinstance(t, str) and t for _, t, _ in gold)
    assert gold[0] == (1, "a kind of mending", 1)
    assert (2, "FIJI, A CASE STUDY", 179) in gold  # unquoted comma in a heading


@needs_hips
def test_iter_corpus_hips_limit():
    docs = list(iter_corpus("hips", limit=2))
    assert len(docs) == 2
    for pdf, gold in docs:
        assert pdf.suffix == ".pdf" and pdf.exists() and gold


def test_iter_corpus_rejects_unknown_name():
    with pytest.raises(ValueError):
        list(iter_corpus("nope"))


def test_level_accuracy_mapped_ignores_shifts_gaps_and_outliers():
    gold = [(1, "Alpha", 1), (2, "Beta", 2), (3, "Gamma", 3)]
    pred = [(2, "Alpha", 1), (5, "Beta", 2), (6, "Gamma", 3)]  # same order, gaps in numbering
    s = score(pred, gold)
    assert s["level_acc"] == pytest.approx(1 / 3)  # only the top level lines up
    assert s["level_acc_map"] == 1.0
    # a consistent +2 shift (and an unmatched cover title at level 1): both figures are 1.0
    gold = [(1, "Book", 1)] + [(2, f"Chapter title {k}", 10 * k) for k in range(1, 6)]
    pred = [(3, "Book", 1)] + [(4, f"Chapter title {k}", 10 * k) for k in range(1, 6)]
    pred.append((1, "Cover", 1))
    s = score(pred, gold)
    assert s["tp"] == 6 and s["level_acc"] == 1.0 and s["level_acc_map"] == 1.0
    # one outlier (book title deeper than the chapters) anchors the min-based offset
    pred[0] = (5, "Book", 1)
    s = score(pred, gold)
    assert s["level_acc"] == 0.0
    assert s["level_acc_map"] == pytest.approx(5 / 6)
    a = aggregate([s])
    assert a["level_correct_map"] == 5 and a["level_acc_map"] == pytest.approx(5 / 6)


def test_level_accuracy_mapped_must_preserve_order():
    gold = [(1, "Alpha", 1), (2, "Beta", 2)]
    inverted = [(2, "Alpha", 1), (1, "Beta", 2)]
    assert score(inverted, gold)["level_acc_map"] == 0.5
