//! Where each address of a core/v1 Endpoints object sits in its canonical bytes, so that a
//! topology Service's Endpoints can be served by leaving pruned addresses (and the lists they
//! empty) out of the bytes instead of decoding the object into a `Value` again, filtering and
//! serializing it (§4). The Endpoints counterpart of `canonical_spans.rs`: recorded while
//! [`super::write`] writes `subsets` by hand, with the bytes serde_json would write;
//! [`super::AsIs::check`] holds the result to what filtering the `Value` gives.

use serde_json::Value;

use super::tree::{get, write_object, Node, Tree};
use super::{non_empty, EndpointSpan};
use crate::cache::topology;

/// The two lists of a subset that §4 filters, in the order a canonical subset has them.
const LISTS: [&str; 2] = ["addresses", "notReadyAddresses"];

/// The `subsets` array of an Endpoints object in its canonical bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressSpans {
    /// Offset of the array's `[`.
    open: u32,
    /// Offset of the array's `]`.
    close: u32,
    /// Its elements in order.
    subsets: Vec<SubsetSpan>,
    /// The entries of the subsets that are objects, subset by subset.
    entries: Vec<EntrySpan>,
    /// Every address of an `addresses` / `notReadyAddresses` array, in object order (subset
    /// by subset, `addresses` first): the order of [`AddressSpans::items`]' `keep`.
    items: Vec<EndpointSpan>,
}

/// One element of `subsets`: `start..end`, and if it is an object, its entries (a range of
/// [`AddressSpans::entries`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SubsetSpan {
    start: u32,
    end: u32,
    entries: Option<(u32, u32)>,
}

/// One entry of a subset (`"key":value`, `start..end`); for an `addresses` or
/// `notReadyAddresses` array, where its `[` and `]` are and its elements (a range of
/// [`AddressSpans::items`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct EntrySpan {
    start: u32,
    end: u32,
    list: Option<(u32, u32, (u32, u32))>,
}

/// Offsets as `u32` (the spans of a list's worth of objects live until the apply); `None` for
/// an object that large, which then takes the `Value` path.
fn at(offset: usize) -> Option<u32> {
    u32::try_from(offset).ok()
}

/// Writes `subsets` to `out` as `serde_json::to_writer` would, and where each subset, entry
/// and address went. `Ok(None)`: written, but no spans (a node name that serializing
/// escapes, or offsets beyond `u32`).
pub(super) fn write_subsets<'a>(
    out: &mut Vec<u8>,
    tree: &Tree<'a>,
    subsets: &[Node<'a>],
) -> Result<Option<AddressSpans>, serde_json::Error> {
    let mut usable = true;
    let open = out.len();
    let mut spans = AddressSpans {
        open: 0,
        close: 0,
        subsets: Vec::with_capacity(subsets.len()),
        entries: Vec::new(),
        items: Vec::new(),
    };
    out.push(b'[');
    for (i, subset) in subsets.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let start = out.len();
        let entries = match tree.object(Some(subset)) {
            None => {
                tree.write(out, subset)?;
                None
            }
            Some(entries) => {
                let first = spans.entries.len();
                write_object(out, entries, |out, entry_at, k, v| {
                    let list = match v {
                        Node::Array(list) if LISTS.contains(&k) => {
                            let list_at = out.len();
                            let from = spans.items.len();
                            usable &= write_list(out, tree, tree.items(*list), &mut spans.items)?;
                            let ends = (at(list_at), at(out.len() - 1));
                            let items = (at(from), at(spans.items.len()));
                            match (ends, items) {
                                ((Some(o), Some(c)), (Some(a), Some(b))) => Some((o, c, (a, b))),
                                _ => {
                                    usable = false;
                                    None
                                }
                            }
                        }
                        _ => {
                            tree.write(out, v)?;
                            None
                        }
                    };
                    match (at(entry_at), at(out.len())) {
                        (Some(start), Some(end)) => {
                            spans.entries.push(EntrySpan { start, end, list })
                        }
                        _ => usable = false,
                    }
                    Ok(())
                })?;
                match (at(first), at(spans.entries.len())) {
                    (Some(a), Some(b)) => Some((a, b)),
                    _ => {
                        usable = false;
                        None
                    }
                }
            }
        };
        match (at(start), at(out.len())) {
            (Some(start), Some(end)) => spans.subsets.push(SubsetSpan {
                start,
                end,
                entries,
            }),
            _ => usable = false,
        }
    }
    let close = out.len();
    out.push(b']');
    match (at(open), at(close)) {
        (Some(open), Some(close)) if usable => Ok(Some(AddressSpans {
            open,
            close,
            ..spans
        })),
        _ => Ok(None),
    }
}

