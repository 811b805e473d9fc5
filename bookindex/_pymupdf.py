"""PyMuPDF without the layout model it loads on import, unless a caller asks for it.

PyMuPDF 2.0 depends on pymupdf-layout, and ``import pymupdf`` imports ``pymupdf.layout``,
which loads an ONNX layout model into an onnxruntime session (0.85 s of a 1.1-s import, and the
session's memory) for ``Page.get_layout`` alone; bookindex never calls it. ``skip_layout``
(run by ``import bookindex``, before any of its modules imports PyMuPDF) makes that import
fail, as it does where pymupdf-layout is not installed, so PyMuPDF leaves ``_get_layout``
unset: every other call of PyMuPDF is the same. ``allow_layout`` lifts it (the benchmarks'
pymupdf4llm baseline, whose default mode is the layout model's).
"""

from __future__ import annotations

import sys

LAYOUT = "pymupdf.layout"


def skip_layout() -> None:
    """``import pymupdf`` without its layout model (where PyMuPDF is not imported yet)."""
    if "pymupdf" not in sys.modules:
        sys.modules.setdefault(LAYOUT, None)


def allow_layout() -> None:
    """A later ``import pymupdf.layout`` (pymupdf4llm's layout mode) imports it."""
    if LAYOUT in sys.modules and sys.modules[LAYOUT] is None:
        del sys.modules[LAYOUT]
