"""The index on disk: Lance I/O, table schemas, the commit rule every reader goes through, the
entity and layout-graph tables (docs/architecture.md §4). No Ray."""
