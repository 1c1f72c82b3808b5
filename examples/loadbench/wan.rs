//! `--only wan`: what a full sync moves over the WAN, with and without `--upstream-gzip`. At
//! scale S and ×10 one simulator each; grid-wrapper is started against it with gzip on, then
//! off, and each sync is measured from spawn to `/readyz` 200: the LIST body bytes the
//! simulator sent (compressed when it compressed them, as an apiserver does over 128 KiB) and
//! before compression, grid-wrapper's CPU (utime+stime of the process, decompression included)
//! and the simulator's CPU over the same span (its gzip included). Bounded by
//! [`crate::WAN_BUDGET`]; every child is killed at the end.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use crate::http::Client;
use crate::phases::{get_ok, machine};
use crate::procs::{clk_tck, cpu_secs, cpu_ticks, Children};
use crate::scale::X10;
use crate::stats::bytes;
use crate::{start_sim_args, start_wrapper_spec, BenchResult, Opts, WrapperSpec};
use crate::{HOSTNAME, SCALE, SIM_HISTORY};

/// The simulator's LIST counters (`/sim/state` `served`).
#[derive(Clone, Copy, Debug, Default)]
struct Served {
    lists: u64,
    sent: u64,
    plain: u64,
    gzipped: u64,
}

impl Served {
    fn read(sim: SocketAddr) -> BenchResult<Served> {
        let r = get_ok(&mut Client::new(sim), "/sim/state")?;
        let v: Value = serde_json::from_slice(&r.body)?;
        let n = |k: &str| v["served"][k].as_u64().unwrap_or(0);
        Ok(Served {
            lists: n("lists"),
            sent: n("listBytes"),
            plain: n("listPlainBytes"),
            gzipped: n("gzippedLists"),
        })
    }

    fn since(self, before: Served) -> Served {
        Served {
            lists: self.lists - before.lists,
            sent: self.sent - before.sent,
            plain: self.plain - before.plain,
            gzipped: self.gzipped - before.gzipped,
        }
    }
}

/// One measured sync.
struct Sync {
    scale: &'static str,
    gzip: bool,
    served: Served,
    gw_cpu: f64,
    sim_cpu: f64,
    ready_ns: u64,
}

/// Runs the bench and returns its table.
pub fn run_wan(children: &Children, opts: &Opts) -> BenchResult<String> {
    let machine = machine(opts);
    let tck = clk_tck();
    let bin = opts.gw_bin();
    let mut syncs = Vec::new();
    for (scale, dims) in [("S", SCALE), ("×10", X10)] {
        let mut args = vec!["--fixture", "scale", "--history", SIM_HISTORY];
        for (k, v) in dims {
            args.extend([k, v]);
        }
        eprintln!("loadbench wan: scale {scale}: starting grid-wrapper-sim");
        let (sim_pid, sim_url, sim) = start_sim_args(children, opts, &args)?;
        for gzip in [true, false] {
            eprintln!("loadbench wan: scale {scale}: sync with --upstream-gzip={gzip}");
            let before = Served::read(sim)?;
            let s0 = cpu_ticks(sim_pid).unwrap_or(0);
            let flag = format!("--upstream-gzip={gzip}");
            let extra = ["-v", "0", flag.as_str()];
            let spec = WrapperSpec {
                bin: &bin,
                hostname: HOSTNAME,
                extra: &extra,
                ready_within: Duration::from_secs(150),
            };
            let (w, ready) = start_wrapper_spec(children, opts, &sim_url, &spec)?;
            let gw_cpu = cpu_secs(0, cpu_ticks(w.pid).unwrap_or(0), tck);
            let sim_cpu = cpu_secs(s0, cpu_ticks(sim_pid).unwrap_or(0), tck);
            let served = Served::read(sim)?.since(before);
            children.kill(w.pid);
            syncs.push(Sync {
                scale,
                gzip,
                served,
                gw_cpu,
                sim_cpu,
                ready_ns: ready.start_to_ready,
            });
        }
        children.kill(sim_pid);
    }
    let m = &machine;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## grid-wrapper WAN bench — a full sync, gzip on and off\n"
    );
    let _ = writeln!(
        out,
        "Machine: nproc {} · {} · Linux {} · {} · {}\n",
        m.nproc, m.cpu, m.kernel, m.date, m.version
    );
    let _ = writeln!(
        out,
        "| Scale | `--upstream-gzip` | LIST bytes sent (WAN) | the same as plain JSON | \
         lists (gzip'd) | grid-wrapper CPU | simulator CPU | start → `/readyz` 200 |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for s in &syncs {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} ({}) | {:.2} s | {:.2} s | {:.2} s |",
            s.scale,
            s.gzip,
            bytes(s.served.sent),
            bytes(s.served.plain),
            s.served.lists,
            s.served.gzipped,
            s.gw_cpu,
            s.sim_cpu,
            s.ready_ns as f64 / 1e9,
        );
    }
    Ok(out)
}
