//! Tests of `persist`: failed writes leave no `*.tmp`, a stale one is removed on open, the
//! failure bookkeeping and texts of the snapshot writer (`persist/failures.rs`), and a directory
//! others write in (`persist/files.rs`): planted links and directories, modes, a snapshot of a
//! newer format kept aside.

use std::io::{self, Write};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cache::snapshot::{self, Meta, Objects, Snapshot};
use crate::k8s::Resource;

use super::failures::{self, Ended, Failures, Previous, RETRY_CAP};
use super::files;
use super::{identity, kept_name, write_atomically, CacheDir, EPOCH_FILE, QUIET, SNAPSHOT_FILE};

/// A counter of WARN lines no test reads.
static NO_WARNINGS: AtomicU64 = AtomicU64::new(0);

/// A fresh directory for one test, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("gw-persist-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create test dir");
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn fill_with(
    bytes: &'static [u8],
) -> impl FnOnce(&mut io::BufWriter<&std::fs::File>) -> io::Result<u64> {
    move |w| {
        w.write_all(bytes)?;
        Ok(bytes.len() as u64)
    }
}

#[test]
fn a_failed_write_leaves_no_tmp_file() {
    let d = Dir::new("failed-write");
    let path = d.0.join(SNAPSHOT_FILE);

    // The rename fails: a directory stands where the snapshot file goes.
    std::fs::create_dir(&path).expect("mkdir");
    let err = write_atomically(&path, &NO_WARNINGS, fill_with(b"new snapshot"))
        .expect_err("rename fails");
    println!("rename over a directory: {err}");
    assert_eq!(names(&d.0), [SNAPSHOT_FILE], "no snapshot.tmp left behind");
    assert!(path.is_dir(), "what was there is untouched");
    std::fs::remove_dir(&path).expect("rmdir");

    // The writing fails half-way (as on a full disk), with an old snapshot in place.
    std::fs::write(&path, b"old snapshot").expect("old snapshot");
    let err = write_atomically(&path, &NO_WARNINGS, |w| {
        w.write_all(b"half of it")?;
        w.flush()?;
        Err(io::Error::other("No space left on device"))
    })
    .expect_err("fill fails");
    assert_eq!(err.to_string(), "No space left on device");
    assert_eq!(names(&d.0), [SNAPSHOT_FILE], "no snapshot.tmp left behind");
    assert_eq!(std::fs::read(&path).expect("read"), b"old snapshot");

    // A write that succeeds replaces the file and leaves nothing else.
    let n = write_atomically(&path, &NO_WARNINGS, fill_with(b"new snapshot")).expect("write");
    assert_eq!(n, 12);
    assert_eq!(names(&d.0), [SNAPSHOT_FILE]);
    assert_eq!(std::fs::read(&path).expect("read"), b"new snapshot");
}

#[test]
fn opening_the_dir_removes_a_stale_tmp_of_ours_only() {
    let d = Dir::new("stale-tmp");
    std::fs::write(d.0.join(SNAPSHOT_FILE), b"kept").expect("write");
    std::fs::write(d.0.join(format!("{SNAPSHOT_FILE}.tmp")), b"torn").expect("write");
    std::fs::write(d.0.join(format!("{EPOCH_FILE}.tmp")), b"7").expect("write");
    std::fs::write(d.0.join("other.tmp"), b"not ours").expect("write");
    CacheDir::open(&d.0, identity("edge-a1", &["https://up"], None)).expect("open");
    assert_eq!(names(&d.0), ["other.tmp", SNAPSHOT_FILE]);
    assert_eq!(
        std::fs::read(d.0.join(SNAPSHOT_FILE)).expect("read"),
        b"kept"
    );
}

