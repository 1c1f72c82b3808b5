//! `/debug/topology` on `--metrics-bind-address`: why each endpoint of a topology Service is kept
//! or pruned. Not built yet: answers 404 with a plain-text reason.

use std::sync::Mutex;

use crate::cache::store::State;

/// (status, Content-Type, body) for `/debug/topology[/<namespace>/<service>]`.
pub fn answer(_path: &str, _query: &str, _shared: &Mutex<State>) -> (u16, &'static str, String) {
    (404, "text/plain; charset=utf-8", "not found".into())
}
