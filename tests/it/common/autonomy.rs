//! Helpers for the edge-autonomy tests (tests/it/autonomy_*.rs): starting grid-wrapper with a
//! captured log, signals, exit codes, `/metrics` and `/readyz`, the served state compared
//! without resourceVersions, and raw watch bodies.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{request, try_request, LogSink, Wrapper};

/// The seven served collections: cluster-wide list paths, and for Nodes kube-proxy's list of
/// its own (`edge-a1`, the node these tests run as: the cache serves no other Node).
pub const COLLECTIONS: [&str; 7] = [
    super::OWN_NODE,
    "/api/v1/services",
    "/api/v1/endpoints",
    "/apis/discovery.k8s.io/v1/endpointslices",
    "/apis/discovery.k8s.io/v1beta1/endpointslices",
    "/apis/networking.k8s.io/v1/servicecidrs",
    "/apis/networking.k8s.io/v1beta1/servicecidrs",
];

/// Starts grid-wrapper for `hostname` against `master` with `extra` flags, capturing its log;
/// waits for the listener only.
pub fn start(master: &str, hostname: &str, extra: &[&str]) -> (Wrapper, LogSink) {
    let mut args = vec![
        format!("--master={master}"),
        format!("--hostname={hostname}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Wrapper::start_captured(&args)
}

/// The log of a wrapper that exited on a signal, once its last line ("stopped") has come
/// through the pipe (the exit can be seen before the reader thread has drained it).
pub fn log_until_stopped(log: &LogSink) -> String {
    log.wait_for_line("the last line, \"stopped\"", Duration::from_secs(10), |l| {
        l.trim_end().ends_with(" stopped")
    })
}

/// Sends `sig` (e.g. "TERM", "HUP", "KILL") to the wrapper.
pub fn signal(w: &Wrapper, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(w.proc.child.id().to_string())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "kill -{sig} failed");
}

/// Waits (bounded) for the wrapper to exit; `None` if it is still running after `timeout`.
pub fn wait_exit(w: &mut Wrapper, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = w.proc.child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `/readyz`: (status, body); (0, "") when the health port does not answer.
pub fn readyz(w: &Wrapper) -> (u16, String) {
    match try_request(w.health, "GET", "/readyz", &[], b"") {
        Ok((code, _, body)) => (code, String::from_utf8_lossy(&body).into_owned()),
        Err(_) => (0, String::new()),
    }
}

/// The `/metrics` text.
pub fn metrics(w: &Wrapper) -> String {
    let (code, _, body) = request(w.health, "GET", "/metrics", &[], b"");
    assert_eq!(code, 200, "/metrics");
    String::from_utf8_lossy(&body).into_owned()
}

/// The value of the sample whose name (with labels, exactly as exposed) is `sample`.
pub fn metric(w: &Wrapper, sample: &str) -> Option<f64> {
    metrics(w).lines().find_map(|l| {
        let (name, value) = l.rsplit_once(' ')?;
        (name == sample).then(|| value.parse().ok())?
    })
}

/// Removes every `metadata.resourceVersion` (grid-wrapper's RVs differ between processes).
fn strip_rvs(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                meta.remove("resourceVersion");
            }
            map.values_mut().for_each(strip_rvs);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_rvs),
        _ => {}
    }
}

/// Everything grid-wrapper serves, per collection: `namespace/name` → object without RVs.
/// `None` when a list does not answer 200.
pub fn served(w: &Wrapper) -> Option<BTreeMap<String, BTreeMap<String, Value>>> {
    let mut out = BTreeMap::new();
    for path in COLLECTIONS {
        let (code, _, body) = w.get(path);
        if code != 200 {
            return None;
        }
        let list: Value = serde_json::from_slice(&body).ok()?;
        let mut items = BTreeMap::new();
        for item in list["items"].as_array()? {
            let mut item = item.clone();
            strip_rvs(&mut item);
            let key = format!(
                "{}/{}",
                item["metadata"]["namespace"].as_str().unwrap_or(""),
                item["metadata"]["name"].as_str().unwrap_or("")
            );
            items.insert(key, item);
        }
        out.insert(path.to_string(), items);
    }
    Some(out)
}

