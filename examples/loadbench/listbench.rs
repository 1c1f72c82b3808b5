//! Phase 2, LIST latency, with a client that is not the bottleneck: kube-proxy's EndpointSlice
//! LIST (selector L) from grid-wrapper and the identical bytes from nginx, read by
//! [`RawClient`]; cross-checked with `curl` on one keep-alive connection; next to a loopback
//! reference ([`Floor`]) and the old `BufReader` client. The same LIST in protobuf (kube-proxy's
//! `Accept`) from grid-wrapper and the identical protobuf bytes from nginx, interleaved with the
//! JSON series; the first protobuf LIST (it encodes every slice) timed apart. Several runs,
//! series interleaved, each on a fresh connection; the table gives the median over runs with the
//! spread. `--only list` runs this phase alone.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::http::Client;
use crate::listclient::{Floor, RawClient};
use crate::phases::{get_ok, item_count, machine, slices_path, Machine};
use crate::procs::{cpu_ticks, Children};
use crate::protobuf::{get_pb, list_info, KUBE_PROXY_ACCEPT};
use crate::stats::{bytes, dur, pct};
use crate::{nginx, start_sim, start_wrapper, BenchResult, Opts, SCALE, SIM_HISTORY};

/// Untimed requests before each timed series.
const WARMUP: usize = 3;

/// p50 and p99 of one series, ns.
#[derive(Clone, Copy, Debug, Default)]
pub struct Run {
    /// Median.
    pub p50: u64,
    /// 99th percentile (nearest rank).
    pub p99: u64,
}

impl Run {
    fn of(mut t: Vec<u64>) -> Run {
        Run {
            p50: pct(&mut t, 50.0),
            p99: pct(&mut t, 99.0),
        }
    }
}

/// How busy the machine was over the phase.
#[derive(Debug, Default)]
pub struct Load {
    /// 1-minute load average before and after.
    pub loadavg: (f64, f64),
    /// Machine-wide CPU busy over the phase, in cores.
    pub busy_cores: f64,
    /// Of that, the processes not of this bench (busy − bench, its children, grid-wrapper, the
    /// simulator, nginx), in cores.
    pub others_cores: f64,
    /// CPUs.
    pub nproc: usize,
    /// Wall time of the phase.
    pub secs: f64,
}

/// LIST latency of the wrapper and of nginx serving the same bytes, per run.
#[derive(Debug, Default)]
pub struct ListBench {
    /// Body bytes.
    pub body_len: usize,
    /// Items in the list.
    pub items: usize,
    /// Whether the wrapper answered chunked.
    pub chunked: bool,
    /// Timed requests per series.
    pub requests: usize,
    /// grid-wrapper, raw client.
    pub wrapper: Vec<Run>,
    /// nginx, raw client (empty without nginx).
    pub nginx: Vec<Run>,
    /// nginx version.
    pub nginx_version: String,
    /// Why there is no nginx series, if there is none.
    pub nginx_error: Option<String>,
    /// The in-process memory server ([`Floor`]), raw client.
    pub floor: Vec<Run>,
    /// nginx read by the old `BufReader` client.
    pub nginx_old: Vec<Run>,
    /// nginx read by curl.
    pub curl_nginx: Vec<Run>,
    /// grid-wrapper read by curl.
    pub curl_wrapper: Vec<Run>,
    /// New connections curl opened in the timed requests (0: every one reused).
    pub curl_connects: u64,
    /// Why there is no curl series, if there is none.
    pub curl_error: Option<String>,
    /// Machine load.
    pub load: Load,
    /// Protobuf body bytes of the same LIST (0: no protobuf series).
    pub pb_len: usize,
    /// Items in the protobuf list.
    pub pb_items: usize,
    /// The run's first protobuf LIST of the slices (encodes every slice), ns.
    pub pb_first_ns: u64,
    /// Whether that first protobuf LIST was made before this phase (by the protobuf kube-proxy of
    /// the memory phase) rather than as this phase's warm-up.
    pub pb_first_earlier: bool,
    /// grid-wrapper in protobuf, raw client.
    pub pb_wrapper: Vec<Run>,
    /// nginx serving the protobuf bytes, raw client.
    pub pb_nginx: Vec<Run>,
    /// Why there is no protobuf series, if there is none.
    pub pb_error: Option<String>,
    /// Why there is no nginx protobuf series while there is a JSON one.
    pub pb_nginx_error: Option<String>,
}

