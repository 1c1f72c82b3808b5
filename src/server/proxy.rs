//! Proxied requests (docs/SEMANTICS.md §8): a worker thread per request forwards it upstream with
//! the shared ureq client and hands the response back to the event loop in pieces, through a
//! bounded channel and the loop's `Waker`; on the loop's side, [`Proxied::pump`] frames those
//! pieces for the client's connection. The loop never blocks on the upstream.

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use log::{debug, warn};
use mio::Waker;

use crate::http::request::Request;
use crate::http::response::{self, Body};
use crate::k8s::status::ApiError;
use crate::server::counters::{self, RouteKind};
use crate::server::outbound::Outbound;
use crate::server::watch::HIGH_WATER;
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

/// A proxied request's answer on its way to the client: the worker's pieces
/// ([`ProxyMsg`]) framed for the client's HTTP version — the upstream's head with the framing
/// the client can read (chunked for HTTP/1.1, close-delimited for HTTP/1.0, none when the answer
/// has no body), each piece as a chunk, then the last chunk.
#[derive(Debug)]
pub struct Proxied {
    rx: Receiver<ProxyMsg>,
    head_sent: bool,
    /// The answer may carry a body (not a HEAD request's; cleared by a bodiless status).
    body: bool,
    /// The request is HTTP/1.0: the body is close-delimited, never chunked.
    http10: bool,
}

/// What one [`Proxied::pump`] left to the connection.
#[derive(Debug)]
pub enum Pumped {
    /// Still in flight: the worker has nothing more for now, or the output reached its high
    /// water (`progressed`: something was done that may let the connection go on at once).
    Pending { progressed: bool },
    /// The answer is complete: the connection takes its next request if it is kept alive.
    Done,
    /// The request failed before any head: the connection answers with this error.
    Failed(ApiError),
    /// The answer cannot be completed (a failure mid-body, the worker gone): the connection
    /// closes, the client sees a truncated body.
    Broken,
}

impl Proxied {
    /// The answer `rx` brings, to a request that may (`body`) have a body in its answer and is
    /// HTTP/1.0 (`http10`) or not.
    pub fn new(rx: Receiver<ProxyMsg>, body: bool, http10: bool) -> Self {
        Proxied {
            rx,
            head_sent: false,
            body,
            http10,
        }
    }

