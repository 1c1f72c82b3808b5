//! Incremental HTTP/1.1 request reader with limits. Pure.
