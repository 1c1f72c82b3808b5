//! HTTP/1.1 over byte slices: the incremental request reader (`request`, with the chunked-body
//! decoder in `chunked`), response framing (`response`) and the token table they share
//! (`token`). Pure: no sockets, no clock, no TLS.

pub mod chunked;
pub mod request;
pub mod response;
mod token;
