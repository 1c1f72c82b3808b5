//! `--cache-dir` (I/O shell): the crash-safe snapshot file, the RV-epoch file, and the writer
//! thread that keeps the snapshot current without ever holding up the event loop.
//!
//! Files in the directory:
//!
//! | file | what | written |
//! |---|---|---|
//! | `snapshot` | [`crate::cache::snapshot`] format: every cached upstream object, the slice version, the RV high-water mark, identity; format version + CRC-32 | debounced after changes (at most once per `--cache-write-interval`), and on shutdown |
//! | `epoch` | the RV epoch of the last process, decimal | once at startup, before any RV is handed out |
//!
//! Every write is: a new file beside the old one (`*.tmp`), `fsync`, `rename` over the old one,
//! `fsync` of the directory. A crash leaves either the old or the new file, never a mix; a
//! damaged file is detected by the format's version and checksum and ignored with one WARN. A
//! write that fails (a full disk: `ENOSPC`) removes its `*.tmp` and leaves the old file as it
//! was; a `*.tmp` left by a crash is removed when the directory is opened (one INFO line).
//!
//! Others may write in the directory (`persist/files.rs`): it is created 0700 and its files
//! 0600 (one WARN at startup if group or others may write to it); a `*.tmp` is created new,
//! after whatever stood at its name was removed, so a symbolic link planted there is never
//! written through; `snapshot` and `epoch` are read only when they are regular files (a
//! symbolic link there is ignored, and replaced by the next write). Each such finding is one
//! WARN, counted in `grid_wrapper_cache_dir_warnings_total`.
//!
//! A snapshot of a newer format (a binary rolled back) is moved to `snapshot.v<N>` (one kept
//! per version, a newer copy replacing an older) rather than overwritten by this binary's
//! writes; with no `snapshot`, a `snapshot.v<N>` of this binary's format is restored.
//!
//! A failing snapshot writer logs one WARN per failure episode, saying whether a previous
//! snapshot is kept or there is none, later failures at DEBUG, and one INFO line when a write
//! succeeds again; it retries no sooner than `--cache-write-interval`, backing off up to five
//! minutes (the bookkeeping is pure: `persist/failures.rs`).
//!
//! A snapshot is tied to its node and upstream ([`identity`]): `--hostname`, the set of the
//! upstream's server URLs (in any order) and a fingerprint of the upstream CA. A process of
//! another node or CA, or whose servers share none with the snapshot's, ignores it (one WARN) and
//! starts empty, so changing `--hostname` or pointing at another cluster never serves foreign
//! data; wiping the directory simply means an empty start (`persist/identity.rs`).

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use log::{debug, info, warn};

use crate::cache::epoch;
use crate::cache::snapshot::{self, Identity, Meta, Snapshot, SnapshotError};
use crate::clock::unix_now;
use crate::sync::lock;
use crate::writer::{Busy, WriterHandle};

mod failures;
use failures::{Failures, Previous};
mod files;
use files::{Cleared, Found};
mod identity;
pub use identity::identity;

#[cfg(test)]
#[path = "persist_tests.rs"]
mod tests;

/// The snapshot file's name in `--cache-dir`.
pub const SNAPSHOT_FILE: &str = "snapshot";
/// The epoch file's name in `--cache-dir`.
pub const EPOCH_FILE: &str = "epoch";
/// A change is written once the cache has been quiet this long…
pub const QUIET: Duration = Duration::from_secs(1);
/// …or this long after the change at the latest (a steady trickle of changes).
pub const MAX_DELAY: Duration = Duration::from_secs(5);
/// How often the writer, holding a change, asks whether the upstream was lost meanwhile.
const LOSS_CHECK: Duration = Duration::from_secs(1);
/// Largest snapshot file read (a larger one is not ours).
const MAX_FILE_BYTES: u64 = 4 << 30;

/// The temporary file a write of `path` goes through: `path.tmp`.
fn tmp_path(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    PathBuf::from(tmp)
}

/// The name a snapshot of format `version` (newer than this binary's) is kept aside under.
pub fn kept_name(version: u32) -> String {
    format!("{SNAPSHOT_FILE}.v{version}")
}

