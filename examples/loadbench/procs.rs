//! Child processes of the load bench and what `/proc` says about them: a registry that kills
//! every child it started (on drop, on demand, or from the watchdog), VmRSS/VmHWM, utime+stime,
//! and a timestamped line log of a child's output.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// Lines kept per child log (older lines are dropped).
const MAX_LOG_LINES: usize = 100_000;

/// Every child started by the bench; all are killed when the last clone is dropped or
/// [`Children::kill_all`] runs.
#[derive(Clone, Debug, Default)]
pub struct Children(Arc<Mutex<Vec<Child>>>);

/// A started child: its pid, its stdout (when piped) and its timestamped stderr lines.
#[derive(Debug)]
pub struct Spawned {
    /// Process id.
    pub pid: u32,
    /// Piped stdout, if asked for.
    pub stdout: Option<ChildStdout>,
    /// stderr lines as they arrived.
    pub log: LineLog,
}

impl Children {
    /// Starts `cmd` (stdin closed, stderr captured into a [`LineLog`], stdout piped if
    /// `pipe_stdout`, else discarded).
    pub fn spawn(&self, cmd: &mut Command, pipe_stdout: bool) -> std::io::Result<Spawned> {
        cmd.stdin(Stdio::null()).stderr(Stdio::piped());
        cmd.stdout(if pipe_stdout {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = cmd.spawn()?;
        let pid = child.id();
        let log = LineLog::default();
        if let Some(err) = child.stderr.take() {
            log.follow(err);
        }
        let stdout = child.stdout.take();
        self.lock().push(child);
        Ok(Spawned { pid, stdout, log })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Child>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Kills and reaps child `pid`.
    pub fn kill(&self, pid: u32) {
        let mut all = self.lock();
        if let Some(i) = all.iter().position(|c| c.id() == pid) {
            let mut c = all.swap_remove(i);
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Asks child `pid` to stop (SIGTERM via `kill`, so nginx's master takes its workers down
    /// with it), then kills it after `grace`.
    pub fn terminate(&self, pid: u32, grace: Duration) {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
        wait_until(grace, Duration::from_millis(10), || !self.alive(pid));
        self.kill(pid);
    }

    /// Whether child `pid` is still running.
    pub fn alive(&self, pid: u32) -> bool {
        let mut all = self.lock();
        all.iter_mut()
            .find(|c| c.id() == pid)
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Kills and reaps every child.
    pub fn kill_all(&self) {
        let mut all = self.lock();
        for c in all.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        all.clear();
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        if Arc::strong_count(&self.0) == 1 {
            self.kill_all();
        }
    }
}

/// Lines a child wrote, each with the instant it was read.
#[derive(Clone, Debug, Default)]
pub struct LineLog(Arc<Mutex<Vec<(Instant, String)>>>);

impl LineLog {
    fn follow(&self, r: impl Read + Send + 'static) {
        let log = self.clone();
        thread::spawn(move || {
            let mut r = BufReader::new(r);
            let mut line = String::new();
            while matches!(r.read_line(&mut line), Ok(n) if n > 0) {
                let now = Instant::now();
                let mut l = log.0.lock().unwrap_or_else(PoisonError::into_inner);
                if l.len() < MAX_LOG_LINES {
                    l.push((now, line.trim_end().to_string()));
                }
                line.clear();
            }
        });
    }

    /// A copy of the lines so far.
    pub fn lines(&self) -> Vec<(Instant, String)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many lines so far contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, l)| l.contains(needle))
            .count()
    }

    /// The last `n` lines, for error messages.
    pub fn tail(&self, n: usize) -> String {
        let l = self.lines();
        let from = l.len().saturating_sub(n);
        l[from..]
            .iter()
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// VmRSS of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// VmHWM (peak RSS) of `pid` in KiB.
pub fn hwm_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmHWM:")
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 if that fails, the Linux default).
pub fn clk_tck() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

/// (utime, stime) in clock ticks from a `stat` file of /proc (a process's or a thread's).
fn stat_ticks(path: &str) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(path).ok()?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// utime + stime of `pid` (all threads), in clock ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    stat_ticks(&format!("/proc/{pid}/stat")).map(|(u, s)| u + s)
}

/// utime + stime of the main thread of `pid` (grid-wrapper's event loop), in clock ticks.
pub fn main_thread_ticks(pid: u32) -> Option<u64> {
    stat_ticks(&format!("/proc/{pid}/task/{pid}/stat")).map(|(u, s)| u + s)
}

/// stime of `pid` (all threads), in clock ticks: the kernel's share of [`cpu_ticks`].
pub fn sys_ticks(pid: u32) -> Option<u64> {
    stat_ticks(&format!("/proc/{pid}/stat")).map(|(_, s)| s)
}

/// utime + stime of this process's threads whose name starts with `prefix`, in clock ticks
/// (the watch client's reading threads, say, apart from the driver's).
pub fn own_thread_ticks(prefix: &str) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.trim_end().starts_with(prefix))
        })
        .filter_map(|t| stat_ticks(&t.path().join("stat").to_string_lossy()))
        .map(|(u, s)| u + s)
        .sum()
}

/// CPU seconds used by `pid` between two tick readings.
pub fn cpu_secs(ticks_before: u64, ticks_after: u64, tck: u64) -> f64 {
    ticks_after.saturating_sub(ticks_before) as f64 / tck as f64
}

/// Sleeps in small steps until `cond` holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, step: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(step);
    }
}
