//! `--scale x10`: grid-wrapper against the simulator at ten times scale S (5,000 nodes, 20,000
//! Services with one Endpoints + one EndpointSlice each, 10 endpoints per slice, 200 zones):
//! sync time and CPU, RSS ÷ cached JSON, LIST latency of every slice, the time a relabel of the
//! local node takes to reach a watcher, and fan-out with 20 watchers. Bounded by
//! [`crate::X10_BUDGET`]; every child is killed at the end.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::http::Client;
use crate::listbench::Run;
use crate::listclient::RawClient;
use crate::phases::{get_ok, machine, memory, slice_templates, slices_path, Machine, Mem};
use crate::phases::{Round, Rounds};
use crate::procs::{clk_tck, cpu_secs, cpu_ticks, hwm_kib, rss_kib, wait_until, Children};
use crate::relist::{label_local_node, relists_by_resource};
use crate::stats::pct;
use crate::watchers::WatchSet;
use crate::{start_sim_args, start_wrapper_spec, BenchResult, Opts, ReadySample, WrapperSpec};
use crate::{HOSTNAME, SIM_HISTORY};

/// Scale ×10.
pub const X10: [(&str, &str); 4] = [
    ("--nodes", "5000"),
    ("--services", "20000"),
    ("--zones", "200"),
    ("--endpoints-per-slice", "10"),
];
/// LIST runs (each on a fresh connection) and timed requests per run.
pub const LIST_RUNS: usize = 3;
/// Timed LISTs per run.
pub const LIST_REQUESTS: usize = 30;
/// Untimed LISTs before each run.
const WARMUP: usize = 2;
/// Fan-out watchers, rate and changes.
pub const FANOUT_WATCHERS: usize = 20;
/// Fan-out apply rate.
pub const FANOUT_RATE: f64 = 50.0;
/// Fan-out changes (10 s at the rate).
pub const FANOUT_CHANGES: usize = 500;
/// A relabel is complete once the watcher got no event for this long.
pub const QUIET: Duration = Duration::from_secs(2);
/// Longest wait for a relabel's events.
const RELABEL_LIMIT: Duration = Duration::from_secs(60);

/// One relabel of the local node.
#[derive(Debug, Default)]
pub struct Relabel {
    /// New zone.
    pub to: String,
    /// Non-BOOKMARK events the watcher received after the relabel.
    pub events: u64,
    /// Slices whose served form differs between a LIST before and one after.
    pub changed: usize,
    /// Relabel sent → last event received, ns (None: no event).
    pub to_last_event: Option<u64>,
    /// Relabel sent → first event received, ns.
    pub to_first_event: Option<u64>,
    /// Whether the quiet period was reached before [`RELABEL_LIMIT`].
    pub settled: bool,
    /// Why the watch ended, if it did.
    pub ended: Option<String>,
    /// Slices in the LIST after.
    pub items: usize,
}

/// Everything the ×10 run measured.
#[derive(Debug)]
pub struct X10Results {
    /// Machine and date.
    pub machine: Machine,
    /// The simulator's flags.
    pub sim_args: String,
    /// spawn of the simulator → its listening line.
    pub sim_start: Duration,
    /// The sync.
    pub ready: ReadySample,
    /// grid-wrapper utime+stime from spawn to just after `/readyz` 200, s.
    pub sync_cpu: f64,
    /// The simulator's CPU over the same time, s.
    pub sim_sync_cpu: f64,
    /// Memory and JSON bytes (rss_end/hwm_end: at the end of the run).
    pub mem: Mem,
    /// LIST runs.
    pub list_runs: Vec<Run>,
    /// LIST body bytes (selector L).
    pub list_bytes: usize,
    /// The two relabels (away and back).
    pub relabels: Vec<Relabel>,
    /// Fan-out with [`FANOUT_WATCHERS`] watchers.
    pub fanout: Round,
    /// `grid_wrapper_upstream_relists_total` at the end (all resources).
    pub relists: u64,
    /// Whole run.
    pub wall: Duration,
}

/// The served slices of a list body: name → endpoints (as JSON text), and the list's RV.
fn slice_map(body: &[u8]) -> BenchResult<(BTreeMap<String, String>, String)> {
    let v: Value = serde_json::from_slice(body)?;
    let rv = v["metadata"]["resourceVersion"]
        .as_str()
        .ok_or("slice list without metadata.resourceVersion")?
        .to_string();
    let items = v["items"].as_array().ok_or("slice list without items")?;
    let map = items
        .iter()
        .map(|s| {
            (
                s["metadata"]["name"].as_str().unwrap_or("?").to_string(),
                s["endpoints"].to_string(),
            )
        })
        .collect();
    Ok((map, rv))
}

