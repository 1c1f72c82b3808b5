//! The writer phase ("the event loop never waits for a writer"): with the watchers connected,
//! kube-proxy's EndpointSlice LIST (raw client, sequential, paced) and the watch fan-out at a
//! modest rate, in three windows: at rest, while the simulator relabels the local node over and
//! over (grid-wrapper re-filters every topology slice), and while it compacts its history and
//! closes every watch over and over (grid-wrapper's reflectors relist everything at scale S).
//! Relists are confirmed by grid-wrapper's `/metrics` (`grid_wrapper_upstream_relists_total`)
//! and its `relisted` log lines.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::http::Client;
use crate::listclient::RawClient;
use crate::phases::{get_ok, slices_path, Round, Rounds};
use crate::report::round_detail;
use crate::stats::{dur, pct};
use crate::{BenchResult, Opts, HOSTNAME};

/// Fan-out apply rate during the windows.
pub const RATE: f64 = 50.0;
/// Start-to-start gap of the sequential LISTs (a slower LIST delays the next one).
const LIST_GAP: Duration = Duration::from_millis(10);
/// Most LISTs per window.
const MAX_LISTS: usize = 20_000;
/// Most writer operations per window.
const MAX_OPS: usize = 1_000;
/// Period of the local node's relabels.
const RELABEL_EVERY: Duration = Duration::from_millis(1000);
/// Period of compact + close-watches (a watch that ends within 1 s of its start without an
/// event counts as a failure with backoff in the reflector, so this stays well above that).
const RELIST_EVERY: Duration = Duration::from_millis(2000);
/// Quiet time after a window, before the next one.
const SETTLE: Duration = Duration::from_secs(3);
/// How long a window waits for the last deliveries.
const DRAIN: Duration = Duration::from_secs(15);
/// A LIST slower than this counts as stalled.
const STALL: Duration = Duration::from_millis(50);
/// A headless Service (outside kube-proxy's selector L, so no reflector of grid-wrapper sees
/// it), applied just before each compaction so that every reflector's resourceVersion (the
/// slices' too, which the paced changes keep current) falls below the new horizon and its
/// rewatch gets 410.
const BUMP_SERVICE: &str = "loadbench-bump";
/// The relabel flips the local node's zone between these (both topology label keys).
const ZONES: [&str; 2] = ["zone-1", "zone-0"];

/// What grid-wrapper is made to do during a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Nothing besides the paced changes and LISTs.
    Rest,
    /// `/sim/label-node` of the local node, zone flipped each time.
    Relabel,
    /// `/sim/compact` + `/sim/close-watches`: every reflector relists.
    Relist,
}

impl Work {
    /// Row label.
    pub fn label(self) -> &'static str {
        match self {
            Work::Rest => "at rest",
            Work::Relabel => "during relabels",
            Work::Relist => "during relists",
        }
    }

    fn every(self) -> Option<Duration> {
        match self {
            Work::Rest => None,
            Work::Relabel => Some(RELABEL_EVERY),
            Work::Relist => Some(RELIST_EVERY),
        }
    }
}

/// One window.
#[derive(Debug)]
pub struct Window {
    /// What ran.
    pub work: Work,
    /// The paced fan-out round (its window is the measurement window).
    pub round: Round,
    /// Durations of the LISTs that started within the window, ns.
    pub lists: Vec<u64>,
    /// Failed LISTs and the first failure.
    pub list_errors: u64,
    /// First LIST failure.
    pub first_list_error: Option<String>,
    /// Writer operations sent within the window.
    pub ops: usize,
    /// Failed writer operations.
    pub op_errors: usize,
    /// First failure.
    pub first_op_error: Option<String>,
    /// `grid_wrapper_upstream_relists_total` increase per resource over the window plus
    /// [`SETTLE`].
    pub relists: Vec<(String, u64)>,
    /// `relisted` log lines with a timestamp within the window.
    pub relisted_lines: usize,
}

impl Window {
    fn list_pct(&self, p: f64) -> u64 {
        pct(&mut self.lists.clone(), p)
    }

    fn relists_total(&self) -> u64 {
        self.relists.iter().map(|r| r.1).sum()
    }
}