/// Writes `path` crash-safely: `path.tmp` (created new, 0600, never through a symbolic link:
/// `persist/files.rs`), fsync, rename, fsync the directory. On any failure `path.tmp` is
/// removed (a full disk would otherwise keep a partial copy there) and `path` is as it was,
/// unless only the directory's fsync failed (then it is the new file). Something other than a
/// regular file found at `path.tmp` is one WARN, counted in `warnings`.
fn write_atomically(
    path: &Path,
    warnings: &AtomicU64,
    fill: impl FnOnce(&mut io::BufWriter<&File>) -> io::Result<u64>,
) -> io::Result<u64> {
    let tmp = tmp_path(path);
    let result = write_and_rename(path, &tmp, warnings, fill);
    if result.is_err() {
        // Only a regular file can be ours: whatever else stands there now is left alone.
        if fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_file()) {
            if let Err(e) = fs::remove_file(&tmp) {
                debug!("cannot remove {}: {e}", tmp.display());
            }
        }
    }
    result
}

fn write_and_rename(
    path: &Path,
    tmp: &Path,
    warnings: &AtomicU64,
    fill: impl FnOnce(&mut io::BufWriter<&File>) -> io::Result<u64>,
) -> io::Result<u64> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let (file, cleared) = files::create_tmp(tmp)?;
    if let Cleared::Foreign(what) = cleared {
        warn_foreign_tmp(tmp, &what, dir, warnings);
    }
    let written = {
        let mut w = io::BufWriter::with_capacity(256 << 10, &file);
        let n = fill(&mut w)?;
        w.flush()?;
        n
    };
    file.sync_all()?;
    drop(file);
    fs::rename(tmp, path)?;
    File::open(dir)?.sync_all()?;
    Ok(written)
}

/// The WARN about `what` (not a regular file), found at `tmp` in `dir` and removed.
fn warn_foreign_tmp(tmp: &Path, what: &str, dir: &Path, warnings: &AtomicU64) {
    warnings.fetch_add(1, Ordering::Relaxed);
    warn!(
        "removed {}: {what}, not a file grid-wrapper wrote (not followed); someone else writes in {}",
        tmp.display(),
        dir.display()
    );
}

/// Removes the `*.tmp` files of the writes in `dir` (left by a crash or a power cut during a
/// write): one INFO line naming them. Anything else at those names is never followed: a
/// symbolic link or a special file is removed, a directory left (its writes will fail, naming
/// it), each with one WARN counted in `warnings`.
fn remove_stale_tmps(dir: &Path, warnings: &AtomicU64) {
    let mut removed = Vec::new();
    for name in [SNAPSHOT_FILE, EPOCH_FILE] {
        let tmp = tmp_path(&dir.join(name));
        match files::clear(&tmp) {
            Ok(Cleared::Nothing) => {}
            Ok(Cleared::File(len)) => removed.push(format!("{name}.tmp ({len} bytes)")),
            Ok(Cleared::Foreign(what)) => warn_foreign_tmp(&tmp, &what, dir, warnings),
            Err(e) => {
                warnings.fetch_add(1, Ordering::Relaxed);
                warn!("cannot remove the stale {}: {e}", tmp.display());
            }
        }
    }
    if !removed.is_empty() {
        info!(
            "removed {} from {}: left by a write that was interrupted",
            removed.join(" and "),
            dir.display()
        );
    }
}

/// The opened `--cache-dir`.
#[derive(Clone, Debug)]
pub struct CacheDir {
    dir: PathBuf,
    identity: Identity,
    /// `written_unix_secs` of the snapshot file known to be valid: loaded at startup or written
    /// since (shared by the clones). `None`: no valid one is known.
    valid: Arc<Mutex<Option<u64>>>,
    /// WARN lines about what was found in the directory (shared by the clones; `/metrics`).
    warnings: Arc<AtomicU64>,
}

/// What [`CacheDir::read_regular`] found.
#[derive(Debug)]
enum Contents {
    /// No file.
    Missing,
    /// The file's bytes.
    Bytes(Vec<u8>),
    /// Something else, or a file that could not be read (logged).
    Ignored,
}

/// What [`CacheDir::read_snapshot`] found.
#[derive(Debug)]
enum SnapshotFile {
    /// No file.
    Missing,
    /// A snapshot (of any identity).
    Decoded(Snapshot),
    /// Something else (logged).
    Ignored,
}

