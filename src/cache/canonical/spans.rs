//! Where each endpoint of a v1 slice sits in its canonical bytes, so that a topology Service's
//! slice can be served by cutting pruned endpoints (docs/SEMANTICS.md §2.3, §2.10) out of the
//! bytes instead of decoding it into a `Value`, filtering and serializing it again (the slices
//! of topology Services, often a large part of a list). Recorded while [`super::write`] writes
//! the `endpoints` array by hand, with the same bytes serde_json would write;
//! [`super::AsIs::check`] holds the splice to what filtering the `Value` gives.

use serde_json::Value;

use super::tree::{write_object, write_str, Entries, Node, Tree};
use super::{endpoint_host, endpoint_name};
use crate::cache::topology::{self, HOSTNAME_LABEL};

/// The top-level `endpoints` array of a v1 slice in its canonical bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointSpans {
    /// Offset of the array's `[`.
    pub open: usize,
    /// Offset of the array's `]`.
    pub close: usize,
    /// Its elements in order.
    pub items: Vec<EndpointSpan>,
}

/// One element of a slice's `endpoints`: offsets into the canonical bytes (`u32`: no list
/// item is that large; a larger one gets no spans). No allocation per endpoint: a list's
/// worth of these lives from the reflector thread's decoding to the cache's apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointSpan {
    /// Its bytes: `start..end`.
    pub start: u32,
    /// See `start`.
    pub end: u32,
    /// Where its node's name is (`node.0 == node.1`: none), as serving a v1 slice reads it:
    /// `nodeName`, else the hostname label of `deprecatedTopology`, if a non-empty string. The
    /// name's bytes are its text: names that serializing would escape get no spans at all.
    pub node: (u32, u32),
}

impl EndpointSpan {
    /// Its node's name in `raw` (the bytes the spans were recorded in).
    pub fn node<'r>(&self, raw: &'r [u8]) -> Option<&'r str> {
        let (from, to) = (self.node.0 as usize, self.node.1 as usize);
        if from == to {
            return None;
        }
        std::str::from_utf8(raw.get(from..to)?).ok()
    }
}

/// Writes `items` (the `endpoints` array) to `out` as `serde_json::to_writer` would, and where
/// each element and its node's name went. `Ok(None)`: written, but no spans
/// (a node name that serializing escapes, or offsets beyond `u32`).
pub(super) fn write_endpoints<'a>(
    out: &mut Vec<u8>,
    tree: &Tree<'a>,
    items: &[Node<'a>],
) -> Result<Option<EndpointSpans>, serde_json::Error> {
    let open = out.len();
    out.push(b'[');
    let mut spans = Vec::with_capacity(items.len());
    let mut usable = true;
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let start = out.len();
        let (mut name, mut host) = (None, None);
        match item {
            Node::Object(entries) => {
                let entries = tree.entries(*entries);
                out.push(b'{');
                for (j, (k, v)) in entries.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    write_str(out, k)?;
                    out.push(b':');
                    match v {
                        Node::Object(topo) if k == "deprecatedTopology" => {
                            host = write_topology(out, tree, tree.entries(*topo))?;
                        }
                        _ => {
                            let at = out.len();
                            tree.write(out, v)?;
                            if k == "nodeName" {
                                name = Some((at + 1, out.len().saturating_sub(1)));
                            }
                        }
                    }
                }
                out.push(b'}');
            }
            other => tree.write(out, other)?,
        }
        // The name's place, in the field serving reads it from; its bytes must be its text.
        let node = match endpoint_node(tree, item) {
            None => (0, 0),
            Some((from_name, text)) => match if from_name { name } else { host } {
                Some((a, b)) if out.get(a..b) == Some(text.as_bytes()) => (a, b),
                _ => {
                    usable = false;
                    (0, 0)
                }
            },
        };
        let span = [start, out.len(), node.0, node.1].map(u32::try_from);
        match span {
            [Ok(start), Ok(end), Ok(n0), Ok(n1)] => spans.push(EndpointSpan {
                start,
                end,
                node: (n0, n1),
            }),
            _ => usable = false,
        }
    }
    let close = out.len();
    out.push(b']');
    Ok(usable.then_some(EndpointSpans {
        open,
        close,
        items: spans,
    }))
}

