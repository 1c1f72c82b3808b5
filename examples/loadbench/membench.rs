//! `--only mem`: what issue 46's acceptance measures, A/B. One simulator (scale S, or ×10 with
//! `--scale x10`; the shape from `GRID_WRAPPER_SIM_SHAPE` as everywhere in the bench) serves
//! every run; each run starts one grid-wrapper, reads its sync (spawn → `/readyz` 200, and its
//! CPU over that time), its VmRSS after sync, after a JSON client has read kube-proxy's four
//! lists, and after a protobuf client (as kube-proxy) has listed and watched them, with its peak
//! (VmHWM) by then, then stops it. With `--gw-bin-b` the two binaries alternate, A B A B …,
//! `--mem-runs` times each; the table gives each figure's median with its range, and every
//! ratio's denominator: the bytes of the simulator's JSON lists of the cached kinds.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::http::Client;
use crate::phases::{get_ok, machine};
use crate::procs::{clk_tck, cpu_secs, cpu_ticks, hwm_kib, rss_kib, Children};
use crate::protobuf::kube_proxy_paths;
use crate::scale::X10;
use crate::{start_sim_args, start_wrapper_spec, BenchResult, Opts, WrapperSpec};
use crate::{HOSTNAME, SCALE, SIM_HISTORY};

/// One run of one binary.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    /// spawn → `/readyz` 200, ms.
    ready_ms: f64,
    /// grid-wrapper's utime+stime over that time, s.
    sync_cpu: f64,
    /// VmRSS 1 s after ready, KiB.
    rss_sync: u64,
    /// VmRSS after a JSON client read kube-proxy's four lists, KiB.
    rss_json: u64,
    /// VmRSS after the protobuf client's lists, watches open, KiB.
    rss_both: u64,
    /// VmHWM (peak RSS) at that point, KiB: what a memory limit must hold.
    peak: u64,
}

/// The upstream's JSON lists of the cached kinds, bytes (the ratios' denominator).
fn upstream_json(sim: SocketAddr) -> BenchResult<u64> {
    let mut up = Client::new(sim);
    let mut total = 0;
    for path in [
        "/api/v1/nodes",
        "/api/v1/services",
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "/apis/networking.k8s.io/v1/servicecidrs",
    ] {
        total += get_ok(&mut up, path)?.body.len() as u64;
    }
    Ok(total)
}

fn one_run(children: &Children, opts: &Opts, bin: &Path, sim_url: &str) -> BenchResult<Sample> {
    let spec = WrapperSpec {
        bin,
        hostname: HOSTNAME,
        extra: &["-v", "0"],
        ready_within: Duration::from_secs(if opts.x10 { 150 } else { 60 }),
    };
    let (w, ready) = start_wrapper_spec(children, opts, sim_url, &spec)?;
    let sync_cpu = cpu_secs(0, cpu_ticks(w.pid).unwrap_or(0), clk_tck());
    thread::sleep(Duration::from_secs(1)); // let start-up allocations settle
    let rss_sync = rss_kib(w.pid).ok_or("no VmRSS")?;
    let mut c = Client::new(w.addr);
    for (_, path) in kube_proxy_paths() {
        get_ok(&mut c, &path)?;
    }
    drop(c);
    thread::sleep(Duration::from_secs(1));
    let rss_json = rss_kib(w.pid).ok_or("no VmRSS")?;
    let p = crate::protobuf::kube_proxy(&w)?;
    if !p.ended.is_empty() {
        return Err(format!("protobuf watches ended early: {}", p.ended.join("; ")).into());
    }
    let peak = hwm_kib(w.pid).ok_or("no VmHWM")?;
    children.kill(w.pid);
    Ok(Sample {
        ready_ms: ready.start_to_ready as f64 / 1e6,
        sync_cpu,
        rss_sync,
        rss_json,
        rss_both: p.rss,
        peak,
    })
}

/// Median (min–max) of `v`, written by `fmt`.
fn spread(mut v: Vec<f64>, fmt: impl Fn(f64) -> String) -> String {
    v.sort_by(f64::total_cmp);
    let mid = v[v.len() / 2];
    let med = if v.len() % 2 == 1 {
        mid
    } else {
        (v[v.len() / 2 - 1] + mid) / 2.0
    };
    format!("{} ({}–{})", fmt(med), fmt(v[0]), fmt(v[v.len() - 1]))
}

