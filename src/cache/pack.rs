//! A small LZ77 byte packer for the upstream bytes the cache keeps only to recompute from.
//!
//! A topology Service's endpoint objects are served pruned, so the cache keeps their upstream bytes
//! as well (`store/upstream.rs`): a sizeable amount next to the served JSON (see BENCHMARKS.md),
//! read only when a relabel or a Service change recomputes the object, or a relist compares it.
//! JSON repeats itself (every endpoint has the same keys, most of the same values), so these are
//! kept packed.
//!
//! The format is LZ4's block format in spirit (a token with 4-bit literal and match lengths,
//! extended by 255-runs, literals, a 2-byte little-endian offset), without its end-of-block rules:
//! only [`unpack`] reads it, and nothing is written to disk in it (a snapshot holds whole objects).
//! Greedy matching with a 4-byte hash of 4,096 slots: fast (a list's endpoint objects are packed as
//! the list is decoded, which is on the way to readiness), not the best ratio (measured by
//! `cargo bench --bench core pack`; the figures are in BENCHMARKS.md). [`unpack`] checks every
//! length and offset, so bytes that were not made by [`pack`] give `None`, never a panic (the
//! `pack` fuzz target: round trips, and arbitrary bytes unpacked).

/// Bytes packed by [`pack`], with the length they unpack to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packed {
    len: u32,
    /// Shared: a snapshot takes them from the writer (pointer copies) and unpacks them on its
    /// own thread.
    bytes: Arc<[u8]>,
}

use std::sync::Arc;

const MIN_MATCH: usize = 4;
const MAX_OFFSET: usize = u16::MAX as usize;
const HASH_BITS: u32 = 12;

impl Packed {
    /// How many bytes it unpacks to.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether it unpacks to nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many bytes it holds.
    pub fn packed_len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether both were packed from the same bytes: [`pack`] is a function of its input alone
    /// (the table's entries from earlier inputs are never matched), so equal inputs give equal
    /// packed bytes, and equal packed bytes unpack to equal inputs.
    pub fn packs_same(&self, other: &Packed) -> bool {
        self.len == other.len && self.bytes == other.bytes
    }

    /// Whether both are the same packed copy (not only equal bytes).
    #[cfg(test)]
    pub fn is_same(&self, other: &Packed) -> bool {
        Arc::ptr_eq(&self.bytes, &other.bytes)
    }

    /// The bytes it was packed from.
    pub fn unpack(&self) -> Option<Vec<u8>> {
        unpack(&self.bytes, self.len as usize)
    }

    /// `f` of the bytes it was packed from, unpacked into a buffer kept per thread (no
    /// allocation once it has grown; let go of after an outsized object).
    pub fn with_unpacked<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        thread_local! {
            static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
        }
        let mut buf = SCRATCH.take();
        let ok = unpack_into(&self.bytes, self.len as usize, &mut buf);
        let result = ok.then(|| f(&buf));
        if buf.capacity() <= KEPT_OUT {
            SCRATCH.set(buf);
        }
        result
    }
}

