//! HTTP/1.1 over byte slices: the incremental request reader (`request`, with the chunked-body
//! decoder in `chunked`) and response framing (`response`). Pure: no sockets, no clock, no TLS.

pub mod chunked;
pub mod request;
pub mod response;
