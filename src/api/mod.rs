//! The API surface: query options, selectors, routing, the one decision of a request's fate,
//! the cache-backed handlers, the watch rules (`transition`) and the answers' bytes (`wire`).
//! Pure.

pub mod decide;
pub mod filter;
pub mod handlers;
pub mod negotiate;
pub mod query;
pub mod relay;
pub mod route;
pub mod runtime_report;
pub mod selector;
pub mod serving;
pub mod transition;
pub mod wire;
