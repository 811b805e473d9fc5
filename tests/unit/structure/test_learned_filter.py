"""The learned section filter: deterministic training, a committed model that loads without
the training extras, the rules as fallback, the LLM refiner reviewing the least certain
candidates first. Real HiPS books from the shared data."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bookindex.operators.structure import learned_filter
from bookindex.operators.structure.assemble import (
    extract_headings,
    filter_used,
    structure_blocks,
)
from bookindex.operators.structure.learned_filter import (
    MODEL_PATH,
    LearnedSectionFilter,
    load_model,
    section_filter,
)
from bookindex.operators.structure.llm_refiner import LLMSectionFilter
from bookindex.operators.structure.sections import LayoutSectionFilter
from tests.conftest import missing_shared_data
from tests.fakes import FakeOpenAI

REPO = Path(__file__).resolve().parents[3]
SMALL_BOOKS = ("6-traditional-medicines", "aegis-or-achilles-heel")


def _hips_pdf(shared_data: Path, prefix: str) -> Path:
    pdfs = sorted((shared_data / "hips" / "PDFs").glob(f"{prefix}*.pdf"))
    if not pdfs:
        missing_shared_data(f"no HiPS book {prefix}* in the shared data")
    return pdfs[0]


@pytest.fixture(scope="module")
def small_books(shared_data):
    from benchmarks.section_data import extract_book
    from bookindex.operators.eval.heading_gold import load_hips_gold

    books = []
    for prefix in SMALL_BOOKS:
        pdf = _hips_pdf(shared_data, prefix)
        books.append(extract_book("hips", pdf, load_hips_gold(pdf.stem)))
    return books


def test_training_is_deterministic(small_books):
    """Same books, same seed: the same model file, byte for byte; another seed differs
    nowhere it must not (the file still parses)."""
    from benchmarks.train_section_model import build_model

    first = json.dumps(build_model(small_books, 0, None), sort_keys=True)
    second = json.dumps(build_model(small_books, 0, None), sort_keys=True)
    assert first == second
    model = learned_filter.parse_model(json.loads(first))
    assert model.off.heading.trees and model.off.heading2.trees and model.on.level.trees
    hashes = [b["pdf_sha256"] for b in json.loads(first)["training"]["books"]]
    assert len(hashes) == 2 and all(len(h) == 64 for h in hashes)


def test_exported_trees_score_like_scikit_learn(small_books):
    """The numpy evaluator of the exported trees gives scikit-learn's probabilities."""
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingClassifier

    from benchmarks.train_section_model import LEVEL_PARAMS, _level_rows, export_trees

    x, y = _level_rows(small_books, [b.x_off for b in small_books])
    clf = HistGradientBoostingClassifier(**LEVEL_PARAMS, early_stopping=False, random_state=0)
    clf.fit(x, y)
    ours = learned_filter.TreeEnsemble.from_json(export_trees(clf)).probability(x)
    assert np.allclose(ours, clf.predict_proba(x), atol=1e-4)


def test_a_bag_of_heading_models_scores_their_mean_log_odds(small_books):
    """Two heading models fitted on different real books, exported as one bag: its
    log-odds are the mean of the members' (scikit-learn's decision function), on rows of
    both books; a bag of one is the member itself."""
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingClassifier

    from benchmarks.train_section_model import (
        HEADING_PARAMS,
        _heading_rows,
        bag_ensembles,
        export_trees,
    )

    members = []
    for book in small_books:
        clf = HistGradientBoostingClassifier(**HEADING_PARAMS, early_stopping=False, random_state=0)
        members.append(clf.fit(*_heading_rows([book], "off")))
    x, _ = _heading_rows(small_books, "off")
    bag = learned_filter.TreeEnsemble.from_json(bag_ensembles([export_trees(m) for m in members]))
    assert len(bag.trees) == sum(len(export_trees(m)["trees"]) for m in members)
    mean = np.mean([m.decision_function(x) for m in members], axis=0)
    assert np.allclose(bag.raw(x)[:, 0], mean, atol=1e-5)
    assert not np.allclose(mean, members[0].decision_function(x), atol=1e-3)
    assert bag_ensembles([export_trees(members[0])]) == export_trees(members[0])


