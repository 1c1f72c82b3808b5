//! `loadbench` (`make loadbench`): drives the release `grid-wrapper` over loopback against
//! `grid-wrapper-sim` at scale S and prints one Markdown table (also written to
//! `out/loadbench.md`): RSS per cached byte (also with a protobuf kube-proxy attached), LIST
//! latency in JSON and in protobuf next to nginx serving the same bytes,
//! watch fan-out latency and CPU per delivered event, LIST and fan-out latency at rest and while
//! grid-wrapper relabels or relists (the writer phase), the sustained change rate kept up with,
//! the time from the last upstream list to `/readyz` 200, and the idle RSS of the demo cluster.
//! `--scale x10` runs the ×10 bench instead; `--only fanout` only the watch fan-out and the
//! sustained-rate sweep, with grid-wrapper's CPU in cores per step. Bounded: fixed request counts, a watchdog that
//! kills every child and exits after [`BUDGET`] ([`X10_BUDGET`]), loopback only.

mod driver;
mod fanout;
mod http;
mod idle;
mod listbench;
mod listclient;
mod membench;
mod nginx;
mod phases;
mod procs;
mod protobuf;
mod relist;
mod report;
mod scale;
mod scalereport;
mod site;
mod snapprobe;
mod snapreport;
mod snapshot;
mod stats;
mod tls;
mod wan;
mod watchers;

use std::error::Error;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use procs::{Children, LineLog};

/// Result of the bench's fallible steps.
pub type BenchResult<T> = Result<T, Box<dyn Error>>;

/// Whole-run bound: the watchdog kills every child and exits past it (`scripts/loadbench.sh`
/// allows 300 s).
pub const BUDGET: Duration = Duration::from_secs(290);
/// Whole-run bound of `--scale x10` (`scripts/loadbench.sh` allows 360 s for it).
pub const X10_BUDGET: Duration = Duration::from_secs(340);
/// Whole-run bound of `--only wan` (`scripts/loadbench.sh` allows 400 s for it).
pub const WAN_BUDGET: Duration = Duration::from_secs(390);
/// Whole-run bound of `--snapshot` (`make snapbench` allows 4 minutes in all).
pub const SNAPSHOT_BUDGET: Duration = Duration::from_secs(225);
/// kube-proxy's label selector L, percent-encoded as it sends it.
pub const SELECTOR_L: &str =
    "%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name";
/// Scale S.
pub const SCALE: [(&str, &str); 4] = [
    ("--nodes", "500"),
    ("--services", "2000"),
    ("--zones", "20"),
    ("--endpoints-per-slice", "10"),
];
/// The node grid-wrapper runs as.
pub const HOSTNAME: &str = "node-00000";
/// Events the simulator keeps for watch resumption during the bench.
pub const SIM_HISTORY: &str = "20000";