    /// Frames into `out` what the worker has sent, up to [`HIGH_WATER`] unsent bytes. The head
    /// clears `keep_alive` when the body is close-delimited.
    pub fn pump(&mut self, out: &mut Outbound, keep_alive: &mut bool) -> Pumped {
        while out.len() < HIGH_WATER {
            match self.rx.try_recv() {
                Ok(ProxyMsg::Head { status, headers }) => {
                    counters::global().request(RouteKind::Proxy, None, status);
                    let has_body = self.body && status >= 200 && status != 204 && status != 304;
                    let framing = match (has_body, self.http10) {
                        (false, _) => Body::Length(0),
                        (true, true) => Body::Close,
                        (true, false) => Body::Chunked,
                    };
                    // A close-delimited body ends the connection.
                    *keep_alive &= framing != Body::Close;
                    out.push_owned(response::relayed_head(
                        status,
                        &headers,
                        framing,
                        *keep_alive,
                    ));
                    self.head_sent = true;
                    if !has_body {
                        // Drain the rest (End) without framing a body.
                        self.body = false;
                        return Pumped::Pending { progressed: true };
                    }
                }
                Ok(ProxyMsg::Data(bytes)) => {
                    if self.body && self.http10 {
                        out.push_owned(bytes);
                    } else if self.body {
                        let mut chunk = Vec::with_capacity(bytes.len() + 16);
                        response::push_chunk(&mut chunk, &bytes);
                        out.push_owned(chunk);
                    }
                }
                Ok(ProxyMsg::End) => {
                    if self.body && !self.http10 {
                        let mut last = Vec::new();
                        response::push_last_chunk(&mut last);
                        out.push_owned(last);
                    }
                    return Pumped::Done;
                }
                // Mid-body failure: the client sees a truncated chunked body.
                Ok(ProxyMsg::Failed(_)) if self.head_sent => return Pumped::Broken,
                Ok(ProxyMsg::Failed(err)) => return Pumped::Failed(err),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return Pumped::Broken,
            }
        }
        Pumped::Pending { progressed: false }
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

    /// The pieces `msgs` pumped into a connection's output for a request that may have a body
    /// (`body`) over HTTP/1.0 or not: what the pump said each time, the bytes framed and
    /// `keep_alive` afterwards. The channel stays open unless `close`.
    fn pumped(
        msgs: Vec<ProxyMsg>,
        body: bool,
        http10: bool,
        close: bool,
    ) -> (Vec<Pumped>, String, bool) {
        let (tx, rx) = sync_channel(msgs.len().max(1));
        for m in msgs {
            tx.send(m).unwrap();
        }
        // The worker stays (its sender alive) until the pumps are done, unless it is gone.
        let _worker = (!close).then_some(tx);
        let mut answer = Proxied::new(rx, body, http10);
        let (mut out, mut keep_alive) = (Outbound::default(), true);
        let mut said = Vec::new();
        // Bounded: each pending pump with progress consumed a head.
        for _ in 0..4 {
            let p = answer.pump(&mut out, &mut keep_alive);
            let again = matches!(p, Pumped::Pending { progressed: true });
            said.push(p);
            if !again {
                break;
            }
        }
        let mut bytes = Vec::new();
        out.write_to(&mut bytes).unwrap();
        (said, String::from_utf8(bytes).unwrap(), keep_alive)
    }

    fn head(status: u16) -> ProxyMsg {
        ProxyMsg::Head {
            status,
            headers: vec![("Content-Type".into(), b"application/json".to_vec())],
        }
    }

    #[test]
    fn an_http11_answer_is_chunked_and_keeps_the_connection() {
        let msgs = vec![head(200), ProxyMsg::Data(b"{}".to_vec()), ProxyMsg::End];
        let (said, bytes, keep_alive) = pumped(msgs, true, false, false);
        assert!(matches!(said[..], [Pumped::Done]), "{said:?}");
        assert!(bytes.starts_with("HTTP/1.1 200 OK\r\n"), "{bytes}");
        assert!(bytes.contains("Transfer-Encoding: chunked\r\n"), "{bytes}");
        assert!(bytes.ends_with("\r\n\r\n2\r\n{}\r\n0\r\n\r\n"), "{bytes}");
        assert!(keep_alive);
    }

    #[test]
    fn an_http10_answer_is_close_delimited() {
        let msgs = vec![head(200), ProxyMsg::Data(b"{}".to_vec()), ProxyMsg::End];
        let (said, bytes, keep_alive) = pumped(msgs, true, true, false);
        assert!(matches!(said[..], [Pumped::Done]), "{said:?}");
        assert!(!bytes.contains("chunked"), "{bytes}");
        assert!(bytes.contains("Connection: close\r\n"), "{bytes}");
        assert!(bytes.ends_with("\r\n\r\n{}"), "{bytes}");
        assert!(!keep_alive, "a close-delimited body ends the connection");
    }

    #[test]
    fn a_bodiless_answer_frames_no_body() {
        for (status, body) in [(204, true), (304, true), (200, false)] {
            let msgs = vec![head(status), ProxyMsg::Data(b"x".to_vec()), ProxyMsg::End];
            let (said, bytes, keep_alive) = pumped(msgs, body, false, false);
            assert!(
                matches!(
                    said[..],
                    [Pumped::Pending { progressed: true }, Pumped::Done]
                ),
                "{status}: {said:?}"
            );
            assert!(bytes.ends_with("\r\n\r\n"), "{status}: {bytes}");
            assert!(
                !bytes.contains("chunked") && !bytes.contains("\r\nx"),
                "{bytes}"
            );
            assert!(keep_alive);
        }
    }

    #[test]
    fn a_failure_is_a_status_before_the_head_and_a_cut_after_it() {
        let err = || ProxyMsg::Failed(ApiError::unavailable("upstream gone", None));
        let (said, bytes, _) = pumped(vec![err()], true, false, false);
        assert!(
            matches!(&said[..], [Pumped::Failed(e)] if e.code == 503),
            "{said:?}"
        );
        assert!(bytes.is_empty(), "the connection answers the Status itself");
        let msgs = vec![head(200), ProxyMsg::Data(b"{".to_vec()), err()];
        let (said, bytes, _) = pumped(msgs, true, false, false);
        assert!(matches!(said[..], [Pumped::Broken]), "{said:?}");
        assert!(!bytes.ends_with("0\r\n\r\n"), "no clean end: {bytes}");
        // A worker gone without a word: the answer cannot be completed.
        let (said, _, _) = pumped(vec![head(200)], true, false, true);
        assert!(matches!(said[..], [Pumped::Broken]), "{said:?}");
        // Nothing yet: wait for the worker.
        let (said, _, _) = pumped(vec![], true, false, false);
        assert!(
            matches!(said[..], [Pumped::Pending { progressed: false }]),
            "{said:?}"
        );
    }
}
