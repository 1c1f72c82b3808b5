//! A unary gRPC client of the node's container runtime (CRI), without an async runtime: HTTP/2
//! with prior knowledge over a unix socket, only the two read-only calls `ListPodSandbox` and
//! `PodSandboxStatus`. Pure where it can be — [`frame`], [`huffman`], [`hpack`], [`grpc`],
//! [`messages`], [`endpoint`] and the connection state machine [`session`] do no
//! I/O — with [`client`] the thin shell that owns the socket and the deadlines (feature `io`),
//! and [`source`] the thread that polls the runtime and hands the cache its view of the local
//! pods (docs/SEMANTICS.md §13).

#[cfg(feature = "io")]
pub mod client;
pub mod endpoint;
pub mod frame;
pub mod grpc;
pub mod hpack;
pub mod huffman;
pub mod messages;
pub mod session;
#[cfg(feature = "io")]
pub mod source;

#[cfg(feature = "io")]
pub use client::{Client, ReadySandbox, Sandboxes};