#[test]
fn what_a_restart_would_find_follows_the_file_and_what_is_known_valid() {
    let d = Dir::new("previous");
    let cache = CacheDir::open(&d.0, identity("edge-a1", &["https://up"], None)).expect("open");
    assert_eq!(cache.previous(), Previous::None, "no file");
    std::fs::write(d.0.join(SNAPSHOT_FILE), b"damaged").expect("write");
    assert!(cache.load().is_none(), "the damaged file is ignored");
    assert_eq!(cache.previous(), Previous::Unusable, "a file, not loadable");
    // A clone (the writer thread's) shares what is known.
    cache.clone().set_valid(1_000);
    assert_eq!(
        cache.previous(),
        Previous::Kept {
            written_unix: 1_000
        }
    );
    std::fs::remove_file(d.0.join(SNAPSHOT_FILE)).expect("wipe");
    assert_eq!(cache.previous(), Previous::None, "wiped since");
}

#[test]
fn the_warning_says_whether_a_previous_snapshot_is_kept() {
    let dir = Path::new("/var/lib/grid-wrapper");
    let err = io::Error::from_raw_os_error(28);
    let kept = failures::failure_warning(dir, &err, Previous::Kept { written_unix: 940 }, 1_000);
    let none = failures::failure_warning(dir, &err, Previous::None, 1_000);
    let unusable = failures::failure_warning(dir, &err, Previous::Unusable, 1_000);
    for text in [&kept, &none, &unusable] {
        assert!(
            text.starts_with("cannot write the snapshot in /var/lib/grid-wrapper: "),
            "{text}"
        );
        assert!(text.contains("No space left on device"), "{text}");
        assert!(text.contains("further failures logged at DEBUG"), "{text}");
    }
    assert!(
        kept.contains(
            "the previous snapshot (written 60 s ago) is kept and is what a restart would serve"
        ),
        "{kept}"
    );
    assert!(!kept.contains("no previous snapshot"), "{kept}");
    assert!(
        none.contains("there is no previous snapshot: a restart now would start empty"),
        "{none}"
    );
    assert!(!none.contains("is kept"), "{none}");
    assert!(
        unusable.contains("no usable previous snapshot"),
        "{unusable}"
    );
    assert!(unusable.contains("would start empty"), "{unusable}");
    assert!(!unusable.contains("is kept"), "{unusable}");
}

#[test]
fn an_episode_warns_once_then_reports_its_recovery() {
    let t0 = Instant::now();
    let mut f = Failures::default();
    assert_eq!(f.succeeded(t0), None, "no episode, nothing to report");
    assert!(f.failed(t0), "the first failure warns");
    assert!(!f.failed(t0 + Duration::from_secs(2)), "a repeat does not");
    assert!(!f.failed(t0 + Duration::from_secs(6)));
    assert_eq!(f.count(), 3);
    assert_eq!(
        f.lasted(t0 + Duration::from_secs(6)),
        Duration::from_secs(6)
    );
    let ended = f.succeeded(t0 + Duration::from_secs(9));
    assert_eq!(
        ended,
        Some(Ended {
            failures: 3,
            lasted: Duration::from_secs(9)
        })
    );
    assert_eq!(f.count(), 0);
    assert_eq!(f.succeeded(t0), None, "reported once");
    assert!(f.failed(t0), "the next episode warns afresh");

    let note = failures::recovery_note(Ended {
        failures: 3,
        lasted: Duration::from_millis(9_300),
    });
    assert_eq!(
        note,
        "snapshot written again after 3 failed attempts over 9.3 s"
    );
    let one = failures::recovery_note(Ended {
        failures: 1,
        lasted: Duration::ZERO,
    });
    assert!(one.ends_with("after 1 failed attempt over 0.0 s"), "{one}");
    let repeated = failures::failure_repeated(
        "final",
        &"No space left on device",
        4,
        Duration::from_secs(12),
        Previous::None,
        1_000,
    );
    assert_eq!(
        repeated,
        "final snapshot not written: No space left on device (4 failed attempts over 12.0 s); there is no previous snapshot: a restart now would start empty"
    );
}

