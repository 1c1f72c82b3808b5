//! The bench's phases in order: start the simulator and grid-wrapper, memory per cached byte,
//! LIST latency next to nginx, watch fan-out, the sustained-rate ramp, then readiness timings of
//! fresh starts. Each returns plain numbers; `report` turns them into the table.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::driver::{apply_paced, templates, ApplyRun, Template};
use crate::http::{Client, Response};
use crate::procs::{
    clk_tck, cpu_secs, cpu_ticks, hwm_kib, main_thread_ticks, own_thread_ticks, rss_kib, sys_ticks,
    wait_until, Children,
};
use crate::stats::{analyze, Delivery};
use crate::watchers::WatchSet;
use crate::{start_sim, start_wrapper, BenchResult, Opts, ReadySample, Wrapper};
use crate::{SCALE, SELECTOR_L, SIM_HISTORY};

/// How long the fan-out phase waits for the last deliveries.
pub const FANOUT_DRAIN: Duration = Duration::from_secs(15);
/// How long a ramp step waits for the last deliveries.
pub const STEP_DRAIN: Duration = Duration::from_secs(5);
/// When the churn is over, VmRSS is read again this long after the last change: the event
/// logs keep 75 s of history (`Retention::for_queue`), aged by the loop every 5 s; 3 s margin.
const AGED_AFTER: Duration = Duration::from_secs(75 + 5 + 3);
/// A ramp step keeps up only if the every-watcher p99 lag stays under this.
pub const KEEP_UP_P99: Duration = Duration::from_secs(1);

/// The machine and the run.
#[derive(Debug, Default)]
pub struct Machine {
    /// CPUs available.
    pub nproc: usize,
    /// `model name` from /proc/cpuinfo.
    pub cpu: String,
    /// UTC date of the run.
    pub date: String,
    /// `uname -r`.
    pub kernel: String,
    /// `grid-wrapper --version`.
    pub version: String,
}

