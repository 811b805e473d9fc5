"""A passage corpus of a chosen size, for serving at corpus scale (``benchmarks.serve_load``):
the shared real passages first, then grown ones, deterministic for a seed.

    python -m benchmarks.grow_passages --size 10000 --out passages_10k.jsonl [--seed 0] \
        [--questions-out DIR]
    bookindex index passages_10k.jsonl --out idx_10k
    bookindex eval --corpus passages_10k.jsonl --index idx_10k \
        --questions DIR/questions_musique.jsonl --method zoom,dense,bm25 --out OUT

The real passages are the MuSiQue and HotpotQA corpora of the shared data
(``multihop/{musique,hotpotqa}/corpus.jsonl``: 1,890 + 994 = 2,884 Wikipedia passages), ids
prefixed with their set (``musique:p0``). A size at or under 2,884 is a seeded sample of them,
written unchanged. Above it, every real passage is written once, then grown passages until the
size is reached, each made from real text only:

- a base passage (the real ones in a seeded order, cycled) gives its first sentence and its
  title, which gets the grown passage's number (``Shabana Azmi (grown 7)``): a title of its own,
  as every real passage has (the index job makes a title entity of it);
- a donor passage (another real one, seeded) gives its remaining sentences, so the grown text
  has the donor's length in sentences and characters (the real distribution) and sentences
  that name real entities.

How grown passages differ from real ones: their text is two real passages spliced (the first
sentence is about the base's subject, the rest about the donor's), so a grown passage is less
coherent than a real one; and every grown sentence repeats a real one, so the corpus's
entities are only the real passages' (about 35 times as many passages per entity at 100,000
as at 2,884) and its vectors cluster around the real ones: a denser entity graph and tighter
near-duplicate neighbourhoods than a real corpus of that size has. For serving load that is the
harder case (more links per entity for the walk, more near ties for the document graph), not an
easier one.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

SETS = ("musique", "hotpotqa")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def real_passages(shared_data: Path) -> list[dict]:
    """The shared MuSiQue and HotpotQA passages, ids prefixed with their set."""
    out = []
    for name in SETS:
        path = Path(shared_data) / "multihop" / name / "corpus.jsonl"
        with path.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                out.append(
                    {"id": f"{name}:{row['id']}", "title": row["title"], "text": row["text"]}
                )
    return out


def sentences(text: str) -> list[str]:
    """A passage's sentences (split after . ! ? before a capital, digit or quote)."""
    return [s for s in SENTENCE_END.split(text.strip()) if s]


def grow(real: list[dict], size: int, seed: int = 0) -> list[dict]:
    """``size`` passages: a seeded sample of ``real`` when that is enough, else all of ``real``
    and grown passages (module docstring)."""
    rng = random.Random(seed)
    if size <= len(real):
        return rng.sample(real, size)
    out = list(real)
    order = list(range(len(real)))
    rng.shuffle(order)
    split = [sentences(p["text"]) for p in real]
    for n in range(size - len(real)):
        base = real[order[n % len(real)]]
        donor = rng.randrange(len(real) - 1)
        donor += donor >= order[n % len(real)]  # never the base itself
        first = split[order[n % len(real)]][0]
        rest = split[donor][1:] or split[donor]
        out.append(
            {
                "id": f"grown:{n}",
                "title": f"{base['title']} (grown {n})",
                "text": " ".join([first, *rest]),
            }
        )
    return out


def corpus_questions(shared_data: Path, name: str) -> list[dict]:
    """A set's questions with their gold passage ids as a grown corpus names them (the set's
    prefix: ``musique:p6``), so ``bookindex eval --corpus GROWN --questions Q`` scores them
    against the grown corpus (the gold passages are among its real ones at any size above
    2,884)."""
    path = Path(shared_data) / "multihop" / name / "questions.jsonl"
    rows = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            rows.append({**row, "gold_ids": [f"{name}:{g}" for g in row["gold_ids"]]})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--shared-data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data")
    )
    parser.add_argument(
        "--questions-out",
        default=None,
        help="also write each set's questions, gold ids as the grown corpus names them, to "
        "DIR/questions_{musique,hotpotqa}.jsonl",
    )
    args = parser.parse_args(argv)
    passages = grow(real_passages(Path(args.shared_data)), args.size, args.seed)
    with Path(args.out).open("w", encoding="utf-8") as f:
        for row in passages:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    grown = sum(p["id"].startswith("grown:") for p in passages)
    print(f"{len(passages)} passages ({len(passages) - grown} real, {grown} grown) -> {args.out}")
    if args.questions_out:
        for name in SETS:
            out = Path(args.questions_out) / f"questions_{name}.jsonl"
            rows = corpus_questions(Path(args.shared_data), name)
            out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
            print(f"{len(rows)} {name} questions -> {out}")


if __name__ == "__main__":
    main()
