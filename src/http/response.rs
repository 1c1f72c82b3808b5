//! Response heads, chunked framing. Pure.
// TEMPORARY STUB — replaced by h-http.
#![allow(missing_docs, unused_variables)]
pub fn accepts_json(accept: Option<&str>) -> bool { true }
pub fn reason(code: u16) -> &'static str { "OK" }
pub enum Body { Length(usize), Chunked }
pub fn head(code: u16, headers: &[(&str, &str)], body: Body, keep_alive: bool) -> Vec<u8> { Vec::new() }
pub fn push_chunk(out: &mut Vec<u8>, data: &[u8]) {}
pub fn push_last_chunk(out: &mut Vec<u8>) {}
pub fn json(code: u16, body: &[u8], keep_alive: bool) -> Vec<u8> { Vec::new() }
pub fn status(err: &crate::k8s::status::ApiError, keep_alive: bool) -> Vec<u8> { Vec::new() }
