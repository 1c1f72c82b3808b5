//! The bearer token of upstream requests: static, or re-read from a file (a projected
//! ServiceAccount token rotates) at most every [`TOKEN_REREAD_INTERVAL`](crate::upstream::client::TOKEN_REREAD_INTERVAL).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::lock;
use crate::upstream::kubeconfig;

/// Bearer token: static, or read from a file at most every [`TOKEN_REREAD_INTERVAL`](crate::upstream::client::TOKEN_REREAD_INTERVAL); the last
/// successfully read file content wins over the static value (client-go semantics). No `Debug`:
/// it holds a secret.
pub(crate) struct TokenSource {
    fixed: Option<String>,
    file: Option<PathBuf>,
    interval: Duration,
    /// Last good file content, and when the file was last tried.
    cached: Mutex<(Option<String>, Option<Instant>)>,
}

impl TokenSource {
    pub(crate) fn new(fixed: Option<String>, file: Option<PathBuf>, interval: Duration) -> Self {
        let fixed = fixed.filter(|t| !t.is_empty());
        TokenSource {
            fixed,
            file,
            interval,
            cached: Mutex::new((None, None)),
        }
    }

    pub(crate) fn current(&self, now: Instant) -> Option<String> {
        let Some(path) = &self.file else {
            return self.fixed.clone();
        };
        let mut guard = lock(&self.cached);
        let (value, tried) = &mut *guard;
        if tried.is_none_or(|at| now.saturating_duration_since(at) >= self.interval) {
            *tried = Some(now);
            match kubeconfig::read_bounded(path) {
                Ok(bytes) => {
                    let tok = String::from_utf8_lossy(&bytes).trim().to_string();
                    if tok.is_empty() {
                        log::warn!(
                            "token file {} is empty; keeping the previous token",
                            path.display()
                        );
                    } else {
                        *value = Some(tok);
                    }
                }
                Err(e) => log::warn!("keeping the previous bearer token: {e}"),
            }
        }
        value.clone().or_else(|| self.fixed.clone())
    }
}
