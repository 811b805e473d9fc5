"""A hostile-input corpus, generated (nothing binary is committed): crafted PDFs, file-system
traps and bad JSONL lines, mixed with good PDFs, for the index job's isolation and input rules.

``build_hostile_corpus(out, good_pdfs, good_passages, reduced)`` writes::

    out/pdfs/        crafted PDFs, odd file names, symlink loops, broken links, a FIFO,
                     a link to /proc/self/mem, and the good PDFs (copied)
    out/passages.jsonl   good passages and every bad-line case
    out/manifest.json    what each input is and what the job must do with it

Each crafted PDF is written object by object with a correct cross-reference table, so MuPDF
reads the structure as crafted (not as repaired). ``reduced`` shrinks the sizes for CI (seconds
to generate and to index) while keeping each case hostile in the same way.

The manifest's ``expect`` per input: ``ok`` (indexed), ``failed`` (a failed document row with
a reason), ``needs_ocr`` (no text layer), ``problem`` (a failure row, no document; discovery or
a JSONL line), or ``either`` (a crafted PDF MuPDF may read or refuse: either way the job goes
on and records what happened).
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

import pymupdf

_PAGE = b"<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]/Resources<</Font<</F1 4 0 R>>>>"
_FONT = b"<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>"


@dataclass(frozen=True)
class Sizes:
    outline_depth: int
    page_tree_depth: int
    image_side: int  # pixels of the image bomb's square RGB image
    flate_mb: int  # decompressed megabytes of the Flate bomb's content stream
    text_ops: int  # show-text operators on the text-operator bomb's page
    blank_pages: int
    run_on_blocks: int  # text blocks of one run-on paragraph (tree.py's merging)


FULL = Sizes(60_000, 20_000, 40_000, 1024, 1_000_000, 20_000, 6_000)
REDUCED = Sizes(60_000, 5_000, 8_000, 64, 100_000, 2_000, 1_500)


def _pdf(objects: list[bytes], root: int = 1, compress_free: bool = False) -> bytes:
    """A PDF of ``objects`` (object i + 1 is objects[i]) with a correct xref table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<</Size %d/Root %d 0 R>>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        root,
        xref,
    )
    return bytes(out)


def _stream(data: bytes, extra: bytes = b"", flate: bool = False) -> bytes:
    if flate:
        data = zlib.compress(data, 9)
        extra += b"/Filter/FlateDecode"
    return b"<<%s/Length %d>>stream\n" % (extra, len(data)) + data + b"\nendstream"


def _one_page(
    text: bytes,
    pages: bytes = b"<</Type/Pages/Kids[3 0 R]/Count 1>>",
    catalog: bytes = b"",
    page: bytes = _PAGE,
    more: tuple[bytes, ...] = (),
) -> list[bytes]:
    """The objects of a one-page PDF showing ``text``: 1 catalog, 2 pages, 3 page, 4 font,
    5 content; ``more`` from 6 on (``pages``, ``catalog`` extras and ``page`` as crafted)."""
    return [
        b"<</Type/Catalog/Pages 2 0 R%s>>" % catalog,
        pages,
        page + b"/Contents 5 0 R>>",
        _FONT,
        _stream(b"BT /F1 12 Tf 72 720 Td (" + text + b") Tj ET"),
        *more,
    ]


def deep_outline(depth: int) -> bytes:
    """A one-page PDF whose outline is a chain ``depth`` items deep (MuPDF recurses on it)."""
    top = b"<</Type/Outlines/First 7 0 R/Last 7 0 R/Count %d>>" % depth
    objects = _one_page(b"Deep outline.", catalog=b"/Outlines 6 0 R", more=(top,))
    for i in range(depth):
        number = 7 + i
        child = b"/First %d 0 R/Last %d 0 R/Count 1" % (number + 1, number + 1)
        objects.append(
            b"<</Title(Level %d)/Parent %d 0 R/Dest[3 0 R/Fit]%s>>"
            % (i, number - 1, child if i + 1 < depth else b"")
        )
    return _pdf(objects)


