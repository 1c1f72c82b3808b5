//! Proxied requests (docs/SEMANTICS.md §8): a worker thread per request forwards it upstream with
//! the shared ureq client and hands the response back to the event loop in pieces, through a
//! bounded channel and the loop's `Waker`. The loop never blocks on the upstream.

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use log::{debug, warn};
use mio::Waker;

use crate::http::request::Request;
use crate::k8s::status::ApiError;
use crate::upstream::client::{ForwardRequest, Upstream, UpstreamError};

/// Most proxied requests in flight (proxied watches hold a worker for their lifetime).
pub const MAX_IN_FLIGHT: usize = 64;
/// Body bytes per message from a worker.
const PIECE: usize = 16 * 1024;
/// Messages a worker may queue ahead of the loop (backpressure on slow clients).
const QUEUE: usize = 16;

/// A piece of a proxied response.
#[derive(Debug)]
pub enum ProxyMsg {
    /// Status and headers (hop-by-hop and framing headers already removed).
    Head {
        /// HTTP status from upstream.
        status: u16,
        /// End-to-end headers.
        headers: Vec<(String, Vec<u8>)>,
    },
    /// Body bytes.
    Data(Vec<u8>),
    /// The body ended.
    End,
    /// The request failed before a head arrived (→ a Status reply) or mid-body (→ close).
    Failed(ApiError),
}

/// Starts proxy workers, bounded by [`MAX_IN_FLIGHT`].
#[derive(Debug)]
pub struct Proxy {
    upstream: Option<Upstream>,
    waker: Arc<Waker>,
    in_flight: Arc<AtomicUsize>,
}

impl Proxy {
    /// A proxy forwarding to `upstream` (`None`: every proxied request gets 503).
    pub fn new(upstream: Option<Upstream>, waker: Arc<Waker>) -> Proxy {
        Proxy {
            upstream,
            waker,
            in_flight: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Forwards `req` on a worker; the receiver yields the response pieces.
    pub fn start(&self, req: Request) -> Result<Receiver<ProxyMsg>, ApiError> {
        let Some(upstream) = self.upstream.clone() else {
            return Err(ApiError::unavailable(
                "no upstream apiserver configured",
                None,
            ));
        };
        if self.in_flight.fetch_add(1, Ordering::SeqCst) >= MAX_IN_FLIGHT {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            let mut e = ApiError::new(
                429,
                "TooManyRequests",
                "too many proxied requests in flight",
            );
            e.retry_after = Some(1);
            return Err(e);
        }
        let (tx, rx) = sync_channel(QUEUE);
        let waker = self.waker.clone();
        let in_flight = self.in_flight.clone();
        let path_and_query = if req.query.is_empty() {
            req.path.clone()
        } else {
            format!("{}?{}", req.path, req.query)
        };
        let fwd = ForwardRequest {
            method: req.method,
            path_and_query,
            // `Upstream::forward` drops hop-by-hop headers (and those named by `Connection`).
            headers: req.headers,
            body: req.body,
        };
        let spawned = std::thread::Builder::new()
            .name("proxy".into())
            .spawn(move || {
                work(&upstream, fwd, &tx, &waker);
                in_flight.fetch_sub(1, Ordering::SeqCst);
            });
        match spawned {
            Ok(_) => Ok(rx),
            Err(e) => {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                Err(ApiError::internal(format!(
                    "cannot start proxy worker: {e}"
                )))
            }
        }
    }
}

/// What to add to a proxied request's failure when the upstream's TLS demanded a client
/// certificate: proxied requests present none of grid-wrapper's (docs/SEMANTICS.md §8).
fn certificate_hint(e: &UpstreamError) -> &'static str {
    match e {
        UpstreamError::Tls(m) if m.contains("CertificateRequired") => {
            " (the upstream requires a client certificate on every connection; proxied requests \
             present none of grid-wrapper's: a site relay is named with --relay-kubeconfig, not \
             as the upstream)"
        }
        _ => "",
    }
}

fn work(upstream: &Upstream, req: ForwardRequest, tx: &SyncSender<ProxyMsg>, waker: &Waker) {
    let send = |msg: ProxyMsg| -> bool {
        let ok = tx.send(msg).is_ok();
        // A failed wake means the loop is gone; the send result already tells us to stop.
        let _ = waker.wake();
        ok
    };
    let (method, path) = (req.method.clone(), req.path_and_query.clone());
    let mut resp = match upstream.forward(req) {
        Ok(r) => r,
        Err(e) => {
            let hint = certificate_hint(&e);
            warn!("proxy {method} {path}: upstream unavailable: {e}{hint}");
            let err = match e {
                UpstreamError::Unreachable(_) | UpstreamError::Stalled(_) => {
                    ApiError::unavailable(format!("upstream apiserver unreachable: {e}"), None)
                }
                #[allow(unreachable_patterns)]
                _ => ApiError::unavailable(format!("upstream request failed: {e}{hint}"), None),
            };
            send(ProxyMsg::Failed(err));
            return;
        }
    };
    debug!("proxy {method} {path}: upstream answered {}", resp.status);
    // Hop-by-hop headers are already gone; the loop re-frames the body (chunked), so the
    // upstream's Content-Length must not be relayed next to it.
    let headers = resp
        .headers
        .drain(..)
        .filter(|(n, _)| !n.eq_ignore_ascii_case("content-length"))
        .collect();
    if !send(ProxyMsg::Head {
        status: resp.status,
        headers,
    }) {
        return;
    }
    let mut buf = vec![0u8; PIECE];
    loop {
        match resp.body.read(&mut buf) {
            Ok(0) => {
                send(ProxyMsg::End);
                return;
            }
            Ok(n) => {
                if !send(ProxyMsg::Data(buf[..n].to_vec())) {
                    debug!("proxy {method} {path}: client went away");
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                warn!("proxy {method} {path}: upstream body failed: {e}");
                send(ProxyMsg::Failed(ApiError::unavailable(
                    format!("upstream body failed: {e}"),
                    None,
                )));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_demanded_client_certificate_is_explained() {
        let demanded = UpstreamError::Tls("received fatal alert: CertificateRequired".into());
        assert!(certificate_hint(&demanded).contains("--relay-kubeconfig"));
        let other = UpstreamError::Tls("invalid peer certificate: UnknownIssuer".into());
        assert_eq!(certificate_hint(&other), "");
    }
}
