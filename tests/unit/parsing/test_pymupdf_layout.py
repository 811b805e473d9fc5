"""``import bookindex`` keeps PyMuPDF 2.0 from loading its layout model (an onnxruntime session
for ``Page.get_layout``, which bookindex never calls; bookindex/_pymupdf.py), and a caller that
wants it (the benchmarks' pymupdf4llm baseline) still gets it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_PROBE = """
import json, sys
import bookindex.operators.parsing.parse
import pymupdf
state = {"layout_loaded": sys.modules.get("pymupdf.layout") is not None,
         "get_layout": pymupdf._get_layout is not None}
from bookindex._pymupdf import allow_layout
allow_layout()
import pymupdf4llm
pymupdf4llm.use_layout(True)
state["after_allow"] = pymupdf._get_layout is not None and "pymupdf.layout" in sys.modules
print(json.dumps(state))
"""


def test_the_parser_imports_pymupdf_without_its_layout_model_and_a_caller_can_ask_for_it():
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, check=True
    )
    state = json.loads(done.stdout.strip().splitlines()[-1])
    assert state == {"layout_loaded": False, "get_layout": False, "after_allow": True}
