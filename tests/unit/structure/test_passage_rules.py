"""The JSONL input rules (operators/structure/passages.py): each bad line is that line's
failure, with the rule it breaks; the good lines around it are read; a duplicate id has one
outcome (the first line wins), so runs never flap."""

from __future__ import annotations

import json

from bookindex.operators.structure.passages import read_passages

BAD = [
    (b'{"id": "s", "text": "bad \\ud800"}', "text holds a lone surrogate"),
    (b'{"id": "\\udfff", "text": "ok"}', "id holds a lone surrogate"),
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
    (b'{"id": "n", "text": null}', "text must be a string, not null"),
    (b'{"id": "e", "text": ""}', "text is empty"),
    (b'{"id": "w", "text": " \\n\\t"}', "text is empty"),
    (b'{"id": "m"}', "text must be a string, not missing"),
    (b'{"id": null, "text": "x"}', "id must be a string or an integer, not null"),
    (b'{"id": false, "text": "x"}', "id must be a string or an integer, not bool"),
    (b'{"id": "t", "title": [], "text": "x"}', "title must be a string or null, not list"),
    (b"[1, 2]", "a line must be a JSON object"),
    (b"{oops", "not JSON"),
    (b'{"id": "u", "text": "caf\xe9"}', "not UTF-8"),
]


def _corpus(tmp_path, hotpot, n_good: int = 6):
    good = list(hotpot.values())[:n_good]
    lines = [json.dumps(good[0]).encode(), *[line for line, _ in BAD]]
    lines += [json.dumps(g).encode() for g in good[1:]]
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n\n")
    return path, good


def test_every_bad_line_is_its_own_failure_and_the_good_ones_are_read(tmp_path, hotpot):
    path, good = _corpus(tmp_path, hotpot)
    read = read_passages(str(path))
    ok = [p for p in read if not p.error]
    assert [p.passage_id for p in ok] == [g["id"] for g in good]
    assert [p.text for p in ok] == [g["text"] for g in good]
    failed = [p for p in read if p.error]
    assert len(failed) == len(BAD)
    for passage, (_, rule), number in zip(failed, BAD, range(2, 2 + len(BAD)), strict=True):
        assert passage.error.startswith(f"line {number}: ") and rule in passage.error
        assert passage.uri.endswith(f"#line{number}")
    for p in read:  # what is stored must be UTF-8
        (p.uri + p.text + p.title + p.error).encode("utf-8")


def test_a_duplicate_id_keeps_the_first_line_every_time(tmp_path, hotpot):
    first = next(iter(hotpot.values()))
    other = dict(first, text="a different text under the same id")
    path = tmp_path / "dups.jsonl"
    path.write_text(json.dumps(first) + "\n" + json.dumps(other) + "\n")
    runs = [read_passages(str(path)) for _ in range(3)]
    assert len({tuple(p.doc_id for p in run) for run in runs}) == 1  # no flapping
    kept, dropped = runs[0]
    assert kept.text == first["text"] and not kept.error
    assert dropped.error.startswith(f"line 2: duplicate id {first['id']!r} (first on line 1")
    assert dropped.doc_id == ""
