"""bookindex: question answering over long, structured documents, at corpus scale on Ray.

The Python API (``bookindex.api``, imported on first use so that ``import bookindex`` stays
cheap and Ray-free)::

    import bookindex

    stats = bookindex.index(["paper.pdf", "reports/"], "my_index")   # the index job
    with bookindex.open_index("my_index") as idx:
        answer = idx.ask("How many tables are in Section 3?")
        print(answer.answer, [e.page for e in answer.evidence])

The command line is ``bookindex`` (``bookindex.cli``). The sub-packages ``bookindex.operators``
(plain Python over PyMuPDF and NumPy), ``bookindex.pipelines`` (Ray Data, Ray Serve, Lance) and
``bookindex.jobs`` (the commands) are mapped in docs/architecture.md.
"""

from __future__ import annotations

from typing import Any

from bookindex._lance import defer_rest_client
from bookindex._pymupdf import skip_layout
from bookindex._version import __version__

skip_layout()  # PyMuPDF's layout model, which bookindex never uses, is not loaded (_pymupdf.py)
defer_rest_client()  # Lance's REST namespace client imports on first use (_lance.py)

__all__ = [
    "Answer",
    "Evidence",
    "Index",
    "IndexStats",
    "__version__",
    "index",
    "load_config",
    "open_index",
]


def __getattr__(name: str) -> Any:  # PEP 562: the API loads on first use
    if name in __all__ and name != "__version__":
        from bookindex import api

        return getattr(api, name)
    raise AttributeError(f"module 'bookindex' has no attribute {name!r}")
