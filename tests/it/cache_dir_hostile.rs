//! `--cache-dir` written to by someone else (issue 43): symbolic links planted at the `*.tmp`
//! names are never written through (the files they point at stay as they were, one WARN each),
//! the directory grid-wrapper creates is 0700 and its files 0600, a directory others may write
//! to is warned about, and a snapshot of a newer format (a rollback) is kept aside, not
//! overwritten. Against the real binaries.

use crate::common;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use common::autonomy::{self, cache_flags};
use common::{wait_for, Sim, TempDir};
use serde_json::json;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn cache_dir_planted_links_are_never_followed_and_the_files_are_private() {
    let root = TempDir::new("cache-hostile");
    let dir = root.path.join("cache");
    let (victim_snap, victim_epoch) = (root.path.join("victim-a"), root.path.join("victim-b"));
    std::fs::write(&victim_snap, b"precious a").expect("write");
    std::fs::write(&victim_epoch, b"precious b").expect("write");
    let flags = cache_flags(&dir.display().to_string());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let sim = Sim::start(&[]);

    let (w, log) = autonomy::start(&sim.url, "edge-a1", &flags);
    w.wait_ready();
    autonomy::wait_snapshot_writes(&w, 1);
    assert_eq!(mode(&dir), 0o700, "the directory grid-wrapper created");
    assert_eq!(mode(&dir.join("snapshot")), 0o600);
    assert_eq!(mode(&dir.join("epoch")), 0o600);

    // Planted while it runs: the next snapshot write meets it.
    symlink(&victim_snap, dir.join("snapshot.tmp")).expect("symlink");
    sim.label_node("edge-a2", json!({"zone": "zone-b"}));
    autonomy::wait_snapshot_writes(&w, 2);
    assert!(
        std::fs::read(&victim_snap).expect("read") == b"precious a",
        "victim_snap was written"
    );
    let text = log.wait_for_text("snapshot.tmp: a symbolic link to", Duration::from_secs(5));
    assert_eq!(text.matches("not followed").count(), 1, "{text}");
    assert!(std::fs::symlink_metadata(dir.join("snapshot"))
        .expect("stat")
        .is_file());
    assert_eq!(
        autonomy::metric(&w, "grid_wrapper_cache_dir_warnings_total"),
        Some(1.0)
    );
    autonomy::signal(&w, "TERM");
    let mut w = w;
    assert!(autonomy::wait_exit(&mut w, Duration::from_secs(10)).is_some());
    drop(w);

    // Planted before a start, in a directory others may write to.
    symlink(&victim_snap, dir.join("snapshot.tmp")).expect("symlink");
    symlink(&victim_epoch, dir.join("epoch.tmp")).expect("symlink");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let (w, log) = autonomy::start(&sim.url, "edge-a1", &flags);
    w.wait_ready();
    sim.label_node("edge-a2", json!({"zone": "zone-c"}));
    autonomy::wait_snapshot_writes(&w, 1);
    assert!(
        std::fs::read(&victim_snap).expect("read") == b"precious a",
        "victim_snap was written"
    );
    assert!(
        std::fs::read(&victim_epoch).expect("read") == b"precious b",
        "victim_epoch was written"
    );
    let text = log.wait_for_text("has mode 0777", Duration::from_secs(5));
    assert_eq!(text.matches("not followed").count(), 2, "{text}");
    assert_eq!(
        autonomy::metric(&w, "grid_wrapper_cache_dir_warnings_total"),
        Some(3.0)
    );
}

#[test]
fn cache_dir_snapshot_of_a_newer_format_is_kept_aside_not_overwritten() {
    let dir = TempDir::new("cache-newer");
    let flags = cache_flags(&dir.path.display().to_string());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let sim = Sim::start(&[]);
    let (w, _log) = autonomy::start(&sim.url, "edge-a1", &flags);
    w.wait_ready();
    autonomy::wait_snapshot_writes(&w, 1);
    autonomy::signal(&w, "TERM");
    let mut w = w;
    assert!(autonomy::wait_exit(&mut w, Duration::from_secs(10)).is_some());
    drop(w);

    // As a later grid-wrapper (format version 4) would have left it before a rollback.
    let path = dir.path.join("snapshot");
    let mut newer = std::fs::read(&path).expect("read");
    newer[8..12].copy_from_slice(&4u32.to_le_bytes());
    std::fs::write(&path, &newer).expect("write");

    let (w, log) = autonomy::start(&sim.url, "edge-a1", &flags);
    w.wait_ready();
    autonomy::wait_snapshot_writes(&w, 1);
    let kept = dir.path.join("snapshot.v4");
    assert_eq!(std::fs::read(&kept).expect("kept aside"), newer);
    let text = log.wait_for_text("newer than this binary's 3", Duration::from_secs(20));
    assert_eq!(
        text.matches("newer than this binary's 3").count(),
        1,
        "{text}"
    );
    assert!(text.contains("moved to"), "{text}");
    wait_for("this binary's own snapshot", || {
        std::fs::read(&path).is_ok_and(|b| b.get(8..12) == Some(&3u32.to_le_bytes()[..]))
    });
    assert_eq!(std::fs::read(&kept).expect("still kept"), newer);
}
