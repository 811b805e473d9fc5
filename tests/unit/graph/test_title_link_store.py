"""Title links kept beside the index (operators/graph/title_link_store.py), on the real
HotpotQA passages: read back they are what linking gives; a corpus changed in one passage is
linked again and the earlier file goes; a damaged file or a directory that cannot be written
costs a linking, never a wrong or failed view."""

from __future__ import annotations

import pytest

from bookindex.operators.graph.entity_linking import title_links
from bookindex.operators.graph.title_link_store import (
    PREFIX,
    store_key,
    store_path,
    title_links_from_store,
)


@pytest.fixture(scope="module")
def corpus(hotpot) -> tuple[list[str], list[str]]:
    passages = sorted(hotpot.values(), key=lambda p: p["id"])[:600]
    return [p["title"] for p in passages], [p["text"] for p in passages]


def test_stored_links_read_back_as_linking_gives_them(corpus, tmp_path):
    titles, bodies = corpus
    expected = title_links(titles, bodies)
    assert expected[1] and max(expected[2]) >= 0  # passages link to titles: a real test
    *first, how = title_links_from_store(titles, bodies, tmp_path)
    assert how == "built" and tuple(first) == expected
    assert [p.name for p in tmp_path.iterdir()] == [
        store_path(tmp_path, store_key(titles, bodies, 10)).name
    ]
    *again, how = title_links_from_store(titles, bodies, tmp_path)
    assert how == "read" and tuple(again) == expected
    *unstored, how = title_links_from_store(titles, bodies, None)
    assert how == "built" and tuple(unstored) == expected and len(list(tmp_path.iterdir())) == 1


def test_a_changed_passage_is_linked_again_and_the_old_file_goes(corpus, tmp_path):
    titles, bodies = list(corpus[0]), list(corpus[1])
    title_links_from_store(titles, bodies, tmp_path)
    old = next(tmp_path.iterdir())
    bodies[7] = bodies[7] + f" It was compared with {titles[3]}."  # now names another title
    *links, how = title_links_from_store(titles, bodies, tmp_path)
    assert how == "built" and tuple(links) == title_links(titles, bodies)
    assert (7, links[2][3]) in links[1]
    assert not old.exists() and len(list(tmp_path.glob(f"{PREFIX}*.npz"))) == 1
    # the same strings cut differently are another corpus: the key length-prefixes each one
    assert store_key(["ab", "c"], ["", ""], 10) != store_key(["a", "bc"], ["", ""], 10)


def test_a_damaged_file_or_an_unwritable_directory_costs_only_a_linking(corpus, tmp_path):
    """(And a corpus without passage titles, a PDF index, writes no file: nothing to keep.)"""
    titles, bodies = corpus
    expected = title_links(titles, bodies)
    path = store_path(tmp_path, store_key(titles, bodies, 10))
    path.write_bytes(b"not an npz file")
    *links, how = title_links_from_store(titles, bodies, tmp_path)
    assert how == "built" and tuple(links) == expected
    assert title_links_from_store(titles, bodies, tmp_path)[3] == "read"  # rewritten
    untitled = title_links_from_store(["", ""], ["a PDF's text", ""], tmp_path)
    assert untitled == ([], [], [-1, -1], "built") and len(list(tmp_path.iterdir())) == 1
    blocked = tmp_path / "a file, not a directory"
    blocked.write_text("")
    *links, how = title_links_from_store(titles, bodies, blocked)
    assert how == "built" and tuple(links) == expected
