//! The on-disk snapshot of the cache (`--cache-dir`): its contents and its file format. Pure:
//! bytes in, bytes out; the I/O shell (`crate::persist`) reads and writes the files.
//!
//! A snapshot holds what is needed to serve after a restart with no upstream: every cached
//! upstream object (compact JSON, as stored by the cache), the EndpointSlice and ServiceCIDR
//! versions mirrored, the last resourceVersion handed out, and what ties it to its node and
//! upstream.
//!
//! # File format (version 3; versions 1 and 2 are still read)
//!
//! Integers are little-endian. `L` is the length of the whole file.
//!
//! | Offset     | Size | Field                                                                |
//! |------------|------|----------------------------------------------------------------------|
//! | 0          | 8    | magic `GWSNAP\r\n` (the `\r\n` catches text-mode line-end mangling)  |
//! | 8          | 4    | format version, u32 ([`FORMAT_VERSION`])                             |
//! | 12         | 8    | `L`, u64: every byte of the file, this header to the end magic       |
//! | 20         | 4    | `M`, u32: length of the meta (at most [`MAX_META_LEN`])              |
//! | 24         | `M`  | meta, a JSON object (below)                                          |
//! | 24 + `M`   | …    | 5 sections, in order nodes, services, endpoints, slices, cidrs;      |
//! |            |      | each is a u32 count `N`, then `N` records: u32 length `n` (at most   |
//! |            |      | [`MAX_OBJECT_LEN`]) and `n` bytes of one JSON object                 |
//! | `L` − 20   | 8    | total object count, u64 (the sum of the five `N`)                    |
//! | `L` − 12   | 4    | CRC-32/IEEE, u32, of bytes `0 .. L − 12` (every byte before it)      |
//! | `L` − 8    | 8    | end magic `GWSEND\r\n`                                               |
//!
//! The meta is a JSON object of exactly these fields (an unknown one is refused: a new field is
//! a new format version); `endpointslices` is `"v1"` or `"v1beta1"`, `servicecidrs` `"v1"`,
//! `"v1beta1"` or `""` (the upstream had none), and the RV a canonical decimal string (digits,
//! no leading zero), as Kubernetes writes resourceVersions and so that no JSON reader rounds it:
//!
//! ```text
//! {"hostname":"edge-1","upstream":"…","written_unix_secs":1700000000,"rv":"1234","endpointslices":"v1","servicecidrs":"v1"}
//! ```
//!
//! Version 3 has the layout of version 2; its nodes section holds the local Node whole and,
//! on a node without a relay port, every other Node as its facts only (name, labels, addresses:
//! docs/SEMANTICS.md §1.1). A binary that reads only version 2 would serve those as whole
//! Nodes, so the version says it: such a binary keeps the file aside instead. A version 2 file
//! (every Node whole) is read as it is, its other Nodes reduced on restore.
//!
//! Version 1, written before grid-wrapper served ServiceCIDRs, is the same without the
//! `servicecidrs` field and the cidrs section; it is read as a snapshot that does not say
//! whether the upstream has ServiceCIDRs ([`Meta::cidr_kind`] `None`, no cidrs).
//!
//! The header carries `L`, so a write that stopped short is told apart from damage at once
//! ([`SnapshotError::Truncated`]), and the writer knows `L` before its first byte (the lengths
//! of the objects are known), so it streams. [`decode`] checks, in order: magic, version,
//! length, end magic, checksum, then the structure (every length within the file, every object
//! a JSON object, the counts consistent, no byte left over). A snapshot is all or nothing:
//! any error rejects the whole file.

use std::fmt;
use std::io::{self, Write};
use std::sync::Arc;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::k8s::Resource;

mod crc32;
#[cfg(test)]
mod tests;

use crc32::Crc32;

/// What a snapshot is tied to: it is served only by a process with the same identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `--hostname` of the process that wrote it.
    pub hostname: String,
    /// The upstream: server URL and a fingerprint of its CA (see `crate::persist`).
    pub upstream: String,
}

/// Everything in a snapshot besides the objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Whose snapshot this is.
    pub identity: Identity,
    /// Wall-clock seconds since the Unix epoch when it was taken (for its age; informational).
    pub written_unix_secs: u64,
    /// The last resourceVersion handed out when it was taken.
    pub rv: u64,
    /// The EndpointSlice version mirrored (`SlicesV1` or `SlicesV1beta1`).
    pub slice_kind: Resource,
    /// The ServiceCIDR version mirrored (`CidrsV1` or `CidrsV1beta1`); `None` when the
    /// upstream had none, or the snapshot does not say (format version 1).
    pub cidr_kind: Option<Resource>,
}

