//! Tests of `persist`: failed writes leave no `*.tmp`, a stale one is removed on open, and the
//! failure bookkeeping and texts of the snapshot writer (`persist/failures.rs`).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::failures::{self, Ended, Failures, Previous, RETRY_CAP};
use super::{identity, write_atomically, CacheDir, EPOCH_FILE, QUIET, SNAPSHOT_FILE};

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
    let err = write_atomically(&path, fill_with(b"new snapshot")).expect_err("rename fails");
    println!("rename over a directory: {err}");
    assert_eq!(names(&d.0), [SNAPSHOT_FILE], "no snapshot.tmp left behind");
    assert!(path.is_dir(), "what was there is untouched");
    std::fs::remove_dir(&path).expect("rmdir");

    // The writing fails half-way (as on a full disk), with an old snapshot in place.
    std::fs::write(&path, b"old snapshot").expect("old snapshot");
    let err = write_atomically(&path, |w| {
        w.write_all(b"half of it")?;
        w.flush()?;
        Err(io::Error::other("No space left on device"))
    })
    .expect_err("fill fails");
    assert_eq!(err.to_string(), "No space left on device");
    assert_eq!(names(&d.0), [SNAPSHOT_FILE], "no snapshot.tmp left behind");
    assert_eq!(std::fs::read(&path).expect("read"), b"old snapshot");

    // A write that succeeds replaces the file and leaves nothing else.
    let n = write_atomically(&path, fill_with(b"new snapshot")).expect("write");
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
