//! Where each address of a core/v1 Endpoints object sits in its canonical bytes, so that a topology
//! Service's Endpoints can be served by leaving pruned addresses (and the lists they empty) out of
//! the bytes instead of decoding the object into a `Value` again, filtering and serializing it
//! (docs/SEMANTICS.md §2.4). The Endpoints counterpart of `spans.rs`: recorded while
//! [`super::write`] writes `subsets` by hand, with the bytes serde_json would write;
//! [`super::AsIs::check`] holds the result to what filtering the `Value` gives.

use serde_json::Value;

use super::non_empty;
use super::tree::{get, write_object, Node, Tree};
use crate::cache::topology;

/// The two lists of a subset that §2.4 filters, in the order a canonical subset has them.
const LISTS: [&str; 2] = ["addresses", "notReadyAddresses"];

/// The `subsets` array of an Endpoints object in its canonical bytes, in one allocation of the
/// exact size: the spans of every Endpoints object of a list live from the reflector thread's
/// decoding to the cache's apply, so they are kept small (was a box and three vectors grown by
/// pushing, whose spare room the allocator kept: a visible RSS cost in a large cluster, see
/// BENCHMARKS.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressSpans {
    /// Offset of the array's `[`.
    open: u32,
    /// Offset of the array's `]`.
    close: u32,
    /// How many of `spans` are addresses (they come first, then the subsets).
    addresses: u32,
    /// How many of `spans` are subsets (the rest are their entries).
    subsets: u32,
    /// Every address of an `addresses` / `notReadyAddresses` array in object order (subset by
    /// subset, `addresses` first: the order of `keep`), then the elements of `subsets`, then
    /// the entries of those that are objects, subset by subset.
    spans: Box<[Span]>,
}

/// `start..end` of an address, subset or entry in the bytes; what `a` and `b` are depends:
/// - an address: where its node's name is (`a == b`: none, as [`topology::address_node`]);
/// - a subset: its entries, `a..b` of the entries (`a == NOT_AN_OBJECT`: it is not an object);
/// - an entry: for an `addresses` / `notReadyAddresses` array, where its `[` is in `a` (`0`:
///   not such a list; the object's `{` is at 0) and how many addresses it has in `b`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
    a: u32,
    b: u32,
}

/// A subset's `a` when it is not an object.
const NOT_AN_OBJECT: u32 = u32::MAX;

/// Offsets as `u32`; `None` for an object that large, which then takes the `Value` path.
fn at(offset: usize) -> Option<u32> {
    u32::try_from(offset).ok()
}

/// Fills the spans of one `subsets` array, in the order [`write_subsets`] writes it.
struct Recorder {
    spans: Box<[Span]>,
    /// Where the next address, subset and entry go in `spans`.
    next: [usize; 3],
    /// Where the addresses, subsets and entries end in `spans`.
    ends: [usize; 3],
    /// Where the entries start in `spans`.
    entries_from: usize,
    usable: bool,
}

const ADDRESS: usize = 0;
const SUBSET: usize = 1;
const ENTRY: usize = 2;

impl Recorder {
    /// Room for exactly what `subsets` holds: counted first, so that the spans are one
    /// allocation of their final size.
    fn for_subsets<'a>(tree: &Tree<'a>, subsets: &[Node<'a>]) -> Self {
        let (mut addresses, mut entries) = (0, 0);
        for object in subsets.iter().filter_map(|s| tree.object(Some(s))) {
            entries += object.len();
            for (k, v) in object {
                if let (Node::Array(list), true) = (v, LISTS.contains(&&**k)) {
                    addresses += tree.items(*list).len();
                }
            }
        }
        let entries_from = addresses + subsets.len();
        let total = entries_from + entries;
        Recorder {
            spans: vec![Span::default(); total].into_boxed_slice(),
            next: [0, addresses, entries_from],
            ends: [addresses, entries_from, total],
            entries_from,
            usable: true,
        }
    }

    /// Records the next span of `kind` (`None`: unusable, e.g. an offset beyond `u32`).
    fn put(&mut self, kind: usize, span: Option<Span>) {
        let i = self.next[kind];
        match (span, self.spans.get_mut(i).filter(|_| i < self.ends[kind])) {
            (Some(span), Some(slot)) => *slot = span,
            _ => self.usable = false,
        }
        self.next[kind] += 1;
    }