/// The three windows.
#[derive(Debug, Default)]
pub struct Writer {
    /// At rest, during relabels, during relists (as far as they ran).
    pub windows: Vec<Window>,
    /// Watchers connected.
    pub watchers: usize,
    /// Seconds of paced changes per window.
    pub secs: f64,
}

/// `grid_wrapper_upstream_relists_total` per resource from grid-wrapper's `/metrics`.
pub fn relists_by_resource(health: SocketAddr) -> BenchResult<Vec<(String, u64)>> {
    let r = get_ok(&mut Client::new(health), "/metrics")?;
    let text = String::from_utf8_lossy(&r.body);
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("grid_wrapper_upstream_relists_total") else {
            continue;
        };
        let (labels, value) = match rest.rsplit_once(' ') {
            Some(lv) => lv,
            None => continue,
        };
        let resource = labels
            .split("resource=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("?")
            .to_string();
        let value: f64 = value.trim().parse().unwrap_or(0.0);
        out.push((resource, value as u64));
    }
    Ok(out)
}

fn delta(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    after
        .iter()
        .map(|(k, v)| {
            let b = before.iter().find(|(bk, _)| bk == k).map_or(0, |x| x.1);
            (k.clone(), v.saturating_sub(b))
        })
        .collect()
}

/// LIST timings of a background loop: (start ns since base, duration ns).
#[derive(Debug, Default)]
struct ListLog {
    samples: Vec<(u64, u64)>,
    errors: u64,
    first_error: Option<String>,
}

/// Writer operations of a background loop: start ns since base of each.
#[derive(Debug, Default)]
struct OpLog {
    starts: Vec<u64>,
    errors: usize,
    first_error: Option<String>,
}

/// The LIST loop and the writer loop, running until stopped.
struct Background {
    stop: Arc<AtomicBool>,
    lists: JoinHandle<ListLog>,
    ops: JoinHandle<OpLog>,
}

impl Background {
    fn start(wrapper: SocketAddr, sim: SocketAddr, work: Work, base: Instant) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let s1 = Arc::clone(&stop);
        let lists = thread::spawn(move || list_loop(wrapper, base, &s1));
        let s2 = Arc::clone(&stop);
        let ops = thread::spawn(move || op_loop(sim, work, base, &s2));
        Background { stop, lists, ops }
    }

    fn stop(self) -> (ListLog, OpLog) {
        self.stop.store(true, Ordering::SeqCst);
        let lists = self.lists.join().unwrap_or_else(|_| ListLog {
            errors: 1,
            first_error: Some("LIST thread panicked".into()),
            ..ListLog::default()
        });
        let ops = self.ops.join().unwrap_or_else(|_| OpLog {
            errors: 1,
            first_error: Some("writer thread panicked".into()),
            ..OpLog::default()
        });
        (lists, ops)
    }
}

fn list_loop(addr: SocketAddr, base: Instant, stop: &AtomicBool) -> ListLog {
    let mut log = ListLog::default();
    let mut c = RawClient::new(addr);
    let path = slices_path();
    while !stop.load(Ordering::Relaxed) && log.samples.len() < MAX_LISTS {
        let t = Instant::now();
        let at = base.elapsed().as_nanos() as u64;
        match c.get(&path) {
            Ok(r) if r.code == 200 => log.samples.push((at, t.elapsed().as_nanos() as u64)),
            Ok(r) => {
                log.errors += 1;
                log.first_error
                    .get_or_insert_with(|| format!("HTTP {}", r.code));
            }
            Err(e) => {
                log.errors += 1;
                log.first_error.get_or_insert_with(|| e.to_string());
                thread::sleep(LIST_GAP); // no hot loop against a refusing server
            }
        }
        if let Some(wait) = (t + LIST_GAP).checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
    }
    log
}

fn post(c: &mut Client, path: &str, body: &serde_json::Value) -> Result<(), String> {
    match c.request("POST", path, body.to_string().as_bytes()) {
        Ok(r) if r.code < 300 => Ok(()),
        Ok(r) => Err(format!(
            "{path}: HTTP {}: {}",
            r.code,
            String::from_utf8_lossy(&r.body)
        )),
        Err(e) => Err(format!("{path}: {e}")),
    }
}

/// Sets the local node's zone labels to `zone`.
pub fn label_local_node(c: &mut Client, zone: &str) -> Result<(), String> {
    let body =
        json!({"name": HOSTNAME, "labels": {"zone": zone, "topology.kubernetes.io/zone": zone}});
    post(c, "/sim/label-node", &body)
}