fn column(samples: &[Sample], upstream: u64) -> Vec<String> {
    let mib = |kib: f64| format!("{:.1} MiB", kib / 1024.0);
    let ratio = |r: f64| format!("{r:.2}×");
    let per = |kib: u64| kib as f64 * 1024.0 / upstream as f64;
    let of = |f: fn(&Sample) -> f64| samples.iter().map(f).collect::<Vec<_>>();
    vec![
        spread(of(|s| s.ready_ms / 1000.0), |v| format!("{v:.2} s")),
        spread(of(|s| s.sync_cpu), |v| format!("{v:.2} s")),
        spread(of(|s| s.rss_sync as f64), mib),
        spread(samples.iter().map(|s| per(s.rss_sync)).collect(), ratio),
        spread(of(|s| s.rss_json as f64), mib),
        spread(of(|s| s.rss_both as f64), mib),
        spread(samples.iter().map(|s| per(s.rss_both)).collect(), ratio),
        spread(of(|s| s.peak as f64), mib),
    ]
}

/// Runs the memory A/B and returns its table.
pub fn run_mem(children: &Children, opts: &Opts) -> BenchResult<String> {
    let began = Instant::now();
    let machine = machine(opts);
    let mut args = vec!["--fixture", "scale", "--history", SIM_HISTORY];
    let scale: &[(&str, &str)] = if opts.x10 { &X10 } else { &SCALE };
    for (k, v) in scale {
        args.extend([*k, *v]);
    }
    let sim_args = args.join(" ");
    eprintln!("loadbench mem: starting grid-wrapper-sim ({sim_args})");
    let (sim_pid, sim_url, sim) = start_sim_args(children, opts, &args)?;
    let upstream = upstream_json(sim)?;
    let mut bins: Vec<PathBuf> = vec![opts.gw_bin()];
    bins.extend(opts.gw_bin_b.clone());
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); bins.len()];
    for run in 0..opts.mem_runs {
        for (i, bin) in bins.iter().enumerate() {
            eprintln!(
                "loadbench mem: run {}/{} of {}",
                run + 1,
                opts.mem_runs,
                bin.display()
            );
            samples[i].push(one_run(children, opts, bin, &sim_url)?);
        }
    }
    children.kill(sim_pid);
    let shape = std::env::var("GRID_WRAPPER_SIM_SHAPE").unwrap_or_else(|_| "flat".into());
    let mut t = String::new();
    t.push_str(&format!(
        "# grid-wrapper memory and sync ({}, shape {shape})\n\n{} on {} CPUs ({}), kernel {}.\n\nSimulator: `{sim_args}`; upstream JSON lists of the cached kinds: {} bytes ({:.1} MiB), the ratios' denominator. {} runs per binary, alternated; median (min–max).\n\n",
        if opts.x10 { "scale ×10" } else { "scale S" },
        machine.date,
        machine.nproc,
        machine.cpu,
        machine.kernel,
        upstream,
        upstream as f64 / 1048576.0,
        opts.mem_runs,
    ));
    t.push_str("| figure |");
    for (i, b) in bins.iter().enumerate() {
        t.push_str(&format!(" {} `{}` |", ["A", "B"][i], b.display()));
    }
    t.push_str("\n|---|");
    for _ in &bins {
        t.push_str("---|");
    }
    t.push('\n');
    let names = [
        "sync: spawn → /readyz 200",
        "sync CPU (utime+stime)",
        "VmRSS 1 s after sync",
        "  ÷ upstream JSON",
        "VmRSS after a JSON client read kube-proxy's four lists",
        "VmRSS after a protobuf client (as kube-proxy) listed and watched them too",
        "  ÷ upstream JSON",
        "VmHWM (peak RSS) by then",
    ];
    let cols: Vec<Vec<String>> = samples.iter().map(|s| column(s, upstream)).collect();
    for (r, name) in names.iter().enumerate() {
        t.push_str(&format!("| {name} |"));
        for c in &cols {
            t.push_str(&format!(" {} |", c[r]));
        }
        t.push('\n');
    }
    t.push_str(&format!(
        "\nkube-proxy's four lists: endpointslices, services, endpoints (selector L), nodes with fieldSelector=metadata.name={HOSTNAME}. Whole run {:.0} s.\n",
        began.elapsed().as_secs_f64()
    ));
    Ok(t)
}

/// The run's time bound: the simulator's start, then each run's sync and readings.
pub fn budget(opts: &Opts) -> Duration {
    let per_run = if opts.x10 { 120 } else { 30 };
    let bins = 1 + usize::from(opts.gw_bin_b.is_some());
    Duration::from_secs(120 + per_run * (opts.mem_runs * bins) as u64)
}