/// (busy, total) jiffies of all CPUs from /proc/stat.
fn cpu_jiffies() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(cpu) = stat.lines().next() else {
        return (0, 0);
    };
    let v: Vec<u64> = cpu
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// Fields after the parenthesised command name of /proc/`pid`/stat (state first).
fn stat_fields(pid: &str) -> Vec<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = s.rfind(')').map_or("", |i| &s[i + 1..]);
    rest.split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect()
}

/// CPU ticks of this bench (with its reaped children, e.g. curl) and of `pids` and their
/// direct children (nginx's worker).
fn bench_ticks(pids: &[u32]) -> u64 {
    let me = stat_fields("self");
    // After the state: ppid is [0], utime [10], stime [11], cutime [12], cstime [13].
    let mut t: u64 = me.iter().skip(10).take(4).sum();
    let mut all = pids.to_vec();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Ok(pid) = name.parse::<u32>() {
                let f = stat_fields(&name);
                if f.first().is_some_and(|&pp| pids.contains(&(pp as u32))) {
                    all.push(pid);
                }
            }
        }
    }
    for pid in all {
        t += cpu_ticks(pid).unwrap_or(0);
    }
    t
}

fn loadavg1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// `n` timed GETs after [`WARMUP`] untimed ones on one fresh connection of the raw client; every
/// body must be `len` bytes.
fn raw_series(addr: SocketAddr, path: &str, n: usize, len: usize) -> BenchResult<Run> {
    client_series(RawClient::new(addr), path, n, len)
}

/// [`raw_series`] with kube-proxy's protobuf `Accept`.
fn pb_series(addr: SocketAddr, path: &str, n: usize, len: usize) -> BenchResult<Run> {
    client_series(
        RawClient::with_accept(addr, KUBE_PROXY_ACCEPT),
        path,
        n,
        len,
    )
}

fn client_series(mut c: RawClient, path: &str, n: usize, len: usize) -> BenchResult<Run> {
    let mut times = Vec::with_capacity(n);
    for i in 0..WARMUP + n {
        let t = Instant::now();
        let r = c.get(path)?;
        let ns = t.elapsed().as_nanos() as u64;
        if r.code != 200 || r.body_len != len {
            return Err(format!(
                "GET {path}: HTTP {}, {} body bytes (expected 200, {len})",
                r.code, r.body_len
            )
            .into());
        }
        if i >= WARMUP {
            times.push(ns);
        }
    }
    Ok(Run::of(times))
}

/// The same with the old `BufReader` client (copies the body into a fresh `Vec`).
fn old_series(addr: SocketAddr, path: &str, n: usize, len: usize) -> BenchResult<Run> {
    let mut c = Client::new(addr);
    let mut times = Vec::with_capacity(n);
    for i in 0..WARMUP + n {
        let t = Instant::now();
        let r = get_ok(&mut c, path)?;
        let ns = t.elapsed().as_nanos() as u64;
        if r.body.len() != len {
            return Err(format!("GET {path}: body changed size").into());
        }
        if i >= WARMUP {
            times.push(ns);
        }
    }
    Ok(Run::of(times))
}