/// Memory after sync against the bytes of the cached collections.
#[derive(Clone, Debug, Default)]
pub struct Mem {
    /// VmRSS after sync, KiB.
    pub rss_sync: u64,
    /// VmHWM after sync, KiB.
    pub hwm_sync: u64,
    /// VmRSS after the four LISTs, KiB.
    pub rss_after_lists: u64,
    /// VmRSS after the watch phases, KiB.
    pub rss_end: u64,
    /// VmHWM after the watch phases, KiB.
    pub hwm_end: u64,
    /// VmRSS once the event logs' window passed after the watch phases, KiB (0: not measured).
    pub rss_aged: u64,
    /// How long after the watch phases `rss_aged` was read.
    pub aged_after: Duration,
    /// VmRSS of the simulator (which holds the same objects as `serde_json::Value`s), KiB.
    pub sim_rss: u64,
    /// (collection, body bytes, items) of the four LISTs.
    pub lists: Vec<(&'static str, u64, usize)>,
    /// (collection, body bytes) of the same LISTs from the simulator itself, and its
    /// ServiceCIDRs: the upstream's JSON lists of the cached kinds, the denominator issue 46's
    /// memory ratios use.
    pub upstream: Vec<(&'static str, u64)>,
    /// With a protobuf kube-proxy attached (its four LISTs and watches), measured after the
    /// JSON-only readings above and before any other protobuf request.
    pub proto: Option<crate::protobuf::ProtoClient>,
    /// Why there is no `proto` reading.
    pub proto_error: Option<String>,
}

impl Mem {
    /// Sum of the four LIST bodies.
    pub fn json_bytes(&self) -> u64 {
        self.lists.iter().map(|l| l.1).sum()
    }

    /// The four LIST bodies, `resource size (n items)` joined by ` + `, sizes written by `fmt`.
    pub fn json_parts(&self, fmt: impl Fn(u64) -> String) -> String {
        let parts: Vec<String> = self
            .lists
            .iter()
            .map(|(n, b, i)| format!("{n} {} ({i} items)", fmt(*b)))
            .collect();
        parts.join(" + ")
    }

    /// Attaches a protobuf kube-proxy ([`crate::protobuf::kube_proxy`]) and records its
    /// reading (or why there is none). Call after [`memory`], before any other protobuf request.
    pub fn attach_protobuf(&mut self, w: &Wrapper) {
        match crate::protobuf::kube_proxy(w) {
            Ok(p) => self.proto = Some(p),
            Err(e) => self.proto_error = Some(e.to_string()),
        }
    }

    /// The "RSS after sync + protobuf kube-proxy" figure: VmRSS (and ÷ cached JSON) with its
    /// detail, or n/a and why.
    pub fn proto_row(&self, fmt: impl Fn(u64) -> String) -> (String, String) {
        let Some(p) = &self.proto else {
            let why = self.proto_error.as_deref().unwrap_or("not measured");
            return ("n/a".into(), why.into());
        };
        let parts: Vec<String> = p
            .lists
            .iter()
            .map(|(n, b, i)| format!("{n} {} ({i} items)", fmt(*b)))
            .collect();
        let result = format!("{} ({:.2}× JSON)", fmt(p.rss * 1024), self.per_json(p.rss));
        let detail = format!(
            "VmRSS 1 s after a protobuf client (`Accept: {}`), after the JSON-only readings above, LISTed kube-proxy's four collections (endpointslices, services, endpoints with selector L; nodes with fieldSelector=metadata.name={}) and opened a protobuf watch on each from its list's RV ({} watches open and drained while VmRSS was read, {} read; closed after){}; ratio: ÷ cached JSON {} as in \"RSS ÷ JSON after sync\" ({:.2}× there); VmRSS just before the first protobuf request {} (+{} for the protobuf forms and watches); protobuf LIST bodies {} = {}; later RSS readings include the protobuf forms of the objects not changed since",
            crate::protobuf::KUBE_PROXY_ACCEPT,
            crate::HOSTNAME,
            p.watches,
            fmt(p.watch_bytes),
            if p.ended.is_empty() {
                String::new()
            } else {
                format!("; **watches ended early: {}**", p.ended.join("; "))
            },
            fmt(self.json_bytes()),
            self.per_json(self.rss_sync),
            fmt(p.rss_before * 1024),
            fmt(p.rss.saturating_sub(p.rss_before) * 1024),
            fmt(p.bytes()),
            parts.join(" + "),
        );
        (result, detail)
    }

    /// `kib` KiB ÷ the cached JSON bytes.
    pub fn per_json(&self, kib: u64) -> f64 {
        (kib * 1024) as f64 / self.json_bytes().max(1) as f64
    }

    /// Sum of the upstream's LIST bodies.
    pub fn upstream_bytes(&self) -> u64 {
        self.upstream.iter().map(|l| l.1).sum()
    }

    /// `kib` of RSS ÷ the upstream's JSON lists.
    pub fn per_upstream(&self, kib: u64) -> f64 {
        (kib * 1024) as f64 / self.upstream_bytes().max(1) as f64
    }

    /// The "RSS ÷ upstream JSON" row: result and detail.
    pub fn upstream_row(&self, fmt: impl Fn(u64) -> String) -> (String, String) {
        let parts: Vec<String> = self
            .upstream
            .iter()
            .map(|(n, b)| format!("{n} {}", fmt(*b)))
            .collect();
        let with_pb = match &self.proto {
            Some(p) => format!(
                "{:.2}× with the protobuf kube-proxy attached ({})",
                self.per_upstream(p.rss),
                fmt(p.rss * 1024)
            ),
            None => "no protobuf reading".into(),
        };
        (
            format!("{:.2}×", self.per_upstream(self.rss_sync)),
            format!(
                "VmRSS after sync {} ÷ the upstream's JSON lists of the cached kinds {} = {} (the same LISTs asked of the simulator itself); {with_pb}; after the watch phases {:.2}×",
                fmt(self.rss_sync * 1024),
                fmt(self.upstream_bytes()),
                parts.join(" + "),
                self.per_upstream(self.rss_end),
            ),
        )
    }
}

/// One paced round of changes with the watchers attached.
#[derive(Debug)]
pub struct Round {
    /// Target rate.
    pub rate: f64,
    /// What the driver sent.
    pub run: ApplyRun,
    /// What reached the watchers.
    pub delivery: Delivery,
    /// Wrapper CPU seconds from the first apply to the last delivery (or drain timeout).
    pub wrapper_cpu: f64,
    /// Simulator CPU seconds over the same window.
    pub sim_cpu: f64,
    /// The bench's own CPU seconds (driver + watchers) over the same window.
    pub self_cpu: f64,
    /// That window.
    pub window: Duration,
    /// Wrapper CPU seconds from the first apply to the last apply's answer (the paced part).
    pub apply_wrapper_cpu: f64,
    /// The watch client's reading threads' CPU seconds over `window` (epoll client only).
    pub client_cpu: f64,
    /// The part of `wrapper_cpu` spent on grid-wrapper's main thread: the event loop, which
    /// does the fan-out (the rest is the change path: reflectors, the writer, and housekeeping).
    pub wrapper_loop_cpu: f64,
    /// The kernel's part (stime) of `wrapper_cpu`.
    pub wrapper_sys_cpu: f64,
    /// Its start (the first apply), ns since the bench's base instant.
    pub start_ns: u64,
    /// "too slow" lines the wrapper logged during the round.
    pub too_slow: usize,
    /// The same changes as seen by one watch opened directly on the simulator (a control:
    /// what grid-wrapper's upstream watch could have received).
    pub upstream: Delivery,
    /// Warning/error lines the wrapper logged during the round (first few).
    pub wrapper_warnings: Vec<String>,
}

impl Round {
    /// Every watcher got every change with p99 under [`KEEP_UP_P99`], and no apply failed.
    pub fn kept_up(&self) -> bool {
        self.delivery.all_delivered()
            && self.run.errors == 0
            && self.delivery.all_pct(99.0) < KEEP_UP_P99.as_nanos() as u64
    }

    /// The driver+simulator could not reach 90 % of the target rate.
    pub fn source_bound(&self) -> bool {
        self.run.achieved_rate() < 0.9 * self.rate
    }
}

/// Everything measured.
#[derive(Debug)]
pub struct Results {
    /// Machine and date.
    pub machine: Machine,
    /// The simulator's flags.
    pub sim_args: String,
    /// Memory.
    pub mem: Mem,
    /// LIST latency.
    pub list: crate::listbench::ListBench,
    /// Watch fan-out.
    pub fanout: Round,
    /// LIST and fan-out at rest and during writer work (relabels, relists).
    pub writer: crate::relist::Writer,
    /// Idle RSS of the demo cluster.
    pub idle: Result<crate::idle::Idle, String>,
    /// Ramp steps, in order (stops after the first that did not keep up).
    pub ramp: Vec<Round>,
    /// The first start (against a freshly started simulator).
    pub first_ready: ReadySample,
    /// Fresh starts against the running simulator.
    pub ready: Vec<ReadySample>,
    /// Watchers per round.
    pub watchers: usize,
    /// Seconds per ramp step.
    pub step_secs: f64,
    /// Anything odd seen on the way.
    pub notes: Vec<String>,
    /// Wall time of the whole run.
    pub wall: Duration,
}

/// What kind of build a binary is, for the tables: a static binary has no program interpreter
/// (the dynamic loader's path is not in it), and the path says which target it was built for.
fn describe_binary(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let dynamic = bytes.windows(b"/ld-linux".len()).any(|w| w == b"/ld-linux")
        || bytes.windows(b"/ld-musl".len()).any(|w| w == b"/ld-musl");
    let libc = if path.to_string_lossy().contains("musl") {
        "musl"
    } else {
        "glibc"
    };
    let linking = if dynamic { "dynamic" } else { "static" };
    format!("{linking} {libc} build `{}`", path.display())
}

fn cmd_text(prog: &str, args: &[&str]) -> String {
    Command::new(prog)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The machine, the date and the binary's version.
pub fn machine(opts: &Opts) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Machine {
        nproc: thread::available_parallelism().map_or(0, |n| n.get()),
        cpu: cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or_else(|| "unknown".into(), |(_, v)| v.trim().to_string()),
        date: cmd_text("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]),
        kernel: cmd_text("uname", &["-r"]),
        version: format!(
            "{} ({})",
            cmd_text(&opts.gw_bin().to_string_lossy(), &["--version"]),
            describe_binary(&opts.gw_bin())
        ),
    }
}

/// GET `path`; anything but 200 is an error.
pub fn get_ok(client: &mut Client, path: &str) -> BenchResult<Response> {
    let r = client.request("GET", path, b"")?;
    if r.code != 200 {
        return Err(format!(
            "GET {path}: HTTP {}: {}",
            r.code,
            String::from_utf8_lossy(&r.body)
        )
        .into());
    }
    Ok(r)
}

/// kube-proxy's EndpointSlice LIST (selector L).
pub fn slices_path() -> String {
    format!("/apis/discovery.k8s.io/v1/endpointslices?labelSelector={SELECTOR_L}")
}

fn list_rv(addr: SocketAddr) -> BenchResult<String> {
    let body = match crate::tls::for_addr(addr) {
        Some(config) => match crate::tls::get(addr, config, &slices_path())? {
            (200, body) => body,
            (code, body) => {
                let text = String::from_utf8_lossy(&body).into_owned();
                return Err(format!("LIST over TLS: HTTP {code}: {text}").into());
            }
        },
        None => get_ok(&mut Client::new(addr), &slices_path())?.body,
    };
    let v: Value = serde_json::from_slice(&body)?;
    v["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| "list without metadata.resourceVersion".into())
}

fn sim_rv(sim: SocketAddr) -> BenchResult<u64> {
    let r = get_ok(&mut Client::new(sim), "/sim/state")?;
    let v: Value = serde_json::from_slice(&r.body)?;
    v["rv"]
        .as_u64()
        .ok_or_else(|| "sim state without rv".into())
}

/// `items` in a list body (0 if none).
pub fn item_count(body: &[u8]) -> usize {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["items"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// VmRSS/VmHWM 1 s after sync and the four LIST bodies (the cached JSON bytes).
pub fn memory(w: &Wrapper, sim_pid: u32, sim: SocketAddr) -> BenchResult<Mem> {
    thread::sleep(Duration::from_secs(1)); // let start-up allocations settle
    let mut m = Mem {
        rss_sync: rss_kib(w.pid).ok_or("no VmRSS")?,
        hwm_sync: hwm_kib(w.pid).unwrap_or(0),
        sim_rss: rss_kib(sim_pid).unwrap_or(0),
        ..Mem::default()
    };
    let mut c = Client::new(w.addr);
    let l = SELECTOR_L;
    for (name, path) in [
        // kube-proxy's list of its own Node: the one Node list grid-wrapper serves.
        (
            "nodes",
            format!(
                "/api/v1/nodes?fieldSelector=metadata.name%3D{}",
                crate::HOSTNAME
            ),
        ),
        ("services", format!("/api/v1/services?labelSelector={l}")),
        ("endpoints", format!("/api/v1/endpoints?labelSelector={l}")),
        ("endpointslices", slices_path()),
    ] {
        let r = get_ok(&mut c, &path)?;
        m.lists
            .push((name, r.body.len() as u64, item_count(&r.body)));
    }
    m.rss_after_lists = rss_kib(w.pid).unwrap_or(0);
    let mut up = Client::new(sim);
    for (name, path) in [
        ("nodes", "/api/v1/nodes".to_string()),
        ("services", format!("/api/v1/services?labelSelector={l}")),
        ("endpoints", format!("/api/v1/endpoints?labelSelector={l}")),
        ("endpointslices", slices_path()),
        (
            "servicecidrs",
            "/apis/networking.k8s.io/v1/servicecidrs".to_string(),
        ),
    ] {
        let r = get_ok(&mut up, &path)?;
        m.upstream.push((name, r.body.len() as u64));
    }
    Ok(m)
}

/// Upstream slices of non-topology Services (odd-numbered), as apply templates.
pub fn slice_templates(sim: SocketAddr) -> BenchResult<Vec<Template>> {
    let r = get_ok(
        &mut Client::new(sim),
        "/apis/discovery.k8s.io/v1/endpointslices",
    )?;
    let v: Value = serde_json::from_slice(&r.body)?;
    let items: Vec<Value> = v["items"]
        .as_array()
        .ok_or("sim slice list has no items")?
        .iter()
        .filter(|s| {
            s["metadata"]["labels"]["kubernetes.io/service-name"]
                .as_str()
                .and_then(|n| n.strip_prefix("svc-"))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n % 2 == 1)
        })
        .map(|s| {
            let mut s = s.clone();
            s["kind"] = json!("EndpointSlice");
            s["apiVersion"] = json!("discovery.k8s.io/v1");
            s
        })
        .collect();
    let t = templates(&items);
    if t.len() < 100 {
        return Err(format!("only {} non-topology slices upstream", t.len()).into());
    }
    Ok(t)
}

/// Shared state of the watch rounds.
pub struct Rounds<'a> {
    /// The wrapper watched.
    pub wrapper: &'a Wrapper,
    /// Where its watches are opened: its kube-proxy port, or its relay port.
    pub watch_addr: SocketAddr,
    /// The simulator changes are applied to.
    pub sim: SocketAddr,
    /// Its pid.
    pub sim_pid: u32,
    /// What the driver applies.
    pub templates: Vec<Template>,
    /// Watchers per round.
    pub watchers: usize,
    /// Next sequence number.
    pub next_seq: u64,
    /// Time base of every ns figure.
    pub base: Instant,
    /// Clock ticks per second.
    pub tck: u64,
    /// Whether a control watch is opened on the simulator too.
    pub control: bool,
}

impl<'a> Rounds<'a> {
    /// Rounds of `watchers` watches on `wrapper`, changes applied to the simulator at `sim`
    /// (process `sim_pid`) through its non-topology slices, a control watch on the simulator.
    pub fn new(
        wrapper: &'a Wrapper,
        sim: SocketAddr,
        sim_pid: u32,
        watchers: usize,
    ) -> BenchResult<Rounds<'a>> {
        Ok(Rounds {
            wrapper,
            watch_addr: wrapper.addr,
            sim,
            sim_pid,
            templates: slice_templates(sim)?,
            watchers,
            next_seq: 1,
            base: Instant::now(),
            tck: clk_tck(),
            control: true,
        })
    }

    /// Waits (at most 30 s) until what is watched stops changing: its list's resourceVersion
    /// stays the same for half a second. After a step it could not keep up with, a backlog of
    /// the last one's changes is still being applied; the next step's watches, opened at the
    /// list's resourceVersion, would otherwise find it behind the event log's horizon.
    pub fn settle(&self) -> BenchResult<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut rv = list_rv(self.watch_addr)?;
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(500));
            let now = list_rv(self.watch_addr)?;
            if now == rv {
                break;
            }
            rv = now;
        }
        Ok(())
    }

