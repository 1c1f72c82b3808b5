//! The API surface: query options, selectors, routing and the cache-backed handlers. Pure.

pub mod filter;
pub mod handlers;
pub mod negotiate;
pub mod query;
pub mod relay;
pub mod route;
pub mod selector;
