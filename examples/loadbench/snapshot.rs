//! `loadbench --snapshot` (`make snapbench`): the `--cache-dir` snapshot at scale S. Two
//! grid-wrappers, one after the other, against one simulator under the same churn (a relabel of
//! a non-local node every `--churn-ms`): the first without `--cache-dir`, the second with it and
//! `--cache-write-interval=0`, each timed on back-to-back LISTs of kube-proxy's EndpointSlice
//! query. The second gives the snapshot's size, write time, lock time and the `snapshot-writer`
//! thread's CPU; then it is stopped (final snapshot), the simulator is killed, and fresh starts
//! from the snapshot are timed to their first LIST 200 with the upstream down.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::http::{self, Client};
use crate::listclient::RawClient;
use crate::phases::{get_ok, item_count, machine, slices_path, Machine};
use crate::procs::{clk_tck, rss_kib, wait_until, Children};
use crate::snapprobe::{
    logged_writes, metrics, task_cpu, writer_task, LoggedWrite, SnapMetrics, TaskCpu,
};
use crate::{start_sim, start_wrapper_with, BenchResult, Opts, Wrapper};
use crate::{HOSTNAME, SCALE, SIM_HISTORY};

/// `/metrics` is polled this often during a window (in both windows, so both see the same load).
const METRICS_POLL: Duration = Duration::from_millis(50);
/// Untimed LISTs before a window.
const LIST_WARMUP: usize = 3;
/// A window is extended past `--window-secs` to reach `--min-requests`, but not past this.
const MAX_WINDOW: Duration = Duration::from_secs(45);
/// After the churn stops: time for the last debounced write (1 s quiet + the write) to finish.
const SETTLE: Duration = Duration::from_millis(2500);
/// Poll period of the offline starts.
const OFFLINE_POLL: Duration = Duration::from_millis(2);
/// The label the churn sets on a non-local node.
const CHURN_LABEL: &str = "loadbench/tick";

/// What the churn thread did.
#[derive(Debug, Default)]
pub struct Churn {
    /// Relabels applied.
    pub changes: u64,
    /// Failed relabels or `/metrics` reads, and the first failure.
    pub errors: u64,
    /// First failure.
    pub first_error: Option<String>,
    /// The writer thread's CPU read at the start and each time the write counter moved:
    /// (writes so far, CPU).
    pub cpu_at: Vec<(u64, TaskCpu)>,
}

/// Non-local nodes: not in zone-0 (node-00000's zone; the scale fixture puts node i in zone
/// i mod zones).
fn churn_node(n: u64) -> String {
    let zones: u64 = SCALE
        .iter()
        .find(|(k, _)| *k == "--zones")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(20);
    let i = n % 400;
    format!("node-{:05}", 1 + i + i / (zones - 1).max(1))
}

fn relabel(sim: &mut Client, n: u64) -> BenchResult<()> {
    let body = json!({"name": churn_node(n), "labels": {CHURN_LABEL: n.to_string()}});
    let r = sim.request("POST", "/sim/label-node", body.to_string().as_bytes())?;
    if r.code >= 300 {
        return Err(format!("label-node: HTTP {}", r.code).into());
    }
    Ok(())
}

/// Relabels a non-local node every `period` from `first` on, and polls `/metrics` every
/// [`METRICS_POLL`] (reading the writer thread's CPU whenever the write counter moves), until
/// `stop`.
fn churn(
    sim: SocketAddr,
    health: SocketAddr,
    task: Option<PathBuf>,
    period: Duration,
    first: u64,
    stop: &AtomicBool,
) -> Churn {
    let mut out = Churn::default();
    fn fail(out: &mut Churn, e: String) {
        out.errors += 1;
        out.first_error.get_or_insert(e);
    }
    let mut client = Client::new(sim);
    let mut writes = metrics(health).map_or(0, |m| m.writes);
    if let Some(c) = task.as_deref().and_then(task_cpu) {
        out.cpu_at.push((writes, c));
    }
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() >= next {
            match relabel(&mut client, first + out.changes) {
                Ok(()) => out.changes += 1,
                Err(e) => fail(&mut out, e.to_string()),
            }
            next += period;
        }
        match metrics(health) {
            Ok(m) if m.writes != writes => {
                writes = m.writes;
                if let Some(c) = task.as_deref().and_then(task_cpu) {
                    out.cpu_at.push((writes, c));
                }
            }
            Ok(_) => {}
            Err(e) => fail(&mut out, format!("/metrics: {e}")),
        }
        let to_next = next.saturating_duration_since(Instant::now());
        thread::sleep(METRICS_POLL.min(to_next).max(Duration::from_millis(1)));
    }
    out
}