const USAGE: &str = "\
loadbench: load benchmark of grid-wrapper against grid-wrapper-sim at scale S (make loadbench)

  --bin-dir DIR               where grid-wrapper and grid-wrapper-sim are (default target/release)
  --out FILE                  Markdown table output (default out/loadbench.md)
  --nginx PATH|none           nginx binary for the LIST baseline (default: nginx on PATH or /usr/sbin)
  --watchers N                concurrent watches (default 100)
  --watch-client epoll|threads  how the bench reads the watches: one epoll thread for all
                              (default; like client-go on Go's netpoller) or one blocking thread
                              per watch (the old client: on 2 cores its wake-ups cost more CPU
                              than grid-wrapper's writes, so its fan-out figures are client-bound)
  --changes N                 fan-out changes (default 1000)
  --rate R                    fan-out apply rate per second (default 200)
  --ramp R1,R2,...            sustained-rate steps per second (default 200,500,1000,2000,3000,4000,8000)
  --step-secs S               seconds per ramp step (default 4)
  --list-requests N           timed LIST requests per series (default 200)
  --list-runs N               LIST runs, series interleaved, fresh connections (default 5)
  --only list                 run only the LIST phase (sim, one grid-wrapper, nginx, curl,
                              loopback reference; JSON and protobuf); table in
                              out/listbench.md unless --out
  --only fanout               run only the watch fan-out (~2 min): latency and grid-wrapper's own
                              share at --rate, then the sweep (default
                              200,500,1000,2000,3000,5000,7000/s), each step with whether every
                              watcher got every change and grid-wrapper's CPU in cores; table in
                              out/fanoutbench.md unless --out
  --epoll-threads N           the epoll watch client reads on N threads (default 1; 2 with
                              --only fanout)
  --only wan                  run only the WAN bench: a full sync at scale S and x10, with
                              --upstream-gzip=true and =false (LIST bytes the simulator sent,
                              grid-wrapper's and the simulator's CPU); table in
                              out/wanbench.md unless --out
  --only relay                run only the site relay bench: the relay's fan-out to --watchers
                              follower watches over TLS (as --only fanout, every sweep step),
                              then what a site of --followers followers costs the cloud without
                              a relay and with one (requests, watches, bytes over --site-secs,
                              churn --site-rate/s); tables in out/relaybench.md unless --out
  --only mem                  run only the memory A/B (issue 46's acceptance): one simulator at
                              scale S (x10 with --scale x10), each run a fresh grid-wrapper:
                              sync time and CPU, VmRSS after sync, after a JSON client and after
                              a protobuf client read kube-proxy's lists, ÷ the upstream's JSON
                              lists; --gw-bin and --gw-bin-b alternated; table in
                              out/membench.md (out/membench-x10.md) unless --out
  --gw-bin-b PATH             with --only mem: the second binary (B), alternated with --gw-bin
  --mem-runs N                with --only mem: runs per binary (default 3)
  --relay-parts fanout,site   which parts of --only relay run (default both)
  --followers N               followers of the relay bench (default 10)
  --site-secs S               the relay bench's window per mode, from the first start (default 300)
  --site-rate R               the relay bench's churn, changes per second (default 20)
  --ready-runs N              fresh starts timed to /readyz (default 3)
  --notify-channel-size N     passed to grid-wrapper (default: its own default)
  --writer-secs S             writer phase: seconds per window (at rest, during relabels, during
                              relists; default 12)
  --gw-bin PATH               the grid-wrapper binary measured (default: DIR/grid-wrapper; make
                              loadbench passes the static musl x86_64 build, what users run)
  --idle-bin PATH             grid-wrapper binary of the idle-RSS row (demo cluster); default
                              out/edge/x86_64-unknown-linux-musl/grid-wrapper if it exists, else
                              the one in --bin-dir

  --scale x10                 instead: scale ×10 (5,000 nodes, 20,000 Services, 200 zones): sync
                              time, RSS ÷ JSON (also with a protobuf kube-proxy attached),
                              LIST p50/p99, local-node relabel time, fan-out
                              with 20 watchers, sync CPU; table in out/loadbench-x10.md unless
                              --out; bounded to 340 s. Run it with
                              bash scripts/loadbench.sh target/release --scale x10

  --snapshot                  instead: measure the --cache-dir snapshot (make snapbench): size,
                              write time and CPU, LIST latency with and without writes, offline
                              start from the snapshot; table in out/snapbench.md unless --out
  --cache-dir DIR             its --cache-dir (default out/snapbench-cache; its snapshot and
                              epoch files are removed first)
  --window-secs S             timed LIST window per wrapper (default 15)
  --min-requests N            timed LISTs per window at least (default 300)
  --churn-ms MS               one node relabel every MS ms during the windows (default 1200)
  --offline-runs N            offline starts from the snapshot (default 3)

Environment: LOADBENCH_DEBUG=1 prints the missing sequence ranges of the first watchers per round.
";

/// Bench parameters.
#[derive(Clone, Debug)]
pub struct Opts {
    /// Directory of the binaries.
    pub bin_dir: PathBuf,
    /// Output file.
    pub out: PathBuf,
    /// nginx binary (`Some("none")` disables).
    pub nginx: Option<String>,
    /// Watchers.
    pub watchers: usize,
    /// Fan-out changes.
    pub changes: usize,
    /// Fan-out rate.
    pub rate: f64,
    /// Ramp steps.
    pub ramp: Vec<f64>,
    /// Seconds per step.
    pub step_secs: f64,
    /// Timed LIST requests per series.
    pub list_requests: usize,
    /// LIST runs.
    pub list_runs: usize,
    /// `--only list`: run only the LIST phase.
    pub only_list: bool,
    /// `--only wan`: run only the WAN bench.
    pub only_wan: bool,
    /// `--only relay`: run only the site relay bench.
    pub only_relay: bool,
    /// The relay bench's site: followers, window, churn.
    pub site: site::SiteSpec,
    /// `--only fanout`: run only the fan-out phases.
    pub only_fanout: bool,
    /// Readiness runs.
    pub ready_runs: usize,
    /// `--notify-channel-size` for grid-wrapper.
    pub channel: Option<usize>,
    /// `--snapshot`: run the snapshot bench instead.
    pub snapshot: bool,
    /// `--cache-dir` of the snapshot bench.
    pub cache_dir: PathBuf,
    /// Timed LIST window per wrapper, seconds.
    pub window_secs: f64,
    /// Timed LISTs per window at least.
    pub min_requests: usize,
    /// Churn period, ms.
    pub churn_ms: u64,
    /// Offline starts.
    pub offline_runs: usize,
    /// Writer phase: seconds per window.
    pub writer_secs: f64,
    /// `--gw-bin`: the grid-wrapper binary measured (default: `grid-wrapper` in `bin_dir`).
    pub gw_bin: Option<PathBuf>,
    /// `--idle-bin`: grid-wrapper binary of the idle-RSS row.
    pub idle_bin: Option<PathBuf>,
    /// `--scale x10`: run the ×10 bench instead (with `--only mem`: at ×10).
    pub x10: bool,
    /// `--only mem`: run only the memory A/B.
    pub only_mem: bool,
    /// `--gw-bin-b`: the memory A/B's second binary.
    pub gw_bin_b: Option<PathBuf>,
    /// `--mem-runs`: runs per binary of the memory A/B.
    pub mem_runs: usize,
}

impl Opts {
    /// The grid-wrapper binary measured.
    pub fn gw_bin(&self) -> PathBuf {
        self.gw_bin
            .clone()
            .unwrap_or_else(|| self.bin_dir.join("grid-wrapper"))
    }
}

fn parse_opts() -> BenchResult<Opts> {
    let mut o = Opts {
        bin_dir: "target/release".into(),
        out: "out/loadbench.md".into(),
        nginx: None,
        watchers: 100,
        changes: 1000,
        rate: 200.0,
        ramp: vec![200.0, 500.0, 1000.0, 2000.0, 3000.0, 4000.0, 8000.0],
        step_secs: 4.0,
        list_requests: 200,
        list_runs: 5,
        only_list: false,
        only_wan: false,
        only_relay: false,
        site: site::SiteSpec {
            followers: 10,
            secs: 300.0,
            rate: 20.0,
            parts: site::Parts {
                fanout: true,
                site: true,
            },
        },
        only_fanout: false,
        ready_runs: 3,
        channel: None,
        snapshot: false,
        cache_dir: "out/snapbench-cache".into(),
        window_secs: 15.0,
        min_requests: 300,
        churn_ms: 1200,
        offline_runs: 3,
        writer_secs: 12.0,
        idle_bin: None,
        gw_bin: None,
        x10: false,
        only_mem: false,
        gw_bin_b: None,
        mem_runs: 3,
    };
    let mut out_given = false;
    let mut ramp_given = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-h" || a == "--help" {
            print!("{USAGE}");
            std::process::exit(0);
        }
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--bin-dir" => o.bin_dir = val()?.into(),
            "--out" => {
                o.out = val()?.into();
                out_given = true;
            }
            "--nginx" => o.nginx = Some(val()?),
            "--watchers" => o.watchers = val()?.parse()?,
            "--watch-client" => watchers::set_client(match val()?.as_str() {
                "epoll" => watchers::ClientKind::Epoll,
                "threads" => watchers::ClientKind::Threads,
                other => return Err(format!("--watch-client {other:?}: epoll or threads").into()),
            }),
            "--changes" => o.changes = val()?.parse()?,
            "--rate" => o.rate = val()?.parse()?,
            "--ramp" => {
                ramp_given = true;
                o.ramp = val()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--step-secs" => o.step_secs = val()?.parse()?,
            "--list-requests" => o.list_requests = val()?.parse()?,
            "--list-runs" => o.list_runs = val()?.parse()?,
            "--only" => match val()?.as_str() {
                "list" => o.only_list = true,
                "wan" => o.only_wan = true,
                "relay" => o.only_relay = true,
                "fanout" => o.only_fanout = true,
                "mem" => o.only_mem = true,
                other => {
                    return Err(format!(
                        "--only {other:?}: `list`, `wan`, `fanout`, `relay` and `mem` are known"
                    )
                    .into())
                }
            },
            "--epoll-threads" => watchers::set_epoll_threads(val()?.parse()?),
            "--followers" => o.site.followers = val()?.parse()?,
            "--site-secs" => o.site.secs = val()?.parse()?,
            "--site-rate" => o.site.rate = val()?.parse()?,
            "--relay-parts" => {
                let v = val()?;
                o.site.parts = site::Parts {
                    fanout: v.split(',').any(|p| p == "fanout"),
                    site: v.split(',').any(|p| p == "site"),
                };
                if !(o.site.parts.fanout || o.site.parts.site) {
                    return Err(format!("--relay-parts {v:?}: fanout, site or both").into());
                }
            }
            "--ready-runs" => o.ready_runs = val()?.parse()?,
            "--notify-channel-size" => o.channel = Some(val()?.parse()?),
            "--snapshot" => o.snapshot = true,
            "--cache-dir" => o.cache_dir = val()?.into(),
            "--window-secs" => o.window_secs = val()?.parse()?,
            "--min-requests" => o.min_requests = val()?.parse()?,
            "--churn-ms" => o.churn_ms = val()?.parse()?,
            "--offline-runs" => o.offline_runs = val()?.parse()?,
            "--writer-secs" => o.writer_secs = val()?.parse()?,
            "--idle-bin" => o.idle_bin = Some(val()?.into()),
            "--gw-bin" => o.gw_bin = Some(val()?.into()),
            "--gw-bin-b" => o.gw_bin_b = Some(val()?.into()),
            "--mem-runs" => o.mem_runs = val()?.parse()?,
            "--scale" => match val()?.as_str() {
                "x10" => o.x10 = true,
                other => return Err(format!("--scale {other:?}: only `x10` is known").into()),
            },
            _ => return Err(format!("unknown argument {a:?}\n{USAGE}").into()),
        }
    }
    if o.watchers == 0 || o.changes == 0 || o.rate <= 0.0 || o.list_requests < 20 {
        return Err("--watchers, --changes, --rate must be positive; --list-requests ≥ 20".into());
    }
    if o.list_runs < 3 {
        return Err("--list-runs must be at least 3 (the table gives the median over runs)".into());
    }
    if o.only_list && !out_given {
        o.out = "out/listbench.md".into();
    }
    if o.only_wan && !out_given {
        o.out = "out/wanbench.md".into();
    }
    if o.only_relay && !out_given {
        o.out = "out/relaybench.md".into();
    }
    if o.site.followers == 0 || !(10.0..=3600.0).contains(&o.site.secs) || o.site.rate <= 0.0 {
        return Err(
            "--followers and --site-rate must be positive, --site-secs within 10..=3600".into(),
        );
    }
    if o.only_fanout && !out_given {
        o.out = "out/fanoutbench.md".into();
    }
    if o.only_fanout || o.only_relay {
        // One reading thread fell behind above about 2,000 changes/s on 2 cores while a second
        // kept up (BENCHMARKS.md, "Fan-out"): two by default, so that the client is not what is
        // measured; an explicit --epoll-threads wins (it was set first).
        watchers::set_epoll_threads(2);
    }
    if (o.only_fanout || o.only_relay) && !ramp_given {
        o.ramp = fanout::FANOUT_RAMP.to_vec();
    }
    if o.snapshot && !out_given {
        o.out = "out/snapbench.md".into();
    }
    if o.only_mem && !out_given {
        o.out = if o.x10 {
            "out/membench-x10.md"
        } else {
            "out/membench.md"
        }
        .into();
    } else if o.x10 && !out_given {
        o.out = "out/loadbench-x10.md".into();
    }
    if o.only_mem && !(1..=9).contains(&o.mem_runs) {
        return Err("--mem-runs must be within 1..=9".into());
    }
    if !(1.0..=60.0).contains(&o.writer_secs) {
        return Err("--writer-secs must be within 1..=60".into());
    }
    if o.window_secs <= 0.0 || o.min_requests == 0 || o.churn_ms == 0 || o.offline_runs == 0 {
        return Err(
            "--window-secs, --min-requests, --churn-ms, --offline-runs must be positive".into(),
        );
    }
    Ok(o)
}

/// A running grid-wrapper.
#[derive(Debug)]
pub struct Wrapper {
    /// Process id.
    pub pid: u32,
    /// Serving address.
    pub addr: SocketAddr,
    /// Health/metrics address.
    pub health: SocketAddr,
    /// Its stderr, timestamped.
    pub log: LineLog,
}

/// Readiness timings of one start.
#[derive(Clone, Debug)]
pub struct ReadySample {
    /// spawn → `/readyz` 200, ns.
    pub start_to_ready: u64,
    /// last `listed` log line → `/readyz` 200, ns (negative if the log line was read later).
    pub listed_to_ready: Option<i64>,
    /// last `listed` log line → `cache ready` log line, ns.
    pub listed_to_cache_ready: Option<i64>,
    /// `listed` lines seen.
    pub listed_lines: usize,
    /// spawn → first `listed` log line, ns.
    pub start_to_first_listed: Option<i64>,
    /// The kind named by the last `listed` line.
    pub last_listed_kind: String,
    /// Of the last list applied (its `… applied in` log line): (read and decoded on the reflector's
    /// thread, applied by the writer), ms.
    pub last_applied: Option<(f64, f64)>,
}

fn signed_ns(from: Instant, to: Instant) -> i64 {
    match to.checked_duration_since(from) {
        Some(d) => d.as_nanos() as i64,
        None => -(from.duration_since(to).as_nanos() as i64),
    }
}

/// Starts grid-wrapper against `master` (`-v 0`) and polls `/readyz` every 5 ms until 200
/// (bounded).
pub fn start_wrapper(
    children: &Children,
    opts: &Opts,
    master: &str,
) -> BenchResult<(Wrapper, ReadySample)> {
    start_wrapper_with(children, opts, master, &["-v", "0"])
}

/// [`start_wrapper`] with `extra` arguments instead of `-v 0`.
pub fn start_wrapper_with(
    children: &Children,
    opts: &Opts,
    master: &str,
    extra: &[&str],
) -> BenchResult<(Wrapper, ReadySample)> {
    let spec = WrapperSpec {
        bin: &opts.gw_bin(),
        hostname: HOSTNAME,
        extra,
        ready_within: Duration::from_secs(60),
    };
    start_wrapper_spec(children, opts, master, &spec)
}

/// Which grid-wrapper to start and how long it may take to become ready.
#[derive(Debug)]
pub struct WrapperSpec<'a> {
    /// The binary.
    pub bin: &'a Path,
    /// `--hostname`.
    pub hostname: &'a str,
    /// Further arguments.
    pub extra: &'a [&'a str],
    /// `/readyz` must answer 200 within this.
    pub ready_within: Duration,
}

