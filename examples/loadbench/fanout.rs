//! `--only fanout`: the watch fan-out alone (phases 3 and 4 of the full bench), in about two
//! minutes: the fan-out latency at a fixed rate with grid-wrapper's own share, then the
//! sustained-rate sweep, each step with whether every watcher got every change, grid-wrapper's
//! CPU in cores and per delivered event (from /proc/PID/stat), and the watch client's own
//! reading threads' CPU, so that a client-bound step shows as one.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::http::free_port;
use crate::http::Client;
use crate::phases::{get_ok, machine, Round, Rounds, FANOUT_DRAIN, KEEP_UP_P99, STEP_DRAIN};
use crate::procs::{rss_kib, Children};
use crate::site::RelayPki;
use crate::stats::{dur, own_share, pct};
use crate::tls;
use crate::watchers::{client, epoll_threads, ClientKind};
use crate::{start_sim, start_wrapper_with, BenchResult, Opts};
use std::net::SocketAddr;

/// The sweep of `--only fanout` when `--ramp` is not given.
pub const FANOUT_RAMP: [f64; 7] = [200.0, 500.0, 1000.0, 2000.0, 3000.0, 5000.0, 7000.0];
/// The sweep stops after this many steps in a row that did not keep up.
const FAILS_IN_A_ROW: usize = 2;

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn cores(cpu: f64, d: Duration) -> f64 {
    cpu / d.as_secs_f64().max(1e-9)
}

/// Runs the fan-out phases and returns their table.
pub fn run_fanout(children: &Children, opts: &Opts) -> BenchResult<String> {
    run(children, opts, None)
}

/// The same on a relay's port (`--only relay`): the watches are a follower's reflector's
/// EndpointSlice watch over TLS with the followers' client certificate, on a grid-wrapper
/// serving `--relay-bind-address`; every step of the sweep runs (the tables of several runs then
/// have the same rows).
pub fn run_relay_fanout(children: &Children, opts: &Opts, pki: &RelayPki) -> BenchResult<String> {
    run(children, opts, Some(pki))
}

fn run(children: &Children, opts: &Opts, relay: Option<&RelayPki>) -> BenchResult<String> {
    let began = Instant::now();
    let m = machine(opts);
    let load0 = loadavg();
    eprintln!("loadbench: starting grid-wrapper-sim at scale S");
    let (sim_pid, sim_url, sim) = start_sim(children, opts)?;
    get_ok(&mut Client::new(sim), "/sim/state")?;
    eprintln!("loadbench: starting grid-wrapper");
    let mut extra: Vec<String> = vec!["-v".into(), "0".into()];
    let relay_port = match relay {
        Some(pki) => {
            let port = free_port()?;
            extra.extend(pki.relay_flags(port));
            Some(port)
        }
        None => None,
    };
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let (w, _) = start_wrapper_with(children, opts, &sim_url, &extra)?;
    // After the sync, before any watch: the relay's second view shows here.
    std::thread::sleep(Duration::from_secs(2));
    let rss_kib = rss_kib(w.pid).unwrap_or(0);
    let mut rounds = Rounds::new(&w, sim, sim_pid, opts.watchers)?;
    if let (Some(pki), Some(port)) = (relay, relay_port) {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        tls::register(addr, pki.client_config()?);
        rounds.watch_addr = addr;
    }
    eprintln!(
        "loadbench: fan-out, {} changes at {}/s",
        opts.changes, opts.rate
    );
    let fanout = rounds.round(opts.rate, opts.changes, FANOUT_DRAIN)?;
    let mut ramp = Vec::new();
    let mut fails = 0;
    for &rate in &opts.ramp {
        let count = (rate * opts.step_secs).round().max(1.0) as usize;
        eprintln!("loadbench: ramp step {rate}/s ({count} changes)");
        rounds.settle()?;
        let r = rounds.round(rate, count, STEP_DRAIN)?;
        fails = if r.kept_up() { 0 } else { fails + 1 };
        ramp.push(r);
        let stop = fails >= FAILS_IN_A_ROW && relay.is_none();
        if stop || began.elapsed() > Duration::from_secs(240) {
            break;
        }
    }
    children.kill(w.pid);
    children.kill(sim_pid);
    let what = match relay {
        Some(_) => "follower watches on the relay port (TLS, a follower reflector's EndpointSlice watch, selector L, JSON)",
        None => "watchers of kube-proxy's EndpointSlice watch (selector L)",
    };
    let mut t = table(
        opts,
        &m,
        (what, relay.is_some(), rss_kib),
        &fanout,
        &ramp,
        began.elapsed(),
    );
    let _ = writeln!(
        t,
        "\nLoad average (/proc/loadavg) at the start: {load0}; at the end: {}.",
        loadavg()
    );
    Ok(t)
}

