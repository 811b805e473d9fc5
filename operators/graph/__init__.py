"""Graphs over the tree: entities and relations per node, gradient entity resolution, entity
linking of questions, the LAD-RAG layout graph (docs/architecture.md §3, §6)."""
