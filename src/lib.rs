//! grid-wrapper: a node-local, topology-pruning cache that kube-proxy talks to instead of the
//! apiserver. (Crate map: filled in as the modules land.)

#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod api;
pub mod app;
pub mod cache;
pub mod config;
pub mod http;
pub mod k8s;
pub mod server;
pub mod upstream;