/// Starts `spec.bin` against `master` and polls `/readyz` every 5 ms until 200 (bounded by
/// `spec.ready_within`).
pub fn start_wrapper_spec(
    children: &Children,
    opts: &Opts,
    master: &str,
    spec: &WrapperSpec<'_>,
) -> BenchResult<(Wrapper, ReadySample)> {
    let (bin, hostname, extra) = (spec.bin, spec.hostname, spec.extra);
    for _attempt in 0..3 {
        let (port, health) = (http::free_port()?, http::free_port()?);
        if port == health {
            continue;
        }
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--master={master}"))
            .arg(format!("--hostname={hostname}"))
            .arg(format!("--bind-address=127.0.0.1:{port}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{health}"))
            .args(extra);
        if let Some(n) = opts.channel {
            cmd.arg(format!("--notify-channel-size={n}"));
        }
        let spawned_at = Instant::now();
        let sp = children.spawn(&mut cmd, false)?;
        let w = Wrapper {
            pid: sp.pid,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            health: SocketAddr::from(([127, 0, 0, 1], health)),
            log: sp.log,
        };
        let mut ready_at = None;
        let deadline = spawned_at + spec.ready_within;
        while Instant::now() < deadline && children.alive(w.pid) {
            if let Ok(r) = http::get_once(w.health, "/readyz", Duration::from_secs(1)) {
                if r.code == 200 {
                    ready_at = Some(Instant::now());
                    break;
                }
            }
            thread::sleep(Duration::from_millis(5));
        }
        let Some(ready_at) = ready_at else {
            let tail = w.log.tail(10);
            children.kill(w.pid);
            if tail.contains("cannot listen") {
                continue; // a port race: retry with fresh ports
            }
            return Err(format!(
                "grid-wrapper did not become ready within {} s:\n{tail}",
                spec.ready_within.as_secs()
            )
            .into());
        };
        thread::sleep(Duration::from_millis(100)); // let the log reader catch up
        let lines = w.log.lines();
        let listed: Vec<&(Instant, String)> = lines
            .iter()
            .filter(|(_, l)| l.contains(" listed "))
            .collect();
        let last_listed = listed.last().map(|(t, _)| *t);
        let last_listed_kind = listed
            .last()
            .and_then(|(_, l)| l.split(" listed ").nth(1))
            .and_then(|rest| rest.split(':').next())
            .unwrap_or("?")
            .to_string();
        let cache_ready = lines
            .iter()
            .find(|(_, l)| l.contains("cache ready"))
            .map(|(t, _)| *t);
        let ms_after = |l: &str, label: &str| -> Option<f64> {
            let rest = &l[l.find(label)? + label.len()..];
            rest.split(" ms").next()?.trim().parse().ok()
        };
        let last_applied = lines
            .iter()
            .rev()
            .find(|(_, l)| l.contains(" items applied"))
            .and_then(|(_, l)| {
                // Today's line ("read and decoded in …, queued … for the writer, applied by the writer in …")
                // or the one before the single writer ("decoded off the lock in …, held it …").
                Some((
                    ms_after(l, "read and decoded in")
                        .or_else(|| ms_after(l, "decoded off the lock in"))?,
                    ms_after(l, "applied by the writer in").or_else(|| ms_after(l, "held it"))?,
                ))
            });
        let sample = ReadySample {
            start_to_ready: ready_at.duration_since(spawned_at).as_nanos() as u64,
            listed_to_ready: last_listed.map(|l| signed_ns(l, ready_at)),
            listed_to_cache_ready: last_listed.zip(cache_ready).map(|(l, c)| signed_ns(l, c)),
            listed_lines: listed.len(),
            start_to_first_listed: listed.first().map(|(t, _)| signed_ns(spawned_at, *t)),
            last_listed_kind,
            last_applied,
        };
        return Ok((w, sample));
    }
    Err("grid-wrapper could not listen (3 attempts)".into())
}