    /// One paced round: `count` changes at `rate`, then up to `drain` for the last deliveries.
    pub fn round(&mut self, rate: f64, count: usize, drain: Duration) -> BenchResult<Round> {
        Ok(self.round_with(rate, count, drain, || ())?.0)
    }

    /// [`Rounds::round`], calling `during` once the watches are open, just before the first
    /// apply; what it returns is handed back with the round (stop it then).
    pub fn round_with<B>(
        &mut self,
        rate: f64,
        count: usize,
        drain: Duration,
        during: impl FnOnce() -> B,
    ) -> BenchResult<(Round, B)> {
        let rv = list_rv(self.watch_addr)?;
        let path = format!(
            "{}&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=456&watch=true",
            slices_path()
        );
        let set = WatchSet::open(self.watch_addr, &path, self.watchers, self.base)?;
        let control = if self.control {
            let sim_rv = sim_rv(self.sim)?;
            Some(WatchSet::open(
                self.sim,
                &format!("{}&resourceVersion={sim_rv}&watch=true", slices_path()),
                1,
                self.base,
            )?)
        } else {
            None
        };
        let log0 = self.wrapper.log.lines().len();
        let slow0 = self.wrapper.log.count("too slow");
        let w0 = cpu_ticks(self.wrapper.pid).unwrap_or(0);
        let ws0 = sys_ticks(self.wrapper.pid).unwrap_or(0);
        let wl0 = main_thread_ticks(self.wrapper.pid).unwrap_or(0);
        let s0 = cpu_ticks(self.sim_pid).unwrap_or(0);
        let me0 = cpu_ticks(std::process::id()).unwrap_or(0);
        let c0 = own_thread_ticks(crate::watchers::EPOLL_THREAD);
        let bg = during();
        let t0 = Instant::now();
        let start_ns = self.base.elapsed().as_nanos() as u64;
        let run = apply_paced(
            self.sim,
            &self.templates,
            self.next_seq,
            count,
            rate,
            self.base,
        );
        let wa = cpu_ticks(self.wrapper.pid).unwrap_or(0);
        self.next_seq += count as u64;
        let expected = (self.watchers * count) as u64;
        wait_until(drain, Duration::from_millis(2), || {
            set.received() >= expected || set.dead() == self.watchers
        });
        let window = t0.elapsed();
        let w1 = cpu_ticks(self.wrapper.pid).unwrap_or(0);
        let ws1 = sys_ticks(self.wrapper.pid).unwrap_or(0);
        let wl1 = main_thread_ticks(self.wrapper.pid).unwrap_or(0);
        let s1 = cpu_ticks(self.sim_pid).unwrap_or(0);
        let me1 = cpu_ticks(std::process::id()).unwrap_or(0);
        let c1 = own_thread_ticks(crate::watchers::EPOLL_THREAD);
        let results = set.finish();
        let upstream = match control {
            Some(c) => analyze(&run, &c.finish()),
            // No control watch: as if it had received everything.
            None => analyze(&run, &[]),
        };
        if std::env::var_os("LOADBENCH_DEBUG").is_some() {
            debug_missing(&run, &results);
        }
        let wrapper_warnings = self.wrapper.log.lines()[log0..]
            .iter()
            .filter(|(_, l)| l.starts_with("WARN") || l.starts_with("ERROR"))
            .take(3)
            .map(|(_, l)| l.clone())
            .collect();
        let round = Round {
            upstream,
            wrapper_warnings,
            rate,
            delivery: analyze(&run, &results),
            run,
            wrapper_cpu: cpu_secs(w0, w1, self.tck),
            sim_cpu: cpu_secs(s0, s1, self.tck),
            self_cpu: cpu_secs(me0, me1, self.tck),
            window,
            apply_wrapper_cpu: cpu_secs(w0, wa, self.tck),
            client_cpu: cpu_secs(c0, c1, self.tck),
            wrapper_sys_cpu: cpu_secs(ws0, ws1, self.tck),
            wrapper_loop_cpu: cpu_secs(wl0, wl1, self.tck),
            start_ns,
            too_slow: self.wrapper.log.count("too slow").saturating_sub(slow0),
        };
        Ok((round, bg))
    }
}

