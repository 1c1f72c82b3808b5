//! Response heads, chunked framing. Pure.