fn step_row(out: &mut String, s: &Round, watchers: usize) {
    let d = &s.delivery;
    let verdict = if s.kept_up() && s.source_bound() {
        format!(
            "kept up with what came: the driver + simulator reached only {:.0}/s",
            s.run.achieved_rate()
        )
    } else if s.kept_up() {
        "kept up".to_string()
    } else if !d.all_delivered() {
        format!(
            "**no**: {}/{} deliveries",
            d.delivered,
            d.changes * watchers
        )
    } else {
        "**no**: p99 ≥ 1 s".to_string()
    };
    let apply = s.run.elapsed;
    let _ = writeln!(
        out,
        "| {:.0}/s | {:.0}/s | {verdict} | {} / {} | {:.2} | {:.2} ({:.0} % kernel) | {} | {:.2} / {} | {:.2} | {:.2} | {:.2} |",
        s.rate,
        s.run.achieved_rate(),
        dur(d.all_pct(50.0)),
        dur(d.all_pct(99.0)),
        cores(s.apply_wrapper_cpu, apply),
        cores(s.wrapper_cpu, s.window),
        100.0 * s.wrapper_sys_cpu / s.wrapper_cpu.max(1e-9),
        dur((s.wrapper_cpu * 1e9 / d.delivered.max(1) as f64) as u64),
        cores(s.wrapper_loop_cpu, s.window),
        dur((s.wrapper_loop_cpu * 1e9 / d.delivered.max(1) as f64) as u64),
        cores(s.sim_cpu, s.window),
        cores(s.client_cpu, s.window),
        cores(s.self_cpu, s.window),
    );
}