/// One `curl` process fetching `url` [`WARMUP`] + `n` times on one connection; the timed
/// `time_total`s and the new connections curl opened during them.
fn curl_series(url: &str, n: usize, len: usize) -> BenchResult<(Run, u64)> {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-s",
        "--http1.1",
        "-H",
        "Accept: application/json",
        "-w",
        "%{http_code} %{size_download} %{num_connects} %{time_total}\\n",
    ]);
    for _ in 0..WARMUP + n {
        cmd.args(["-o", "/dev/null", url]);
    }
    let out = cmd.output().map_err(|e| format!("curl: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut times = Vec::with_capacity(n);
    let mut connects = 0;
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let ok = f.len() == 4 && f[0] == "200" && f[1].parse::<usize>().ok() == Some(len);
        if !ok {
            return Err(format!("curl {url}: unexpected {line:?}").into());
        }
        if i >= WARMUP {
            connects += f[2].parse::<u64>().unwrap_or(0);
            times.push((f[3].parse::<f64>().unwrap_or(0.0) * 1e9) as u64);
        }
    }
    if times.len() != n {
        return Err(format!("curl {url}: {} timings of {n}", times.len()).into());
    }
    Ok((Run::of(times), connects))
}

/// `Content-Type` of `path` at `addr` (one request, `Connection: close`).
fn content_type(addr: SocketAddr, path: &str) -> BenchResult<String> {
    use std::io::{BufReader, Write};
    let s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut r = BufReader::new(s);
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    r.get_mut().write_all(req.as_bytes())?;
    let (_, headers) = crate::http::read_head(&mut r)?;
    Ok(headers
        .into_iter()
        .find(|(k, _)| k == "content-type")
        .map_or_else(String::new, |(_, v)| v))
}