/// The highest resourceVersion grid-wrapper has handed out (its list RVs).
pub fn max_rv(w: &Wrapper) -> u64 {
    COLLECTIONS
        .iter()
        .map(|p| super::rv(&w.get_json(p)))
        .max()
        .unwrap_or(0)
}

/// A watch as raw bytes: sends the request, then reads until the server closes (or `timeout`).
/// Returns (bytes, whether the server closed).
pub struct RawWatch {
    sock: TcpStream,
    pub bytes: Vec<u8>,
}

impl RawWatch {
    /// Opens `path` (with `watch=true`) and reads the response head.
    pub fn open(addr: SocketAddr, path: &str) -> RawWatch {
        let mut sock = TcpStream::connect(addr).expect("connect");
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        sock.write_all(req.as_bytes()).expect("send watch");
        let mut w = RawWatch {
            sock,
            bytes: Vec::new(),
        };
        w.read_for(Duration::from_millis(300));
        assert!(
            w.bytes.starts_with(b"HTTP/1.1 200"),
            "watch answered {:?}",
            String::from_utf8_lossy(&w.bytes)
        );
        w
    }

    /// Reads what arrives for `d`; returns true when the server closed the connection.
    pub fn read_for(&mut self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut buf = [0u8; 65536];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let _ = self.sock.set_read_timeout(Some(left));
            match self.sock.read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => self.bytes.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return false
                }
                Err(_) => return true,
            }
        }
    }

    /// Whether the body so far ends with the chunked encoding's terminating chunk.
    pub fn ended_cleanly(&self) -> bool {
        self.bytes.ends_with(b"\r\n0\r\n\r\n")
    }

    /// Number of watch events received so far (lines with a `"type"`).
    pub fn events(&self) -> usize {
        String::from_utf8_lossy(&self.bytes)
            .matches("{\"type\":")
            .count()
    }
}

/// An upstream URL where nothing listens (a port bound and released: connections are refused).
pub fn dead_master() -> String {
    format!("http://127.0.0.1:{}", super::free_port())
}

/// The flags of a wrapper with a snapshot in `dir` written after 1 s of quiet (no minimum gap).
pub fn cache_flags(dir: &str) -> Vec<String> {
    vec![
        format!("--cache-dir={dir}"),
        "--cache-write-interval=0".to_string(),
    ]
}

/// Waits (bounded by 15 s) until the snapshot writer has written `n` snapshots in total.
pub fn wait_snapshot_writes(w: &Wrapper, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let done = metric(w, "grid_wrapper_snapshot_writes_total").unwrap_or(0.0);
        if done >= n as f64 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {done} snapshots written, waited for {n}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// libfaketime's preload library (Debian package `faketime`), if installed.
pub fn libfaketime() -> Option<std::path::PathBuf> {
    let dirs = std::fs::read_dir("/usr/lib").ok()?;
    dirs.filter_map(Result::ok)
        .map(|d| d.path().join("faketime/libfaketime.so.1"))
        .chain([std::path::PathBuf::from(
            "/usr/lib/faketime/libfaketime.so.1",
        )])
        .find(|p| p.is_file())
}

/// Starts grid-wrapper (as `edge-a1` against `master`) with its clock faked by libfaketime
/// (`spec` as in `FAKETIME`, e.g. `@2020-01-01 00:00:00` or `-365d`) preloaded into the process
/// itself, so that signals reach grid-wrapper. Waits for readiness. `None` (reason printed)
/// without libfaketime.
pub fn start_with_fake_clock(
    spec: &str,
    master: &str,
    extra: &[&str],
) -> Option<(Wrapper, LogSink)> {
    let Some(lib) = libfaketime() else {
        println!("skipping: libfaketime not installed (Debian package faketime)");
        return None;
    };
    let w = Wrapper::spawn(
        Command::new(env!("CARGO_BIN_EXE_grid-wrapper"))
            .env("LD_PRELOAD", lib)
            .env("FAKETIME", spec)
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .arg(format!("--master={master}"))
            .arg("--hostname=edge-a1")
            .args(extra),
    );
    let log = w.log.clone();
    w.wait_ready();
    Some((w, log))
}
