"""From blocks to a heading tree: page furniture, block typing, section filtering (layout,
outline, LLM refiner), the tree with DeepRead coordinates, passages as documents
(docs/architecture.md §3)."""