/// Writes one `addresses` / `notReadyAddresses` array, pushing where each element and its
/// `nodeName` went; `false` if a node name's bytes are not its text or an offset is too large.
fn write_list<'a>(
    out: &mut Vec<u8>,
    tree: &Tree<'a>,
    list: &[Node<'a>],
    items: &mut Vec<EndpointSpan>,
) -> Result<bool, serde_json::Error> {
    let mut usable = true;
    out.push(b'[');
    for (i, addr) in list.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let start = out.len();
        // `nodeName` is the address's node (`topology::address_node`): a non-empty string whose
        // bytes are its text.
        let mut written = None;
        match tree.object(Some(addr)) {
            Some(entries) => write_object(out, entries, |out, _, k, v| {
                let at = out.len();
                tree.write(out, v)?;
                if k == "nodeName" {
                    written = Some((at + 1, out.len().saturating_sub(1)));
                }
                Ok(())
            })?,
            None => tree.write(out, addr)?,
        }
        let node = tree
            .object(Some(addr))
            .and_then(|e| non_empty(get(e, "nodeName")));
        let place = match (node, written) {
            (None, _) => Some((start, start)),
            (Some(name), Some((a, b))) if out.get(a..b) == Some(name.as_bytes()) => Some((a, b)),
            (Some(_), _) => None,
        };
        let span = place.and_then(|(a, b)| {
            Some(EndpointSpan {
                start: at(start)?,
                end: at(out.len())?,
                node: (at(a)?, at(b)?),
                hints: (0, 0),
            })
        });
        match span {
            Some(span) => items.push(span),
            None => {
                usable = false;
                items.push(EndpointSpan {
                    start: 0,
                    end: 0,
                    node: (0, 0),
                    hints: (0, 0),
                });
            }
        }
    }
    out.push(b']');
    Ok(usable)
}

impl AddressSpans {
    /// Every address, in object order: its node is [`EndpointSpan::node`].
    pub fn items(&self) -> &[EndpointSpan] {
        &self.items
    }

    /// Moves the first address's start by `by` bytes (tests: a wrong span must be caught).
    #[cfg(test)]
    pub(super) fn shift_first_item(&mut self, by: u32) {
        if let Some(first) = self.items.first_mut() {
            first.start += by;
        }
    }

    /// Whether every span lies in order in bytes of length `len` whose stamp goes at
    /// `stamp_at`, after it: then writing the kept addresses cannot fail. Always so in bytes
    /// they were recorded in; checked before anything is published.
    pub fn fit(&self, len: usize, stamp_at: usize) -> bool {
        let mut last = stamp_at;
        let mut next = |p: u32| {
            let ok = last <= p as usize;
            last = p as usize;
            ok
        };
        let mut ok = next(self.open);
        for s in &self.subsets {
            ok &= next(s.start);
            let (a, b) = s.entries.unwrap_or((0, 0));
            for e in self.entries.get(a as usize..b as usize).unwrap_or_default() {
                ok &= next(e.start);
                if let Some((open, close, (x, y))) = e.list {
                    ok &= next(open);
                    for i in self.items.get(x as usize..y as usize).unwrap_or_default() {
                        ok &= next(i.start) && i.node.0 <= i.node.1 && next(i.end);
                        ok &= i.start <= i.node.0 && i.node.1 <= i.end;
                    }
                    ok &= next(close);
                }
                ok &= next(e.end);
            }
            ok &= next(s.end);
        }
        ok && next(self.close) && (self.close as usize) < len
    }