fn hash(four: [u8; 4]) -> usize {
    (u32::from_le_bytes(four).wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

fn four(data: &[u8], at: usize) -> Option<[u8; 4]> {
    data.get(at..at + 4)?.try_into().ok()
}

/// Appends `n` as a 4-bit token field's extension (the part above 15, in 255-runs).
fn push_len(out: &mut Vec<u8>, mut n: usize) {
    while n >= 255 {
        out.push(255);
        n -= 255;
    }
    out.push(n as u8);
}

/// One sequence: `literals`, then (unless last) a match of `len` bytes `offset` back.
fn push_sequence(out: &mut Vec<u8>, literals: &[u8], matched: Option<(usize, usize)>) {
    let lit = literals.len();
    let ml = matched.map_or(0, |(len, _)| len - MIN_MATCH);
    out.push(((lit.min(15) as u8) << 4) | ml.min(15) as u8);
    if lit >= 15 {
        push_len(out, lit - 15);
    }
    out.extend_from_slice(literals);
    if let Some((_, offset)) = matched {
        out.extend_from_slice(&(offset as u16).to_le_bytes());
        if ml >= 15 {
            push_len(out, ml - 15);
        }
    }
}

/// How many bytes `a` and `b` have in common at their start, eight at a time.
fn common(a: &[u8], b: &[u8]) -> usize {
    let mut n = 0;
    let (mut x, mut y) = (a, b);
    while let (Some((cx, rx)), Some((cy, ry))) = (x.split_first_chunk::<8>(), y.split_first_chunk())
    {
        let diff = u64::from_le_bytes(*cx) ^ u64::from_le_bytes(*cy);
        if diff != 0 {
            return n + (diff.trailing_zeros() / 8) as usize;
        }
        n += 8;
        (x, y) = (rx, ry);
    }
    n + x.iter().zip(y).take_while(|(p, q)| p == q).count()
}

/// The match finder's hash table and the output buffer, kept per thread between calls, so that
/// packing an object allocates only its result (a buffer per call, freed after the result was
/// copied out, made musl's allocator map and unmap pages, which delayed readiness in the static
/// build). A slot holds a position plus `base`, and `base` moves past each input, so earlier
/// inputs' entries are stale without clearing the table (16 KiB) for every object.
struct Table {
    slots: Box<[u32]>,
    base: u32,
    out: Vec<u8>,
}

/// Past this, the output buffer is let go of after the call (an outsized object).
const KEPT_OUT: usize = 256 * 1024;

thread_local! {
    static TABLE: std::cell::RefCell<Table> = std::cell::RefCell::new(Table {
        slots: vec![0; 1 << HASH_BITS].into_boxed_slice(),
        base: 1,
        out: Vec::new(),
    });
}

/// Packs `data`; `None` if it is 4 GiB or more.
pub fn pack(data: &[u8]) -> Option<Packed> {
    let len = u32::try_from(data.len()).ok()?;
    TABLE.with(|table| {
        let mut table = table.borrow_mut();
        if table
            .base
            .checked_add(len)
            .is_none_or(|end| end == u32::MAX)
        {
            table.slots.fill(0);
            table.base = 1;
        }
        let mut out = std::mem::take(&mut table.out);
        out.clear();
        pack_with(data, &mut table, &mut out);
        let bytes = Arc::from(&out[..]);
        if out.capacity() <= KEPT_OUT {
            table.out = out;
        }
        table.base += len + 1;
        Some(Packed { len, bytes })
    })
}

fn pack_with(data: &[u8], table: &mut Table, out: &mut Vec<u8>) {
    let base = table.base as usize;
    let (mut anchor, mut i) = (0, 0);
    while let Some(here) = four(data, i) {
        let Some(slot) = table.slots.get_mut(hash(here)) else {
            break;
        };
        let seen = *slot as usize;
        *slot = (base + i) as u32;
        let candidate = seen.wrapping_sub(base);
        let found = seen >= base
            && candidate < i
            && i - candidate <= MAX_OFFSET
            && four(data, candidate) == Some(here);
        if !found {
            i += 1;
            continue;
        }
        let len = MIN_MATCH + common(&data[i + MIN_MATCH..], &data[candidate + MIN_MATCH..]);
        push_sequence(out, &data[anchor..i], Some((len, i - candidate)));
        i += len;
        anchor = i;
    }
    push_sequence(out, &data[anchor..], None);
}

/// Reads a token field's extension after its 4-bit value `n` (15: more follows).
fn read_len(data: &[u8], at: &mut usize, mut n: usize) -> Option<usize> {
    if n == 15 {
        loop {
            let b = *data.get(*at)?;
            *at += 1;
            n = n.checked_add(b as usize)?;
            if b != 255 {
                break;
            }
        }
    }
    Some(n)
}

/// The bytes `data` unpacks to, which must be `len` long; `None` if `data` is not what
/// [`pack`] made of `len` bytes (a length or offset out of range, or a different total).
pub fn unpack(data: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    unpack_into(data, len, &mut out).then_some(out)
}

/// [`unpack`] into `out` (cleared first); `false` where `unpack` gives `None`.
fn unpack_into(data: &[u8], len: usize, out: &mut Vec<u8>) -> bool {
    out.clear();
    out.reserve(len);
    unpack_to(data, len, out).is_some()
}

fn unpack_to(data: &[u8], len: usize, out: &mut Vec<u8>) -> Option<()> {
    let mut at = 0;
    while let Some(&token) = data.get(at) {
        at += 1;
        let lit = read_len(data, &mut at, (token >> 4) as usize)?;
        let literals = data.get(at..at.checked_add(lit)?)?;
        if out.len() + lit > len {
            return None;
        }
        out.extend_from_slice(literals);
        at += lit;
        if at == data.len() {
            break; // the last sequence has no match
        }
        let offset = u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?) as usize;
        at += 2;
        let ml = read_len(data, &mut at, (token & 15) as usize)?.checked_add(MIN_MATCH)?;
        if offset == 0 || offset > out.len() || out.len() + ml > len {
            return None;
        }
        // The match may overlap what it writes (a run): copy in pieces no longer than `offset`.
        let mut left = ml;
        while left > 0 {
            let from = out.len() - offset;
            let n = left.min(offset);
            out.extend_from_within(from..from + n);
            left -= n;
        }
    }
    (out.len() == len).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(data: &[u8]) -> Packed {
        let packed = pack(data).expect("packs");
        assert_eq!(packed.unpack().as_deref(), Some(data), "{data:?}");
        assert_eq!(packed.len(), data.len());
        packed
    }

    #[test]
    fn what_is_packed_unpacks_to_the_same_bytes() {
        for data in [
            &b""[..],
            b"a",
            b"abcd",
            b"abcdabcd",
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            br#"{"endpoints":[{"addresses":["10.0.0.1"],"nodeName":"n1"},{"addresses":["10.0.0.2"],"nodeName":"n2"}]}"#,
        ] {
            round_trip(data);
        }
        // Long literal runs and long matches (the 255-run extensions), offsets near the limit.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let noise: Vec<u8> = (0..70_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        round_trip(&noise);
        let mut far = noise[..1000].to_vec();
        far.extend_from_slice(&noise[1000..66_000]);
        far.extend_from_slice(&noise[..1000]);
        round_trip(&far);
        round_trip(&[&noise[..600], &[7u8; 5000][..], &noise[..600]].concat());
    }

    #[test]
    fn packing_depends_on_the_input_alone() {
        let a = br#"{"endpoints":[{"addresses":["10.0.0.1"],"nodeName":"n1"},{"addresses":["10.0.0.1"],"nodeName":"n2"}]}"#;
        let b = br#"{"endpoints":[{"addresses":["10.0.0.2"],"nodeName":"n1"},{"addresses":["10.0.0.1"],"nodeName":"n2"}]}"#;
        let first = pack(a).expect("packs");
        // Other inputs in between leave entries in the thread's table; a fresh thread has none.
        for i in 0..50 {
            pack(format!("{i}{}", String::from_utf8_lossy(a)).as_bytes());
        }
        let again = pack(a).expect("packs");
        let elsewhere = std::thread::spawn(move || pack(a).expect("packs"))
            .join()
            .expect("thread");
        assert!(first.packs_same(&again) && first.packs_same(&elsewhere));
        assert!(!first.is_same(&again), "distinct copies, equal bytes");
        assert!(!first.packs_same(&pack(b).expect("packs")));
        assert!(!first.packs_same(&pack(&a[..a.len() - 1]).expect("packs")));
    }

    #[test]
    fn repetitive_json_packs_small() {
        let item = |i: usize| {
            format!(
                r#"{{"addresses":["10.0.{i}.1"],"conditions":{{"ready":true,"serving":true,"terminating":false}},"nodeName":"node-{i:05}","targetRef":{{"kind":"Pod","name":"svc-00001-pod-{i}","namespace":"default"}},"zone":"zone-{i}"}}"#
            )
        };
        let json: String = (0..10).map(item).collect::<Vec<_>>().join(",");
        let packed = round_trip(json.as_bytes());
        assert!(
            packed.packed_len() * 2 < json.len(),
            "{} of {}",
            packed.packed_len(),
            json.len()
        );
    }

    #[test]
    fn bytes_not_made_by_pack_give_none() {
        let good = pack(b"abcdabcdabcdabcd-abcdabcd").expect("packs");
        assert_eq!(unpack(&good.bytes, 3), None, "another length");
        assert_eq!(unpack(&good.bytes, 1000), None, "another length");
        // An offset before the start, a zero offset, a match past the length, a cut input.
        for bad in [
            &[0x04, 1, 0][..],
            &[0x14, b'a', 0, 0],
            &[0x1f, b'a', 1, 0, 255, 255, 255],
            &[0xf0],
            &[0xf0, 255],
            &[0x50, b'a'],
        ] {
            assert_eq!(unpack(bad, 10), None, "{bad:?}");
        }
        // Every prefix and every single-byte change of good bytes: no panic, the right bytes
        // or `None`.
        let data = b"{\"a\":\"xyzxyzxyzxyz\",\"b\":\"xyzxyzxyz\"}";
        let p = pack(data).expect("packs");
        for cut in 0..p.bytes.len() {
            let _ = unpack(&p.bytes[..cut], data.len());
        }
        for i in 0..p.bytes.len() {
            for v in [0u8, 1, 15, 16, 255] {
                let mut b = p.bytes.to_vec();
                b[i] = v;
                if let Some(out) = unpack(&b, data.len()) {
                    assert_eq!(out.len(), data.len());
                }
            }
        }
    }
}