/// The cached upstream objects, each as compact JSON bytes, per resource: as a file holds
/// them (`Arc<[u8]>`), or as the cache hands them to the writer ([`Blob`]: bytes it keeps
/// packed or only as the served object are made whole one at a time while they are written).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Objects<B = Arc<[u8]>> {
    /// Nodes.
    pub nodes: Vec<B>,
    /// Services.
    pub services: Vec<B>,
    /// Endpoints.
    pub endpoints: Vec<B>,
    /// EndpointSlices of `Meta::slice_kind`.
    pub slices: Vec<B>,
    /// ServiceCIDRs of `Meta::cidr_kind`.
    pub cidrs: Vec<B>,
}

/// One object's bytes as the snapshot writer takes them.
pub trait Blob {
    /// How many bytes it has.
    fn len(&self) -> usize;

    /// Whether it has none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands its bytes to `put`, in one or more pieces; an error if they cannot be made
    /// (bytes that do not unpack), or `put`'s.
    fn write_with(&self, put: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()>;
}

impl Blob for Arc<[u8]> {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn write_with(&self, put: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        put(self)
    }
}

impl<B> Objects<B> {
    /// Number of objects over all resources.
    pub fn len(&self) -> usize {
        self.nodes.len()
            + self.services.len()
            + self.endpoints.len()
            + self.slices.len()
            + self.cidrs.len()
    }

    /// Whether there are no objects.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A whole snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot<B = Arc<[u8]>> {
    /// Identity, time, RV, slice version.
    pub meta: Meta,
    /// The objects.
    pub objects: Objects<B>,
}

/// The version of the file format this binary writes (and reads, with [`WHOLE_NODES_FORMAT_VERSION`]
/// and [`OLD_FORMAT_VERSION`]).
pub const FORMAT_VERSION: u32 = 3;
/// The version before Nodes were kept as facts (the layout of [`FORMAT_VERSION`], every Node
/// whole), still read.
pub const WHOLE_NODES_FORMAT_VERSION: u32 = 2;
/// The version before ServiceCIDRs, still read (its snapshot serves without them).
pub const OLD_FORMAT_VERSION: u32 = 1;
/// The largest object accepted, in bytes (64 MiB; the apiserver's own limit is far lower).
pub const MAX_OBJECT_LEN: u32 = 64 << 20;
/// The largest meta section accepted, in bytes (64 KiB).
pub const MAX_META_LEN: u32 = 64 << 10;

/// The first 8 bytes of every snapshot.
const MAGIC: [u8; 8] = *b"GWSNAP\r\n";
/// The last 8 bytes of every snapshot.
const END_MAGIC: [u8; 8] = *b"GWSEND\r\n";
/// Magic, version, file length.
const HEADER_LEN: usize = 20;
/// Total object count, CRC, end magic.
const TRAILER_LEN: usize = 20;
/// CRC and end magic: what the CRC does not cover.
const UNSUMMED_LEN: usize = 12;
/// The smallest file the layout allows (empty meta, four empty sections: version 1).
const MIN_LEN: u64 = (HEADER_LEN + 4 + 4 * 4 + TRAILER_LEN) as u64;
/// What version 2 adds to [`MIN_LEN`]: the cidrs section's count.
const CIDRS_LEN: u64 = 4;

/// Why bytes are not a usable snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnapshotError {
    /// Not a snapshot at all: a foreign file (bad magic).
    NotASnapshot,
    /// A snapshot in another format version.
    Version {
        /// The version in the file.
        found: u32,
    },
    /// The file ends early (e.g. a write that stopped short).
    Truncated {
        /// Bytes present.
        len: u64,
        /// Bytes the header records, if the header is complete.
        expected: Option<u64>,
    },
    /// The bytes are damaged: the stored checksum does not match them.
    Checksum {
        /// The CRC-32 in the file.
        stored: u32,
        /// The CRC-32 of the bytes read.
        computed: u32,
    },
    /// Inconsistent: longer than recorded, no end marker, or, behind an intact checksum, a
    /// length, count, meta field or object that does not hold up.
    Malformed(String),
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::NotASnapshot => f.write_str("not a grid-wrapper snapshot"),
            SnapshotError::Version { found } => write!(
                f,
                "snapshot format version {found}, this binary reads {OLD_FORMAT_VERSION} to {FORMAT_VERSION}"
            ),
            SnapshotError::Truncated {
                len,
                expected: Some(expected),
            } => write!(f, "truncated ({len} of {expected} bytes)"),
            SnapshotError::Truncated {
                len,
                expected: None,
            } => write!(f, "truncated ({len} bytes, within the header)"),
            SnapshotError::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch (damaged): stored {stored:08x}, computed {computed:08x}"
            ),
            SnapshotError::Malformed(what) => write!(f, "malformed: {what}"),
        }
    }
}

