"""The Doc-Zoom graph's document rows kept beside the index (operators.walks.graph_store): read
back as stored, grown by the new documents of a larger corpus (in the view's order), built
again when a document is gone or changed or the file is damaged; every path gives the graph of
a build from scratch."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import scipy.sparse as sp

from bookindex.operators.config import WalkConfig
from bookindex.operators.walks.engine import make_engine
from bookindex.operators.walks.graph_store import fit_from_store, store_path

N_DOC, N_ENT, N_Q, DIM = 300, 400, 24, 32
CONFIG = WalkConfig(max_doc_links=3)  # rows reach the bound: the capped path is exercised


@pytest.fixture(scope="module")
def corpus() -> dict:
    rng = np.random.default_rng(1)
    topics = rng.normal(size=(10, DIM))
    docs = topics[rng.integers(0, 10, N_DOC)] + 1.5 * rng.normal(size=(N_DOC, DIM))
    queries = topics[rng.integers(0, 10, N_Q)] + 1.5 * rng.normal(size=(N_Q, DIM))
    de = sp.random(N_DOC, N_ENT, density=5 / N_ENT, random_state=rng, format="csr")
    qe = sp.random(N_Q, N_ENT, density=3 / N_ENT, random_state=rng, format="csr")
    de.data[:], qe.data[:] = 1.0, 1.0
    # the smaller corpus: 200 of the documents, interleaved with the others in view order
    old = np.sort(rng.choice(N_DOC, 200, replace=False))
    return {
        "docs": docs.astype(np.float32),
        "de": de,
        "ids": [f"doc-{i}" for i in range(N_DOC)],
        "q": queries,
        "qe": qe,
        "old": old,
    }


def _engine(slack: float = 0.0):
    # slack 0: the grown corpus lowers thresholds under stored floors (rows recomputed)
    return make_engine(CONFIG, device="cpu", dtype=np.float64, threshold_slack=slack)


def _same_graph(a, b, corpus) -> None:
    assert (a.n_d, a.n_e, a.dd_nnz) == (b.n_d, b.n_e, b.dd_nnz)
    assert abs(a.S - b.S).max() < 1e-9
    ra, rb = a.doc_zoom(corpus["q"], corpus["qe"]), b.doc_zoom(corpus["q"], corpus["qe"])
    np.testing.assert_array_equal(ra[0], rb[0])
    assert np.abs(ra[1] - rb[1]).max() < 1e-9 and np.abs(ra[2] - rb[2]).max() < 1e-9


def _fit(corpus, where, rows=None, docs=None, slack: float = 0.0):
    rows = np.arange(N_DOC) if rows is None else rows
    docs = corpus["docs"] if docs is None else docs
    engine = _engine(slack)
    ids = [corpus["ids"][i] for i in rows]
    how = fit_from_store(engine, docs[rows], corpus["de"][rows], ids, where)
    return engine, how


def test_read_grown_and_built_give_the_graph_from_scratch(corpus, tmp_path):
    scratch = _engine().fit(corpus["docs"], corpus["de"])
    small, how = _fit(corpus, tmp_path, corpus["old"])
    assert how == "built" and store_path(tmp_path, small).exists()
    _same_graph(
        small, _engine().fit(corpus["docs"][corpus["old"]], corpus["de"][corpus["old"]]), corpus
    )

    grown, how = _fit(corpus, tmp_path)
    assert how == "grown" and grown.last_add["n_new"] == N_DOC - 200
    assert grown.last_add["rows_recomputed"] > 0  # the recomputation path ran too
    _same_graph(grown, scratch, corpus)

    read, how = _fit(corpus, tmp_path)  # the grown graph was stored
    assert how == "read"
    _same_graph(read, scratch, corpus)


def test_a_removed_or_changed_document_or_other_parameters_build_from_scratch(corpus, tmp_path):
    _fit(corpus, tmp_path)
    fewer = np.delete(np.arange(N_DOC), 7)
    engine, how = _fit(corpus, tmp_path, fewer)
    assert how == "built"
    _same_graph(engine, _engine().fit(corpus["docs"][fewer], corpus["de"][fewer]), corpus)

    changed = corpus["docs"].copy()
    changed[corpus["old"][3]] += 0.5  # a stored document's vector differs (another model)
    for stored in (np.arange(N_DOC), corpus["old"]):  # the same documents, or fewer
        _fit(corpus, tmp_path, stored)
        engine, how = _fit(corpus, tmp_path, docs=changed)
        assert how == "built"
    _same_graph(engine, _engine().fit(changed, corpus["de"]), corpus)

    # another slack is another file: the stored one does not apply
    _, how = _fit(corpus, tmp_path, slack=0.5)
    assert how == "built" and len(list(tmp_path.glob("walk_graph-*.npz"))) == 2


def test_damaged_file_or_unwritable_place_still_gives_the_graph(corpus, tmp_path, caplog):
    scratch = _engine().fit(corpus["docs"], corpus["de"])
    path = store_path(tmp_path, scratch)
    path.write_bytes(b"not a numpy archive")
    with caplog.at_level(logging.WARNING):
        engine, how = _fit(corpus, tmp_path)
    assert how == "built" and "unreadable" in caplog.text
    _same_graph(engine, scratch, corpus)
    assert _fit(corpus, tmp_path)[1] == "read"  # overwritten with a good one

    with np.load(path) as f:  # a file that loads but whose rows do not fit the documents
        arrays = dict(f)
    np.savez(path.with_suffix(".tmp.npz"), **dict(arrays, s1=arrays["s1"][:-1]))
    path.with_suffix(".tmp.npz").replace(path)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        engine, how = _fit(corpus, tmp_path)
    assert how == "built" and "does not fit" in caplog.text
    _same_graph(engine, scratch, corpus)

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        engine, how = _fit(corpus, blocked)  # its "directory" is a file: nothing written
    assert how == "built" and "not stored" in caplog.text
    _same_graph(engine, scratch, corpus)
    assert not list(tmp_path.glob(".walk_graph-*"))  # no temporary file left behind