/// Runs the LIST phase against a ready wrapper at `addr`.
/// `pids`: the other processes of the bench (grid-wrapper, simulator), whose CPU is not counted
/// as the machine's other load. `pb_first`: the time of the run's first protobuf LIST of the
/// slices if it was made before this phase (ns); else this phase's first protobuf request is
/// that one, timed during the warm-up.
pub fn list_bench(
    children: &Children,
    opts: &Opts,
    addr: SocketAddr,
    pids: &[u32],
    pb_first: Option<u64>,
) -> BenchResult<ListBench> {
    let path = slices_path();
    let reference = get_ok(&mut Client::new(addr), &path)?;
    let len = reference.body.len();
    // The protobuf form of the same LIST, fetched once (the first protobuf LIST unless made
    // earlier: it encodes every slice), before any timed series.
    let pb = get_pb(&mut Client::with_accept(addr, KUBE_PROXY_ACCEPT), &path).and_then(
        |(body, took)| {
            let (_, items) =
                list_info(&body).ok_or("the protobuf LIST is not a decodable list envelope")?;
            Ok((body, took, items))
        },
    );
    let mut b = ListBench {
        body_len: len,
        items: item_count(&reference.body),
        chunked: reference.chunked,
        requests: opts.list_requests,
        ..ListBench::default()
    };
    let pb_body = match pb {
        Ok((body, took, items)) => {
            b.pb_len = body.len();
            b.pb_items = items;
            b.pb_first_earlier = pb_first.is_some();
            b.pb_first_ns = pb_first.unwrap_or(took.as_nanos() as u64);
            Some(body)
        }
        Err(e) => {
            b.pb_error = Some(e.to_string());
            None
        }
    };
    let ng = match opts.nginx.as_deref() {
        Some("none") => Err("nginx not installed (or disabled with --nginx none)".to_string()),
        other => nginx::find(other).ok_or_else(|| "nginx not found".to_string()),
    }
    .and_then(|bin| nginx::start(children, &bin, &reference.body, pb_body.as_deref()))
    .and_then(|ng| {
        let r = get_ok(&mut Client::new(ng.addr), nginx::PATH).map_err(|e| e.to_string());
        match r {
            Ok(r) if r.body == reference.body => Ok(ng),
            Ok(_) => {
                children.terminate(ng.pid, Duration::from_secs(3));
                Err("nginx served different bytes".to_string())
            }
            Err(e) => {
                children.terminate(ng.pid, Duration::from_secs(3));
                Err(e)
            }
        }
    });
    match &ng {
        Ok(n) => b.nginx_version = n.version.clone(),
        Err(e) => b.nginx_error = Some(e.clone()),
    }
    // nginx's protobuf copy: the very same bytes, with the protobuf Content-Type.
    let ng_pb = match (&ng, &pb_body) {
        (Ok(ng), Some(body)) => {
            let same = get_ok(&mut Client::new(ng.addr), nginx::PB_PATH)
                .map(|r| r.body == *body)
                .map_err(|e| e.to_string());
            let ctype = content_type(ng.addr, nginx::PB_PATH).map_err(|e| e.to_string());
            match (same, ctype) {
                (Ok(true), Ok(t)) if t == "application/vnd.kubernetes.protobuf" => Some(ng.addr),
                (Ok(true), Ok(t)) => {
                    b.pb_nginx_error = Some(format!("nginx typed the protobuf body {t:?}"));
                    None
                }
                (Ok(false), _) => {
                    b.pb_nginx_error = Some("nginx served different protobuf bytes".into());
                    None
                }
                (Err(e), _) | (_, Err(e)) => {
                    b.pb_nginx_error = Some(e);
                    None
                }
            }
        }
        _ => None,
    };
    let pb_len = b.pb_len;
    let floor = Floor::start(&reference.body)?;
    let n = opts.list_requests;
    let wrapper_url = format!("http://{addr}{path}");
    let mut pids = pids.to_vec();
    if let Ok(ng) = &ng {
        pids.push(ng.pid);
    }
    let (busy0, total0) = cpu_jiffies();
    let ours0 = bench_ticks(&pids);
    let load0 = loadavg1();
    let t0 = Instant::now();
    for run in 0..opts.list_runs {
        eprintln!("loadbench: LIST run {}/{}", run + 1, opts.list_runs);
        b.wrapper.push(raw_series(addr, &path, n, len)?);
        if let Ok(ng) = &ng {
            b.nginx.push(raw_series(ng.addr, nginx::PATH, n, len)?);
        }
        if pb_body.is_some() {
            b.pb_wrapper.push(pb_series(addr, &path, n, pb_len)?);
        }
        if let Some(ng) = ng_pb {
            b.pb_nginx.push(pb_series(ng, nginx::PB_PATH, n, pb_len)?);
        }
        b.floor.push(raw_series(floor.addr, "/", n, len)?);
        if let Ok(ng) = &ng {
            b.nginx_old.push(old_series(ng.addr, nginx::PATH, n, len)?);
        }
        if b.curl_error.is_some() {
            continue;
        }
        let curl = ng
            .as_ref()
            .ok()
            .map(|ng| curl_series(&format!("http://{}{}", ng.addr, nginx::PATH), n, len))
            .transpose()
            .and_then(|c| Ok((c, curl_series(&wrapper_url, n, len)?)));
        match curl {
            Ok((c_ng, (c_w, k_w))) => {
                if let Some((r, k)) = c_ng {
                    b.curl_nginx.push(r);
                    b.curl_connects += k;
                }
                b.curl_wrapper.push(c_w);
                b.curl_connects += k_w;
            }
            Err(e) => b.curl_error = Some(e.to_string()),
        }
    }
    let (busy1, total1) = cpu_jiffies();
    let ours1 = bench_ticks(&pids);
    let nproc = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cores = |ticks: u64| ticks as f64 / (total1 - total0).max(1) as f64 * nproc as f64;
    b.load = Load {
        loadavg: (load0, loadavg1()),
        busy_cores: cores(busy1 - busy0),
        others_cores: cores((busy1 - busy0).saturating_sub(ours1.saturating_sub(ours0))),
        nproc,
        secs: t0.elapsed().as_secs_f64(),
    };
    if let Ok(ng) = &ng {
        children.terminate(ng.pid, Duration::from_secs(3));
    }
    Ok(b)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

fn medf(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0.0)
}