impl std::error::Error for SnapshotError {}

fn malformed(what: impl Into<String>) -> SnapshotError {
    SnapshotError::Malformed(what.into())
}

/// The meta section as JSON.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetaJson {
    hostname: String,
    upstream: String,
    written_unix_secs: u64,
    rv: String,
    endpointslices: String,
    /// Version 2 on (absent from version 1 files; required in version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    servicecidrs: Option<String>,
}

fn slice_version(kind: Resource) -> Option<&'static str> {
    match kind {
        Resource::SlicesV1 => Some("v1"),
        Resource::SlicesV1beta1 => Some("v1beta1"),
        _ => None,
    }
}

/// The meta's `servicecidrs` value: `""` for an upstream without them.
fn cidr_version(kind: Option<Resource>) -> Option<&'static str> {
    match kind {
        None => Some(""),
        Some(Resource::CidrsV1) => Some("v1"),
        Some(Resource::CidrsV1beta1) => Some("v1beta1"),
        Some(_) => None,
    }
}

/// A canonical decimal u64: digits only, no sign, no leading zero.
fn parse_rv(s: &str) -> Option<u64> {
    let canonical = s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if canonical {
        s.parse().ok()
    } else {
        None
    }
}

fn parse_meta(bytes: &[u8], version: u32) -> Result<Meta, SnapshotError> {
    let m: MetaJson = serde_json::from_slice(bytes).map_err(|e| malformed(format!("meta: {e}")))?;
    let cidr_kind = match (version, m.servicecidrs.as_deref()) {
        (OLD_FORMAT_VERSION, None) => None,
        (WHOLE_NODES_FORMAT_VERSION | FORMAT_VERSION, Some("")) => None,
        (WHOLE_NODES_FORMAT_VERSION | FORMAT_VERSION, Some("v1")) => Some(Resource::CidrsV1),
        (WHOLE_NODES_FORMAT_VERSION | FORMAT_VERSION, Some("v1beta1")) => {
            Some(Resource::CidrsV1beta1)
        }
        (_, other) => return Err(malformed(format!("meta: servicecidrs {other:?}"))),
    };
    let rv = parse_rv(&m.rv).ok_or_else(|| malformed(format!("meta: rv {:?}", m.rv)))?;
    let slice_kind = match m.endpointslices.as_str() {
        "v1" => Resource::SlicesV1,
        "v1beta1" => Resource::SlicesV1beta1,
        other => return Err(malformed(format!("meta: endpointslices {other:?}"))),
    };
    Ok(Meta {
        identity: Identity {
            hostname: m.hostname,
            upstream: m.upstream,
        },
        written_unix_secs: m.written_unix_secs,
        rv,
        slice_kind,
        cidr_kind,
    })
}

fn sections<B>(o: &Objects<B>) -> [(&'static str, &[B]); 5] {
    [
        ("nodes", &o.nodes),
        ("services", &o.services),
        ("endpoints", &o.endpoints),
        ("slices", &o.slices),
        ("cidrs", &o.cidrs),
    ]
}

/// What `write_to` writes, checked and measured before its first byte.
struct Plan<'a, B> {
    meta: Vec<u8>,
    sections: [(&'static str, &'a [B]); 5],
    file_len: u64,
    total: u64,
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

/// A length as its u32 field, if it is at most `max`.
fn len_field(len: usize, max: u32, what: &str) -> io::Result<[u8; 4]> {
    match u32::try_from(len) {
        Ok(n) if n <= max => Ok(n.to_le_bytes()),
        _ => Err(invalid(format!("snapshot: {what} too large ({len})"))),
    }
}

fn plan<B: Blob>(snap: &Snapshot<B>) -> io::Result<Plan<'_, B>> {
    let m = &snap.meta;
    let version = slice_version(m.slice_kind)
        .ok_or_else(|| invalid(format!("snapshot: slice kind {:?}", m.slice_kind)))?;
    let cidrs = cidr_version(m.cidr_kind)
        .ok_or_else(|| invalid(format!("snapshot: ServiceCIDR kind {:?}", m.cidr_kind)))?;
    let meta = serde_json::to_vec(&MetaJson {
        hostname: m.identity.hostname.clone(),
        upstream: m.identity.upstream.clone(),
        written_unix_secs: m.written_unix_secs,
        rv: m.rv.to_string(),
        endpointslices: version.to_string(),
        servicecidrs: Some(cidrs.to_string()),
    })
    .map_err(io::Error::other)?;
    len_field(meta.len(), MAX_META_LEN, "meta")?;
    let mut file_len = MIN_LEN + CIDRS_LEN + meta.len() as u64;
    let mut total = 0u64;
    let sections = sections(&snap.objects);
    for (what, objs) in sections {
        len_field(objs.len(), u32::MAX, what)?;
        total += objs.len() as u64;
        for obj in objs {
            len_field(obj.len(), MAX_OBJECT_LEN, what)?;
            file_len += 4 + obj.len() as u64;
        }
    }
    Ok(Plan {
        meta,
        sections,
        file_len,
        total,
    })
}

