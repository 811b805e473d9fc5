"""PDF parsing with PyMuPDF: probing files, typed blocks per page, ruled tables
(docs/architecture.md §3)."""