fn range(v: &[u64]) -> String {
    let (lo, hi) = (v.iter().min(), v.iter().max());
    match (lo, hi) {
        (Some(&lo), Some(&hi)) => format!("{}–{}", dur(lo), dur(hi)),
        _ => "n/a".into(),
    }
}

/// "p50 / p99" medians over runs, and the spread text.
fn summary(runs: &[Run]) -> (u64, u64, String) {
    let p50: Vec<u64> = runs.iter().map(|r| r.p50).collect();
    let p99: Vec<u64> = runs.iter().map(|r| r.p99).collect();
    let spread = format!("p50 {} · p99 {}", range(&p50), range(&p99));
    (median(p50), median(p99), spread)
}

/// Body bytes ÷ time, GiB/s.
fn gibs(len: usize, ns: u64) -> f64 {
    len as f64 / ns.max(1) as f64 * 1e9 / (1u64 << 30) as f64
}

/// Per-run ratios a ÷ b of p50 and of p99: (median p50 ratio, median p99 ratio, spread text).
fn ratios(a: &[Run], b: &[Run]) -> (f64, f64, String) {
    let r50: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| x.p50 as f64 / y.p50.max(1) as f64)
        .collect();
    let r99: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| x.p99 as f64 / y.p99.max(1) as f64)
        .collect();
    let lohi = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{lo:.2}–{hi:.2}×")
    };
    let spread = format!("per run: p50 {} · p99 {}", lohi(&r50), lohi(&r99));
    (medf(r50), medf(r99), spread)
}

/// The protobuf rows of phase 2: the first protobuf LIST, grid-wrapper and nginx p50 / p99,
/// their ratio, the body sizes.
fn pb_rows(out: &mut String, l: &ListBench, each: &str) {
    if let Some(e) = &l.pb_error {
        let _ = writeln!(
            out,
            "| 2 | LIST all endpointslices (selector L) in protobuf, grid-wrapper p50 / p99 | n/a | {e} |"
        );
        return;
    }
    let _ = writeln!(
        out,
        "| 2 | first protobuf LIST (encodes every object) | {} | the run's first protobuf request, kube-proxy's EndpointSlice LIST (selector L, `Accept: {KUBE_PROXY_ACCEPT}`), {}, not in the series below; it encodes each slice's protobuf form, kept with that object version for later protobuf reads; {}, {} items |",
        dur(l.pb_first_ns),
        if l.pb_first_earlier {
            "made by the protobuf kube-proxy of phase 1 (after the JSON-only RSS readings), before this phase"
        } else {
            "made before this phase's timed series"
        },
        bytes(l.pb_len as u64),
        l.pb_items,
    );
    let (p50, p99, ps) = summary(&l.pb_wrapper);
    let _ = writeln!(
        out,
        "| 2 | LIST all endpointslices (selector L) in protobuf, grid-wrapper p50 / p99 | {} / {} | kube-proxy's `Accept`, answered `application/vnd.kubernetes.protobuf` (`k8s\\0` + runtime.Unknown); {each}; interleaved with the JSON series; spread {ps}; {}; {:.2} GiB/s at p50 |",
        dur(p50),
        dur(p99),
        bytes(l.pb_len as u64),
        gibs(l.pb_len, p50),
    );
    if l.pb_nginx.is_empty() {
        let why = l
            .pb_nginx_error
            .as_deref()
            .or(l.nginx_error.as_deref())
            .unwrap_or("no nginx");
        let _ = writeln!(
            out,
            "| 2 | same protobuf bytes from nginx p50 / p99 | n/a | {why} |"
        );
    } else {
        let (n50, n99, ns) = summary(&l.pb_nginx);
        let _ = writeln!(
            out,
            "| 2 | same protobuf bytes from nginx p50 / p99 | {} / {} | the body fetched once from grid-wrapper, served as a file typed `application/vnd.kubernetes.protobuf`; same client and Accept, interleaved; spread {ns}; {:.2} GiB/s at p50 |",
            dur(n50),
            dur(n99),
            gibs(l.pb_len, n50),
        );
        let (r50, r99, rs) = ratios(&l.pb_wrapper, &l.pb_nginx);
        let _ = writeln!(
            out,
            "| 2 | **protobuf ratio grid-wrapper ÷ nginx** | **p50 {r50:.2}×, p99 {r99:.2}×** | median of the per-run ratios (ratio of the medians: p50 {:.2}×, p99 {:.2}×); {rs} |",
            p50 as f64 / n50.max(1) as f64,
            p99 as f64 / n99.max(1) as f64,
        );
    }
    let (w50, _, _) = summary(&l.wrapper);
    let _ = writeln!(
        out,
        "| 2 | LIST body, JSON / protobuf | {} / {} | protobuf ÷ JSON {:.2}; {} / {} items; grid-wrapper p50 protobuf ÷ JSON {:.2}× |",
        bytes(l.body_len as u64),
        bytes(l.pb_len as u64),
        l.pb_len as f64 / l.body_len.max(1) as f64,
        l.items,
        l.pb_items,
        p50 as f64 / w50.max(1) as f64,
    );
}