def cyclic_page_tree() -> bytes:
    """The page tree's root has a child whose kid is the root again."""
    pages = b"<</Type/Pages/Kids[6 0 R 3 0 R]/Count 2>>"
    back = b"<</Type/Pages/Parent 2 0 R/Kids[2 0 R]/Count 1>>"
    return _pdf(_one_page(b"Cyclic page tree.", pages=pages, more=(back,)))


def deep_page_tree(depth: int) -> bytes:
    """One page under ``depth`` nested /Pages nodes."""
    page = _PAGE.replace(b"/Parent 2 0 R", b"/Parent %d 0 R" % (5 + depth))
    pages = b"<</Type/Pages/Kids[6 0 R]/Count 1>>"
    objects = _one_page(b"Deep page tree.", pages=pages, page=page)
    for i in range(depth):
        number = 6 + i
        parent = 2 if i == 0 else number - 1
        kid = 3 if i + 1 == depth else number + 1
        objects.append(b"<</Type/Pages/Parent %d 0 R/Kids[%d 0 R]/Count 1>>" % (parent, kid))
    return _pdf(objects)


def lying_page_count() -> bytes:
    """A page tree that says it has two billion pages and holds one."""
    pages = b"<</Type/Pages/Kids[3 0 R]/Count 2000000000>>"
    return _pdf(_one_page(b"One page, two billion claimed.", pages=pages))


def _zeros_deflated(n_bytes: int) -> bytes:
    compressor = zlib.compressobj(9)
    chunk = bytes(1 << 20)
    parts = [compressor.compress(chunk) for _ in range(n_bytes >> 20)]
    parts.append(compressor.compress(bytes(n_bytes & ((1 << 20) - 1))))
    parts.append(compressor.flush())
    return b"".join(parts)


def image_bomb(side: int) -> bytes:
    """A page with text and a ``side`` × ``side`` RGB image whose Flate data is a few MB."""
    data = _zeros_deflated(side * side * 3)
    image = b"<</Type/XObject/Subtype/Image/Width %d/Height %d/ColorSpace/DeviceRGB" % (side, side)
    image += b"/BitsPerComponent 8/Filter/FlateDecode/Length %d>>stream\n" % len(data)
    content = b"BT /F1 12 Tf 72 720 Td (An image bomb.) Tj ET q 400 0 0 400 100 200 cm /Im1 Do Q"
    return _pdf(
        [
            b"<</Type/Catalog/Pages 2 0 R>>",
            b"<</Type/Pages/Kids[3 0 R]/Count 1>>",
            b"<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]/Resources<</Font<</F1 4 0 R>>"
            b"/XObject<</Im1 6 0 R>>>>/Contents 5 0 R>>",
            _FONT,
            _stream(content),
            image + data + b"\nendstream",
        ]
    )


def flate_bomb(megabytes: int) -> bytes:
    """A page whose content stream inflates to ``megabytes`` MB of spaces around one line."""
    body = b"BT /F1 12 Tf 72 720 Td (A Flate bomb.) Tj ET"
    compressor = zlib.compressobj(9)
    data = compressor.compress(body + b"\n")
    chunk = b" " * (1 << 20)
    data += b"".join(compressor.compress(chunk) for _ in range(megabytes))
    data += compressor.flush()
    return _pdf(
        [
            b"<</Type/Catalog/Pages 2 0 R>>",
            b"<</Type/Pages/Kids[3 0 R]/Count 1>>",
            _PAGE + b"/Contents 5 0 R>>",
            _FONT,
            b"<</Filter/FlateDecode/Length %d>>stream\n" % len(data) + data + b"\nendstream",
        ]
    )