/// One snapshot write, for logs, metrics and benchmarks.
#[derive(Clone, Copy, Debug, Default)]
pub struct Written {
    /// File size.
    pub bytes: u64,
    /// Objects in it.
    pub objects: usize,
    /// Time to get the objects from the cache's writer (waiting for it, then pointer copies).
    pub taken: Duration,
    /// Encoding, writing and syncing (off the lock).
    pub write: Duration,
}

impl CacheDir {
    /// Creates the directory if needed (0700), warns once if others may write to it, and
    /// removes a `*.tmp` left by an interrupted write.
    pub fn open(dir: &Path, identity: Identity) -> io::Result<CacheDir> {
        let meta = files::create_dir(dir)?;
        let warnings = Arc::new(AtomicU64::new(0));
        if let Some(text) = files::open_to_others(dir, meta.mode()) {
            warnings.fetch_add(1, Ordering::Relaxed);
            warn!("{text}");
        }
        remove_stale_tmps(dir, &warnings);
        Ok(CacheDir {
            dir: dir.to_path_buf(),
            identity,
            valid: Arc::new(Mutex::new(None)),
            warnings,
        })
    }

    /// WARN lines so far about what was found in the directory (a name of ours held by a
    /// symbolic link, a directory or a special file; the directory open to others; a snapshot
    /// of a newer format kept aside).
    pub fn warnings(&self) -> &Arc<AtomicU64> {
        &self.warnings
    }

    fn warn(&self, text: &str) {
        self.warnings.fetch_add(1, Ordering::Relaxed);
        warn!("{text}");
    }

    fn set_valid(&self, written_unix: u64) {
        *lock(&self.valid) = Some(written_unix);
    }

