//! List/watch query options (PROTOCOL.md §5): parsing and validation. Pure.