/// A writer that counts and checksums what passes.
struct Sink<W> {
    w: W,
    crc: Crc32,
    written: u64,
}

impl<W: Write> Sink<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.w.write_all(bytes)?;
        self.crc.update(bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }
}

fn write_plan<W: Write, B: Blob>(plan: &Plan<'_, B>, w: W) -> io::Result<u64> {
    let mut out = Sink {
        w,
        crc: Crc32::new(),
        written: 0,
    };
    out.put(&MAGIC)?;
    out.put(&FORMAT_VERSION.to_le_bytes())?;
    out.put(&plan.file_len.to_le_bytes())?;
    out.put(&len_field(plan.meta.len(), MAX_META_LEN, "meta")?)?;
    out.put(&plan.meta)?;
    for (what, objs) in plan.sections {
        out.put(&len_field(objs.len(), u32::MAX, what)?)?;
        for obj in objs {
            out.put(&len_field(obj.len(), MAX_OBJECT_LEN, what)?)?;
            let before = out.written;
            obj.write_with(&mut |piece| out.put(piece))?;
            if out.written - before != obj.len() as u64 {
                return Err(invalid(format!("snapshot: a {what} object changed length")));
            }
        }
    }
    out.put(&plan.total.to_le_bytes())?;
    // The CRC covers every byte before it; what follows it is not summed (nor needs to be).
    let crc = out.crc.finish();
    out.put(&crc.to_le_bytes())?;
    out.put(&END_MAGIC)?;
    out.w.flush()?;
    debug_assert_eq!(out.written, plan.file_len);
    Ok(out.written)
}

/// Writes `snap` to `w` in the format of the module docs, streaming (the objects are written
/// from where they are, never gathered into one buffer; pass a buffered writer), and flushes
/// `w`. Returns the bytes written.
///
/// Fails with `InvalidInput`, before writing any byte, for a snapshot the format cannot hold:
/// a slice kind other than `SlicesV1`/`SlicesV1beta1`, an object over [`MAX_OBJECT_LEN`], a
/// meta over [`MAX_META_LEN`], more than `u32::MAX` objects of a resource. The objects' JSON
/// is not checked here (the cache holds only parsed objects); [`decode`] rejects a file with an
/// object that is not a JSON object.
pub fn write_to<W: Write, B: Blob>(snap: &Snapshot<B>, w: W) -> io::Result<u64> {
    write_plan(&plan(snap)?, w)
}

/// The whole file as bytes ([`write_to`] into memory). A snapshot that [`write_to`] refuses
/// gives an empty vector, which [`decode`] rejects.
pub fn encode<B: Blob>(snap: &Snapshot<B>) -> Vec<u8> {
    let Ok(plan) = plan(snap) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(usize::try_from(plan.file_len).unwrap_or(0));
    match write_plan(&plan, &mut out) {
        Ok(_) => out,
        Err(_) => Vec::new(),
    }
}

fn le32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..)?.first_chunk::<4>()?;
    Some(u32::from_le_bytes(*b))
}

fn le64(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..)?.first_chunk::<8>()?;
    Some(u64::from_le_bytes(*b))
}