/// The headless Service that bumps the simulator's resourceVersion unseen by grid-wrapper.
fn bump_service(n: usize) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": BUMP_SERVICE, "namespace": "default",
            "labels": {"service.kubernetes.io/headless": ""},
            "annotations": {"loadbench.example/bump": n.to_string()}},
        "spec": {"clusterIP": "None", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}
    })
}

fn op_loop(sim: SocketAddr, work: Work, base: Instant, stop: &AtomicBool) -> OpLog {
    let mut log = OpLog::default();
    let Some(every) = work.every() else {
        return log;
    };
    let mut c = Client::new(sim);
    while !stop.load(Ordering::Relaxed) && log.starts.len() < MAX_OPS {
        let t = Instant::now();
        let n = log.starts.len();
        log.starts.push(base.elapsed().as_nanos() as u64);
        let r = match work {
            Work::Relabel => label_local_node(&mut c, ZONES[n % 2]),
            Work::Relist => post(&mut c, "/sim/apply", &bump_service(n))
                .and_then(|()| post(&mut c, "/sim/compact", &json!({})))
                .and_then(|()| post(&mut c, "/sim/close-watches", &json!({}))),
            Work::Rest => Ok(()),
        };
        if let Err(e) = r {
            log.errors += 1;
            log.first_error.get_or_insert(e);
        }
        crate::procs::wait_until(every, Duration::from_millis(10), || {
            stop.load(Ordering::Relaxed) || t.elapsed() >= every
        });
    }
    if work == Work::Relabel && log.starts.len() % 2 == 1 {
        // Back to the fixture's zone.
        if let Err(e) = label_local_node(&mut c, ZONES[1]) {
            log.errors += 1;
            log.first_error.get_or_insert(e);
        }
    }
    log
}

/// Runs the three windows with `rounds`' watchers (no control watch on the simulator, whose
/// watches the relist window closes).
pub fn run(rounds: &mut Rounds<'_>, opts: &Opts) -> BenchResult<Writer> {
    let control = rounds.control;
    rounds.control = false;
    let result = run_windows(rounds, opts);
    rounds.control = control;
    result
}

fn run_windows(rounds: &mut Rounds<'_>, opts: &Opts) -> BenchResult<Writer> {
    let count = (RATE * opts.writer_secs).round().max(1.0) as usize;
    let mut out = Writer {
        watchers: rounds.watchers,
        secs: opts.writer_secs,
        ..Writer::default()
    };
    let (wrapper, health, sim, base) = (
        rounds.wrapper.addr,
        rounds.wrapper.health,
        rounds.sim,
        rounds.base,
    );
    for work in [Work::Rest, Work::Relabel, Work::Relist] {
        eprintln!("loadbench: writer phase: {}", work.label());
        let m0 = relists_by_resource(health)?;
        let (round, bg) = rounds.round_with(RATE, count, DRAIN, || {
            Background::start(wrapper, sim, work, base)
        })?;
        let (lists, ops) = bg.stop();
        thread::sleep(SETTLE);
        let m1 = relists_by_resource(health)?;
        let (from, to) = (
            round.start_ns,
            round.start_ns + round.window.as_nanos() as u64,
        );
        let within = |at: u64| at >= from && at <= to;
        let (t_from, t_to) = (
            base + Duration::from_nanos(from),
            base + Duration::from_nanos(to),
        );
        let relisted_lines = rounds
            .wrapper
            .log
            .lines()
            .iter()
            .filter(|(t, l)| *t >= t_from && *t <= t_to && l.contains("relisted "))
            .count();
        out.windows.push(Window {
            work,
            lists: lists
                .samples
                .iter()
                .filter(|s| within(s.0))
                .map(|s| s.1)
                .collect(),
            list_errors: lists.errors,
            first_list_error: lists.first_error,
            ops: ops.starts.iter().filter(|&&s| within(s)).count(),
            op_errors: ops.errors,
            first_op_error: ops.first_error,
            relists: delta(&m0, &m1),
            relisted_lines,
            round,
        });
    }
    Ok(out)
}

fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "n/a".into()
    } else {
        format!("{:.1}×", a as f64 / b as f64)
    }
}