def test_stacked_tree_walk_sums_like_the_per_tree_walk(shared_data, small_books, monkeypatch):
    """Every model call while two real books are structured, outline on and off, and a pool
    of real rows larger than one stacked walk takes at once: ``raw`` (all trees walked at
    once) returns the per-tree walk's sums bit for bit, so the filter decides the same."""
    import numpy as np

    calls = []
    stacked = learned_filter.TreeEnsemble.raw

    def checked(self, x):
        out = stacked(self, x)
        calls.append((len(x), np.array_equal(out, self.raw_per_tree(x))))
        return out

    monkeypatch.setattr(learned_filter.TreeEnsemble, "raw", checked)
    for prefix in SMALL_BOOKS:
        for outline in (True, False):
            extract_headings(str(_hips_pdf(shared_data, prefix)), outline)
    # heading, level and (but where the mode's final score is stage 1's) heading2 per document
    assert len(calls) >= 8 and sum(n for n, _ in calls) > 200
    assert all(same for _, same in calls)
    model = load_model()
    rows = np.vstack([b.x_off for b in small_books] * 8)  # real feature rows, > 2,048
    assert len(rows) > learned_filter._ROWS_AT_ONCE
    for heading in (model.off.heading, model.on.heading):
        assert np.array_equal(stacked(heading, rows), heading.raw_per_tree(rows))


def test_levels_are_scored_only_where_a_decision_reads_them(small_books):
    """The level model scores the kept rows and the numbered ones only (NaN elsewhere, most
    of a book's rows), and every decision, level included, is the one that scoring every
    row gives, outline on and off, on real books."""
    import numpy as np

    from benchmarks.train_section_model import _candidates, _layout, _outline_decisions
    from bookindex.operators.structure.heading_context import row_style
    from bookindex.operators.structure.learned_filter import decide_with_scores, row_prominences

    model = load_model()
    for book in small_books:
        for mode, scored in (("off", model.off), ("on", model.on)):
            x = book.x_on if mode == "on" else book.x_off
            layout = _layout(book)
            decided = []
            for every in (False, True):
                p, levels = scored.score(x, book.texts, book.pages, layout, every_level=every)
                skipped = np.isnan(levels).any(axis=1)
                assert skipped.sum() > len(x) / 2 if not every else not skipped.any()
                decided.append(
                    decide_with_scores(
                        _candidates(book),
                        layout,
                        _outline_decisions(book, mode),
                        p,
                        levels,
                        scored.level.classes,
                        scored.threshold2,
                        prominences=row_prominences(x),
                        styles=[row_style(r) for r in x],
                    )
                )
            assert decided[0] == decided[1]
            assert any(d.level for d in decided[0])


