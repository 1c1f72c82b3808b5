//! Forwarding clients' requests upstream: the proxy's upstream side (docs/SEMANTICS.md §8).
//! [`Upstream::forward`] sends one client request, with the client's own credentials only, on
//! the proxy agent of the server the failover selects, and hands back the answer's head and
//! its body as a stream; the hop-by-hop headers it drops both ways. grid-wrapper's own API
//! calls (lists, watches, discovery, probes) are [`crate::upstream::client`]'s.

use std::fmt;
use std::io::Read;

use ureq::http;

use crate::upstream::client::Upstream;
use crate::upstream::error::{self, UpstreamError};
use crate::upstream::failover::Failed;
use crate::upstream::stats::Verb;

/// Request headers never forwarded: hop-by-hop (RFC 9110 §7.6.1) plus the framing ureq sets.
const DROP_REQUEST_HEADERS: [&str; 12] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "expect",
];
/// Response headers never relayed (the server re-frames the body).
const DROP_RESPONSE_HEADERS: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// One client request to relay upstream (docs/SEMANTICS.md §8).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForwardRequest {
    /// Method as sent by the client.
    pub method: String,
    /// Path and query, starting with `/`.
    pub path_and_query: String,
    /// Client headers in order (hop-by-hop ones are dropped here).
    pub headers: Vec<(String, Vec<u8>)>,
    /// Body, relayed byte for byte.
    pub body: Vec<u8>,
}

/// The upstream's answer to a forwarded request; the body streams without a response timeout.
pub struct ForwardResponse {
    /// HTTP status.
    pub status: u16,
    /// Response headers minus hop-by-hop ones (`Content-Length` kept when the upstream sent it).
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body as it arrives (de-chunked, not decompressed).
    pub body: Box<dyn Read + Send>,
}

impl fmt::Debug for ForwardResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForwardResponse")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .finish()
    }
}

fn drop_header(name: &str, drop: &[&str], connection_tokens: &[String]) -> bool {
    drop.iter().any(|d| name.eq_ignore_ascii_case(d))
        || connection_tokens
            .iter()
            .any(|t| name.eq_ignore_ascii_case(t))
}

/// Header names listed in `Connection` values (also hop-by-hop).
fn connection_tokens<'a>(headers: impl Iterator<Item = (&'a str, &'a [u8])>) -> Vec<String> {
    headers
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| {
            String::from_utf8_lossy(v)
                .split(',')
                .map(|t| t.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|t| !t.is_empty())
        .collect()
}

impl Upstream {
    /// Proxy one client request (docs/SEMANTICS.md §8): the client's own headers (its
    /// `Authorization` only if it sent one — the server's token is never added), minus hop-by-hop
    /// ones; `Host` is the upstream's; body and `Content-Type` byte for byte; redirects are
    /// relayed, not followed; no read timeout on the response body. Connect failure or timeout →
    /// [`UpstreamError::Unreachable`]. Sent to the selected server (a relay or the cloud, with
    /// that server's proxy agent: its CA, no client certificate of grid-wrapper's for a cloud
    /// server, never a token); retried on the next one only when no connection could be made
    /// (nothing was sent).
    pub fn forward(&self, req: ForwardRequest) -> Result<ForwardResponse, UpstreamError> {
        if !req.path_and_query.starts_with('/') {
            return Err(UpstreamError::InvalidRequest(format!(
                "path {:?} must start with /",
                req.path_and_query
            )));
        }
        let method = http::Method::from_bytes(req.method.as_bytes())
            .map_err(|e| UpstreamError::InvalidRequest(e.to_string()))?;
        let tokens = connection_tokens(req.headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())));
        let mut headers = Vec::with_capacity(req.headers.len());
        for (name, value) in &req.headers {
            if drop_header(name, &DROP_REQUEST_HEADERS, &tokens) {
                continue;
            }
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| UpstreamError::InvalidRequest(e.to_string()))?;
            let value = http::HeaderValue::from_bytes(value)
                .map_err(|e| UpstreamError::InvalidRequest(e.to_string()))?;
            headers.push((name, value));
        }
        let bodiless = req.body.is_empty()
            && matches!(
                method,
                http::Method::GET
                    | http::Method::HEAD
                    | http::Method::DELETE
                    | http::Method::OPTIONS
            );
        let f = self.failover();
        let resp = f.call(Verb::Forward, self.requests(), None, |i, base| {
            let agent = self.proxy_agent(i)?;
            let mut builder = http::Request::builder()
                .method(method.clone())
                .uri(format!("{base}{}", req.path_and_query));
            for (name, value) in &headers {
                builder = builder.header(name, value);
            }
            let invalid = |e: http::Error| UpstreamError::InvalidRequest(e.to_string());
            let resp = if bodiless {
                let r = builder.body(()).map_err(invalid)?;
                agent
                    .run(agent.configure_request(r).timeout_per_read(None).build())
                    .map_err(certificate_demanded)?
            } else {
                let r = builder.body(req.body.as_slice()).map_err(invalid)?;
                agent
                    .run(agent.configure_request(r).timeout_per_read(None).build())
                    .map_err(certificate_demanded)?
            };
            let code = resp.status().as_u16();
            Ok::<_, Failed>((resp, code))
        })?;
        let status = resp.status().as_u16();
        let rtokens = connection_tokens(
            resp.headers()
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_bytes())),
        );
        let headers = resp
            .headers()
            .iter()
            .filter(|(n, _)| !drop_header(n.as_str(), &DROP_RESPONSE_HEADERS, &rtokens))
            .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
            .collect();
        Ok(ForwardResponse {
            status,
            headers,
            body: Box::new(resp.into_body().into_reader()),
        })
    }
}

/// A proxied request's failure, for the failover: a server that refuses the handshake because
/// it demands a client certificate (proxied requests present none to a cloud server) is alive,
/// so that is not taken for a server down (nor retried elsewhere); any other failure is judged
/// as usual.
fn certificate_demanded(e: ureq::Error) -> Failed {
    if error::certificate_demanded(&e.to_string()) {
        Failed::Upstream(e.into())
    } else {
        Failed::Ureq(e)
    }
}

#[cfg(test)]
#[path = "forward_tests.rs"]
mod tests;