/// The writer phase's rows.
pub fn rows(out: &mut String, w: &Writer) {
    let rest = w.windows.iter().find(|x| x.work == Work::Rest);
    let (rest50, rest99) = rest.map_or((0, 0), |r| (r.list_pct(50.0), r.list_pct(99.0)));
    for x in &w.windows {
        let stalls = x
            .lists
            .iter()
            .filter(|&&d| d > STALL.as_nanos() as u64)
            .count();
        let mut detail = format!(
            "{} LISTs (raw client, one keep-alive connection, sequential, started ≥ {} ms apart) within the {:.1} s window, {} watchers connected; max {}; {} over {} ms",
            x.lists.len(),
            LIST_GAP.as_millis(),
            x.round.window.as_secs_f64(),
            w.watchers,
            dur(x.list_pct(100.0)),
            stalls,
            STALL.as_millis(),
        );
        if x.work != Work::Rest {
            let _ = write!(
                detail,
                "; vs at rest p50 {} / p99 {}",
                ratio(x.list_pct(50.0), rest50),
                ratio(x.list_pct(99.0), rest99)
            );
        }
        let _ = write!(detail, "; {}", work_text(x));
        if x.list_errors > 0 {
            let _ = write!(
                detail,
                "; {} LIST errors ({})",
                x.list_errors,
                x.first_list_error.as_deref().unwrap_or("?")
            );
        }
        let _ = writeln!(
            out,
            "| 6 | LIST endpointslices (selector L) {}, p50 / p99 | {} / {} | {detail} |",
            x.work.label(),
            dur(x.list_pct(50.0)),
            dur(x.list_pct(99.0)),
        );
    }
    for x in &w.windows {
        let d = &x.round.delivery;
        let _ = writeln!(
            out,
            "| 6 | fan-out {}: apply → received by all {} watchers, p50 / p99 | {} / {} | max {}; {}; {} |",
            x.work.label(),
            w.watchers,
            dur(d.all_pct(50.0)),
            dur(d.all_pct(99.0)),
            dur(d.all_pct(100.0)),
            round_detail(&x.round, w.watchers),
            work_text(x),
        );
    }
    let summary: Vec<String> = w
        .windows
        .iter()
        .filter(|x| x.work != Work::Rest)
        .map(|x| match x.work {
            Work::Relabel => format!(
                "{} relabels of `{HOSTNAME}` (zone-0 ⇄ zone-1, every {} ms) within the {:.1} s window",
                x.ops,
                RELABEL_EVERY.as_millis(),
                x.round.window.as_secs_f64()
            ),
            _ => format!(
                "{} × (apply of the headless Service `{BUMP_SERVICE}`, compact, close-watches) (every {} ms) within the {:.1} s window → {} relists counted by `grid_wrapper_upstream_relists_total` ({}), {} `relisted` log lines within the window",
                x.ops,
                RELIST_EVERY.as_millis(),
                x.round.window.as_secs_f64(),
                x.relists_total(),
                per_resource(&x.relists),
                x.relisted_lines
            ),
        })
        .collect();
    let _ = writeln!(
        out,
        "| 6 | writer work that overlapped the windows | {} | {}; each window: {} changes at {:.0}/s to non-topology slices, {} s settle between windows |",
        w.windows
            .iter()
            .filter(|x| x.work != Work::Rest)
            .map(|x| match x.work {
                Work::Relabel => format!("{} relabels", x.ops),
                _ => format!("{} relists", x.relists_total()),
            })
            .collect::<Vec<_>>()
            .join(", "),
        summary.join("; "),
        (RATE * w.secs).round(),
        RATE,
        SETTLE.as_secs(),
    );
}

fn per_resource(r: &[(String, u64)]) -> String {
    r.iter()
        .map(|(k, v)| format!("{k} +{v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn work_text(x: &Window) -> String {
    let mut s = match x.work {
        Work::Rest => "no writer work".to_string(),
        Work::Relabel => format!("{} relabels within the window", x.ops),
        Work::Relist => format!(
            "{} compact + close-watches within the window, relists_total +{}",
            x.ops,
            x.relists_total()
        ),
    };
    if x.op_errors > 0 {
        let _ = write!(
            s,
            ", {} failed ({})",
            x.op_errors,
            x.first_op_error.as_deref().unwrap_or("?")
        );
    }
    s
}