    /// What a restart would find: the snapshot file as loaded or last written, if it is still
    /// there.
    fn previous(&self) -> Previous {
        match fs::symlink_metadata(self.dir.join(SNAPSHOT_FILE)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Previous::None,
            _ => match *lock(&self.valid) {
                Some(written_unix) => Previous::Kept { written_unix },
                None => Previous::Unusable,
            },
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// This process's RV epoch: one above the last process's (and above the snapshot's, if
    /// given), recorded before any RV is handed out. A missing or unreadable file, or a write
    /// that fails, falls back to a random epoch (logged).
    pub fn next_epoch(&self, snapshot_rv: Option<u64>) -> u64 {
        let path = self.dir.join(EPOCH_FILE);
        let last = match self.read_regular(&path, 64, "the RV epoch file") {
            Contents::Bytes(b) => std::str::from_utf8(&b)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok()),
            Contents::Missing | Contents::Ignored => None,
        };
        let last = last.max(snapshot_rv.map(epoch::epoch_of));
        let next = match last {
            Some(e) => epoch::next(e),
            None => random_epoch(),
        };
        let written = write_atomically(&path, &self.warnings, |w| {
            w.write_all(format!("{next}\n").as_bytes())?;
            Ok(0)
        });
        if let Err(e) = written {
            warn!(
                "cannot record the RV epoch in {}: {e}; using a random epoch",
                path.display()
            );
            return random_epoch();
        }
        next
    }

    /// The snapshot, if there is a valid one of this identity. Anything else is one WARN line
    /// (or one INFO line when there is simply no file) and `None`. A snapshot of a newer format
    /// (a rollback) is moved to [`kept_name`] first, so that this binary's writes do not
    /// replace it; with no `snapshot`, one this binary's format kept aside by an older binary
    /// is restored.
    pub fn load(&self) -> Option<Snapshot> {
        let path = self.dir.join(SNAPSHOT_FILE);
        match self.read_snapshot(&path, true) {
            SnapshotFile::Missing => self.load_kept(&path),
            SnapshotFile::Decoded(snap) => self.accept(snap, &path),
            SnapshotFile::Ignored => None,
        }
    }

    /// The snapshot of this binary's format that an older binary kept aside, restored to
    /// `path` if it is valid and of this identity; otherwise as [`CacheDir::load`] says.
    fn load_kept(&self, path: &Path) -> Option<Snapshot> {
        let kept = self.dir.join(kept_name(snapshot::FORMAT_VERSION));
        let snap = match self.read_snapshot(&kept, false) {
            SnapshotFile::Missing => {
                info!("no snapshot in {}: starting empty", self.dir.display());
                return None;
            }
            SnapshotFile::Decoded(snap) => snap,
            SnapshotFile::Ignored => return None,
        };
        let snap = self.accept(snap, &kept)?;
        match fs::rename(&kept, path) {
            Ok(()) => info!(
                "restored the snapshot {} (kept aside by an older binary, which could not read this format) as {}",
                kept.display(),
                path.display()
            ),
            Err(e) => warn!(
                "serving the snapshot {} kept aside by an older binary, but cannot move it back to {}: {e}",
                kept.display(),
                path.display()
            ),
        }
        Some(snap)
    }

    /// The snapshot file at `path`, decoded; anything else is one WARN and
    /// [`SnapshotFile::Ignored`] (with `keep_newer`, a snapshot of a newer format is first kept
    /// aside).
    fn read_snapshot(&self, path: &Path, keep_newer: bool) -> SnapshotFile {
        let bytes = match self.read_regular(path, MAX_FILE_BYTES, "the snapshot") {
            Contents::Bytes(bytes) => bytes,
            Contents::Missing => return SnapshotFile::Missing,
            Contents::Ignored => return SnapshotFile::Ignored,
        };
        match snapshot::decode(&bytes) {
            Ok(snap) => SnapshotFile::Decoded(snap),
            Err(SnapshotError::Version { found })
                if keep_newer && found > snapshot::FORMAT_VERSION =>
            {
                self.keep_aside(path, found);
                SnapshotFile::Ignored
            }
            Err(e) => {
                warn!("ignoring the snapshot {}: {e}", path.display());
                SnapshotFile::Ignored
            }
        }
    }

    /// Moves the snapshot of a newer format `version` at `path` to [`kept_name`], replacing a
    /// copy of that version kept before (one per version), with one WARN either way.
    fn keep_aside(&self, path: &Path, version: u32) {
        let kept = self.dir.join(kept_name(version));
        let replaced = fs::symlink_metadata(&kept).is_ok();
        let why = format!(
            "ignoring the snapshot {}: format version {version}, newer than this binary's {} (a rollback?)",
            path.display(),
            snapshot::FORMAT_VERSION
        );
        match fs::rename(path, &kept) {
            Ok(()) => self.warn(&format!(
                "{why}; moved to {}{} so that this binary's snapshots do not replace it: a binary that reads version {version} restores it when there is no snapshot, and this one starts empty",
                kept.display(),
                if replaced {
                    ", replacing the older copy kept there"
                } else {
                    ""
                }
            )),
            Err(e) => self.warn(&format!(
                "{why}; cannot move it to {}: {e}, so this binary's next snapshot replaces it",
                kept.display()
            )),
        }
    }

    /// The bytes of the regular file at `path` (at most `max`; `what` it is, for the log),
    /// never read through a symbolic link: a file others may read is narrowed to 0600 first;
    /// anything but a regular file is one WARN, and so is a read error.
    fn read_regular(&self, path: &Path, max: u64, what: &str) -> Contents {
        let (file, meta) = match files::open_regular(path) {
            Ok(Found::Missing) => return Contents::Missing,
            Ok(Found::File(file, meta)) => (file, meta),
            Ok(Found::Foreign(it)) => {
                self.warn(&format!(
                    "ignoring {what} {}: {it}, not a file grid-wrapper wrote (not followed; its next write replaces the name); someone else writes in {}",
                    path.display(),
                    self.dir.display()
                ));
                return Contents::Ignored;
            }
            Err(e) => {
                warn!("ignoring {what} {}: {e}", path.display());
                return Contents::Ignored;
            }
        };
        match files::tighten(&file, &meta) {
            Ok(None) => {}
            Ok(Some(mode)) => info!(
                "{} had mode {mode:04o}: now {:04o}, as grid-wrapper writes its files",
                path.display(),
                files::FILE_MODE
            ),
            Err(e) => self.warn(&format!(
                "{} has mode {:04o}, readable by others, and cannot be narrowed: {e}",
                path.display(),
                meta.mode() & 0o7777
            )),
        }
        match read_capped(file, meta.len(), max) {
            Ok(bytes) => Contents::Bytes(bytes),
            Err(e) => {
                warn!("ignoring {what} {}: {e}", path.display());
                Contents::Ignored
            }
        }
    }

    /// `snap`, read from `path`, if this process may serve it (its identity).
    fn accept(&self, snap: Snapshot, path: &Path) -> Option<Snapshot> {
        let theirs = &snap.meta.identity;
        if !identity::accepts(&self.identity, theirs) {
            warn!(
                "ignoring the snapshot {}: written for node {:?} and upstream {:?}, this process is node {:?} with upstream {:?}",
                path.display(),
                theirs.hostname,
                theirs.upstream,
                self.identity.hostname,
                self.identity.upstream
            );
            return None;
        }
        if theirs.upstream != self.identity.upstream {
            info!(
                "restoring the snapshot {} written for upstream {:?}: this process's {:?} shares a server with it (the same cluster)",
                path.display(),
                theirs.upstream,
                self.identity.upstream
            );
        }
        self.set_valid(snap.meta.written_unix_secs);
        Some(snap)
    }

    /// Asks the cache's writer for its objects (pointer copies, taken between two changes) and
    /// writes them on this thread. `Ok(None)`: the cache is not ready (nothing worth keeping).
    pub fn save(&self, writer: &WriterHandle) -> io::Result<Option<Written>> {
        let start = Instant::now();
        let identity = self.identity.clone();
        let taken = writer.ask(move |state| {
            state.is_ready().then(|| Snapshot {
                meta: Meta {
                    identity,
                    written_unix_secs: unix_now(),
                    rv: state.current_rv(),
                    slice_kind: state.slice_kind(),
                    cidr_kind: state.cidr_kind(),
                },
                objects: state.export(),
            })
        });
        let snap = match taken {
            Ok(Some(snap)) => snap,
            Ok(None) => return Ok(None),
            Err(Busy) => return Err(io::Error::other("the cache's writer is gone")),
        };
        let taken = start.elapsed();
        let path = self.dir.join(SNAPSHOT_FILE);
        let bytes = write_atomically(&path, &self.warnings, |w| snapshot::write_to(&snap, w))?;
        self.set_valid(snap.meta.written_unix_secs);
        Ok(Some(Written {
            bytes,
            objects: snap.objects.len(),
            taken,
            write: start.elapsed() - taken,
        }))
    }
}

/// The bytes of `file` (`len` by its metadata), refused above `max`.
fn read_capped(file: File, len: u64, max: u64) -> io::Result<Vec<u8>> {
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{len} bytes is larger than any such file"),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// A random epoch (std's per-process random hash keys, mixed with time and pid).
pub fn random_epoch() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    epoch::from_random(h.finish())
}

/// Statistics of the writer, for `/metrics`.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Snapshots written.
    pub writes: AtomicU64,
    /// Failed writes.
    pub failures: AtomicU64,
    /// Unix seconds of the last successful write (0 = never).
    pub last_write_unix: AtomicU64,
    /// Size of the last snapshot written.
    pub last_bytes: AtomicU64,
    /// Milliseconds the last write took (encode + write + fsync).
    pub last_write_ms: AtomicU64,
    /// Unix seconds of the oldest change no snapshot holds yet (0 = every change is written):
    /// what tells a snapshot that is behind from one that is old because nothing changed.
    pub unsaved_since_unix: AtomicU64,
    /// WARN lines about what was found in the directory ([`CacheDir::warnings`]).
    pub dir_warnings: Arc<AtomicU64>,
}

