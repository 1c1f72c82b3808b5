//! Idle RSS of the demo cluster: the simulator with `--fixture demo` (four nodes, a handful of
//! Services), one grid-wrapper as `edge-a1` (the static musl build when there is one, see
//! `--idle-bin`), `/readyz` 200, then 5 s of idle, then VmRSS.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::thread;
use std::time::Duration;

use crate::procs::{hwm_kib, rss_kib, Children};
use crate::stats::bytes;
use crate::{start_sim_args, start_wrapper_spec, BenchResult, Opts, WrapperSpec};

/// The static build `make cross` leaves (relative to the working directory).
pub const DEFAULT_IDLE_BIN: &str = "out/edge/x86_64-unknown-linux-musl/grid-wrapper";
/// Idle time after `/readyz` 200 before VmRSS is read.
const IDLE: Duration = Duration::from_secs(5);
/// The demo node grid-wrapper runs as.
const DEMO_NODE: &str = "edge-a1";

/// What the idle run measured.
#[derive(Debug)]
pub struct Idle {
    /// The binary.
    pub bin: PathBuf,
    /// How it was chosen.
    pub why: &'static str,
    /// Its `--version`.
    pub version: String,
    /// VmRSS after the idle time, KiB.
    pub rss_kib: u64,
    /// VmHWM then, KiB.
    pub hwm_kib: u64,
    /// spawn → `/readyz` 200, ns.
    pub start_to_ready: u64,
}

/// The binary of the idle row and why it was chosen.
fn idle_bin(opts: &Opts) -> (PathBuf, &'static str) {
    if let Some(p) = &opts.idle_bin {
        return (p.clone(), "given by --idle-bin");
    }
    let musl = PathBuf::from(DEFAULT_IDLE_BIN);
    if musl.is_file() {
        (musl, "static musl build (default, found)")
    } else {
        (
            opts.gw_bin(),
            "release build (default: no static musl build at out/edge/…)",
        )
    }
}

/// Starts the demo simulator and grid-wrapper, idles, reads VmRSS, stops both.
pub fn run(children: &Children, opts: &Opts) -> BenchResult<Idle> {
    let (bin, why) = idle_bin(opts);
    if !bin.is_file() {
        return Err(format!("{} is not a file", bin.display()).into());
    }
    let version = std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let (sim_pid, sim_url, _) = start_sim_args(children, opts, &["--fixture", "demo"])?;
    let spec = WrapperSpec {
        bin: &bin,
        hostname: DEMO_NODE,
        extra: &["-v", "0"],
        ready_within: Duration::from_secs(30),
    };
    let started = start_wrapper_spec(children, opts, &sim_url, &spec);
    let (w, ready) = match started {
        Ok(x) => x,
        Err(e) => {
            children.kill(sim_pid);
            return Err(e);
        }
    };
    thread::sleep(IDLE);
    let rss = rss_kib(w.pid);
    let hwm = hwm_kib(w.pid).unwrap_or(0);
    children.kill(w.pid);
    children.kill(sim_pid);
    Ok(Idle {
        bin,
        why,
        version,
        rss_kib: rss.ok_or("no VmRSS for the idle grid-wrapper")?,
        hwm_kib: hwm,
        start_to_ready: ready.start_to_ready,
    })
}

/// The idle row.
pub fn row(out: &mut String, idle: &Result<Idle, String>) {
    match idle {
        Ok(i) => {
            let _ = writeln!(
                out,
                "| 7 | idle RSS, demo cluster | {} KiB ({:.1} MiB) | binary `{}` ({}; {}); sim `--fixture demo`, `--hostname={DEMO_NODE}`; VmRSS {} s after `/readyz` 200 (ready {:.0} ms after spawn); VmHWM {} |",
                i.rss_kib,
                i.rss_kib as f64 / 1024.0,
                i.bin.display(),
                i.why,
                i.version,
                IDLE.as_secs(),
                i.start_to_ready as f64 / 1e6,
                bytes(i.hwm_kib * 1024),
            );
        }
        Err(e) => {
            let _ = writeln!(out, "| 7 | idle RSS, demo cluster | n/a | failed: {e} |");
        }
    }
}