fn relabel(wrapper: SocketAddr, sim: SocketAddr, zone: &str) -> BenchResult<Relabel> {
    let before = get_ok(&mut Client::new(wrapper), &slices_path())?;
    let (m0, rv) = slice_map(&before.body)?;
    drop(before);
    let base = Instant::now();
    let path = format!(
        "{}&resourceVersion={rv}&timeoutSeconds=300&watch=true",
        slices_path()
    );
    let set = WatchSet::open(wrapper, &path, 1, base)?;
    let sent = base.elapsed().as_nanos() as u64;
    label_local_node(&mut Client::new(sim), zone)?;
    let limit = Instant::now() + RELABEL_LIMIT;
    let mut last_seen = (0u64, Instant::now());
    let settled = wait_until(RELABEL_LIMIT, Duration::from_millis(20), || {
        let n = set.events();
        if n != last_seen.0 {
            last_seen = (n, Instant::now());
        }
        (n > 0 && last_seen.1.elapsed() >= QUIET) || set.dead() > 0 || Instant::now() > limit
    }) && set.dead() == 0;
    let last_ns = set.last_event_ns();
    let events = set.events();
    let results = set.finish();
    let first_ns = results.iter().map(|r| r.first_ns).filter(|&f| f > 0).min();
    let after = get_ok(&mut Client::new(wrapper), &slices_path())?;
    let (m1, _) = slice_map(&after.body)?;
    let changed = m1.iter().filter(|(k, v)| m0.get(*k) != Some(*v)).count()
        + m0.keys().filter(|k| !m1.contains_key(*k)).count();
    Ok(Relabel {
        to: zone.to_string(),
        events,
        changed,
        to_last_event: (last_ns > 0).then(|| last_ns.saturating_sub(sent)),
        to_first_event: first_ns.map(|f| f.saturating_sub(sent)),
        settled,
        ended: results.iter().find_map(|r| r.ended.clone()),
        items: m1.len(),
    })
}

fn list_runs(wrapper: SocketAddr) -> BenchResult<(Vec<Run>, usize)> {
    let path = slices_path();
    let mut runs = Vec::new();
    let mut body = 0;
    for _ in 0..LIST_RUNS {
        let mut c = RawClient::new(wrapper);
        for _ in 0..WARMUP {
            body = c.get(&path)?.body_len;
        }
        let mut t = Vec::with_capacity(LIST_REQUESTS);
        for _ in 0..LIST_REQUESTS {
            let s = Instant::now();
            let r = c.get(&path)?;
            if r.code != 200 {
                return Err(format!("LIST answered HTTP {}", r.code).into());
            }
            t.push(s.elapsed().as_nanos() as u64);
        }
        runs.push(Run {
            p50: pct(&mut t, 50.0),
            p99: pct(&mut t, 99.0),
        });
    }
    Ok((runs, body))
}

/// Runs the ×10 bench and returns its table.
pub fn run_x10(children: &Children, opts: &Opts) -> BenchResult<String> {
    let began = Instant::now();
    let machine = machine(opts);
    let mut args = vec!["--fixture", "scale", "--history", SIM_HISTORY];
    for (k, v) in X10 {
        args.extend([k, v]);
    }
    let sim_args = args.join(" ");
    eprintln!("loadbench x10: starting grid-wrapper-sim ({sim_args})");
    let t = Instant::now();
    let (sim_pid, sim_url, sim) = start_sim_args(children, opts, &args)?;
    let sim_start = t.elapsed();
    let tck = clk_tck();

    eprintln!("loadbench x10: starting grid-wrapper (sync)");
    let s0 = cpu_ticks(sim_pid).unwrap_or(0);
    let bin = opts.gw_bin();
    let spec = WrapperSpec {
        bin: &bin,
        hostname: HOSTNAME,
        extra: &["-v", "0"],
        ready_within: Duration::from_secs(150),
    };
    let (w, ready) = start_wrapper_spec(children, opts, &sim_url, &spec)?;
    let sync_cpu = cpu_secs(0, cpu_ticks(w.pid).unwrap_or(0), tck);
    let sim_sync_cpu = cpu_secs(s0, cpu_ticks(sim_pid).unwrap_or(0), tck);

    eprintln!("loadbench x10: ready; memory");
    let mut mem = memory(&w, sim_pid, sim)?;
    eprintln!("loadbench x10: a protobuf kube-proxy (lists + watches); memory");
    mem.attach_protobuf(&w);
    eprintln!("loadbench x10: LIST latency");
    let (list_runs, list_bytes) = list_runs(w.addr)?;
    eprintln!("loadbench x10: relabels of the local node");
    let mut relabels = Vec::new();
    for zone in ["zone-1", "zone-0"] {
        relabels.push(relabel(w.addr, sim, zone)?);
    }
    eprintln!("loadbench x10: fan-out ({FANOUT_WATCHERS} watchers at {FANOUT_RATE}/s)");
    let mut rounds = Rounds {
        wrapper: &w,
        watch_addr: w.addr,
        sim,
        sim_pid,
        templates: slice_templates(sim)?,
        watchers: FANOUT_WATCHERS,
        next_seq: 1,
        base: Instant::now(),
        tck,
        control: true,
    };
    let fanout = rounds.round(FANOUT_RATE, FANOUT_CHANGES, Duration::from_secs(20))?;
    mem.rss_end = rss_kib(w.pid).unwrap_or(0);
    mem.hwm_end = hwm_kib(w.pid).unwrap_or(0);
    let relists = relists_by_resource(w.health)
        .map(|v| v.iter().map(|x| x.1).sum())
        .unwrap_or(0);
    children.kill(w.pid);
    children.kill(sim_pid);
    let r = X10Results {
        machine,
        sim_args,
        sim_start,
        ready,
        sync_cpu,
        sim_sync_cpu,
        mem,
        list_runs,
        list_bytes,
        relabels,
        fanout,
        relists,
        wall: began.elapsed(),
    };
    Ok(crate::scalereport::table(&r))
}