def text_operator_bomb(n_ops: int) -> bytes:
    """One page with ``n_ops`` show-text operators, each at a new spot on the page."""
    ops = b"".join(
        b"1 0 0 1 %d %d Tm (w%d) Tj " % (36 + (i * 7) % 540, 36 + (i * 13) % 720, i % 10)
        for i in range(n_ops)
    )
    return _pdf(
        [
            b"<</Type/Catalog/Pages 2 0 R>>",
            b"<</Type/Pages/Kids[3 0 R]/Count 1>>",
            _PAGE + b"/Contents 5 0 R>>",
            _FONT,
            _stream(b"BT /F1 4 Tf " + ops + b" ET", flate=True),
        ]
    )


def blank_pages(n_pages: int) -> bytes:
    """``n_pages`` empty pages (no text layer at all)."""
    with pymupdf.open() as doc:
        for _ in range(n_pages):
            doc.new_page()
        return doc.tobytes(garbage=0, deflate=True)


def run_on_paragraph(n_blocks: int) -> bytes:
    """A readable PDF whose body is one paragraph cut into ``n_blocks`` text blocks (each
    starts lower-case, none ends a sentence): tree.py merges them into one leaf."""
    with pymupdf.open() as doc:
        page = doc.new_page()
        page.insert_text((72, 72), "Run-on paragraph", fontsize=18)
        y = 100.0
        for i in range(n_blocks):
            if y > 760:
                page, y = doc.new_page(), 72.0
            text = f"and then clause {i} continued with more words over the line {i % 7}"
            page.insert_text((72, y), text, fontsize=9)
            y += 24.0  # a gap: each line is its own block
        return doc.tobytes(garbage=0, deflate=True)


def odd_named_pdf(label: str) -> bytes:
    """A small readable PDF (its own text, so each odd name is a document of its own)."""
    with pymupdf.open() as doc:
        page = doc.new_page()
        page.insert_text((72, 72), f"Odd name: {label}", fontsize=18)
        page.insert_text((72, 120), f"This document is named {label!r}.", fontsize=11)
        return doc.tobytes(garbage=0, deflate=True)


_ODD_NAMES: list[tuple[str | bytes, str]] = [
    ("-starts-with-dash.pdf", "leading dash"),
    ('it\'s "quoted".pdf', "quotes"),
    ("new\nline.pdf", "newline"),
    ("Ωmega 文档 ünïcödé.pdf", "unicode"),
    ("spaces   inside .pdf", "spaces"),
    ("UPPER.PDF", "upper-case suffix"),
    ("x" * 240 + ".pdf", "long name"),
    ("semi;colon $(echo no) `x`.pdf", "shell characters"),
]
_NOT_UTF8 = b"latin1-\xe9t\xe9.pdf"  # a name that is not UTF-8