/// Prints the missing sequence ranges of the first watchers (LOADBENCH_DEBUG).
fn debug_missing(run: &ApplyRun, results: &[crate::watchers::WatchResult]) {
    for (w, r) in results.iter().enumerate().take(3) {
        let got: std::collections::BTreeSet<u64> = r.recv.iter().map(|x| x.0).collect();
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for i in 0..run.sent_ns.len() as u64 {
            let seq = run.first_seq + i;
            if !got.contains(&seq) {
                match ranges.last_mut() {
                    Some(last) if last.1 + 1 == seq => last.1 = seq,
                    _ => ranges.push((seq, seq)),
                }
            }
        }
        let last_recv = r.recv.iter().map(|x| x.1).max().unwrap_or(0);
        let last_sent = run.sent_ns.last().copied().unwrap_or(0);
        eprintln!(
            "debug watcher {w}: first seq {} n {} missing ranges ({}): {:?} ended {:?} unmarked {} last recv - last sent {} ms",
            run.first_seq,
            run.sent_ns.len(),
            ranges.len(),
            &ranges[..ranges.len().min(12)],
            r.ended,
            r.unmarked,
            (last_recv as i64 - last_sent as i64) / 1_000_000
        );
    }
}

/// Runs every phase and returns the table.
pub fn run_all(children: &Children, opts: &Opts) -> BenchResult<String> {
    let began = Instant::now();
    let mut notes = Vec::new();
    let machine = machine(opts);
    eprintln!("loadbench: starting grid-wrapper-sim at scale S");
    let (sim_pid, sim_url, sim) = start_sim(children, opts)?;
    let state = get_ok(&mut Client::new(sim), "/sim/state")?;
    eprintln!(
        "loadbench: sim state {}",
        String::from_utf8_lossy(&state.body)
    );
    let mut sim_args = format!("--fixture scale --history {SIM_HISTORY}");
    for (k, v) in SCALE {
        sim_args.push_str(&format!(" {k} {v}"));
    }

    eprintln!("loadbench: starting grid-wrapper");
    let (w, first_ready) = start_wrapper(children, opts, &sim_url)?;
    eprintln!("loadbench: ready; memory and LIST latency");
    let mut mem = memory(&w, sim_pid, sim)?;
    // The JSON-only readings are taken; now the protobuf kube-proxy (the run's first protobuf
    // requests), then the LIST phase.
    mem.attach_protobuf(&w);
    let pb_first = mem.proto.as_ref().map(|p| p.first_list_ns);
    let list = crate::listbench::list_bench(children, opts, w.addr, &[w.pid, sim_pid], pb_first)?;
    if let Some(e) = &list.nginx_error {
        notes.push(format!("nginx column n/a: {e}"));
    }

    eprintln!("loadbench: watch fan-out");
    let mut rounds = Rounds::new(&w, sim, sim_pid, opts.watchers)?;
    let fanout = rounds.round(opts.rate, opts.changes, FANOUT_DRAIN)?;

    eprintln!("loadbench: LIST and fan-out at rest, during relabels, during relists");
    let writer = crate::relist::run(&mut rounds, opts)?;

    let mut ramp = Vec::new();
    for &rate in &opts.ramp {
        let count = (rate * opts.step_secs).round().max(1.0) as usize;
        eprintln!("loadbench: ramp step {rate}/s ({count} changes)");
        let r = rounds.round(rate, count, STEP_DRAIN)?;
        let (kept, bound) = (r.kept_up(), r.source_bound());
        ramp.push(r);
        if !kept || bound || began.elapsed() > Duration::from_secs(200) {
            break;
        }
    }
    mem.rss_end = rss_kib(w.pid).unwrap_or(0);
    mem.hwm_end = hwm_kib(w.pid).unwrap_or(0);
    let churn_end = Instant::now();
    let relists = w.log.count("relist");
    if relists > 0 {
        notes.push(format!(
            "the wrapper logged {relists} relist line(s) during the run"
        ));
    }

    // While the event logs' window passes for the wrapper above (it stays up, its watchers
    // connected, no change made), fresh starts and the idle run use other processes.
    eprintln!("loadbench: readiness ({} fresh starts)", opts.ready_runs);
    let mut ready = Vec::new();
    for _ in 0..opts.ready_runs {
        let (w2, s) = start_wrapper(children, opts, &sim_url)?;
        children.kill(w2.pid);
        ready.push(s);
    }
    eprintln!("loadbench: idle RSS of the demo cluster");
    let idle = crate::idle::run(children, opts).map_err(|e| e.to_string());
    eprintln!(
        "loadbench: waiting for the event logs' window ({} s after the last change)",
        AGED_AFTER.as_secs()
    );
    thread::sleep(AGED_AFTER.saturating_sub(churn_end.elapsed()));
    mem.aged_after = churn_end.elapsed();
    mem.rss_aged = rss_kib(w.pid).unwrap_or(0);
    children.kill(w.pid);
    children.kill(sim_pid);

    let results = Results {
        machine,
        sim_args,
        mem,
        list,
        fanout,
        writer,
        idle,
        ramp,
        first_ready,
        ready,
        watchers: opts.watchers,
        step_secs: opts.step_secs,
        notes,
        wall: began.elapsed(),
    };
    Ok(crate::report::table(&results))
}
