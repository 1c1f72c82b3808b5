//! HTTP/1.1 over byte slices: the incremental request reader and response framing. Pure.

pub mod request;
pub mod response;
