//! The `default/kubernetes` local-apiserver rewrite (docs/SEMANTICS.md §3): on edge nodes the
//! `kubernetes` Endpoints / EndpointSlice point at the node-local lite-apiserver named by the
//! object's own annotations. Owns the applicability checks and the rewritten content only; a
//! failed check is logged and reported as "not rewritten" so the caller serves normally.

use std::net::IpAddr;

use serde_json::{json, Value};

use super::Locality;

/// Annotation carrying the local apiserver IP literal.
pub const LOCAL_ENDPOINT_ANNOTATION: &str = "superedge.io/local-endpoint";
/// Annotation carrying the local apiserver port (decimal, 1–65535).
pub const LOCAL_PORT_ANNOTATION: &str = "superedge.io/local-port";

/// Longest port annotation accepted before parsing (5 digits plus leading zeros is plenty).
const MAX_PORT_TEXT: usize = 16;

/// The object being considered, which decides what "IP family matches" means.
#[derive(Clone, Copy, Debug)]
pub(super) enum Target {
    /// core/v1 Endpoints: any family.
    Endpoints,
    /// An EndpointSlice (either version): family must match `addressType`.
    Slice,
}

/// Rewritten Endpoints, or `None` when §3 does not apply (logged when a check failed).
pub(super) fn endpoints(obj: &Value, loc: &Locality<'_>) -> Option<Value> {
    let (ip, port) = target(obj, loc, Target::Endpoints)?;
    let mut out = obj.clone();
    let map = out.as_object_mut()?;
    map.insert(
        "subsets".to_string(),
        json!([{ "addresses": [{ "ip": ip }], "ports": [https(port)] }]),
    );
    Some(out)
}

/// Rewritten EndpointSlice (v1 or v1beta1), or `None` when §3 does not apply.
pub(super) fn slice(obj: &Value, loc: &Locality<'_>) -> Option<Value> {
    let (ip, port) = target(obj, loc, Target::Slice)?;
    let mut out = obj.clone();
    let map = out.as_object_mut()?;
    map.insert("endpoints".to_string(), json!([{ "addresses": [ip] }]));
    map.insert("ports".to_string(), json!([https(port)]));
    Some(out)
}

fn https(port: u16) -> Value {
    json!({ "name": "https", "port": port, "protocol": "TCP" })
}

/// Whether §3 rewrites `obj` (every condition holds), without logging: what
/// [`endpoints`] / [`slice`] decide, for explanations.
pub(super) fn applies(obj: &Value, loc: &Locality<'_>, kind: Target) -> bool {
    candidate(obj, loc).is_some() && check(obj, kind).is_ok()
}

/// The object's metadata when §3 is to be checked at all: `--wrapper-in-cluster` and the object
/// is `default/kubernetes`.
fn candidate<'v>(obj: &'v Value, loc: &Locality<'_>) -> Option<&'v Value> {
    let meta = obj.get("metadata")?;
    let namespace = meta.get("namespace").and_then(Value::as_str);
    let name = meta.get("name").and_then(Value::as_str);
    may_apply(namespace.unwrap_or(""), name.unwrap_or(""), loc).then_some(meta)
}

/// Whether §3 is checked at all for the object `namespace/name`: `--wrapper-in-cluster` and
/// the object is `default/kubernetes`.
pub(super) fn may_apply(namespace: &str, name: &str, loc: &Locality<'_>) -> bool {
    loc.wrapper_in_cluster && namespace == "default" && name == "kubernetes"
}

/// `(ip, port)` when every §3 condition holds. Objects that are not `default/kubernetes`, and
/// all objects when `--wrapper-in-cluster=false`, are silently not rewritten; a
/// `default/kubernetes` object failing a check is logged with the reason.
fn target(obj: &Value, loc: &Locality<'_>, kind: Target) -> Option<(String, u16)> {
    let meta = candidate(obj, loc)?;
    match check(obj, kind) {
        Ok(found) => Some(found),
        Err(why) => {
            // Unannotated (an ordinary cluster) is normal: debug. A half or bad annotation is a
            // misconfiguration an operator wants to see.
            let annotated = ["superedge.io/local-endpoint", "superedge.io/local-port"]
                .iter()
                .any(|k| {
                    meta.pointer(&format!("/annotations/{}", k.replace('/', "~1")))
                        .is_some()
                });
            if annotated {
                log::warn!(
                    "default/kubernetes {kind:?} served without local-apiserver rewrite: {why}"
                );
            } else {
                log::debug!(
                    "default/kubernetes {kind:?} is not annotated for the local-apiserver rewrite"
                );
            }
            None
        }
    }
}

/// The annotation checks of §3, with the reason of the first failure.
fn check(obj: &Value, kind: Target) -> Result<(String, u16), String> {
    let annotations = obj.get("metadata").and_then(|m| m.get("annotations"));
    let get = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
    let ip_text = get(LOCAL_ENDPOINT_ANNOTATION)
        .ok_or_else(|| format!("annotation {LOCAL_ENDPOINT_ANNOTATION} missing"))?;
    let port_text = get(LOCAL_PORT_ANNOTATION)
        .ok_or_else(|| format!("annotation {LOCAL_PORT_ANNOTATION} missing"))?;
    let ip: IpAddr = ip_text
        .parse()
        .map_err(|_| format!("{LOCAL_ENDPOINT_ANNOTATION}={ip_text:?} is not an IP literal"))?;
    let port = parse_port(port_text)
        .ok_or_else(|| format!("{LOCAL_PORT_ANNOTATION}={port_text:?} is not a port 1-65535"))?;
    if let Target::Slice = kind {
        let address_type = obj.get("addressType").and_then(Value::as_str);
        let matches = match address_type {
            Some("IPv4") => ip.is_ipv4(),
            Some("IPv6") => ip.is_ipv6(),
            _ => false,
        };
        if !matches {
            return Err(format!(
                "{LOCAL_ENDPOINT_ANNOTATION}={ip_text:?} does not match addressType {address_type:?}"
            ));
        }
    }
    Ok((ip_text.to_string(), port))
}

/// A decimal port 1–65535: ASCII digits only (no sign, no spaces).
fn parse_port(text: &str) -> Option<u16> {
    if text.is_empty() || text.len() > MAX_PORT_TEXT || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u16>().ok().filter(|p| *p != 0)
}

#[cfg(test)]
mod tests {
    use super::parse_port;

    #[test]
    fn port_parsing() {
        let table: &[(&str, Option<u16>)] = &[
            ("51003", Some(51003)),
            ("1", Some(1)),
            ("65535", Some(65535)),
            ("0051003", Some(51003)),
            ("0", None),
            ("65536", None),
            ("70000", None),
            ("-1", None),
            ("+80", None),
            (" 80", None),
            ("x", None),
            ("", None),
            ("00000000000000000080", None),
        ];
        for (text, want) in table {
            assert_eq!(parse_port(text), *want, "{text:?}");
        }
    }
}
