"""What the web viewer shows of an index, as plain data: the pages of a document's PDF
(rendered in a child process, sized within a cap, kept in a cache), the running heads and
footers the index dropped as furniture (recomputed from the PDF), and the JSON of its views
(corpus, document, section, page) read from the query side's read model. No Ray, no Lance:
``pipelines/viewer`` serves these over HTTP (docs/viewer.md)."""
