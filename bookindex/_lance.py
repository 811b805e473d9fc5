"""Lance without its REST namespace client's import, until something asks for the client.

``import lance`` (pylance 4.0, pinned by Ray's ``write_lance``) imports ``lance.namespace``,
whose ``lance_namespace`` imports the request and response models of
``lance_namespace_urllib3_client``, a generated OpenAPI client; importing any part of that
package first runs its ``__init__``, which imports every API class of the REST server
(``TableApi``, ``MetadataApi``, ...: about 60 % of ``import lance``, 1.3 s of 2 s on a quiet
core). bookindex reads and writes local or object-store datasets by URI and never talks to a
REST namespace. ``defer_rest_client`` (run by ``import bookindex``, before any of its modules
imports Lance) registers the package without running its ``__init__``: its sub-modules (the
models ``lance_namespace`` needs) import as before, and the first attribute of the package
itself (``ApiClient``, ``TableApi``, ...) runs the real ``__init__`` then, so every caller that
uses the client still gets all of it.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Any

REST_CLIENT = "lance_namespace_urllib3_client"


def defer_rest_client(name: str = REST_CLIENT) -> bool:
    """Register ``name`` (a package) so that its ``__init__`` runs on first attribute access
    instead of on import; False where it is imported already or not installed."""
    if name in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    package = importlib.util.module_from_spec(spec)  # __path__ set: sub-modules import
    lock = threading.Lock()

    def __getattr__(attribute: str) -> Any:  # PEP 562, until the real __init__ has run
        with lock:
            if package.__dict__.pop("__getattr__", None) is not None:
                spec.loader.exec_module(package)
        return getattr(package, attribute)

    package.__getattr__ = __getattr__  # type: ignore[attr-defined]
    sys.modules[name] = package
    return True