    /// The spans, if every one was recorded and usable.
    fn done(self) -> Option<Box<[Span]>> {
        (self.usable && self.next == self.ends).then_some(self.spans)
    }

    /// How many entries are recorded.
    fn entries(&self) -> usize {
        self.next[ENTRY] - self.entries_from
    }
}

fn span(start: usize, end: usize, a: usize, b: usize) -> Option<Span> {
    Some(Span {
        start: at(start)?,
        end: at(end)?,
        a: at(a)?,
        b: at(b)?,
    })
}

/// Writes `subsets` to `out` as `serde_json::to_writer` would, and where each subset, entry
/// and address went. `Ok(None)`: written, but no spans (a node name that serializing
/// escapes, or offsets beyond `u32`).
pub(super) fn write_subsets<'a>(
    out: &mut Vec<u8>,
    tree: &Tree<'a>,
    subsets: &[Node<'a>],
) -> Result<Option<AddressSpans>, serde_json::Error> {
    let mut rec = Recorder::for_subsets(tree, subsets);
    let open = out.len();
    out.push(b'[');
    for (i, subset) in subsets.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let start = out.len();
        let entries = match tree.object(Some(subset)) {
            None => {
                tree.write(out, subset)?;
                Some((NOT_AN_OBJECT, NOT_AN_OBJECT))
            }
            Some(entries) => {
                let first = rec.entries();
                write_object(out, entries, |out, entry_at, k, v| {
                    let (list_at, from) = (out.len(), rec.next[ADDRESS]);
                    let (a, b) = match v {
                        Node::Array(list) if LISTS.contains(&k) => {
                            write_list(out, tree, tree.items(*list), &mut rec)?;
                            (list_at, rec.next[ADDRESS] - from)
                        }
                        _ => {
                            tree.write(out, v)?;
                            (0, 0)
                        }
                    };
                    rec.put(ENTRY, span(entry_at, out.len(), a, b));
                    Ok(())
                })?;
                at(first).zip(at(rec.entries()))
            }
        };
        let recorded = entries.and_then(|(a, b)| {
            let mut s = span(start, out.len(), 0, 0)?;
            (s.a, s.b) = (a, b);
            Some(s)
        });
        rec.put(SUBSET, recorded);
    }
    let close = out.len();
    out.push(b']');
    let counts = at(rec.next[ADDRESS]).zip(at(subsets.len()));
    Ok((|| {
        let (addresses, subsets) = counts?;
        Some(AddressSpans {
            open: at(open)?,
            close: at(close)?,
            addresses,
            subsets,
            spans: rec.done()?,
        })
    })())
}

/// Writes one `addresses` / `notReadyAddresses` array, recording where each element and its
/// `nodeName` went; unusable if a node name's bytes are not its text or an offset is too large.
fn write_list<'a>(
    out: &mut Vec<u8>,
    tree: &Tree<'a>,
    list: &[Node<'a>],
    rec: &mut Recorder,
) -> Result<(), serde_json::Error> {
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
        rec.put(
            ADDRESS,
            place.and_then(|(a, b)| span(start, out.len(), a, b)),
        );
    }
    out.push(b']');
    Ok(())
}

impl AddressSpans {
    /// How many addresses there are (the length of `keep`).
    pub fn len(&self) -> usize {
        self.addresses as usize
    }

