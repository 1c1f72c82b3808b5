//! `/debug/state` on `--metrics-bind-address` (with `--debug`). Not built yet: answers 404.

use std::sync::Mutex;

use crate::cache::store::State;
use crate::server::health::Extras;

/// (status, Content-Type, body) for `/debug/state`.
pub fn answer(
    _query: &str,
    _shared: &Mutex<State>,
    _extras: &Extras,
) -> (u16, &'static str, String) {
    (404, "text/plain; charset=utf-8", "not found".into())
}