impl WriterStats {
    /// A change came: from now on (if none was pending) a snapshot is behind.
    fn note_change(&self) {
        let _ = self.unsaved_since_unix.compare_exchange(
            0,
            unix_now().max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The pending changes are being written: whatever comes from here on is pending anew.
    /// Returns when the taken ones began to pend, for [`WriterStats::untake`].
    fn take_unsaved(&self) -> u64 {
        self.unsaved_since_unix.swap(0, Ordering::Relaxed)
    }

    /// The write of changes pending since `since` did not happen: they pend again, from then
    /// (older than any change that came meanwhile).
    fn untake(&self, since: u64) {
        if since != 0 {
            let _ =
                self.unsaved_since_unix
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                        Some(if now == 0 { since } else { now.min(since) })
                    });
        }
    }
}

#[derive(Debug, Default)]
struct Pending {
    dirty: bool,
    since: Option<Instant>,
    last_change: Option<Instant>,
    stop: bool,
}

/// The writer thread's handle: [`SnapshotWriter::changed`] after every applied change,
/// [`SnapshotWriter::finish`] at shutdown.
#[derive(Debug)]
pub struct SnapshotWriter {
    pending: Arc<(Mutex<Pending>, Condvar)>,
    /// The thread; it returns its failure bookkeeping when it stops, for the final write.
    thread: Mutex<Option<JoinHandle<Failures>>>,
    /// Counters for `/metrics`.
    pub stats: Arc<WriterStats>,
}

