//! The API surface: query options, selectors, routing, the one decision of a request's fate and
//! the cache-backed handlers. Pure.

pub mod decide;
pub mod facts;
pub mod filter;
pub mod handlers;
pub mod negotiate;
pub mod query;
pub mod relay;
pub mod route;
pub mod selector;