/// The phase-2 rows of the table.
pub fn rows(out: &mut String, l: &ListBench) {
    let runs = l.wrapper.len();
    let each = format!(
        "median of {runs} runs × {} requests (+{WARMUP} warm-up), each run a fresh keep-alive connection",
        l.requests
    );
    let (w50, w99, ws) = summary(&l.wrapper);
    let _ = writeln!(
        out,
        "| 2 | LIST all endpointslices (selector L), grid-wrapper p50 / p99 | {} / {} | {each}; spread {ws}; raw client (4 MiB reused buffer, body skipped); {}, {} items, {}; {:.2} GiB/s at p50 |",
        dur(w50),
        dur(w99),
        bytes(l.body_len as u64),
        l.items,
        if l.chunked { "chunked" } else { "Content-Length" },
        gibs(l.body_len, w50),
    );
    if let Some(e) = &l.nginx_error {
        let _ = writeln!(out, "| 2 | same bytes from nginx p50 / p99 | n/a | {e} |");
    }
    let version = &l.nginx_version;
    if !l.nginx.is_empty() {
        let (n50, n99, ns) = summary(&l.nginx);
        let _ = writeln!(
            out,
            "| 2 | same bytes from nginx p50 / p99 | {} / {} | {version}, 1 worker, sendfile; same client, interleaved with the grid-wrapper series; spread {ns}; {:.2} GiB/s at p50 |",
            dur(n50),
            dur(n99),
            gibs(l.body_len, n50),
        );
        let (r50, r99, rs) = ratios(&l.wrapper, &l.nginx);
        let _ = writeln!(
            out,
            "| 2 | **ratio grid-wrapper ÷ nginx** | **p50 {r50:.2}×, p99 {r99:.2}×** | median of the per-run ratios (ratio of the medians above: p50 {:.2}×, p99 {:.2}×); {rs} |",
            w50 as f64 / n50.max(1) as f64,
            w99 as f64 / n99.max(1) as f64,
        );
    }
    pb_rows(out, l, &each);
    match &l.curl_error {
        Some(e) => {
            let _ = writeln!(out, "| 2 | client check: curl | n/a | {e} |");
        }
        None => {
            if !l.curl_nginx.is_empty() {
                let (c50, c99, cs) = summary(&l.curl_nginx);
                let (n50, _, _) = summary(&l.nginx);
                let (r50, _, rs) = ratios(&l.nginx, &l.curl_nginx);
                let _ = writeln!(
                    out,
                    "| 2 | client check: curl reading nginx's copy, `time_total` p50 / p99 | {} / {} | one curl process, {} URLs on one connection ({} new connections in the timed requests); spread {cs}; **raw client ÷ curl on nginx, p50: {:.2}×** ({} vs {}; median of the per-run ratios {r50:.2}×, {rs}) |",
                    dur(c50),
                    dur(c99),
                    WARMUP + l.requests,
                    l.curl_connects,
                    n50 as f64 / c50.max(1) as f64,
                    dur(n50),
                    dur(c50),
                );
            }
            let (c50, c99, cs) = summary(&l.curl_wrapper);
            let _ = writeln!(
                out,
                "| 2 | client check: curl reading grid-wrapper's copy p50 / p99 | {} / {} | as above; spread {cs}; raw client ÷ curl p50 {:.2}×{} |",
                dur(c50),
                dur(c99),
                w50 as f64 / c50.max(1) as f64,
                if l.curl_nginx.is_empty() {
                    String::new()
                } else {
                    let cn = summary(&l.curl_nginx).0;
                    format!("; **curl: grid-wrapper ÷ nginx p50 {:.2}×**", c50 as f64 / cn.max(1) as f64)
                },
            );
        }
    }
    let (f50, f99, fs) = summary(&l.floor);
    let _ = writeln!(
        out,
        "| 2 | loopback reference: same bytes written from memory by a thread of the bench, raw client p50 / p99 | {} / {} | one `write_all` of the prebuilt response (Content-Length), copied into the socket (nginx's sendfile avoids that copy and can be faster); spread {fs}; **{:.2} GiB/s at p50** |",
        dur(f50),
        dur(f99),
        gibs(l.body_len, f50),
    );
    if !l.nginx_old.is_empty() {
        let (o50, o99, os) = summary(&l.nginx_old);
        let _ = writeln!(
            out,
            "| 2 | client-bound (old client): nginx read by the old `BufReader` client p50 / p99 | {} / {} | 256 KiB `BufReader`, body copied into a fresh `Vec` per response; spread {os} |",
            dur(o50),
            dur(o99),
        );
    }
    let ld = &l.load;
    let _ = writeln!(
        out,
        "| 2 | machine load during the LIST phase: CPU of processes not of the bench | {:.2} of {} cores | over {:.1} s: all processes {:.2} cores (/proc/stat), of which the bench, curl, grid-wrapper, the simulator and nginx {:.2}; 1-min loadavg {:.2} → {:.2} |",
        ld.others_cores,
        ld.nproc,
        ld.secs,
        ld.busy_cores,
        ld.busy_cores - ld.others_cores,
        ld.loadavg.0,
        ld.loadavg.1,
    );
}

