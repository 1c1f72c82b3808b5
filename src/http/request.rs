//! Incremental HTTP/1.1 request reader with limits. Pure.
// TEMPORARY STUB — replaced by h-http.
#![allow(missing_docs, unused_variables)]
#[derive(Clone, Copy, Debug)]
pub struct Limits { pub max_head: usize, pub max_headers: usize, pub max_body: usize }
impl Default for Limits { fn default() -> Self { Limits { max_head: 16384, max_headers: 64, max_body: 4 << 20 } } }
#[derive(Clone, Debug)]
pub struct Request { pub method: String, pub path: String, pub query: String, pub minor_version: u8, pub headers: Vec<(String, Vec<u8>)>, pub body: Vec<u8> }
impl Request {
    pub fn header(&self, name: &str) -> Option<&[u8]> { None }
    pub fn header_str(&self, name: &str) -> Option<&str> { None }
    pub fn keep_alive(&self) -> bool { true }
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError { Malformed }
impl ReadError { pub fn status(self) -> u16 { 400 } pub fn message(self) -> &'static str { "bad" } }
#[derive(Debug)]
pub struct RequestReader;
impl RequestReader {
    pub fn new(limits: Limits) -> Self { RequestReader }
    pub fn push(&mut self, data: &[u8]) -> Result<(), ReadError> { Ok(()) }
    pub fn next_request(&mut self) -> Result<Option<Request>, ReadError> { Ok(None) }
    pub fn buffered(&self) -> usize { 0 }
}