def _bad_passage_lines(good: list[dict]) -> list[tuple[bytes, str, str]]:
    """(line, case, expect) for every JSONL rule, around the good passages."""
    dup = good[0]
    cases: list[tuple[bytes, str, str]] = [
        (b'{"id": "sur-text", "title": "t", "text": "bad \\ud800 text"}', "lone surrogate", "problem"),
        (b'{"id": "sur-\\udfff", "title": "t", "text": "ok text"}', "surrogate in id", "problem"),
        (b"[" * 100_000 + b"]" * 100_000, "100k nested brackets", "problem"),
        (b'{"id": "nested", "text": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "deep value", "problem"),
        (json.dumps({"id": dup["id"], "title": "x", "text": "a different text"}).encode(),
         "duplicate id", "problem"),
        (b'{"id": "null-text", "title": "t", "text": null}', "null text", "problem"),
        (b'{"id": "empty-text", "title": "t", "text": ""}', "empty text", "problem"),
        (b'{"id": "blank-text", "title": "t", "text": "   \\n "}', "blank text", "problem"),
        (b'{"id": "no-text", "title": "t"}', "missing text", "problem"),
        (b'{"id": null, "text": "no id"}', "null id", "problem"),
        (b'{"id": true, "text": "bool id"}', "bool id", "problem"),
        (b'{"id": "num-title", "title": 5, "text": "x"}', "title not a string", "problem"),
        (b'["not", "an", "object"]', "not an object", "problem"),
        (b"{not json", "not JSON", "problem"),
        (b'{"id": "latin1", "text": "caf\xe9"}', "invalid UTF-8 bytes", "problem"),
    ]  # fmt: skip
    return cases


def build_hostile_corpus(
    out: str | Path,
    good_pdfs: list[Path],
    good_passages: list[dict],
    reduced: bool = False,
) -> dict:
    """Write the corpus under ``out`` (emptied first); the manifest (also written)."""
    sizes = REDUCED if reduced else FULL
    root = Path(out)
    if root.exists():
        shutil.rmtree(root)
    pdfs = root / "pdfs"
    pdfs.mkdir(parents=True)
    inputs: list[dict] = []

    def add(name: str | bytes, data: bytes, case: str, expect: str) -> None:
        path = os.path.join(os.fsencode(pdfs), os.fsencode(name))
        with open(path, "wb") as handle:
            handle.write(data)
        shown = os.fsdecode(path)
        inputs.append({"path": os.fsencode(shown).decode("utf-8", "backslashreplace"),
                       "case": case, "expect": expect})  # fmt: skip

    add("deep_outline.pdf", deep_outline(sizes.outline_depth), "outline 60,000 deep", "failed")
    add("cyclic_page_tree.pdf", cyclic_page_tree(), "cyclic page tree", "either")
    add("deep_page_tree.pdf", deep_page_tree(sizes.page_tree_depth), "deep page tree", "either")
    add("lying_page_count.pdf", lying_page_count(), "page count 2e9, one page", "either")
    add("image_bomb.pdf", image_bomb(sizes.image_side), "image bomb", "either")
    add("flate_bomb.pdf", flate_bomb(sizes.flate_mb), "Flate bomb", "either")
    add("text_op_bomb.pdf", text_operator_bomb(sizes.text_ops), "text-operator bomb", "either")
    add("blank_pages.pdf", blank_pages(sizes.blank_pages), "blank pages", "needs_ocr")
    add("run_on.pdf", run_on_paragraph(sizes.run_on_blocks), "run-on paragraph", "ok")
    for name, label in _ODD_NAMES:
        add(name, odd_named_pdf(label), f"odd name: {label}", "ok")
    add(_NOT_UTF8, odd_named_pdf("not UTF-8"), "file name not UTF-8", "problem")
    for pdf in good_pdfs:
        shutil.copy(pdf, pdfs / pdf.name)
        inputs.append({"path": str(pdfs / pdf.name), "case": "good PDF", "expect": "ok"})

    traps = pdfs / "traps"
    traps.mkdir()
    (traps / "loop_a").symlink_to("..")  # two loops: an exponential walk for a recursive glob
    (traps / "loop_b").symlink_to("../traps")
    (traps / "self_loop.pdf").symlink_to("self_loop.pdf")
    (traps / "broken.pdf").symlink_to("no_such_target.pdf")
    (traps / "proc_mem.pdf").symlink_to("/proc/self/mem")
    os.mkfifo(traps / "fifo.pdf")
    for name, case in (
        ("loop_a", "symlink loop"),
        ("loop_b", "symlink loop"),
        ("self_loop.pdf", "link to itself"),
        ("broken.pdf", "broken symlink"),
        ("proc_mem.pdf", "link to /proc/self/mem"),
        ("fifo.pdf", "FIFO"),
    ):
        inputs.append({"path": str(traps / name), "case": case, "expect": "problem"})

    lines = [json.dumps(p, ensure_ascii=False).encode("utf-8") for p in good_passages]
    bad = _bad_passage_lines(good_passages)
    mixed = [lines[0], *[line for line, _, _ in bad], *lines[1:]]
    (root / "passages.jsonl").write_bytes(b"\n".join(mixed) + b"\n")
    passages = [{"id": p["id"], "case": "good passage", "expect": "ok"} for p in good_passages]
    passages += [{"line": i + 2, "case": case, "expect": e} for i, (_, case, e) in enumerate(bad)]
    manifest = {"reduced": reduced, "sizes": vars(sizes), "inputs": inputs, "passages": passages}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False))
    return manifest
