//! TEMPORARY STUB of the reflector interface (replaced by h-upstream).
#![allow(missing_docs)]
pub mod reflector {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum UpstreamKind { Nodes, Services, Endpoints, SlicesV1, SlicesV1beta1 }
    pub enum Change { Upsert(serde_json::Value), Delete(serde_json::Value), Replace(Vec<serde_json::Value>) }
    pub trait Sink: Send + Sync + 'static { fn apply(&self, kind: UpstreamKind, change: Change); }
}
pub mod client {
    #[derive(Clone, Debug)]
    pub struct Upstream;
    pub struct ForwardRequest { pub method: String, pub path_and_query: String, pub headers: Vec<(String, Vec<u8>)>, pub body: Vec<u8> }
    pub struct ForwardResponse { pub status: u16, pub headers: Vec<(String, Vec<u8>)>, pub body: Box<dyn std::io::Read + Send> }
    #[derive(Debug)]
    pub enum UpstreamError { Unreachable(String) }
    impl std::fmt::Display for UpstreamError { fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "{:?}", self) } }
    impl Upstream { pub fn forward(&self, req: ForwardRequest) -> Result<ForwardResponse, UpstreamError> { Err(UpstreamError::Unreachable(req.method)) } }
}
