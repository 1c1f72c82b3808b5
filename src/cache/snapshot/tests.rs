//! The snapshot codec: round trips, the documented layout, and rejection of every truncation,
//! every single-bit flip, foreign input and lying lengths.

use std::sync::Arc;

use super::*;

fn obj(s: &str) -> Arc<[u8]> {
    Arc::from(s.as_bytes())
}

fn meta(slice_kind: Resource) -> Meta {
    Meta {
        identity: Identity {
            hostname: "h".into(),
            upstream: "u".into(),
        },
        written_unix_secs: 5,
        rv: 42,
        slice_kind,
        cidr_kind: None,
    }
}

fn empty() -> Snapshot {
    Snapshot {
        meta: meta(Resource::SlicesV1),
        objects: Objects::default(),
    }
}

/// One small object of every resource, v1beta1 slices, v1 ServiceCIDRs.
fn small() -> Snapshot {
    Snapshot {
        meta: Meta {
            cidr_kind: Some(Resource::CidrsV1),
            ..meta(Resource::SlicesV1beta1)
        },
        objects: Objects {
            nodes: vec![obj(r#"{"n":1}"#)],
            services: vec![obj(r#"{"s":2}"#)],
            endpoints: vec![obj(r#"{"e":3}"#)],
            slices: vec![obj(r#"{"l":4}"#)],
            cidrs: vec![obj(r#"{"c":5}"#)],
        },
    }
}

const SMALL_META: &str = r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":"42","endpointslices":"v1beta1","servicecidrs":"v1"}"#;

/// No sections but empty ones, as a version 2 file has them.
const NO_OBJECTS: [&[&[u8]]; 5] = [&[]; 5];

/// A file of format version 2 assembled by hand from the module docs' table.
fn by_table(meta: &[u8], sections: [&[&[u8]]; 5]) -> Vec<u8> {
    by_table_of(FORMAT_VERSION, meta, &sections)
}

/// A file of `version` assembled by hand from the module docs' table: any number of sections.
fn by_table_of(version: u32, meta: &[u8], sections: &[&[&[u8]]]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"GWSNAP\r\n");
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&[0; 8]); // L, filled in below
    b.extend_from_slice(&(meta.len() as u32).to_le_bytes());
    b.extend_from_slice(meta);
    let mut total = 0u64;
    for objs in sections.iter() {
        b.extend_from_slice(&(objs.len() as u32).to_le_bytes());
        for o in objs.iter() {
            b.extend_from_slice(&(o.len() as u32).to_le_bytes());
            b.extend_from_slice(o);
        }
        total += objs.len() as u64;
    }
    b.extend_from_slice(&total.to_le_bytes());
    b.extend_from_slice(&[0; 4]); // CRC, filled in by reseal
    b.extend_from_slice(b"GWSEND\r\n");
    reseal(&mut b);
    b
}

/// Rewrites the length field and the CRC after an edit, so that only the edit is wrong.
fn reseal(b: &mut [u8]) {
    let len = b.len() as u64;
    b[12..20].copy_from_slice(&len.to_le_bytes());
    let n = b.len() - 12;
    let crc = crc32::checksum(&b[..n]);
    b[n..n + 4].copy_from_slice(&crc.to_le_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn is_malformed(r: Result<Snapshot, SnapshotError>) -> bool {
    matches!(r, Err(SnapshotError::Malformed(_)))
}

#[test]
fn crc32_known_vectors() {
    assert_eq!(crc32::checksum(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32::checksum(b""), 0);
    let fox = b"The quick brown fox jumps over the lazy dog";
    assert_eq!(crc32::checksum(fox), 0x414F_A339);
    let mut crc = crc32::Crc32::new();
    crc.update(&fox[..10]);
    crc.update(&fox[10..]);
    assert_eq!(crc.finish(), 0x414F_A339);
}

#[test]
fn round_trip_empty() {
    let bytes = encode(&empty());
    assert_eq!(decode(&bytes), Ok(empty()));
}

#[test]
fn round_trip_every_resource_v1beta1() {
    let mut snap = small();
    snap.meta.identity.hostname = "nœud-\"1\"\\\n".into();
    snap.meta.identity.upstream = "https://10.0.0.1:6443#sha256:ab".into();
    snap.meta.rv = u64::MAX;
    snap.meta.written_unix_secs = u64::MAX;
    snap.objects
        .services
        .push(obj(r#"{"kind":"Service","x":[1,{"y":null}]}"#));
    snap.objects.slices.push(obj("{}"));
    let back = decode(&encode(&snap)).unwrap();
    assert_eq!(back, snap);
    assert_eq!(back.meta.slice_kind, Resource::SlicesV1beta1);
    assert_eq!(back.meta.cidr_kind, Some(Resource::CidrsV1));
    assert_eq!(back.objects.len(), 7);
    // Every ServiceCIDR answer round-trips, "none" included.
    for cidr_kind in [None, Some(Resource::CidrsV1), Some(Resource::CidrsV1beta1)] {
        let mut snap = small();
        snap.meta.cidr_kind = cidr_kind;
        assert_eq!(decode(&encode(&snap)).unwrap().meta.cidr_kind, cidr_kind);
    }
}

/// A snapshot written before ServiceCIDRs were served (format version 1: four sections, no
/// `servicecidrs` in the meta) still loads: it says nothing about ServiceCIDRs and has none.
#[test]
fn a_version_1_snapshot_still_loads() {
    let meta = r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":"42","endpointslices":"v1beta1"}"#;
    let sections: [&[&[u8]]; 4] = [
        &[br#"{"n":1}"#],
        &[br#"{"s":2}"#],
        &[br#"{"e":3}"#],
        &[br#"{"l":4}"#],
    ];
    let old = by_table_of(OLD_FORMAT_VERSION, meta.as_bytes(), &sections);
    let mut want = small();
    want.meta.cidr_kind = None;
    want.objects.cidrs.clear();
    assert_eq!(decode(&old), Ok(want.clone()));
    // The same, as the previous release wrote it (kept as a fuzz seed).
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/snapshot/format1-small");
    let written = std::fs::read(path).unwrap();
    assert_eq!(written, old);
    assert_eq!(decode(&written), Ok(want));
    // A version 1 file holds four sections: a fifth is bytes left over.
    let five = by_table_of(OLD_FORMAT_VERSION, meta.as_bytes(), &NO_OBJECTS);
    assert!(is_malformed(decode(&five)));
    // And its meta has no `servicecidrs` (a new field is a new version).
    let with = SMALL_META.as_bytes();
    assert!(is_malformed(decode(&by_table_of(
        OLD_FORMAT_VERSION,
        with,
        &sections
    ))));
    // Version 2 needs both.
    assert!(is_malformed(decode(&by_table_of(
        FORMAT_VERSION,
        meta.as_bytes(),
        &NO_OBJECTS
    ))));
    assert!(is_malformed(decode(&by_table_of(
        FORMAT_VERSION,
        with,
        &sections
    ))));
}

/// A snapshot of format version 2 (every Node whole; the layout of version 3) still loads, as
/// the previous release wrote it (kept as a fuzz seed); its other Nodes are reduced on restore
/// (`cache::store`'s tests).
#[test]
fn a_version_2_snapshot_still_loads() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/snapshot/format2-small");
    let written = std::fs::read(path).unwrap();
    assert_eq!(written[8..12], WHOLE_NODES_FORMAT_VERSION.to_le_bytes());
    assert_eq!(decode(&written), Ok(small()));
    let mut now = encode(&small());
    put32(&mut now, 8, WHOLE_NODES_FORMAT_VERSION);
    let crc_at = now.len() - 12;
    let crc = super::crc32::checksum(&now[..crc_at]);
    now[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(now, written, "the same layout but for the version");
}

#[test]
fn layout_follows_the_documented_table() {
    let want = by_table(
        SMALL_META.as_bytes(),
        [
            &[br#"{"n":1}"#],
            &[br#"{"s":2}"#],
            &[br#"{"e":3}"#],
            &[br#"{"l":4}"#],
            &[br#"{"c":5}"#],
        ],
    );
    assert_eq!(encode(&small()), want);
    assert_eq!(decode(&want), Ok(small()));
}

/// Records the largest single write.
#[derive(Default)]
struct Writes {
    total: usize,
    largest: usize,
    flushed: bool,
}

impl Write for Writes {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.total += buf.len();
        self.largest = self.largest.max(buf.len());
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.flushed = true;
        Ok(())
    }
}

#[test]
fn write_to_streams_what_encode_returns() {
    let mut snap = small();
    let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(1000));
    snap.objects.nodes = vec![obj(&big); 10];
    let bytes = encode(&snap);
    let mut w = Writes::default();
    assert_eq!(write_to(&snap, &mut w).unwrap(), bytes.len() as u64);
    assert_eq!(w.total, bytes.len());
    assert_eq!(
        w.largest,
        big.len(),
        "objects are written where they are, one by one"
    );
    assert!(w.flushed);
    let mut v = Vec::new();
    assert_eq!(write_to(&snap, &mut v).unwrap(), bytes.len() as u64);
    assert_eq!(v, bytes);
}

#[test]
fn every_truncation_is_truncated() {
    for snap in [empty(), small()] {
        let bytes = encode(&snap);
        for n in 0..bytes.len() {
            let expected = (n >= 20).then_some(bytes.len() as u64);
            assert_eq!(
                decode(&bytes[..n]),
                Err(SnapshotError::Truncated {
                    len: n as u64,
                    expected
                }),
                "cut at {n}"
            );
        }
    }
}

#[test]
fn every_single_bit_flip_fails() {
    let bytes = encode(&small());
    let len = bytes.len();
    for bit in 0..len * 8 {
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        let r = decode(&b);
        let ok = match bit / 8 {
            0..8 => r == Err(SnapshotError::NotASnapshot),
            // A flip to another version this binary reads is caught by the checksum.
            8..12 => matches!(
                r,
                Err(SnapshotError::Version { .. } | SnapshotError::Checksum { .. })
            ),
            12..20 => matches!(
                r,
                Err(SnapshotError::Truncated { .. } | SnapshotError::Malformed(_))
            ),
            i if i < len - 8 => matches!(r, Err(SnapshotError::Checksum { .. })),
            _ => is_malformed(r.clone()),
        };
        assert!(ok, "bit {bit}: {r:?}");
    }
}

#[test]
fn other_versions_are_reported() {
    for v in [0, 4, 7, u32::MAX] {
        let mut b = encode(&small());
        put32(&mut b, 8, v);
        assert_eq!(decode(&b), Err(SnapshotError::Version { found: v }));
    }
    // A future version may change everything after the version field.
    let mut future = b"GWSNAP\r\n".to_vec();
    future.extend_from_slice(&4u32.to_le_bytes());
    assert_eq!(decode(&future), Err(SnapshotError::Version { found: 4 }));
}

#[test]
fn foreign_input_is_not_a_snapshot() {
    let valid = encode(&small());
    let mangled: Vec<u8> = valid.iter().copied().filter(|&c| c != b'\r').collect();
    let foreign: [&[u8]; 6] = [
        br#"{"kind":"List","items":[]}"#,
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
        b"GWSNAQ\r\n\x01\0\0\0",
        b"hello",
        &[0xff; 100],
        &mangled,
    ];
    for f in foreign {
        assert_eq!(decode(f), Err(SnapshotError::NotASnapshot), "{f:?}");
    }
}

#[test]
fn empty_and_header_short_files_are_truncated() {
    for b in [&b""[..], b"GWS", b"GWSNAP\r\n", b"GWSNAP\r\n\x01\0\0\0\x30"] {
        assert_eq!(
            decode(b),
            Err(SnapshotError::Truncated {
                len: b.len() as u64,
                expected: None
            })
        );
    }
}

#[test]
fn bytes_after_the_end_fail() {
    let valid = encode(&small());
    let mut extra = valid.clone();
    extra.push(0);
    assert!(is_malformed(decode(&extra)));
    let twice = [valid.clone(), valid].concat();
    assert!(is_malformed(decode(&twice)));
}

#[test]
fn lying_lengths_fail_without_allocating() {
    let mut huge = encode(&small());
    huge[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
    let len = huge.len() as u64;
    assert_eq!(
        decode(&huge),
        Err(SnapshotError::Truncated {
            len,
            expected: Some(u64::MAX)
        })
    );
    let base = encode(&small());
    let m = SMALL_META.len();
    let nodes_count = 24 + m;
    let first_len = nodes_count + 4;
    // Each edit sits behind a valid checksum: only the structure can refuse it.
    for (at, v) in [
        (20, u32::MAX),
        (20, MAX_META_LEN + 1),
        (20, m as u32 + 1),
        (nodes_count, u32::MAX),
        (nodes_count, 2),
        (first_len, u32::MAX),
        (first_len, MAX_OBJECT_LEN + 1),
        (first_len, 1000),
    ] {
        let mut b = base.clone();
        put32(&mut b, at, v);
        reseal(&mut b);
        assert!(is_malformed(decode(&b)), "{v} at {at}");
    }
    // Sealed files shorter than any snapshot.
    for n in [20, 40, 59] {
        let mut b = base[..n].to_vec();
        b.extend_from_slice(&[0; 12]);
        reseal(&mut b);
        assert!(is_malformed(decode(&b)), "{n}");
    }
}

#[test]
fn objects_must_be_json_objects() {
    let m = SMALL_META.as_bytes();
    for bad in [
        &b""[..],
        b"[]",
        b"\"x\"",
        b"null",
        b"{\"a\":1",
        b"{} {}",
        b"{\"a\":1}x",
        b"\xff{}",
        b"nul",
    ] {
        for section in 0..5 {
            let mut secs = NO_OBJECTS;
            let objs = [&b"{}"[..], bad];
            secs[section] = &objs;
            assert!(is_malformed(decode(&by_table(m, secs))), "{bad:?}");
        }
    }
    let spaced: [&[u8]; 1] = [b" { \"a\" : [ 1 ] }\n"];
    assert!(decode(&by_table(m, [&spaced, &[], &[], &[], &[]])).is_ok());
}

#[test]
fn meta_must_be_exactly_the_documented_object() {
    let bad = [
        r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":"42","endpointslices":"v1","servicecidrs":"v1","x":1}"#,
        r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":"42","endpointslices":"v1","servicecidrs":"v2"}"#,
        r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":"42","endpointslices":"v1","servicecidrs":null}"#,
        r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":"42"}"#,
        r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":"007","endpointslices":"v1"}"#,
        r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":"+1","endpointslices":"v1"}"#,
        r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":"","endpointslices":"v1"}"#,
        r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":"18446744073709551616","endpointslices":"v1"}"#,
        r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":42,"endpointslices":"v1"}"#,
        r#"{"hostname":"h","upstream":"u","written_unix_secs":-5,"rv":"42","endpointslices":"v1"}"#,
        r#"{"hostname":"h","upstream":"u","written_unix_secs":5,"rv":"42","endpointslices":"v2"}"#,
        r#"{"hostname":"h","hostname":"h","upstream":"u","written_unix_secs":5,"rv":"42","endpointslices":"v1"}"#,
        r#"["h"]"#,
        "",
    ];
    for meta in bad {
        assert!(
            is_malformed(decode(&by_table(meta.as_bytes(), NO_OBJECTS))),
            "{meta}"
        );
    }
    let zero = r#"{"hostname":"","upstream":"","written_unix_secs":0,"rv":"0","endpointslices":"v1","servicecidrs":""}"#;
    let snap = decode(&by_table(zero.as_bytes(), NO_OBJECTS)).unwrap();
    assert_eq!(snap.meta.rv, 0);
    assert_eq!(snap.meta.cidr_kind, None);
}

#[test]
fn counts_must_add_up() {
    let mut b = encode(&small());
    let at = b.len() - 20;
    b[at..at + 8].copy_from_slice(&6u64.to_le_bytes());
    reseal(&mut b);
    assert!(is_malformed(decode(&b)));
    // A stray byte between the last section and the trailer.
    let mut b = encode(&small());
    b.insert(b.len() - 20, b' ');
    reseal(&mut b);
    assert!(is_malformed(decode(&b)));
}

#[test]
fn writer_refuses_what_the_format_cannot_hold() {
    let mut snap = small();
    snap.meta.slice_kind = Resource::Nodes;
    let mut out = Vec::new();
    let err = write_to(&snap, &mut out).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(out.is_empty(), "nothing written");
    assert!(encode(&snap).is_empty());
    let mut snap = small();
    snap.meta.cidr_kind = Some(Resource::SlicesV1);
    assert_eq!(
        write_to(&snap, &mut out).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
    assert!(out.is_empty(), "nothing written");
    let mut snap = small();
    let mut big = vec![b' '; MAX_OBJECT_LEN as usize + 1];
    big[0] = b'{';
    big[1] = b'}';
    snap.objects.endpoints.push(big.into());
    let err = write_to(&snap, &mut out).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(out.is_empty(), "nothing written");
}

#[test]
fn errors_read_well() {
    let cases = [
        (SnapshotError::NotASnapshot, "not a grid-wrapper snapshot"),
        (
            SnapshotError::Version { found: 7 },
            "snapshot format version 7, this binary reads 1 to 3",
        ),
        (
            SnapshotError::Truncated {
                len: 10,
                expected: Some(80),
            },
            "truncated (10 of 80 bytes)",
        ),
        (
            SnapshotError::Truncated {
                len: 3,
                expected: None,
            },
            "truncated (3 bytes, within the header)",
        ),
        (
            SnapshotError::Checksum {
                stored: 1,
                computed: 0xCBF4_3926,
            },
            "checksum mismatch (damaged): stored 00000001, computed cbf43926",
        ),
        (malformed("meta: x"), "malformed: meta: x"),
    ];
    for (e, text) in cases {
        assert_eq!(e.to_string(), text);
    }
}

/// The committed fuzz seeds are current snapshots (`GW_WRITE_SEEDS=1` rewrites them).
#[test]
fn fuzz_seeds_are_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/snapshot");
    for (name, snap) in [("empty", empty()), ("small", small())] {
        let path = dir.join(name);
        let bytes = encode(&snap);
        if std::env::var_os("GW_WRITE_SEEDS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let seed = std::fs::read(&path).unwrap();
        assert_eq!(seed, bytes, "{name}: GW_WRITE_SEEDS=1 rewrites it");
        assert_eq!(decode(&seed), Ok(snap));
    }
}