fn table(
    opts: &Opts,
    m: &crate::phases::Machine,
    (what, relayed, rss_kib): (&str, bool, u64),
    f: &Round,
    ramp: &[Round],
    wall: Duration,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# loadbench --only {}\n\n{} · {} × {} · kernel {} · {}\n\ngrid-wrapper {}; {} {what}, read by {}; changes to slices of non-topology Services through the simulator; wall {:.0} s.\n",
        if relayed { "relay: the relay's fan-out" } else { "fanout" },
        m.date,
        m.nproc,
        m.cpu,
        m.kernel,
        if m.nproc <= 2 { "simulator, grid-wrapper and the bench share these cores" } else { "shared machine" },
        m.version,
        opts.watchers,
        match client() {
            ClientKind::Epoll => format!("{} epoll thread(s)", epoll_threads()),
            ClientKind::Threads => "one thread per watch".into(),
        },
        wall.as_secs_f64(),
    );
    let d = &f.delivery;
    let mut own = own_share(d, &f.upstream);
    let _ = writeln!(out, "| row | figure | value | how |\n|---|---|---|---|");
    let _ = writeln!(
        out,
        "| F0 | grid-wrapper RSS after sync | {:.2} MiB | VmRSS 2 s after `/readyz` 200, before any watch{} |",
        rss_kib as f64 / 1024.0,
        if relayed { "; with `--relay-bind-address`: its relay view too" } else { "" },
    );
    let _ = writeln!(
        out,
        "| F1 | fan-out at {:.0}/s: apply → received by all {} watchers, p50 / p99 | {} / {} | {} changes; delivered {}/{}; control watch on the simulator p50 / p99 {} / {} |",
        f.rate,
        opts.watchers,
        dur(d.all_pct(50.0)),
        dur(d.all_pct(99.0)),
        d.changes,
        d.delivered,
        d.changes * opts.watchers,
        dur(f.upstream.all_pct(50.0)),
        dur(f.upstream.all_pct(99.0)),
    );
    let _ = writeln!(
        out,
        "| F1 | fan-out at {:.0}/s: grid-wrapper's own share, p50 / p99 | {} / {} | per change ({}): received by the last watcher − received by the control watch (0 when the control was later) |",
        f.rate,
        dur(pct(&mut own, 50.0)),
        dur(pct(&mut own, 99.0)),
        own.len(),
    );
    let _ = writeln!(
        out,
        "| F1 | grid-wrapper CPU per delivered event at {:.0}/s, all threads / event loop thread (the fan-out) | {} / {} | utime+stime {:.2} s ({:.0} % kernel) over {} deliveries, window {:.1} s ({:.2} cores); watch client threads {:.2} cores |",
        f.rate,
        dur((f.wrapper_cpu * 1e9 / d.delivered.max(1) as f64) as u64),
        dur((f.wrapper_loop_cpu * 1e9 / d.delivered.max(1) as f64) as u64),
        f.wrapper_cpu,
        100.0 * f.wrapper_sys_cpu / f.wrapper_cpu.max(1e-9),
        d.delivered,
        f.window.as_secs_f64(),
        cores(f.wrapper_cpu, f.window),
        cores(f.client_cpu, f.window),
    );
    let achieved = |s: &Round| s.run.achieved_rate();
    let best = ramp
        .iter()
        .filter(|s| s.kept_up())
        .max_by(|a, b| achieved(a).total_cmp(&achieved(b)));
    let source = ramp.iter().map(achieved).fold(0.0, f64::max);
    let _ = writeln!(
        out,
        "| F2 | highest sustained rate kept up (achieved) | {} | keep up = every watcher got every change, all-watcher p99 < {} s; steps of {:.0} s; the sweep stops after {FAILS_IN_A_ROW} failing steps in a row; the most the driver + simulator delivered at any step: {source:.0}/s |",
        best.map_or_else(
            || "none".into(),
            |s| format!("{:.0}/s (step {:.0}/s)", achieved(s), s.rate)
        ),
        KEEP_UP_P99.as_secs(),
        opts.step_secs,
    );
    let _ = writeln!(
        out,
        "\n| step | achieved | every watcher every change | all-watcher lag p50 / p99 | grid-wrapper cores (apply) | grid-wrapper cores (window) | grid-wrapper CPU per delivery | event loop thread: cores / per delivery | sim cores | watch client threads cores | bench process cores |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for s in ramp {
        step_row(&mut out, s, opts.watchers);
    }
    for s in ramp.iter().filter(|s| !s.kept_up()) {
        let _ = writeln!(
            out,
            "\nStep {:.0}/s in detail: {}.",
            s.rate,
            crate::report::round_detail(s, opts.watchers)
        );
    }
    let _ = writeln!(
        out,
        "\nThe event loop thread (grid-wrapper's main thread) does the fan-out; the rest of grid-wrapper's CPU is the change path (reflector, writer) and housekeeping. \"apply\": from the first apply to the last apply's answer; \"window\": from the first apply until every delivery arrived (or the {} s drain wait ended). CPU from /proc/PID/stat (utime+stime); the watch client threads' from /proc/self/task; on loopback the kernel bills the receiving side's TCP work partly to the sender.",
        STEP_DRAIN.as_secs()
    );
    out
}