/// Starts the simulator at scale S; returns (pid, URL, address).
fn start_sim(children: &Children, opts: &Opts) -> BenchResult<(u32, String, SocketAddr)> {
    let mut args = vec!["--fixture", "scale", "--history", SIM_HISTORY];
    for (k, v) in SCALE {
        args.extend([k, v]);
    }
    start_sim_args(children, opts, &args)
}

/// Starts the simulator with `args`; returns (pid, URL, address).
pub fn start_sim_args(
    children: &Children,
    opts: &Opts,
    args: &[&str],
) -> BenchResult<(u32, String, SocketAddr)> {
    let mut cmd = Command::new(opts.bin_dir.join("grid-wrapper-sim"));
    cmd.args(args);
    let sp = children.spawn(&mut cmd, true)?;
    let out = sp.stdout.ok_or("sim stdout not piped")?;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut r = BufReader::new(out);
        let mut line = String::new();
        let _ = r.read_line(&mut line);
        let _ = tx.send(line);
        // Keep draining so the sim never blocks on a full pipe.
        let _ = std::io::copy(&mut r, &mut std::io::sink());
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .map_err(|_| format!("sim printed no banner:\n{}", sp.log.tail(10)))?;
    let url = line
        .split_whitespace()
        .last()
        .filter(|u| u.starts_with("http://"))
        .ok_or_else(|| format!("unexpected sim banner {line:?}"))?
        .to_string();
    let addr: SocketAddr = url.trim_start_matches("http://").parse()?;
    Ok((sp.pid, url, addr))
}

