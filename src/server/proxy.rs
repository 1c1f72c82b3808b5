//! Proxied requests (docs/SEMANTICS.md §8): a worker thread per request forwards it upstream with
//! the shared ureq client and hands the response back to the event loop in pieces, through a
//! bounded channel and the loop's `Waker`. The loop never blocks on the upstream.

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use log::{debug, warn};
use mio::Waker;

use crate::http::request::Request;
use crate::k8s::status::ApiError;
use crate::sync::lock;
use crate::upstream::client::{Upstream, UpstreamError};
use crate::upstream::forward::ForwardRequest;

/// Most proxied requests in flight (proxied watches hold a worker for their lifetime).
pub const MAX_IN_FLIGHT: usize = 64;
/// Body bytes per message from a worker.
const PIECE: usize = 16 * 1024;
/// Messages a worker may queue ahead of the loop (backpressure on slow clients).
const QUEUE: usize = 16;
/// How long an episode of refused credential-less requests stays quiet after its WARN.
const REFUSALS_WARN_AGAIN: Duration = Duration::from_secs(3600);
/// Why a proxied request without credentials was refused, and the fix (docs/SEMANTICS.md §8).
const NO_CREDENTIALS_HINT: &str = "the client sent no Authorization header and grid-wrapper \
     lends none, so the upstream saw an anonymous request. kube-proxy (client-go) sends its \
     kubeconfig's token only over https: serve TLS on --bind-address (--insecure=false \
     --cert-file --key-file) and give kube-proxy's kubeconfig `server: https://…` with a \
     `certificate-authority` for that certificate, keeping its token or tokenFile (a client \
     certificate authenticates kube-proxy to grid-wrapper only, not upstream)";

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
    refusals: Arc<Mutex<AnonymousRefusals>>,
}

/// Episodes of proxied requests without credentials that the upstream refused (401/403): one
/// WARN opens an episode; it ends when any proxied request is answered below 400 (the path
/// works now, so a later refusal is news) or [`REFUSALS_WARN_AGAIN`] after its WARN.
#[derive(Debug, Default)]
struct AnonymousRefusals {
    warned_at: Option<Instant>,
}

impl AnonymousRefusals {
    /// Takes note of a proxied answer `status` to a request that carried an `Authorization`
    /// header or not; true when a WARN is due.
    fn note(&mut self, authorization: bool, status: u16, now: Instant) -> bool {
        if status < 400 {
            self.warned_at = None;
            return false;
        }
        if authorization || !matches!(status, 401 | 403) {
            return false;
        }
        let due = self
            .warned_at
            .is_none_or(|t| now.saturating_duration_since(t) >= REFUSALS_WARN_AGAIN);
        if due {
            self.warned_at = Some(now);
        }
        due
    }
}

impl Proxy {
    /// A proxy forwarding to `upstream` (`None`: every proxied request gets 503).
    pub fn new(upstream: Option<Upstream>, waker: Arc<Waker>) -> Proxy {
        Proxy {
            upstream,
            waker,
            in_flight: Arc::new(AtomicUsize::new(0)),
            refusals: Arc::default(),
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
        let refusals = self.refusals.clone();
        // A client certificate ends at grid-wrapper: only this header can carry an identity.
        let authorization = req.header("authorization").is_some();
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
                work(&upstream, fwd, authorization, &refusals, &tx, &waker);
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
        UpstreamError::Tls(_) if e.is_certificate_demanded() => {
            " (the upstream requires a client certificate on every connection; proxied requests \
             present none of grid-wrapper's: a site relay is named with --relay-kubeconfig, not \
             as the upstream)"
        }
        _ => "",
    }
}

fn work(
    upstream: &Upstream,
    req: ForwardRequest,
    authorization: bool,
    refusals: &Mutex<AnonymousRefusals>,
    tx: &SyncSender<ProxyMsg>,
    waker: &Waker,
) {
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
    let warn_due = lock(refusals).note(authorization, resp.status, Instant::now());
    if warn_due {
        warn!(
            "proxy {method} {path}: upstream answered {} (relayed to the client): \
             {NO_CREDENTIALS_HINT}; further such refusals are logged at debug level for an hour \
             or until a proxied request succeeds",
            resp.status
        );
    }
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

    #[test]
    fn a_refused_anonymous_request_warns_once_per_episode() {
        let t0 = Instant::now();
        let mut r = AnonymousRefusals::default();
        assert!(r.note(false, 403, t0), "the first refusal opens an episode");
        assert!(
            !r.note(false, 401, t0 + Duration::from_secs(1)),
            "same episode"
        );
        assert!(!r.note(false, 403, t0 + Duration::from_secs(3599)));
        assert!(
            r.note(false, 403, t0 + REFUSALS_WARN_AGAIN),
            "an hour later it is said again"
        );
        // A success in between ends the episode.
        assert!(!r.note(true, 201, t0 + Duration::from_secs(3601)));
        assert!(r.note(false, 401, t0 + Duration::from_secs(3602)));
        // Refusals of requests that carried credentials, and other errors, are the upstream's
        // verdict on that identity or that request: never this hint, and no episode ends.
        let mut r = AnonymousRefusals::default();
        assert!(!r.note(true, 403, t0));
        assert!(!r.note(true, 401, t0));
        assert!(!r.note(false, 404, t0));
        assert!(!r.note(false, 500, t0));
        assert!(r.note(false, 403, t0));
        assert!(!r.note(false, 404, t0 + Duration::from_secs(1)));
        assert!(!r.note(false, 403, t0 + Duration::from_secs(2)));
    }
}