impl SnapshotWriter {
    /// Starts the writer: after a change it waits for [`QUIET`] (at most [`MAX_DELAY`]), and
    /// for `min_gap` since its last write, then writes a snapshot if the cache is ready. After a
    /// failed write it waits at least as long, backing off while the writes keep failing.
    ///
    /// While `upstream_lost` says the upstream cannot be reached, a change is written as soon as
    /// it settled, without waiting for `min_gap`: an offline restart is what the snapshot is
    /// for, and it would otherwise serve a state older than what kube-proxy already programmed
    /// (docs/SEMANTICS.md §10).
    pub fn spawn(
        cache: CacheDir,
        writer: WriterHandle,
        min_gap: Duration,
        upstream_lost: Box<dyn Fn() -> bool + Send>,
    ) -> io::Result<Arc<SnapshotWriter>> {
        let pending = Arc::new((Mutex::new(Pending::default()), Condvar::new()));
        let stats = Arc::new(WriterStats {
            dir_warnings: cache.warnings.clone(),
            ..WriterStats::default()
        });
        let (p, s) = (pending.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name("snapshot-writer".into())
            .spawn(move || writer_loop(&cache, &writer, &p, &s, min_gap, &*upstream_lost))?;
        Ok(Arc::new(SnapshotWriter {
            pending,
            thread: Mutex::new(Some(thread)),
            stats,
        }))
    }

    /// The cache changed: write a snapshot soon. Cheap; never blocks on the disk.
    pub fn changed(&self) {
        let (m, cv) = &*self.pending;
        let mut p = lock(m);
        let now = Instant::now();
        if !p.dirty {
            p.dirty = true;
            p.since = Some(now);
        }
        p.last_change = Some(now);
        self.stats.note_change();
        cv.notify_one();
    }

    /// Stops the thread (it finishes a write in progress), then writes the final snapshot if
    /// anything changed since the last one, or the last write failed (or always, with `force`).
    /// A failure is logged (WARN, or INFO within a failure episode already warned about) and
    /// otherwise ignored: the shutdown goes on.
    pub fn finish(&self, cache: &CacheDir, writer: &WriterHandle, force: bool) {
        let dirty = {
            let (m, cv) = &*self.pending;
            let mut p = lock(m);
            p.stop = true;
            cv.notify_one();
            p.dirty
        };
        let handle = lock(&self.thread).take();
        let mut failures = handle.and_then(|h| h.join().ok()).unwrap_or_default();
        if dirty || force {
            let taken = self.stats.take_unsaved();
            if write_once(cache, writer, &self.stats, &mut failures, "final") != Attempt::Written {
                self.stats.untake(taken);
            }
        }
    }
}

/// What one write attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    /// The cache is not ready: nothing to write.
    NotReady,
    /// Written.
    Written,
    /// The write failed (logged).
    Failed,
}