/// Writes a `deprecatedTopology` object; where its hostname label's string went (quotes
/// excluded), if it is a string.
fn write_topology<'a>(
    out: &mut Vec<u8>,
    tree: &Tree<'a>,
    topo: Entries<'_, 'a>,
) -> Result<Option<(usize, usize)>, serde_json::Error> {
    let mut host = None;
    write_object(out, topo, |out, _, k, v| {
        let at = out.len();
        tree.write(out, v)?;
        if k == HOSTNAME_LABEL && matches!(v, Node::String(_)) {
            host = Some((at + 1, out.len().saturating_sub(1)));
        }
        Ok(())
    })?;
    Ok(host)
}

/// [`topology::slice_endpoint_node`] of a v1 endpoint, read from the tree: whether it is the
/// `nodeName` (else the hostname label of `deprecatedTopology`), and the name.
fn endpoint_node<'n, 'a>(tree: &'n Tree<'a>, ep: &Node<'a>) -> Option<(bool, &'n str)> {
    let entries = tree.object(Some(ep))?;
    match endpoint_name(entries) {
        Some(name) => Some((true, name)),
        None => endpoint_host(tree, entries, "deprecatedTopology").map(|h| (false, h)),
    }
}

impl EndpointSpans {
    /// Whether every span lies where `EndpointSpans::cut` needs it in bytes of length `len`
    /// whose stamp goes at `stamp_at`: then cutting cannot fail. Always so in bytes they were
    /// recorded in; checked before anything is published, so a wrong span is never served.
    pub fn fit(&self, len: usize, stamp_at: usize) -> bool {
        let within = |(a, b): (u32, u32), lo: usize, hi: usize| {
            a == b || (lo <= a as usize && a <= b && b as usize <= hi)
        };
        self.open < self.close
            && self.close < stamp_at
            && stamp_at <= len
            && self.items.iter().all(|e| {
                let (start, end) = (e.start as usize, e.end as usize);
                self.open < start && start <= end && end <= self.close && within(e.node, start, end)
            })
    }

    /// `raw[..stamp_at]` with the endpoints whose `keep` is false cut out (the kept ones as
    /// they are); `None` unless `keep` has one entry per endpoint and the array comes
    /// before `stamp_at` (it does: `endpoints` sorts before `metadata`).
    pub(super) fn cut(&self, raw: &[u8], keep: &[bool], stamp_at: usize) -> Option<Vec<u8>> {
        if keep.len() != self.items.len() || self.close >= stamp_at {
            return None;
        }
        let mut out = Vec::with_capacity(raw.len() + 32);
        out.extend_from_slice(raw.get(..=self.open)?);
        let mut first = true;
        for ep in self
            .items
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(e, _)| e)
        {
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(raw.get(ep.start as usize..ep.end as usize)?);
        }
        out.extend_from_slice(raw.get(self.close..stamp_at)?);
        Some(out)
    }

    /// The contract against the `Value` path: each endpoint's node is the one
    /// [`topology::slice_endpoint_node`] reads, and cutting `keep`'s endpoints gives what
    /// filtering the decoded `value` the same way (then stamping) gives.
    pub(super) fn check(&self, raw: &[u8], value: &Value, keep: &[bool]) -> Result<Value, String> {
        let Some(Value::Array(list)) = value.get("endpoints") else {
            return Err("spans recorded, but no endpoints array".into());
        };
        if list.len() != self.items.len() {
            return Err(format!(
                "{} spans for {} endpoints",
                self.items.len(),
                list.len()
            ));
        }
        for (ep, span) in list.iter().zip(&self.items) {
            if topology::slice_endpoint_node(ep, "deprecatedTopology") != span.node(raw) {
                return Err(format!("node of {ep} read as {:?}", span.node(raw)));
            }
        }
        let mut want = value.clone();
        if let Some(Value::Array(list)) = want.get_mut("endpoints") {
            let mut k = keep.iter();
            list.retain(|_| k.next().copied().unwrap_or(false));
        }
        Ok(want)
    }
}