/// `--only list`: the simulator, one grid-wrapper, the LIST phase; a table of its rows.
pub fn run_only(children: &Children, opts: &Opts) -> BenchResult<String> {
    let began = Instant::now();
    let m: Machine = machine(opts);
    eprintln!("loadbench: starting grid-wrapper-sim at scale S");
    let (sim_pid, sim_url, _sim) = start_sim(children, opts)?;
    eprintln!("loadbench: starting grid-wrapper");
    let (w, _ready) = start_wrapper(children, opts, &sim_url)?;
    eprintln!("loadbench: ready; LIST latency ({} runs)", opts.list_runs);
    let l = list_bench(children, opts, w.addr, &[w.pid, sim_pid], None)?;
    let mut sim_args = format!("--fixture scale --history {SIM_HISTORY}");
    for (k, v) in SCALE {
        sim_args.push_str(&format!(" {k} {v}"));
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## grid-wrapper LIST bench (`--only list`) — scale S\n"
    );
    let _ = writeln!(
        out,
        "Machine: nproc {} · {} · Linux {} · {} · {} · sim `{sim_args}` · whole run {:.0} s\n",
        m.nproc,
        m.cpu,
        m.kernel,
        m.date,
        m.version,
        began.elapsed().as_secs_f64()
    );
    let _ = writeln!(out, "| # | Measurement | Result | Detail |");
    let _ = writeln!(out, "|---|---|---|---|");
    rows(&mut out, &l);
    Ok(out)
}
