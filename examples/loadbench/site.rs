//! `--only relay`, its first table: what a site of N followers costs the cloud, without a relay
//! and with one. One simulator (the cloud) at scale S per mode; in each mode N followers start
//! against it (plain: every follower lists and watches the simulator; relayed: a relay
//! grid-wrapper with `--relay-bind-address` lists and watches it, and the followers read from the
//! relay, `--relay-kubeconfig`/`--relay-servers`, the simulator being their last resort), then the
//! loadbench churn (changes of non-topology slices at a fixed rate) runs until the window ends.
//! The window starts before the first process starts, so the syncs are in it. The simulator's
//! counters say what the cloud carried: requests, lists, watches (started, and open at the end),
//! LIST bytes as sent and watch event bytes. The relay's and the followers' CPU over the window
//! come from `/proc`. Every child is killed at the end of its mode.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::driver::apply_paced;
use crate::http::{free_port, Client};
use crate::phases::{get_ok, machine, slice_templates};
use crate::procs::{clk_tck, cpu_secs, cpu_ticks, Children};
use crate::stats::bytes;
use crate::{start_sim_args, start_wrapper_spec, BenchResult, Opts, Wrapper, WrapperSpec};
use crate::{SCALE, SIM_HISTORY};

/// The relay port's certificates and the followers' kubeconfig for it.
#[derive(Debug)]
pub struct RelayPki {
    dir: PathBuf,
}

impl RelayPki {
    /// Makes the site CA, the relay's serving certificate for 127.0.0.1 and the followers'
    /// client certificate with `deploy/relay/make-certs.sh` (the operator's script) in `dir`.
    pub fn make(dir: &Path) -> BenchResult<RelayPki> {
        let _ = std::fs::remove_dir_all(dir);
        let out = Command::new("bash")
            .arg("deploy/relay/make-certs.sh")
            .arg(dir)
            .args(["bench", "127.0.0.1"])
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "deploy/relay/make-certs.sh failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        // Absolute: a kubeconfig's relative paths are read from its own directory.
        Ok(RelayPki {
            dir: std::fs::canonicalize(dir)?,
        })
    }

    /// A file of the PKI.
    pub fn file(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    /// The followers' TLS client configuration (the site CA, their certificate).
    pub fn client_config(&self) -> BenchResult<std::sync::Arc<rustls::ClientConfig>> {
        crate::tls::client_config(
            &self.file("site-ca.crt"),
            &self.file("follower.crt"),
            &self.file("follower.key"),
        )
    }

    /// The relay's own flags for serving on `port`.
    pub fn relay_flags(&self, port: u16) -> Vec<String> {
        vec![
            format!("--relay-bind-address=127.0.0.1:{port}"),
            format!("--relay-cert-file={}", self.file("relay.crt")),
            format!("--relay-key-file={}", self.file("relay.key")),
            format!("--relay-client-ca-file={}", self.file("site-ca.crt")),
        ]
    }

    /// Writes the followers' relay kubeconfig for a relay on `port`; its path.
    pub fn follower_kubeconfig(&self, port: u16) -> BenchResult<String> {
        let path = self.file("follower.kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority: {}\n    \
             server: https://127.0.0.1:{port}\n  name: relays\ncontexts:\n- context:\n    \
             cluster: relays\n    user: follower\n  name: relays\ncurrent-context: relays\n\
             users:\n- name: follower\n  user:\n    client-certificate: {}\n    client-key: {}\n",
            self.file("site-ca.crt"),
            self.file("follower.crt"),
            self.file("follower.key"),
        );
        std::fs::write(&path, text)?;
        Ok(path)
    }
}

/// What the simulator's `/sim/state` counts.
#[derive(Clone, Copy, Debug, Default)]
struct Cloud {
    requests: u64,
    lists: u64,
    watches: u64,
    gets: u64,
    list_bytes: u64,
    watch_bytes: u64,
    open_watches: u64,
}

impl Cloud {
    fn read(sim: SocketAddr) -> BenchResult<Cloud> {
        let r = get_ok(&mut Client::new(sim), "/sim/state")?;
        let v: Value = serde_json::from_slice(&r.body)?;
        let n = |k: &str| v["served"][k].as_u64().unwrap_or(0);
        let requests = v["listens"]
            .as_array()
            .map_or(0, |l| l.iter().filter_map(|x| x["requests"].as_u64()).sum());
        Ok(Cloud {
            requests,
            lists: n("lists"),
            watches: n("watches"),
            gets: n("gets"),
            list_bytes: n("listBytes"),
            watch_bytes: n("watchBytes"),
            open_watches: v["openWatches"].as_u64().unwrap_or(0),
        })
    }

