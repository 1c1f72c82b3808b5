//! The API surface: query options, selectors, routing and the cache-backed handlers. Pure.

pub mod query;
pub mod selector;
