//! [`UpstreamError`]: why an upstream call failed, and how ureq's errors map onto it.

use std::fmt;
use std::time::Duration;

use crate::upstream::decode::{self, DecodeError};

/// Why an upstream call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The settings cannot work (bad server URL, no usable CA, unusable client certificate).
    Config(String),
    /// A forwarded request cannot be expressed (bad method, header or path).
    InvalidRequest(String),
    /// No usable answer: resolve/connect failure, timeout or a broken connection.
    Unreachable(String),
    /// TLS handshake or certificate failure.
    Tls(String),
    /// The connection stayed silent past the request's progress deadline (no byte of a list
    /// body, or of a watch stream whose upstream sends bookmarks): presumed dead.
    Stalled(String),
    /// The upstream did not speak HTTP properly.
    Protocol(String),
    /// The apiserver answered with an error status (its `Status` body decoded).
    Status {
        /// HTTP status code.
        code: u16,
        /// `Status.reason`, empty if the body was not a Status.
        reason: String,
        /// `Status.message`, or the start of the body.
        message: String,
        /// `Status.details.causes[].reason` (see [`decode::StatusInfo::causes`]).
        causes: Vec<String>,
        /// The answer's `Retry-After` (429 and 5xx only, capped: see
        /// [`crate::upstream::retry_after`]); `None` when absent or not valid.
        retry_after: Option<Duration>,
    },
    /// A body exceeded its limit.
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// A list had more items than one list may bring (`--max-list-items`): it was abandoned as
    /// it passed the bound, nothing of it applied.
    TooManyItems {
        /// The bound.
        limit: usize,
    },
    /// A 2xx body could not be decoded.
    Decode(DecodeError),
    /// The request names a resourceVersion of another server's RV space (a relay's own, or the
    /// cloud's) than the server it would go to; it was not sent
    /// ([`crate::upstream::domain`]).
    ForeignResourceVersion {
        /// The server that issued the RV, with its role (`relay https://r1:51010`).
        issued_by: String,
        /// The server the request would have gone to, with its role.
        now: String,
    },
}

impl UpstreamError {
    /// The HTTP code of a [`UpstreamError::Status`].
    pub fn status_code(&self) -> Option<u16> {
        match self {
            UpstreamError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The wait a 429 or 5xx answer asked for with `Retry-After` (docs/SEMANTICS.md §7).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            UpstreamError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether this is a 429 Too Many Requests: the upstream sheds load (API Priority and
    /// Fairness).
    pub fn is_throttled(&self) -> bool {
        self.status_code() == Some(429)
    }

    /// Whether the upstream's TLS refused the connection for want of a client certificate
    /// (rustls' `CertificateRequired` alert): what a proxied request, which presents none of
    /// grid-wrapper's, meets at a server that demands one on every connection.
    pub fn is_certificate_demanded(&self) -> bool {
        certificate_demanded(&self.to_string())
    }

    /// Whether this is the upstream refusing a resourceVersion newer than any it has (its RVs
    /// went backwards): see [`decode::is_rv_too_large`].
    pub fn is_rv_too_large(&self) -> bool {
        match self {
            UpstreamError::Status {
                message, causes, ..
            } => decode::is_rv_too_large(message, causes),
            _ => false,
        }
    }
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamError::Config(m) => write!(f, "upstream configuration: {m}"),
            UpstreamError::InvalidRequest(m) => write!(f, "invalid request: {m}"),
            UpstreamError::Unreachable(m) => write!(f, "upstream unreachable: {m}"),
            UpstreamError::Tls(m) => write!(f, "upstream TLS: {m}"),
            UpstreamError::Stalled(m) => write!(f, "upstream stalled: {m}"),
            UpstreamError::Protocol(m) => write!(f, "upstream protocol error: {m}"),
            UpstreamError::Status {
                code,
                reason,
                message,
                retry_after,
                ..
            } => {
                write!(f, "upstream answered {code} {reason}: {message}")?;
                match retry_after {
                    Some(d) => write!(f, " (Retry-After {} s)", d.as_secs()),
                    None => Ok(()),
                }
            }
            UpstreamError::TooLarge { limit } => {
                write!(f, "upstream body larger than {limit} bytes")
            }
            UpstreamError::TooManyItems { limit } => write!(
                f,
                "the list has more than {limit} items (--max-list-items={limit}): abandoned \
                 at item {}, nothing of it applied; raise --max-list-items if the list is genuine",
                limit.saturating_add(1)
            ),
            UpstreamError::Decode(e) => write!(f, "undecodable upstream body: {e}"),
            UpstreamError::ForeignResourceVersion { issued_by, now } => write!(
                f,
                "the resourceVersion was issued by {issued_by}, now reading from {now}"
            ),
        }
    }
}

impl std::error::Error for UpstreamError {}

impl From<DecodeError> for UpstreamError {
    fn from(e: DecodeError) -> Self {
        UpstreamError::Decode(e)
    }
}

impl From<ureq::Error> for UpstreamError {
    fn from(e: ureq::Error) -> Self {
        use ureq::Error as E;
        match e {
            E::Io(io) => match io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                Some(tls) => UpstreamError::Tls(tls.to_string()),
                None => UpstreamError::Unreachable(io.to_string()),
            },
            E::Rustls(tls) => UpstreamError::Tls(tls.to_string()),
            E::Tls(m) => UpstreamError::Tls(m.to_string()),
            E::Pem(p) => UpstreamError::Config(p.to_string()),
            E::BodyExceedsLimit(limit) => UpstreamError::TooLarge { limit },
            E::LargeResponseHeader(got, limit) => UpstreamError::Protocol(format!(
                "response head larger than {limit} bytes (read {got})"
            )),
            E::Protocol(p) => UpstreamError::Protocol(p.to_string()),
            E::Http(h) => UpstreamError::InvalidRequest(h.to_string()),
            E::BadUri(u) => UpstreamError::InvalidRequest(u),
            E::Timeout(ureq::Timeout::PerRead) => {
                UpstreamError::Stalled("no byte received within the progress deadline".into())
            }
            // Timeouts, resolve and connect failures, and anything else transport-level.
            other => UpstreamError::Unreachable(other.to_string()),
        }
    }
}

/// Whether an error's text is rustls' alert for a missing client certificate.
pub(crate) fn certificate_demanded(text: &str) -> bool {
    text.contains("CertificateRequired")
}
