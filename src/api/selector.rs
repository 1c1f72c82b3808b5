//! Label and field selectors (PROTOCOL.md §5): parsing and matching. Pure.