    /// Each address's node in `raw` (the bytes the spans were recorded in), in object order:
    /// what `topology::address_node` reads.
    pub fn nodes<'r>(&'r self, raw: &'r [u8]) -> impl Iterator<Item = Option<&'r str>> + 'r {
        self.addresses().iter().map(move |s| {
            let (from, to) = (s.a as usize, s.b as usize);
            if from == to {
                return None;
            }
            std::str::from_utf8(raw.get(from..to)?).ok()
        })
    }

    /// Whether there are no addresses.
    pub fn is_empty(&self) -> bool {
        self.addresses == 0
    }

    fn addresses(&self) -> &[Span] {
        self.spans.get(..self.len()).unwrap_or_default()
    }

    fn subsets(&self) -> &[Span] {
        let from = self.len();
        let to = from + self.subsets as usize;
        self.spans.get(from..to).unwrap_or_default()
    }

    /// A subset's entries; `None` if it is not an object.
    fn entries_of(&self, subset: &Span) -> Option<&[Span]> {
        if subset.a == NOT_AN_OBJECT {
            return None;
        }
        let from = self.len() + self.subsets as usize;
        let entries = self.spans.get(from..).unwrap_or_default();
        Some(
            entries
                .get(subset.a as usize..subset.b as usize)
                .unwrap_or_default(),
        )
    }

    /// Moves the first address's start by `by` bytes (tests: a wrong span must be caught).
    #[cfg(test)]
    pub(super) fn shift_first_item(&mut self, by: u32) {
        if let Some(first) = self.spans.first_mut().filter(|_| self.addresses > 0) {
            first.start += by;
        }
    }

    /// Whether every span lies in order in bytes of length `len` whose stamp goes at
    /// `stamp_at`, after it, and the lists' addresses are all the addresses: then writing the
    /// kept addresses cannot fail. Always so in bytes they were recorded in; checked before
    /// anything is published.
    pub fn fit(&self, len: usize, stamp_at: usize) -> bool {
        let mut last = stamp_at;
        let mut next = |p: u32| {
            let ok = last <= p as usize;
            last = p as usize;
            ok
        };
        let addresses = self.addresses();
        let mut x = 0;
        let mut ok = next(self.open);
        for s in self.subsets() {
            ok &= next(s.start);
            for e in self.entries_of(s).unwrap_or_default() {
                ok &= next(e.start);
                if e.a != 0 {
                    ok &= next(e.a);
                    let list = addresses.get(x..x + e.b as usize);
                    ok &= list.is_some();
                    for i in list.unwrap_or_default() {
                        ok &= next(i.start) && i.a <= i.b && next(i.end);
                        ok &= i.start <= i.a && i.b <= i.end;
                    }
                    x += e.b as usize;
                }
                ok &= next(e.end);
            }
            ok &= next(s.end);
        }
        ok && x == addresses.len() && next(self.close) && (self.close as usize) < len
    }

    /// Appends `raw[from..]` to `out` with the addresses whose `keep` is false left out, and
    /// an `addresses` / `notReadyAddresses` list that keeps none left out whole (§2.4:
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
        if keep.len() != self.len() || !self.fit(raw.len(), from) {
            return None;
        }
        let addresses = self.addresses();
        let mut x = 0;
        out.extend_from_slice(raw.get(from..=self.open as usize)?);
        for (i, s) in self.subsets().iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let Some(entries) = self.entries_of(s) else {
                out.extend_from_slice(piece(s.start, s.end)?);
                continue;
            };
            out.push(b'{');
            let mut first = true;
            for e in entries {
                if e.a == 0 {
                    (!first).then(|| out.push(b','));
                    out.extend_from_slice(piece(e.start, e.end)?);
                    first = false;
                    continue;
                }
                let (open, n) = (e.a, e.b as usize);
                let items = addresses.get(x..x + n)?;
                let keep = keep.get(x..x + n)?;
                x += n;
                let mut kept = items.iter().zip(keep).filter(|(_, k)| **k).peekable();
                if kept.peek().is_none() {
                    continue;
                }
                (!first).then(|| out.push(b','));
                first = false;
                out.extend_from_slice(piece(e.start, open + 1)?);
                for (j, (item, _)) in kept.enumerate() {
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
    /// filtering the decoded `value` the same way gives (§2.4; then stamping).
    pub(super) fn check(&self, raw: &[u8], value: &Value, keep: &[bool]) -> Result<Value, String> {
        let subsets = value.get("subsets").and_then(Value::as_array);
        let lists = subsets
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .flat_map(|s| LISTS.iter().filter_map(|f| s.get(*f)?.as_array()));
        let addrs: Vec<&Value> = lists.flatten().collect();
        if addrs.len() != self.len() {
            return Err(format!(
                "{} spans for {} addresses",
                self.len(),
                addrs.len()
            ));
        }
        for (addr, node) in addrs.iter().zip(self.nodes(raw)) {
            if topology::address_node(addr) != node {
                return Err(format!("node of {addr} read as {node:?}"));
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