/// Decodes a whole snapshot file. Never panics; anything but an intact file of this format
/// version is an error (the checks are listed in the module docs), and nothing is allocated
/// for a length the file cannot hold.
pub fn decode(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    let len = bytes.len() as u64;
    let short = SnapshotError::Truncated {
        len,
        expected: None,
    };
    match bytes.first_chunk::<8>() {
        Some(magic) if *magic == MAGIC => {}
        None if MAGIC.starts_with(bytes) => return Err(short),
        _ => return Err(SnapshotError::NotASnapshot),
    }
    let found = le32(bytes, 8).ok_or_else(|| short.clone())?;
    if ![
        OLD_FORMAT_VERSION,
        WHOLE_NODES_FORMAT_VERSION,
        FORMAT_VERSION,
    ]
    .contains(&found)
    {
        return Err(SnapshotError::Version { found });
    }
    let file_len = le64(bytes, 12).ok_or(short)?;
    if len < file_len {
        return Err(SnapshotError::Truncated {
            len,
            expected: Some(file_len),
        });
    }
    if len > file_len {
        return Err(malformed(format!(
            "{len} bytes, longer than the recorded {file_len}"
        )));
    }
    if len < MIN_LEN {
        return Err(malformed(format!("recorded length {len} below {MIN_LEN}")));
    }
    let split = bytes.len().saturating_sub(UNSUMMED_LEN);
    let (summed, unsummed) = bytes
        .split_at_checked(split)
        .ok_or_else(|| malformed("no trailer"))?;
    let (stored, end) = unsummed
        .split_first_chunk::<4>()
        .ok_or_else(|| malformed("no trailer"))?;
    if end != END_MAGIC {
        return Err(malformed("no end marker"));
    }
    let stored = u32::from_le_bytes(*stored);
    let computed = crc32::checksum(summed);
    if stored != computed {
        return Err(SnapshotError::Checksum { stored, computed });
    }
    // Intact as written; still, every length is checked (a checksum proves no intent).
    let (body, total) = summed
        .get(HEADER_LEN..)
        .and_then(|b| b.split_last_chunk::<8>())
        .ok_or_else(|| malformed("no trailer"))?;
    let total = u64::from_le_bytes(*total);
    let mut r = Reader { rest: body };
    let meta_len = r.u32("meta length")?;
    if meta_len > MAX_META_LEN {
        return Err(malformed(format!(
            "meta of {meta_len} bytes, over {MAX_META_LEN}"
        )));
    }
    let meta = parse_meta(r.take(meta_len, || "meta".into())?, found)?;
    let objects = Objects {
        nodes: r.section("nodes")?,
        services: r.section("services")?,
        endpoints: r.section("endpoints")?,
        slices: r.section("slices")?,
        cidrs: match found {
            OLD_FORMAT_VERSION => Vec::new(),
            _ => r.section("cidrs")?,
        },
    };
    if !r.rest.is_empty() {
        return Err(malformed(format!(
            "{} stray bytes before the trailer",
            r.rest.len()
        )));
    }
    let read = objects.len() as u64;
    if read != total {
        return Err(malformed(format!("{total} objects recorded, {read} read")));
    }
    Ok(Snapshot { meta, objects })
}

/// A bounds-checked reader over the checksummed body.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// The next `n` bytes; an error names them `what` (called once at most: no formatting
    /// cost per object on the good path).
    fn take(&mut self, n: u32, what: impl Fn() -> String) -> Result<&'a [u8], SnapshotError> {
        let split = usize::try_from(n)
            .ok()
            .and_then(|n| self.rest.split_at_checked(n));
        let Some((head, rest)) = split else {
            let left = self.rest.len();
            return Err(malformed(format!("{}: {n} bytes, {left} left", what())));
        };
        self.rest = rest;
        Ok(head)
    }

    fn u32(&mut self, what: &str) -> Result<u32, SnapshotError> {
        let (b, rest) = self
            .rest
            .split_first_chunk::<4>()
            .ok_or_else(|| malformed(format!("{what}: past the end")))?;
        self.rest = rest;
        Ok(u32::from_le_bytes(*b))
    }

    fn section(&mut self, what: &str) -> Result<Vec<Arc<[u8]>>, SnapshotError> {
        let count = self.u32(what)?;
        // Each record takes at least its 4-byte length: a count the rest of the file cannot
        // hold is refused before anything is allocated for it.
        if u64::from(count) * 4 > self.rest.len() as u64 {
            return Err(malformed(format!(
                "{what}: {count} objects cannot fit in {} bytes",
                self.rest.len()
            )));
        }
        let mut objs = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
        for i in 0..count {
            let n = self.u32(what)?;
            if n > MAX_OBJECT_LEN {
                return Err(malformed(format!(
                    "{what}[{i}]: {n} bytes, over {MAX_OBJECT_LEN}"
                )));
            }
            let obj = self.take(n, || format!("{what}[{i}]"))?;
            serde_json::from_slice::<JsonObject>(obj)
                .map_err(|e| malformed(format!("{what}[{i}]: {e}")))?;
            objs.push(Arc::from(obj));
        }
        Ok(objs)
    }
}

/// Deserializes any JSON object (and nothing else), keeping nothing of it.
struct JsonObject;

impl<'de> Deserialize<'de> for JsonObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = JsonObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonObject, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(JsonObject)
            }
        }
        d.deserialize_map(V)
    }
}
