//! What `loadbench --snapshot` reads from a running grid-wrapper: the `snapshot-writer`
//! thread's CPU (`/proc/<pid>/task/<tid>/stat` and `schedstat`), the snapshot figures of
//! `/metrics`, and the "… snapshot written" log lines.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::http;
use crate::procs::LineLog;
use crate::BenchResult;

/// The `snapshot-writer` thread's name (its `comm`).
const WRITER_COMM: &str = "snapshot-writer";

/// CPU used so far by one thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct TaskCpu {
    /// utime + stime, clock ticks (`/proc/<pid>/task/<tid>/stat`).
    pub ticks: u64,
    /// Time on the CPU, ns (`schedstat`, first field), when the kernel has it.
    pub sched_ns: Option<u64>,
}

/// The `/proc/<pid>/task/<tid>` directory of the thread named [`WRITER_COMM`].
pub fn writer_task(pid: u32) -> Option<PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            std::fs::read_to_string(p.join("comm")).is_ok_and(|c| c.trim_end() == WRITER_COMM)
        })
}

/// The CPU a thread (`/proc/<pid>/task/<tid>`) used so far.
pub fn task_cpu(task: &Path) -> Option<TaskCpu> {
    let s = std::fs::read_to_string(task.join("stat")).ok()?;
    // After the parenthesised comm: state is field 3, utime 14, stime 15.
    let f: Vec<&str> = s[s.rfind(')')? + 1..].split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let sched_ns = std::fs::read_to_string(task.join("schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok());
    Some(TaskCpu { ticks, sched_ns })
}

/// The snapshot figures of `/metrics` (0 when absent, i.e. without `--cache-dir`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapMetrics {
    /// `grid_wrapper_snapshot_writes_total`.
    pub writes: u64,
    /// `grid_wrapper_snapshot_bytes`.
    pub bytes: u64,
    /// `grid_wrapper_snapshot_last_write_duration_seconds`.
    pub last_write_s: f64,
}

/// The snapshot figures of `/metrics` at `health`.
pub fn metrics(health: SocketAddr) -> BenchResult<SnapMetrics> {
    let r = http::get_once(health, "/metrics", Duration::from_secs(2))?;
    if r.code != 200 {
        return Err(format!("/metrics: HTTP {}", r.code).into());
    }
    let text = String::from_utf8_lossy(&r.body);
    let val = |name: &str| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or(0.0)
    };
    Ok(SnapMetrics {
        writes: val("grid_wrapper_snapshot_writes_total") as u64,
        bytes: val("grid_wrapper_snapshot_bytes") as u64,
        last_write_s: val("grid_wrapper_snapshot_last_write_duration_seconds"),
    })
}

/// One "… snapshot written: N objects, B bytes in X ms (Y µs to take them from the cache's
/// writer)" log line (before the single writer: "Y µs under the cache lock").
#[derive(Clone, Copy, Debug)]
pub struct LoggedWrite {
    /// When the bench read the line (just after the write ended).
    pub at: Instant,
    /// Objects.
    pub objects: u64,
    /// File bytes.
    pub bytes: u64,
    /// Encode + write + fsync, ms.
    pub ms: u64,
    /// Taking the objects from the cache, µs.
    pub lock_us: u64,
}

/// The `what` ("debounced", "final") write lines of `log` from line `from` on.
pub fn logged_writes(log: &LineLog, what: &str, from: usize) -> Vec<LoggedWrite> {
    let marker = format!("{what} snapshot written: ");
    log.lines()
        .iter()
        .skip(from)
        .filter_map(|(at, l)| {
            let rest = l.split(marker.as_str()).nth(1)?;
            let n: Vec<u64> = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|s| s.parse().ok())
                .collect();
            Some(LoggedWrite {
                at: *at,
                objects: *n.first()?,
                bytes: *n.get(1)?,
                ms: *n.get(2)?,
                lock_us: *n.get(3)?,
            })
        })
        .collect()
}