def test_committed_model_loads_without_training_extras(shared_data):
    """A fresh interpreter where scikit-learn cannot be imported loads the committed model
    and finds headings with it, with no warning."""
    pdf = _hips_pdf(shared_data, SMALL_BOOKS[1])
    code = f"""
import sys, warnings
sys.modules["sklearn"] = None  # importing it raises ImportError
sys.modules["lightgbm"] = None
warnings.simplefilter("error")
from bookindex.operators.structure.learned_filter import load_model, section_filter, LearnedSectionFilter
model = load_model()
assert model.training["books"], "the model file records its training books"
assert "cv" in model.training
assert isinstance(section_filter([], False), LearnedSectionFilter)
from bookindex.operators.structure.assemble import extract_headings
headings = extract_headings({str(pdf)!r}, use_outline=False)
assert len(headings) >= 10, headings
assert "sklearn" not in {{k for k, v in sys.modules.items() if v is not None}}
print(len(headings))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]


def test_committed_model_records_its_training_data(shared_data):
    """The model file names every labelled book of the shared data (``hips`` and
    ``hips_extra``), each by the sha256 of its PDF and of its gold table of contents as they
    are on disk, and nothing else; its CV record scores those books' gold headings."""
    import hashlib

    from benchmarks.section_data import LABELLED_CORPORA

    data = json.loads(MODEL_PATH.read_text())
    books = {(b["corpus"], b["name"]): b for b in data["training"]["books"]}
    on_disk = {
        (corpus, pdf.stem): pdf
        for corpus in LABELLED_CORPORA
        for pdf in sorted((shared_data / corpus / "PDFs").glob("*.pdf"))
    }
    assert len(on_disk) >= 20 and set(books) == set(on_disk)
    for (corpus, name), pdf in on_disk.items():
        gold = shared_data / corpus / "GT_TOCs" / f"{name}.toc"
        assert books[corpus, name]["pdf_sha256"] == hashlib.sha256(pdf.read_bytes()).hexdigest()
        assert books[corpus, name]["gold_sha256"] == hashlib.sha256(gold.read_bytes()).hexdigest()
    pooled = data["training"]["cv"]["pooled"]["learned-outline"]
    assert pooled["n_docs"] == len(books)
    assert pooled["n_gold"] == sum(b["n_gold"] for b in books.values())


def test_committed_model_was_trained_on_the_features_this_code_computes():
    """``feature_code`` (a hash of the code the training features come from,
    ``benchmarks.section_data.code_version``) is the current code's: a change there that
    the model was not retrained on fails here."""
    from benchmarks.section_data import code_version

    recorded = json.loads(MODEL_PATH.read_text())["training"]["feature_code"]
    assert recorded == code_version(), (
        "the feature code changed since the model was trained: retrain it "
        "(python -m benchmarks.train_section_model --workers 2)"
    )


@pytest.mark.parametrize("content", [None, b"", b"{not json", b'{"format": "other"}', b"\xff\xfe"])
def test_missing_or_corrupt_model_falls_back_to_the_rules(tmp_path, shared_data, content):
    path = tmp_path / "section_model.json"
    if content is not None:
        path.write_bytes(content)
    learned_filter._cached_model.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="using the layout rules"):
            chosen = section_filter([], False, model_path=path)
    finally:
        learned_filter._cached_model.cache_clear()
    assert isinstance(chosen, LayoutSectionFilter)


def test_a_truncated_model_is_refused(tmp_path):
    data = json.loads(MODEL_PATH.read_text())
    tree = data["modes"]["off"]["heading"]["trees"][0]
    tree["left"] = tree["left"][:-1]
    path = tmp_path / "model.json"
    path.write_text(json.dumps(data))
    with pytest.raises(learned_filter.ModelFileError):
        load_model(path)


def test_fallback_headings_are_the_rules(tmp_path, shared_data, monkeypatch):
    """With no model file the indexer's headings (the learned filter asked for) are exactly
    the layout rules', which here differ from the learned filter's."""
    pdf = _hips_pdf(shared_data, SMALL_BOOKS[1])
    rules = extract_headings(str(pdf), use_outline=False, section_filter_kind="rules")
    learned = extract_headings(str(pdf), use_outline=False)
    assert rules and rules != learned  # the comparison below can tell the two apart
    monkeypatch.setattr(learned_filter, "MODEL_PATH", tmp_path / "missing.json")
    learned_filter._cached_model.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="using the layout rules"):
            fallback = extract_headings(str(pdf), use_outline=False)
        assert filter_used("learned").startswith("rules (fallback: cannot read section model")
    finally:
        learned_filter._cached_model.cache_clear()
    assert fallback == rules