/// One wrapper's timed window.
#[derive(Debug)]
pub struct Window {
    /// With `--cache-dir`.
    pub cache: bool,
    /// Spawn → `/readyz` 200.
    pub ready: Duration,
    /// (start, latency ns) of each timed LIST, in order.
    pub lat: Vec<(Instant, u64)>,
    /// Window length.
    pub elapsed: Duration,
    /// `/metrics` write-counter delta over the window.
    pub writes: u64,
    /// The churn during the window.
    pub churn: Churn,
    /// Debounced writes logged from the window's start to the end of the settle time.
    pub logged: Vec<LoggedWrite>,
    /// Writer CPU at the window's start and after the settle time, and the writes between.
    pub cpu: Option<(TaskCpu, TaskCpu, u64)>,
    /// `/metrics` after the settle time.
    pub metrics: SnapMetrics,
    /// Body bytes and items of the LIST.
    pub body: (usize, usize),
    /// VmRSS after the window, KiB.
    pub rss_kib: u64,
}

/// Starts a wrapper (`-v 2`, with or without the cache dir), times a window, and returns the
/// still-running wrapper with the window.
fn window(
    children: &Children,
    opts: &Opts,
    sim: SocketAddr,
    sim_url: &str,
    cache: bool,
    first_change: u64,
) -> BenchResult<(Wrapper, Window)> {
    let dir_arg = format!("--cache-dir={}", opts.cache_dir.display());
    let mut extra = vec!["-v", "2"];
    if cache {
        extra.extend([dir_arg.as_str(), "--cache-write-interval=0"]);
    }
    let (w, ready) = start_wrapper_with(children, opts, sim_url, &extra)?;
    let task = if cache {
        let wrote = wait_until(Duration::from_secs(20), Duration::from_millis(20), || {
            metrics(w.health).is_ok_and(|m| m.writes >= 1)
        });
        if !wrote {
            return Err(format!("no first snapshot within 20 s:\n{}", w.log.tail(10)).into());
        }
        Some(writer_task(w.pid).ok_or("no snapshot-writer thread")?)
    } else {
        None
    };
    thread::sleep(Duration::from_millis(500)); // start-up work settles
    let m0 = metrics(w.health)?;
    let cpu0 = task.as_deref().and_then(task_cpu);
    let log0 = w.log.lines().len();
    let path = slices_path();
    // One decoded LIST for the body's size and item count; the timed ones use the raw client
    // (a reused 4 MiB buffer, body skipped), which keeps up with curl on nginx's copy.
    let last = get_ok(&mut Client::new(w.addr), &path)?;
    let mut c = RawClient::new(w.addr);
    for _ in 1..LIST_WARMUP {
        raw_ok(&mut c, &path)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (stop2, health, period) = (stop.clone(), w.health, Duration::from_millis(opts.churn_ms));
    let churner = thread::spawn(move || churn(sim, health, task, period, first_change, &stop2));
    let target = Duration::from_secs_f64(opts.window_secs);
    let mut lat = Vec::with_capacity(opts.min_requests * 2);
    let t0 = Instant::now();
    let result = loop {
        let e = t0.elapsed();
        if (e >= target && lat.len() >= opts.min_requests) || e >= MAX_WINDOW {
            break Ok(());
        }
        let t = Instant::now();
        match raw_ok(&mut c, &path) {
            Ok(()) => lat.push((t, t.elapsed().as_nanos() as u64)),
            Err(e) => break Err(e),
        }
    };
    let elapsed = t0.elapsed();
    let m1 = metrics(w.health);
    stop.store(true, Ordering::Relaxed);
    let churn = churner.join().map_err(|_| "churn thread panicked")?;
    result?;
    let m1 = m1?;
    drop(c);
    thread::sleep(SETTLE);
    let m2 = metrics(w.health)?;
    let task = if cache { writer_task(w.pid) } else { None };
    let cpu = cpu0
        .zip(task.as_deref().and_then(task_cpu))
        .map(|(a, b)| (a, b, m2.writes - m0.writes));
    let win = Window {
        cache,
        ready: Duration::from_nanos(ready.start_to_ready),
        lat,
        elapsed,
        writes: m1.writes - m0.writes,
        churn,
        logged: logged_writes(&w.log, "debounced", log0),
        cpu,
        metrics: m2,
        body: (last.body.len(), item_count(&last.body)),
        rss_kib: rss_kib(w.pid).unwrap_or(0),
    };
    Ok((w, win))
}

/// The SIGTERM of the wrapper with `--cache-dir`.
#[derive(Debug, Default)]
pub struct Shutdown {
    /// SIGTERM → exit.
    pub to_exit: Duration,
    /// The final write's log line.
    pub final_write: Option<LoggedWrite>,
    /// Size of the snapshot file afterwards.
    pub file_bytes: u64,
}

/// One start from the snapshot with the upstream down.
#[derive(Debug, Default)]
pub struct Offline {
    /// Spawn → first LIST 200.
    pub first_list: Duration,
    /// VmRSS right after, KiB.
    pub rss_kib: u64,
    /// Items and bytes of that LIST.
    pub body: (usize, usize),
    /// Polls answered with something else than 200 before (connection refusals not counted).
    pub non_200: usize,
    /// Spawn → the first log line containing each of [`OFFLINE_MARKS`] (as read by the bench).
    pub marks: Vec<Option<Duration>>,
}

/// Start-up log lines timed in an offline start: config read (snapshot load starts), topology
/// recompute of the restored objects starts (DEBUG), snapshot restored, listening.
pub const OFFLINE_MARKS: [&str; 4] = [
    "upstream apiserver:",
    "recomputing",
    "serving the snapshot",
    "serving kube-proxy on",
];

fn offline_start(children: &Children, opts: &Opts, sim_url: &str) -> BenchResult<Offline> {
    let (port, health) = (http::free_port()?, http::free_port()?);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut cmd = Command::new(opts.gw_bin());
    cmd.arg(format!("--master={sim_url}"))
        .arg(format!("--hostname={HOSTNAME}"))
        .arg(format!("--bind-address=127.0.0.1:{port}"))
        .arg(format!("--metrics-bind-address=127.0.0.1:{health}"))
        .arg(format!("--cache-dir={}", opts.cache_dir.display()))
        .args(["--cache-write-interval=0", "-v", "2"]);
    let t0 = Instant::now();
    let sp = children.spawn(&mut cmd, false)?;
    let path = slices_path();
    let mut out = Offline::default();
    loop {
        if t0.elapsed() > Duration::from_secs(20) || !children.alive(sp.pid) {
            children.kill(sp.pid);
            return Err(format!("no LIST 200 from the snapshot:\n{}", sp.log.tail(10)).into());
        }
        match http::get_once(addr, &path, Duration::from_secs(2)) {
            Ok(r) if r.code == 200 => {
                out.first_list = t0.elapsed();
                out.rss_kib = rss_kib(sp.pid).unwrap_or(0);
                out.body = (r.body.len(), item_count(&r.body));
                break;
            }
            Ok(_) => out.non_200 += 1,
            Err(_) => {}
        }
        thread::sleep(OFFLINE_POLL);
    }
    thread::sleep(Duration::from_millis(100)); // the log reader catches up
    let lines = sp.log.lines();
    out.marks = OFFLINE_MARKS
        .iter()
        .map(|needle| {
            lines
                .iter()
                .find(|(_, l)| l.contains(needle))
                .map(|(t, _)| t.saturating_duration_since(t0))
        })
        .collect();
    children.terminate(sp.pid, Duration::from_secs(5));
    Ok(out)
}

/// Everything measured.
#[derive(Debug)]
pub struct SnapResults {
    /// Machine and date.
    pub machine: Machine,
    /// `/proc/loadavg` at the start and at the end.
    pub loadavg: (String, String),
    /// The simulator's flags.
    pub sim_args: String,
    /// The cache dir and its file system type.
    pub cache_dir: (String, String),
    /// Sum of the four upstream list bodies, and the objects in them.
    pub upstream_json: (u64, usize),
    /// Without and with `--cache-dir`.
    pub without: Window,
    /// With `--cache-dir --cache-write-interval=0`.
    pub with: Window,
    /// Its SIGTERM.
    pub shutdown: Shutdown,
    /// Starts from the snapshot with the upstream down.
    pub offline: Vec<Offline>,
    /// CLK_TCK.
    pub tck: u64,
    /// Churn period.
    pub churn_ms: u64,
    /// Wall time of the whole run.
    pub wall: Duration,
}

fn upstream_json(sim: SocketAddr) -> BenchResult<(u64, usize)> {
    let mut c = Client::new(sim);
    let mut total = (0, 0);
    for p in [
        "/api/v1/nodes",
        "/api/v1/services",
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
    ] {
        let r = get_ok(&mut c, p)?;
        total.0 += r.body.len() as u64;
        total.1 += item_count(&r.body);
    }
    Ok(total)
}

fn clean_cache_dir(dir: &Path) -> BenchResult<()> {
    std::fs::create_dir_all(dir)?;
    for f in ["snapshot", "snapshot.tmp", "epoch", "epoch.tmp"] {
        match std::fs::remove_file(dir.join(f)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    Ok(())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Runs the snapshot bench and returns the table.
pub fn run_all(children: &Children, opts: &Opts) -> BenchResult<String> {
    let began = Instant::now();
    let load0 = loadavg();
    let machine = machine(opts);
    clean_cache_dir(&opts.cache_dir)?;
    let fs_type = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(&opts.cache_dir)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    eprintln!("snapbench: starting grid-wrapper-sim at scale S");
    let (sim_pid, sim_url, sim) = start_sim(children, opts)?;
    let mut sim_args = format!("--fixture scale --history {SIM_HISTORY}");
    for (k, v) in SCALE {
        sim_args.push_str(&format!(" {k} {v}"));
    }
    let upstream = upstream_json(sim)?;

    eprintln!("snapbench: window without --cache-dir");
    let (w, without) = window(children, opts, sim, &sim_url, false, 0)?;
    children.terminate(w.pid, Duration::from_secs(5));
    eprintln!("snapbench: window with --cache-dir --cache-write-interval=0");
    let (w, with) = window(children, opts, sim, &sim_url, true, 1_000_000)?;

    eprintln!("snapbench: SIGTERM (final snapshot), then the simulator is killed");
    let log0 = w.log.lines().len();
    relabel(&mut Client::new(sim), 2_000_000)?; // something for the final snapshot to write
    thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    children.terminate(w.pid, Duration::from_secs(10));
    let mut shutdown = Shutdown {
        to_exit: t.elapsed(),
        ..Shutdown::default()
    };
    thread::sleep(Duration::from_millis(100)); // the log reader catches up
    shutdown.final_write = logged_writes(&w.log, "final", log0).first().copied();
    shutdown.file_bytes = std::fs::metadata(opts.cache_dir.join("snapshot"))?.len();
    children.kill(sim_pid);

    eprintln!(
        "snapbench: {} starts from the snapshot, upstream down",
        opts.offline_runs
    );
    let mut offline = Vec::new();
    for _ in 0..opts.offline_runs {
        offline.push(offline_start(children, opts, &sim_url)?);
    }
    let results = SnapResults {
        machine,
        loadavg: (load0, loadavg()),
        sim_args,
        cache_dir: (opts.cache_dir.display().to_string(), fs_type),
        upstream_json: upstream,
        without,
        with,
        shutdown,
        offline,
        tck: clk_tck(),
        churn_ms: opts.churn_ms,
        wall: began.elapsed(),
    };
    Ok(crate::snapreport::table(&results))
}

/// One LIST through the raw client that must answer 200.
fn raw_ok(c: &mut RawClient, path: &str) -> BenchResult<()> {
    let r = c.get(path)?;
    if r.code != 200 {
        return Err(format!("GET {path}: HTTP {}", r.code).into());
    }
    Ok(())
}