fn write_once(
    cache: &CacheDir,
    writer: &WriterHandle,
    stats: &WriterStats,
    failures: &mut Failures,
    why: &str,
) -> Attempt {
    match cache.save(writer) {
        Ok(None) => {
            debug!("not writing a snapshot: the cache is not ready");
            Attempt::NotReady
        }
        Ok(Some(w)) => {
            stats.writes.fetch_add(1, Ordering::Relaxed);
            stats.last_write_unix.store(unix_now(), Ordering::Relaxed);
            stats.last_bytes.store(w.bytes, Ordering::Relaxed);
            let ms = u64::try_from(w.write.as_millis()).unwrap_or(u64::MAX);
            stats.last_write_ms.store(ms, Ordering::Relaxed);
            if let Some(ended) = failures.succeeded(Instant::now()) {
                info!("{}", failures::recovery_note(ended));
            }
            let msg = format!(
                "{why} snapshot written: {} objects, {} bytes in {} ms ({} µs to take them from the cache's writer)",
                w.objects,
                w.bytes,
                w.write.as_millis(),
                w.taken.as_micros()
            );
            if why == "final" {
                info!("{msg}");
            } else {
                debug!("{msg}");
            }
            Attempt::Written
        }
        Err(e) => {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            let now = Instant::now();
            let previous = cache.previous();
            if failures.failed(now) {
                warn!(
                    "{}",
                    failures::failure_warning(cache.path(), &e, previous, unix_now())
                );
            } else {
                let msg = failures::failure_repeated(
                    why,
                    &e,
                    failures.count(),
                    failures.lasted(now),
                    previous,
                    unix_now(),
                );
                // The last word before exiting is worth a line at the default level.
                if why == "final" {
                    info!("{msg}");
                } else {
                    debug!("{msg}");
                }
            }
            Attempt::Failed
        }
    }
}

fn writer_loop(
    cache: &CacheDir,
    writer: &WriterHandle,
    pending: &(Mutex<Pending>, Condvar),
    stats: &WriterStats,
    min_gap: Duration,
    upstream_lost: &dyn Fn() -> bool,
) -> Failures {
    let (m, cv) = pending;
    let mut failures = Failures::default();
    // The last attempt that wrote or failed (not one skipped because the cache was not ready).
    let mut last_attempt: Option<Instant> = None;
    // Whether the write below is early because the upstream was lost, and whether that was
    // said (once per loss).
    let (mut early, mut early_said) = (false, false);
    loop {
        // When the changes this round writes began to pend (`WriterStats::unsaved_since_unix`).
        let taken;
        {
            let mut p = lock(m);
            loop {
                if p.stop {
                    return failures;
                }
                let now = Instant::now();
                let lost = p.dirty && upstream_lost();
                early_said &= lost || !p.dirty;
                // Without the upstream, no `min_gap` (unless writes are failing: their backoff
                // holds, the disk is the problem then).
                let gap = if lost && failures.count() == 0 {
                    Duration::ZERO
                } else {
                    failures.retry_gap(min_gap)
                };
                let due = match (p.dirty, p.since, p.last_change) {
                    (true, Some(since), Some(last)) => {
                        let settled = (last + QUIET).min(since + MAX_DELAY);
                        let gap_end = last_attempt.map_or(now, |w| w + gap);
                        early = lost && gap_end < last_attempt.map_or(now, |w| w + min_gap);
                        Some(settled.max(gap_end))
                    }
                    _ => None,
                };
                match due {
                    Some(at) if at <= now => {
                        p.dirty = false;
                        p.since = None;
                        taken = stats.take_unsaved();
                        break;
                    }
                    Some(at) => {
                        // Woken at the latest each LOSS_CHECK to notice the upstream's loss.
                        let wait = (at - now).min(LOSS_CHECK);
                        p = cv
                            .wait_timeout(p, wait)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                    None => p = cv.wait(p).unwrap_or_else(|e| e.into_inner()),
                }
            }
        }
        if early && !early_said {
            info!("the upstream cannot be reached: writing the snapshot now, not after --cache-write-interval, so that an offline restart serves what is served now");
            early_said = true;
        }
        let why = if early { "early" } else { "debounced" };
        match write_once(cache, writer, stats, &mut failures, why) {
            Attempt::Written => last_attempt = Some(Instant::now()),
            Attempt::Failed => {
                stats.untake(taken);
                // Retried after the gap (see `Failures::retry_gap`), not in a loop.
                last_attempt = Some(Instant::now());
                let mut p = lock(m);
                if !p.dirty {
                    p.dirty = true;
                    p.since = Some(Instant::now());
                    p.last_change = p.since;
                }
            }
            Attempt::NotReady => stats.untake(taken),
        }
    }
}

/// Set once a snapshot has been restored (for `/readyz` and `/metrics`): its write time.
#[derive(Debug, Default)]
pub struct Restored {
    /// Whether a snapshot was restored at startup.
    pub restored: AtomicBool,
    /// Its `written_unix_secs`.
    pub written_unix: AtomicU64,
}