    fn since(self, before: Cloud) -> Cloud {
        Cloud {
            requests: self.requests - before.requests,
            lists: self.lists - before.lists,
            watches: self.watches - before.watches,
            gets: self.gets - before.gets,
            list_bytes: self.list_bytes - before.list_bytes,
            watch_bytes: self.watch_bytes - before.watch_bytes,
            open_watches: self.open_watches,
        }
    }
}

/// A row of the table: its name and how a window fills its cells.
type Row = (&'static str, fn(&Window) -> String);

/// One mode's window.
#[derive(Debug)]
struct Window {
    cloud: Cloud,
    /// Changes the churn applied.
    changes: usize,
    /// CPU seconds of the relay (0 without one) and of all followers, over the window.
    relay_cpu: f64,
    followers_cpu: f64,
    /// Seconds from the first start to the last follower ready.
    synced_secs: f64,
    /// The followers' watches open on the relay at the end (its `/metrics`).
    on_relay: u64,
}

/// How many followers, for how long, at which churn rate.
#[derive(Clone, Copy, Debug)]
pub struct SiteSpec {
    /// Followers.
    pub followers: usize,
    /// The window, seconds.
    pub secs: f64,
    /// Churn, changes per second.
    pub rate: f64,
    /// Which parts run.
    pub parts: Parts,
}

/// The whole-run bound of `--only relay`: both windows, each with room for its simulator and
/// syncs, and the rest.
pub fn budget(spec: &SiteSpec) -> Duration {
    Duration::from_secs_f64(2.0 * (spec.secs + 180.0) + 420.0)
}

/// `--only relay`: the relay's fan-out (`crate::fanout`), then the site's two windows; both
/// tables.
pub fn run_relay(children: &Children, opts: &Opts, spec: SiteSpec) -> BenchResult<String> {
    let pki = RelayPki::make(Path::new("out/relaybench-pki"))?;
    let mut out = String::new();
    if spec.parts.fanout {
        out.push_str(&crate::fanout::run_relay_fanout(children, opts, &pki)?);
        out.push('\n');
    }
    if spec.parts.site {
        out.push_str(&run_site(children, opts, spec, &pki)?);
    }
    Ok(out)
}

/// Which parts of `--only relay` run (`--relay-parts`).
#[derive(Clone, Copy, Debug)]
pub struct Parts {
    /// The relay's fan-out to 100 follower watches.
    pub fanout: bool,
    /// What a site costs the cloud.
    pub site: bool,
}

/// Runs both modes (plain, then relayed) and returns the table.
fn run_site(
    children: &Children,
    opts: &Opts,
    spec: SiteSpec,
    pki: &RelayPki,
) -> BenchResult<String> {
    let plain = window(children, opts, spec, None)?;
    let relayed = window(children, opts, spec, Some(pki))?;
    let m = machine(opts);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## What a site costs the cloud: {} followers, with and without a relay\n",
        spec.followers
    );
    let _ = writeln!(
        out,
        "Machine: nproc {} · {} · Linux {} · {} · {}. Scale S, a {} s window from the first \
         start, churn {} changes/s of non-topology EndpointSlices.\n",
        m.nproc, m.cpu, m.kernel, m.date, m.version, spec.secs, spec.rate
    );
    let _ = writeln!(
        out,
        "| What the cloud carried | without a relay | with a relay |"
    );
    let _ = writeln!(out, "|---|---|---|");
    let rows: [Row; 11] = [
        ("requests (all)", |w| w.cloud.requests.to_string()),
        ("lists", |w| w.cloud.lists.to_string()),
        ("watches started", |w| w.cloud.watches.to_string()),
        ("gets", |w| w.cloud.gets.to_string()),
        ("open watches at the end", |w| {
            w.cloud.open_watches.to_string()
        }),
        ("LIST bytes (as sent)", |w| bytes(w.cloud.list_bytes)),
        ("watch event bytes", |w| bytes(w.cloud.watch_bytes)),
        ("upstream bytes in all", |w| {
            bytes(w.cloud.list_bytes + w.cloud.watch_bytes)
        }),
        ("the followers' watches on the relay at the end", |w| {
            w.on_relay.to_string()
        }),
        ("changes applied by the churn", |w| w.changes.to_string()),
        ("start → every follower ready", |w| {
            format!("{:.2} s", w.synced_secs)
        }),
    ];
    for (name, cell) in rows {
        let _ = writeln!(out, "| {name} | {} | {} |", cell(&plain), cell(&relayed));
    }
    let _ = writeln!(
        out,
        "| CPU over the window: relay / all followers | — / {:.2} s | {:.2} s / {:.2} s |",
        plain.followers_cpu, relayed.relay_cpu, relayed.followers_cpu
    );
    Ok(out)
}

/// One mode: a fresh simulator, the relay when `pki` is given, the followers, the churn.
fn window(
    children: &Children,
    opts: &Opts,
    spec: SiteSpec,
    pki: Option<&RelayPki>,
) -> BenchResult<Window> {
    let mode = if pki.is_some() { "relayed" } else { "plain" };
    let tck = clk_tck();
    let mut args = vec!["--fixture", "scale", "--history", SIM_HISTORY];
    for (k, v) in SCALE {
        args.extend([k, v]);
    }
    eprintln!("loadbench relay: {mode}: starting grid-wrapper-sim");
    let (sim_pid, sim_url, sim) = start_sim_args(children, opts, &args)?;
    let templates = slice_templates(sim)?;
    let before = Cloud::read(sim)?;
    let start = Instant::now();
    let bin = opts.gw_bin();
    let mut relay: Option<Wrapper> = None;
    let mut follower_args: Vec<String> = vec!["-v".into(), "0".into()];
    if let Some(pki) = pki {
        let port = free_port()?;
        let mut extra: Vec<String> = vec!["-v".into(), "0".into()];
        extra.extend(pki.relay_flags(port));
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let ws = WrapperSpec {
            bin: &bin,
            hostname: "node-00000",
            extra: &extra,
            ready_within: Duration::from_secs(120),
        };
        let (w, _) = start_wrapper_spec(children, opts, &sim_url, &ws)?;
        relay = Some(w);
        follower_args.push(format!(
            "--relay-kubeconfig={}",
            pki.follower_kubeconfig(port)?
        ));
        follower_args.push(format!("--relay-servers=https://127.0.0.1:{port}"));
    }
    eprintln!(
        "loadbench relay: {mode}: starting {} followers",
        spec.followers
    );
    let mut followers = Vec::new();
    for i in 0..spec.followers {
        let host = format!("node-{:05}", i + 1);
        let extra: Vec<&str> = follower_args.iter().map(String::as_str).collect();
        let ws = WrapperSpec {
            bin: &bin,
            hostname: &host,
            extra: &extra,
            ready_within: Duration::from_secs(180),
        };
        let (w, _) = start_wrapper_spec(children, opts, &sim_url, &ws)?;
        followers.push(w);
    }
    let synced_secs = start.elapsed().as_secs_f64();
    let left = (spec.secs - synced_secs).max(1.0);
    let count = (left * spec.rate) as usize;
    eprintln!(
        "loadbench relay: {mode}: every follower ready after {synced_secs:.1} s; churn of {count} changes"
    );
    let run = apply_paced(sim, &templates, 1, count, spec.rate, Instant::now());
    if let Some(e) = &run.first_error {
        return Err(format!("churn failed: {e}").into());
    }
    if let Some(rest) = Duration::from_secs_f64(spec.secs).checked_sub(start.elapsed()) {
        std::thread::sleep(rest);
    }
    let cloud = Cloud::read(sim)?.since(before);
    let on_relay = relay.as_ref().map_or(Ok(0), relay_watches)?;
    let cpu = |w: &Wrapper| cpu_secs(0, cpu_ticks(w.pid).unwrap_or(0), tck);
    let relay_cpu = relay.as_ref().map_or(0.0, cpu);
    let followers_cpu = followers.iter().map(cpu).sum();
    for w in followers.iter().chain(&relay) {
        children.kill(w.pid);
    }
    children.kill(sim_pid);
    Ok(Window {
        cloud,
        changes: run.sent_ns.len(),
        relay_cpu,
        followers_cpu,
        synced_secs,
        on_relay,
    })
}

/// The watches open on `relay`'s relay port (`grid_wrapper_relay_open_watches`, summed).
fn relay_watches(relay: &Wrapper) -> BenchResult<u64> {
    let r = get_ok(&mut Client::new(relay.health), "/metrics")?;
    Ok(String::from_utf8_lossy(&r.body)
        .lines()
        .filter(|l| l.starts_with("grid_wrapper_relay_open_watches{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum())
}
