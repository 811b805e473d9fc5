"""Evaluation material: QA metrics, heading gold and matching, the sample-corpus generator
(docs/architecture.md §1)."""