def test_llm_refiner_reviews_the_least_certain_first(shared_data):
    """Given the learned filter's probabilities, the model sees the candidates nearest the
    threshold first, each with its p_title, and only max_candidates of them."""
    import pymupdf

    from bookindex.operators.models import ModelConfig
    from bookindex.operators.models.openai_compatible import OpenAIBackend
    from bookindex.operators.parsing.parse import document_metadata, parse_pages

    pdf = _hips_pdf(shared_data, SMALL_BOOKS[1])
    with pymupdf.open(str(pdf)) as doc:
        meta = document_metadata(doc)
        blocks = parse_pages(doc, 0, doc.page_count).blocks
    base = LearnedSectionFilter(load_model(), use_outline=False)

    def echo(body: dict) -> str:
        cands = json.loads(body["messages"][-1]["content"])["candidates"]
        return json.dumps({"decisions": [{"index": c["index"], "level": 0} for c in cands]})

    fake = FakeOpenAI(echo)
    try:
        config = ModelConfig(backend="openai", base_url=fake.url, model="fake", max_retries=0)
        refiner = LLMSectionFilter(OpenAIBackend(config), base, batch_size=5, max_candidates=10)
        structure_blocks(copy.deepcopy(blocks), meta["n_pages"], [], False, refiner)
    finally:
        fake.close()
    sent = [
        c for body in fake.chats for c in json.loads(body["messages"][-1]["content"])["candidates"]
    ]
    assert len(sent) == 10 and len(fake.chats) == 2
    margins = [abs(c["p_title"] - 0.5) for c in sent]
    # The first batch holds the five least certain, the second the next five.
    assert max(margins[:5]) <= min(margins[5:]) + 0.01
    assert refiner.errors == []


def test_viterbi_levels_follow_the_step_model_where_the_level_model_is_unsure():
    import numpy as np

    from bookindex.operators.structure.learned_filter import viterbi_levels

    classes = (1, 2, 3)
    unsure = np.array([[0.6, 0.3, 0.1], [0.4, 0.35, 0.25], [0.4, 0.3, 0.3]])
    steps = (-1, 0, 1)
    deeper = np.array([[1 / 3, 1 / 3, 1 / 3], [0.05, 0.05, 0.9], [0.05, 0.05, 0.9]])
    assert viterbi_levels(unsure, classes, deeper, steps).tolist() == [0, 1, 2]
    flat = np.full((3, 3), 1 / 3)
    assert viterbi_levels(unsure, classes, flat, steps).tolist() == [0, 0, 0]
    # a sure level model wins over the step model
    sure = np.array([[0.98, 0.01, 0.01]] * 3)
    assert viterbi_levels(sure, classes, deeper, steps).tolist() == [0, 0, 0]


def test_threshold_is_the_middle_of_the_near_best_plateau():
    """Scores that separate headings from the rest anywhere between 0.3 and 0.6: every
    threshold there gives the same F1, and the middle one is taken, not an edge."""
    import numpy as np

    from benchmarks.train_section_model import THRESHOLD_GRID, _best_threshold

    p = np.array([0.1, 0.2, 0.25, 0.65, 0.8, 0.9])
    y = np.array([0, 0, 0, 1, 1, 1])
    t = _best_threshold(p, y, n_gold=3)
    flat = [g for g in THRESHOLD_GRID if 0.25 < g <= 0.65]
    assert t == flat[len(flat) // 2]
    assert 0.4 <= t <= 0.5


def test_style_consensus_gives_one_level_per_kept_style(small_books):
    """On a real book's feature rows: the kept rows of one style end at one level, the one
    their summed log probabilities favour, even where a row alone leans elsewhere; rows not
    kept keep their probabilities."""
    import numpy as np

    from bookindex.operators.structure.heading_context import row_style
    from bookindex.operators.structure.learned_filter import style_consensus

    book = small_books[1]  # aegis-or-achilles-heel
    x = book.x_off
    kept = np.array([lv > 0 for lv in book.layout_level])
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), size=len(x))
    out = style_consensus(probs, x, kept)
    assert np.array_equal(out[~kept], probs[~kept])
    by_style: dict[tuple, list[int]] = {}
    for i in np.flatnonzero(kept):
        by_style.setdefault(row_style(x[i]), []).append(int(i))
    assert len(by_style) >= 2  # several heading styles: the test says something
    split = 0
    for rows in by_style.values():
        levels = {int(np.argmax(out[i])) for i in rows}
        assert len(levels) == 1
        assert levels == {int(np.argmax(np.log(probs[rows]).sum(axis=0)))}
        assert np.allclose(out[rows].sum(axis=1), 1.0) and set(np.unique(out[rows])) <= {0.0, 1.0}
        split += len({int(np.argmax(probs[i])) for i in rows}) > 1
    assert split >= 1  # some style was split by its rows alone and is joined now


