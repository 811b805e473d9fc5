"""Everything that imports Ray: the index job's Ray Data stages, the corpus-resolver actor, the
Serve application, and ``store/`` (Lance I/O, schemas, the commit rule). docs/architecture.md §1.
"""