    /// Appends `raw[from..]` to `out` with the addresses whose `keep` is false left out, and
    /// an `addresses` / `notReadyAddresses` list that keeps none left out whole (§4:
    /// `omitempty`); `None` unless `keep` has one entry per address and the spans are after
    /// `from` ([`AddressSpans::fit`]).
    pub(super) fn write_kept(
        &self,
        out: &mut Vec<u8>,
        raw: &[u8],
        keep: &[bool],
        from: usize,
    ) -> Option<()> {
        let piece = |a: u32, b: u32| raw.get(a as usize..b as usize);
        if keep.len() != self.items.len() || !self.fit(raw.len(), from) {
            return None;
        }
        out.extend_from_slice(raw.get(from..=self.open as usize)?);
        for (i, s) in self.subsets.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let Some((a, b)) = s.entries else {
                out.extend_from_slice(piece(s.start, s.end)?);
                continue;
            };
            out.push(b'{');
            let mut first = true;
            for e in self.entries.get(a as usize..b as usize)? {
                let kept = match e.list {
                    None => {
                        (!first).then(|| out.push(b','));
                        out.extend_from_slice(piece(e.start, e.end)?);
                        first = false;
                        continue;
                    }
                    Some((open, _, (x, y))) => {
                        let items = self.items.get(x as usize..y as usize)?;
                        let keep = keep.get(x as usize..y as usize)?;
                        let kept: Vec<&EndpointSpan> = items
                            .iter()
                            .zip(keep)
                            .filter(|(_, k)| **k)
                            .map(|(e, _)| e)
                            .collect();
                        (open, kept)
                    }
                };
                let (open, kept) = kept;
                if kept.is_empty() {
                    continue;
                }
                (!first).then(|| out.push(b','));
                first = false;
                out.extend_from_slice(piece(e.start, open + 1)?);
                for (j, item) in kept.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(piece(item.start, item.end)?);
                }
                out.push(b']');
            }
            out.push(b'}');
        }
        out.extend_from_slice(raw.get(self.close as usize..)?);
        Some(())
    }

    /// The contract against the `Value` path: each address's node is the one
    /// [`topology::address_node`] reads, and leaving out `keep`'s addresses gives what
    /// filtering the decoded `value` the same way gives (§4; then stamping).
    pub(super) fn check(&self, raw: &[u8], value: &Value, keep: &[bool]) -> Result<Value, String> {
        let subsets = value.get("subsets").and_then(Value::as_array);
        let lists = subsets
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .flat_map(|s| LISTS.iter().filter_map(|f| s.get(*f)?.as_array()));
        let addrs: Vec<&Value> = lists.flatten().collect();
        if addrs.len() != self.items.len() {
            return Err(format!(
                "{} spans for {} addresses",
                self.items.len(),
                addrs.len()
            ));
        }
        for (addr, span) in addrs.iter().zip(&self.items) {
            if topology::address_node(addr) != span.node(raw) {
                return Err(format!("node of {addr} read as {:?}", span.node(raw)));
            }
        }
        let mut want = value.clone();
        let mut k = keep.iter();
        let subsets = want.get_mut("subsets").and_then(Value::as_array_mut);
        for subset in subsets
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            for field in LISTS {
                let Some(list) = subset.get_mut(field).and_then(Value::as_array_mut) else {
                    continue;
                };
                list.retain(|_| k.next().copied().unwrap_or(false));
                if list.is_empty() {
                    subset.retain(|key, _| key != field);
                }
            }
        }
        Ok(want)
    }
}