#[test]
fn failed_writes_are_retried_no_sooner_than_the_interval_backing_off_to_the_cap() {
    let t0 = Instant::now();
    let gaps = |min_gap: Duration, n: u32| -> Vec<u64> {
        let mut f = Failures::default();
        let mut out = vec![f.retry_gap(min_gap).as_secs()];
        for _ in 0..n {
            f.failed(t0);
            out.push(f.retry_gap(min_gap).as_secs());
        }
        out
    };
    assert_eq!(QUIET, Duration::from_secs(1));
    assert_eq!(RETRY_CAP, Duration::from_secs(300));
    // `--cache-write-interval=0`: no gap without failures; 1 s, 2 s, … 256 s, 300 s with them.
    assert_eq!(
        gaps(Duration::ZERO, 11),
        [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
    );
    // The default 30 s.
    assert_eq!(
        gaps(Duration::from_secs(30), 6),
        [30, 30, 60, 120, 240, 300, 300]
    );
    // An interval above the cap is never shortened.
    assert_eq!(gaps(Duration::from_secs(3600), 3), [3600; 4]);
    // Many failures do not overflow.
    let mut f = Failures::default();
    for _ in 0..100_000 {
        f.failed(t0);
    }
    assert_eq!(f.retry_gap(Duration::ZERO), RETRY_CAP);
    assert_eq!(
        f.retry_gap(Duration::from_secs(u64::MAX)).as_secs(),
        u64::MAX
    );
    let mut f = Failures::default();
    f.succeeded(t0);
    assert_eq!(f.retry_gap(Duration::from_secs(5)), Duration::from_secs(5));
}

/// The identity the tests' cache dirs are opened with.
fn test_identity() -> crate::cache::snapshot::Identity {
    identity("edge-a1", &["https://up"], None)
}

/// The bytes of a valid, empty snapshot of [`test_identity`] written at `written`.
fn snapshot_bytes(written: u64) -> Vec<u8> {
    snapshot::encode(&Snapshot::<std::sync::Arc<[u8]>> {
        meta: Meta {
            identity: test_identity(),
            written_unix_secs: written,
            rv: 7,
            slice_kind: Resource::SlicesV1,
            cidr_kind: None,
        },
        objects: Objects::default(),
    })
}

/// `bytes` claiming format `version` (the version is checked before the checksum).
fn with_version(mut bytes: Vec<u8>, version: u32) -> Vec<u8> {
    bytes[8..12].copy_from_slice(&version.to_le_bytes());
    bytes
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .expect("stat")
        .permissions()
        .mode()
        & 0o7777
}

fn warnings(cache: &CacheDir) -> u64 {
    cache.warnings().load(Ordering::Relaxed)
}

#[test]
fn a_symlink_planted_at_a_tmp_name_is_never_written_through() {
    let d = Dir::new("planted-links");
    let cache_dir = d.0.join("cache");
    let victims = d.0.join("victims");
    std::fs::create_dir_all(&victims).expect("mkdir");
    let (snap_victim, epoch_victim) = (victims.join("a"), victims.join("b"));
    std::fs::write(&snap_victim, b"precious a").expect("write");
    std::fs::write(&epoch_victim, b"precious b").expect("write");
    let cache = CacheDir::open(&cache_dir, test_identity()).expect("open");
    let plant = || {
        symlink(&snap_victim, cache_dir.join("snapshot.tmp")).expect("symlink");
        symlink(&epoch_victim, cache_dir.join("epoch.tmp")).expect("symlink");
    };

    // Planted while the process runs: its next writes meet them.
    plant();
    let epoch = cache.next_epoch(None);
    write_atomically(
        &cache_dir.join(SNAPSHOT_FILE),
        cache.warnings(),
        fill_with(b"new snapshot"),
    )
    .expect("write");
    assert_eq!(std::fs::read(&snap_victim).expect("read"), b"precious a");
    assert_eq!(std::fs::read(&epoch_victim).expect("read"), b"precious b");
    assert_eq!(warnings(&cache), 2, "one WARN per planted link");
    assert_eq!(names(&cache_dir), [EPOCH_FILE, SNAPSHOT_FILE]);
    for name in [EPOCH_FILE, SNAPSHOT_FILE] {
        let meta = std::fs::symlink_metadata(cache_dir.join(name)).expect("stat");
        assert!(meta.is_file(), "{name} is a file of its own, not the link");
    }
    assert_eq!(
        std::fs::read_to_string(cache_dir.join(EPOCH_FILE)).expect("read"),
        format!("{epoch}\n")
    );

    // Planted before a start: removed when the directory is opened, never followed.
    plant();
    let reopened = CacheDir::open(&cache_dir, test_identity()).expect("open");
    assert_eq!(warnings(&reopened), 2, "one WARN per planted link");
    assert_eq!(names(&cache_dir), [EPOCH_FILE, SNAPSHOT_FILE]);
    reopened.next_epoch(None);
    assert_eq!(std::fs::read(&snap_victim).expect("read"), b"precious a");
    assert_eq!(std::fs::read(&epoch_victim).expect("read"), b"precious b");
}

#[test]
fn a_directory_planted_at_a_tmp_name_is_refused_and_nothing_is_written_into_it() {
    let d = Dir::new("planted-dir");
    let tmp = d.0.join("snapshot.tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    std::fs::write(tmp.join("inside"), b"theirs").expect("write");
    std::fs::write(d.0.join(SNAPSHOT_FILE), b"old snapshot").expect("write");
    let cache = CacheDir::open(&d.0, test_identity()).expect("open");
    assert_eq!(warnings(&cache), 1, "the directory is warned about at open");
    let err = write_atomically(
        &d.0.join(SNAPSHOT_FILE),
        cache.warnings(),
        fill_with(b"new snapshot"),
    )
    .expect_err("refused");
    assert!(
        err.to_string()
            .contains("snapshot.tmp is a directory, not a file grid-wrapper wrote: remove it"),
        "{err}"
    );
    assert_eq!(names(&tmp), ["inside"], "nothing written into it");
    assert_eq!(std::fs::read(tmp.join("inside")).expect("read"), b"theirs");
    assert_eq!(
        std::fs::read(d.0.join(SNAPSHOT_FILE)).expect("read"),
        b"old snapshot"
    );
}

#[test]
fn the_dir_is_created_0700_and_the_files_0600_and_an_old_0644_snapshot_is_narrowed() {
    let d = Dir::new("modes");
    let cache_dir = d.0.join("new").join("cache");
    let cache = CacheDir::open(&cache_dir, test_identity()).expect("open");
    assert_eq!(mode(&cache_dir), 0o700);
    assert_eq!(warnings(&cache), 0, "a 0700 directory is not warned about");
    cache.next_epoch(None);
    write_atomically(
        &cache_dir.join(SNAPSHOT_FILE),
        cache.warnings(),
        fill_with(b"new snapshot"),
    )
    .expect("write");
    assert_eq!(mode(&cache_dir.join(EPOCH_FILE)), 0o600);
    assert_eq!(mode(&cache_dir.join(SNAPSHOT_FILE)), 0o600);

    // A snapshot written 0644 (by an older binary) is narrowed when it is read.
    let path = cache_dir.join(SNAPSHOT_FILE);
    std::fs::write(&path, snapshot_bytes(1_000)).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert!(cache.load().is_some(), "a valid snapshot of ours");
    assert_eq!(mode(&path), 0o600);
}

#[test]
fn a_dir_others_can_write_to_is_warned_about_once() {
    let d = Dir::new("open-dir");
    std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let cache = CacheDir::open(&d.0, test_identity()).expect("open");
    assert_eq!(warnings(&cache), 1);
    let dir = Path::new("/var/lib/grid-wrapper");
    for quiet in [0o700, 0o755, 0o750, 0o1755] {
        assert_eq!(files::open_to_others(dir, quiet), None, "{quiet:o}");
    }
    for loud in [0o770, 0o707, 0o777, 0o1777, 0o40775] {
        let text = files::open_to_others(dir, loud).expect("a warning");
        assert!(
            text.contains(&format!("has mode {:04o}", loud & 0o7777)),
            "{text}"
        );
        assert!(text.contains("chmod 0700 /var/lib/grid-wrapper"), "{text}");
    }
}

#[test]
fn a_symlink_at_the_snapshot_or_epoch_name_is_not_read_through() {
    let d = Dir::new("link-read");
    let cache_dir = d.0.join("cache");
    let cache = CacheDir::open(&cache_dir, test_identity()).expect("open");
    let elsewhere = d.0.join("elsewhere");
    std::fs::write(&elsewhere, snapshot_bytes(1_000)).expect("write");
    symlink(&elsewhere, cache_dir.join(SNAPSHOT_FILE)).expect("symlink");
    assert!(cache.load().is_none(), "not read through the link");
    assert_eq!(warnings(&cache), 1);

    let epoch_elsewhere = d.0.join("epoch-elsewhere");
    std::fs::write(&epoch_elsewhere, b"41\n").expect("write");
    symlink(&epoch_elsewhere, cache_dir.join(EPOCH_FILE)).expect("symlink");
    cache.next_epoch(None);
    assert_eq!(warnings(&cache), 2);
    let meta = std::fs::symlink_metadata(cache_dir.join(EPOCH_FILE)).expect("stat");
    assert!(meta.is_file(), "the write replaced the link");
    assert_eq!(std::fs::read(&epoch_elsewhere).expect("read"), b"41\n");
    // The same bytes as a file of its own are read.
    std::fs::remove_file(cache_dir.join(SNAPSHOT_FILE)).expect("rm");
    std::fs::copy(&elsewhere, cache_dir.join(SNAPSHOT_FILE)).expect("copy");
    assert!(cache.load().is_some());
}

#[test]
fn a_snapshot_of_a_newer_format_is_kept_aside_not_overwritten() {
    let d = Dir::new("newer");
    let path = d.0.join(SNAPSHOT_FILE);
    let newer = with_version(snapshot_bytes(1_000), 4);
    std::fs::write(&path, &newer).expect("write");
    let cache = CacheDir::open(&d.0, test_identity()).expect("open");
    assert!(cache.load().is_none(), "this binary cannot read it");
    assert_eq!(warnings(&cache), 1, "one WARN");
    assert_eq!(names(&d.0), [kept_name(4)]);
    assert_eq!(std::fs::read(d.0.join(kept_name(4))).expect("read"), newer);
    // This binary's writes leave it alone.
    write_atomically(&path, cache.warnings(), fill_with(b"ours")).expect("write");
    assert_eq!(std::fs::read(d.0.join(kept_name(4))).expect("read"), newer);

    // Another rollback from version 4: the newer copy replaces the older (one per version).
    let newest = with_version(snapshot_bytes(2_000), 4);
    std::fs::write(&path, &newest).expect("write");
    assert!(cache.load().is_none());
    assert_eq!(warnings(&cache), 2);
    assert_eq!(names(&d.0), [kept_name(4)]);
    assert_eq!(std::fs::read(d.0.join(kept_name(4))).expect("read"), newest);

    // An older unknown version is not ours to keep: ignored, as damage is.
    std::fs::write(&path, with_version(snapshot_bytes(1_000), 0)).expect("write");
    assert!(cache.load().is_none());
    assert_eq!(names(&d.0), [SNAPSHOT_FILE, &kept_name(4)]);
}

#[test]
fn a_snapshot_of_this_format_kept_aside_is_restored_when_there_is_none() {
    let d = Dir::new("restore-kept");
    let bytes = snapshot_bytes(1_000);
    let kept = d.0.join(kept_name(snapshot::FORMAT_VERSION));
    std::fs::write(&kept, &bytes).expect("write");
    let cache = CacheDir::open(&d.0, test_identity()).expect("open");
    let snap = cache.load().expect("restored");
    assert_eq!(snap.meta.written_unix_secs, 1_000);
    assert_eq!(names(&d.0), [SNAPSHOT_FILE]);
    assert_eq!(std::fs::read(d.0.join(SNAPSHOT_FILE)).expect("read"), bytes);
    assert_eq!(
        cache.previous(),
        Previous::Kept {
            written_unix: 1_000
        }
    );

    // With a snapshot in place (written since the rollback), the kept copy is not read.
    std::fs::write(&kept, snapshot_bytes(500)).expect("write");
    let snap = cache.load().expect("loaded");
    assert_eq!(snap.meta.written_unix_secs, 1_000, "the current one");
}