fn main() {
    let opts = match parse_opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("loadbench: {e}");
            std::process::exit(2);
        }
    };
    let children = Children::default();
    let watchdog = children.clone();
    let budget = if opts.only_mem {
        membench::budget(&opts)
    } else if opts.snapshot {
        SNAPSHOT_BUDGET
    } else if opts.x10 {
        X10_BUDGET
    } else if opts.only_wan {
        WAN_BUDGET
    } else if opts.only_relay {
        site::budget(&opts.site)
    } else {
        BUDGET
    };
    thread::spawn(move || {
        thread::sleep(budget);
        eprintln!(
            "loadbench: time budget of {} s exceeded; stopping",
            budget.as_secs()
        );
        watchdog.kill_all();
        std::process::exit(1);
    });
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if opts.only_mem {
            membench::run_mem(&children, &opts)
        } else if opts.snapshot {
            snapshot::run_all(&children, &opts)
        } else if opts.x10 {
            scale::run_x10(&children, &opts)
        } else if opts.only_list {
            listbench::run_only(&children, &opts)
        } else if opts.only_wan {
            wan::run_wan(&children, &opts)
        } else if opts.only_relay {
            site::run_relay(&children, &opts, opts.site)
        } else if opts.only_fanout {
            fanout::run_fanout(&children, &opts)
        } else {
            phases::run_all(&children, &opts)
        }
    }));
    children.kill_all();
    let result = result.unwrap_or_else(|_| Err("panicked (see above)".into()));
    match result {
        Ok(table) => {
            println!("{table}");
            if let Some(dir) = opts.out.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Err(e) = std::fs::write(&opts.out, &table) {
                eprintln!("loadbench: cannot write {}: {e}", opts.out.display());
                std::process::exit(1);
            }
            eprintln!("loadbench: table written to {}", opts.out.display());
        }
        Err(e) => {
            eprintln!("loadbench: failed: {e}");
            std::process::exit(1);
        }
    }
}
