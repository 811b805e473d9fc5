"""The walk engine's two backends: NumPy/SciPy on CPU, CuPy on GPU (imported only when asked)."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import scipy.sparse as sp


@dataclass(frozen=True)
class Backend:
    name: str  # "cpu" or "gpu"
    xp: ModuleType  # numpy or cupy
    sparse: ModuleType  # scipy.sparse or cupyx.scipy.sparse
    dtype: Any  # dtype of the walk state and transition matrices

    def asarray(self, a: Any, dtype: Any = None) -> Any:
        a = a.toarray() if sp.issparse(a) else a
        return self.xp.asarray(a, dtype=self.dtype if dtype is None else dtype)

    def coo_csr(self, vals: Any, rows: Any, cols: Any, shape: tuple[int, int]) -> Any:
        idx = (rows.astype(self.xp.int32), cols.astype(self.xp.int32))
        return self.sparse.coo_matrix((vals.astype(self.dtype), idx), shape=shape).tocsr()

    def sync(self) -> None:
        if self.name == "gpu":
            self.xp.cuda.Stream.null.synchronize()


def cupy_or_reason() -> tuple[Any, Any, str]:
    """(cupy, cupyx.scipy.sparse, "") when a CUDA device is usable, else (None, None, why)."""
    try:
        import cupy
        import cupyx.scipy.sparse as cusparse
    except ImportError as exc:
        return None, None, f"CuPy is not installed ({exc})"
    try:
        if not cupy.cuda.is_available():
            return None, None, "CuPy is installed but no CUDA device is available"
    except Exception as exc:  # driver/runtime errors surface here, not as ImportError
        return None, None, f"CUDA check failed ({exc})"
    return cupy, cusparse, ""
