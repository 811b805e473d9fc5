"""ZoomRAG's random walks: the batched walk engine (SciPy, a compiled CSR kernel, or CuPy) and
its kernel (docs/architecture.md §5, §6)."""