def test_the_final_score_is_the_stage_the_inner_cv_scores_best(shared_data, small_books):
    """With three real books the inner CV scores stage 1 alone, stage 2, and their blend on
    out-of-fold scores, per mode, and keeps the best (a tie: the earlier); a model that chose
    stage 1 scores with stage 1's probabilities at stage 1's threshold in the product."""
    import numpy as np

    from benchmarks.section_data import extract_book
    from benchmarks.train_section_model import STAGES, _layout, fit_mode
    from bookindex.operators.eval.heading_gold import load_hips_gold
    from bookindex.operators.structure.learned_filter import first_stage, mode_from_json

    pdf = _hips_pdf(shared_data, "the-role-of-the-patent-system")
    books = [*small_books, extract_book("hips", pdf, load_hips_gold(pdf.stem))]
    fitted = {}
    for mode in ("off", "on"):
        data = fitted[mode] = fit_mode(books, mode, 0)
        f1 = data["stage_f1"]
        assert set(f1) == set(STAGES) and all(0 < v <= 1 for v in f1.values())
        best = max(f1.values())
        assert data["stage"] == next(s for s in STAGES if f1[s] == best)
        assert data["blend"] == (data["stage"] == "blend")
        first = {**data, "stage": "first", "blend": False, "threshold2": data["threshold"]}
        model = mode_from_json(first)
        assert model.first_stage_only
        book = books[2]
        x = book.x_on if mode == "on" else book.x_off
        p, _ = model.score(x, book.texts, book.pages, _layout(book))
        assert np.array_equal(p, first_stage(model.heading, x, _layout(book), book.texts))
        assert not np.array_equal(
            p,
            mode_from_json({**data, "stage": "second", "blend": False}).score(
                x, book.texts, book.pages, _layout(book)
            )[0],
        )
    # --bag (an ablation): the same choices, each heading model averaged with the 3 inner ones
    bagged, data = fit_mode(books, "off", 0, single=True, bag=True), fitted["off"]
    assert bagged["bagged"] == 4 and "bagged" not in data
    assert (bagged["stage"], bagged["threshold2"]) == (data["stage"], data["threshold2"])
    assert bagged["single"]["heading"] == data["heading"] != bagged["heading"]
    for name in ("heading", "heading2"):
        assert len(bagged[name]["trees"]) > 3 * len(data[name]["trees"])


def test_cv_from_refuses_a_cv_made_by_other_feature_code(shared_data, tmp_path, capsys):
    """``train_section_model --cv-from`` takes a CV's scores only from a CV made with this
    feature code, folds, seed and books (its ``made_by``), before parsing any book."""
    from benchmarks.train_section_model import main
    from benchmarks.tree_accuracy import cv_identity

    made_by = cv_identity(6, 0)
    out = tmp_path / "model.json"
    for record in ({}, {"made_by": dict(made_by, feature_code="0" * 16)}):
        cv = tmp_path / "cv.json"
        cv.write_text(json.dumps(record))
        with pytest.raises(SystemExit) as refused:
            main(["--cv-from", str(cv), "--out", str(out)])
        assert refused.value.code == 2
        assert "that CV was made with another feature_code" in capsys.readouterr().err
    assert not out.exists()
    assert (
        len(made_by["books"]) == 24
        and made_by["feature_code"]
        == json.loads(MODEL_PATH.read_text())["training"]["feature_code"]
    )
