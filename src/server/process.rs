//! The process's own resource use, read from `/proc/self` (Linux), with the standard Prometheus
//! process-collector names (`process_resident_memory_bytes`, `process_cpu_seconds_total`, …).
//! Parsing is pure; [`read`] does the file reads and is `None`-tolerant everywhere, so another
//! OS simply shows no process metrics.

use std::fmt::Write as _;

/// Clock ticks per second of the times in `/proc/<pid>/stat`: `USER_HZ`, which the kernel
/// fixes at 100 for userspace on every architecture (Prometheus' own collectors assume it too).
const USER_HZ: f64 = 100.0;

/// What `/proc/self` says about this process; each field `None` when unreadable.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessStats {
    /// Resident set size (`VmRSS`), bytes.
    pub resident_bytes: Option<u64>,
    /// Peak resident set size (`VmHWM`), bytes.
    pub resident_peak_bytes: Option<u64>,
    /// Virtual memory size (`VmSize`), bytes.
    pub virtual_bytes: Option<u64>,
    /// User + system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Threads.
    pub threads: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit on open file descriptors.
    pub max_fds: Option<u64>,
    /// Start time, Unix seconds.
    pub start_time_seconds: Option<f64>,
}

/// (CPU seconds, threads, start time in seconds after boot) from `/proc/self/stat`.
pub fn parse_stat(stat: &str) -> Option<(f64, u64, f64)> {
    // The command name (field 2) is in parentheses and may hold spaces or ')'.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `f[0]` is field 3 (state): utime = 14, stime = 15, num_threads = 20, starttime = 22.
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    let cpu = (num(11)? + num(12)?) as f64 / USER_HZ;
    Some((cpu, num(17)?, num(19)? as f64 / USER_HZ))
}

/// A `Key:   1234 kB` line of `/proc/self/status`, in bytes.
pub fn status_kib(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let v = l.strip_prefix(key)?.strip_prefix(':')?;
        let kib: u64 = v.trim().strip_suffix("kB")?.trim().parse().ok()?;
        Some(kib * 1024)
    })
}

/// `btime` (boot time, Unix seconds) from `/proc/stat`.
pub fn parse_btime(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

/// The soft "Max open files" limit from `/proc/self/limits` (`None` if unlimited).
pub fn parse_max_fds(limits: &str) -> Option<u64> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Reads `/proc/self` (a few small files; call it outside every lock).
pub fn read() -> ProcessStats {
    let file = |p: &str| std::fs::read_to_string(p).ok();
    let status = file("/proc/self/status").unwrap_or_default();
    let stat = file("/proc/self/stat").and_then(|s| parse_stat(&s));
    let btime = file("/proc/stat").and_then(|s| parse_btime(&s));
    ProcessStats {
        resident_bytes: status_kib(&status, "VmRSS"),
        resident_peak_bytes: status_kib(&status, "VmHWM"),
        virtual_bytes: status_kib(&status, "VmSize"),
        cpu_seconds: stat.map(|s| s.0),
        threads: stat.map(|s| s.1),
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64),
        max_fds: file("/proc/self/limits").and_then(|s| parse_max_fds(&s)),
        start_time_seconds: stat.zip(btime).map(|(s, b)| b as f64 + s.2),
    }
}

/// Appends the standard process metrics that could be read to `out`.
pub fn render_prometheus(p: &ProcessStats, out: &mut String) {
    let metrics: [(&str, &str, &str, Option<String>); 7] = [
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            p.cpu_seconds.map(|v| format!("{v:.2}")),
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            p.resident_bytes.map(|v| v.to_string()),
        ),
        (
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            p.virtual_bytes.map(|v| v.to_string()),
        ),
        (
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            p.open_fds.map(|v| v.to_string()),
        ),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            p.max_fds.map(|v| v.to_string()),
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            p.start_time_seconds.map(|v| format!("{v:.2}")),
        ),
        (
            "process_threads",
            "gauge",
            "Number of OS threads in the process.",
            p.threads.map(|v| v.to_string()),
        ),
    ];
    for (name, kind, help, value) in metrics {
        if let Some(v) = value {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name} {v}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        let stat = "12653 (a b) c) R 12651 12651 32742 0 -1 4194304 102 0 0 0 250 125 0 0 20 0 7 0 188824 3133440 415 1";
        assert_eq!(parse_stat(stat), Some((3.75, 7, 1888.24)));
        assert_eq!(parse_stat("12 (x) R 1 2"), None);
        assert_eq!(parse_stat(""), None);
        let status =
            "Name:\tx\nVmHWM:\t    1800 kB\nVmRSS:\t    1700 kB\nVmSize:\t2928 kB\nVmRSSx: 1 kB\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(1700 * 1024));
        assert_eq!(status_kib(status, "VmHWM"), Some(1800 * 1024));
        assert_eq!(status_kib(status, "VmSize"), Some(2928 * 1024));
        assert_eq!(status_kib(status, "VmSwap"), None);
        assert_eq!(parse_btime("cpu 1 2\nbtime 1796094935\n"), Some(1796094935));
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            20000                40000                files     \n";
        assert_eq!(parse_max_fds(limits), Some(20000));
        assert_eq!(
            parse_max_fds(
                "Max open files            unlimited            unlimited            files"
            ),
            None
        );
    }

    #[test]
    fn renders_what_was_read() {
        let mut out = String::new();
        render_prometheus(&ProcessStats::default(), &mut out);
        assert!(out.is_empty());
        let p = ProcessStats {
            resident_bytes: Some(5 << 20),
            cpu_seconds: Some(1.5),
            start_time_seconds: Some(1_700_000_000.25),
            ..ProcessStats::default()
        };
        render_prometheus(&p, &mut out);
        assert!(out.contains(
            "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.50\n"
        ));
        assert!(out.contains("process_resident_memory_bytes 5242880\n"));
        assert!(out.contains("process_start_time_seconds 1700000000.25\n"));
        assert!(!out.contains("process_open_fds"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let p = read();
        assert!(p.resident_bytes.is_some_and(|b| b > 1 << 20), "{p:?}");
        assert!(p.open_fds.is_some_and(|n| n >= 3), "{p:?}");
        assert!(p.cpu_seconds.is_some() && p.threads.is_some_and(|t| t >= 1));
        assert!(p.start_time_seconds.is_some_and(|s| s > 1.5e9), "{p:?}");
    }
}
