//! Integration-test harness: starts the real `grid-wrapper-sim` and `grid-wrapper` binaries on
//! loopback, and speaks HTTP/1.1 to them over plain sockets (no client library in between).
#![allow(dead_code)]

pub mod autonomy;
pub mod cri;
pub mod fault_proxy;
pub mod generations;
pub mod http;
pub mod pki;
pub mod procs;
pub mod protobuf;

pub use http::*;
pub use procs::*;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// (status, headers, body) of one response.
pub type Response = (u16, Vec<(String, String)>, Vec<u8>);

/// A started child process, killed on drop.
pub struct Proc {
    pub child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The process-wide lock of the tests that load the machine (floods, load loops, stuck
/// readers, thousands of changes, tight timing): they run one at a time, beside the light tests
/// only. Take it first: `let _heavy = common::heavy();`. A heavy test that panicked leaves it
/// poisoned; the next one takes it all the same.
pub fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY.lock().unwrap_or_else(|p| p.into_inner())
}

/// A free loopback port (bound and released: a small race the tests accept), for an address
/// that must be known before its process starts: an upstream started, stopped and started again
/// at the same address, or one where nothing listens. Anything else listens on port 0.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The `grid-wrapper-sim` binary of the build profile this test was built with: a package of its
/// own (sim/), so Cargo gives the tests no `CARGO_BIN_EXE_` path for it. A test runs as
/// target/<profile>/deps/<test>-<hash>; the simulator is target/<profile>/grid-wrapper-sim, built
/// by `cargo build --bins` (`make test` does that before `cargo test`).
pub fn sim_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let mut dir = exe.parent().expect("the test's directory").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let sim = dir.join(format!("grid-wrapper-sim{}", std::env::consts::EXE_SUFFIX));
    assert!(
        sim.is_file(),
        "run `cargo build --bins` (or `make test`) first: grid-wrapper-sim is not built at {}",
        sim.display()
    );
    sim
}

/// The simulated apiserver.
pub struct Sim {
    pub proc: Proc,
    pub url: String,
    pub addr: SocketAddr,
}

impl Sim {
    /// Starts `grid-wrapper-sim` with `args` (fixture demo unless given) and waits for its
    /// "listening on" line. A simulator that ends without it (a fixed `--listen` port that an
    /// outgoing connection of another test holds for a moment) is started again, up to 20 times.
    pub fn start(args: &[&str]) -> Sim {
        let mut attempts = 0;
        let (child, line) = loop {
            let mut cmd = Command::new(sim_bin());
            if !args.contains(&"--fixture") {
                cmd.args(["--fixture", "demo"]);
            }
            cmd.args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            let mut child = cmd.spawn().expect("start grid-wrapper-sim");
            let stdout = child.stdout.take().expect("sim stdout");
            let mut line = String::new();
            BufReader::new(stdout)
                .read_line(&mut line)
                .expect("sim banner");
            attempts += 1;
            if !line.trim().is_empty() || attempts >= 20 {
                break (child, line);
            }
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(100));
        };
        let url = line
            .split_whitespace()
            .last()
            .expect("sim prints its URL")
            .to_string();
        let hostport = url
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .to_string();
        Sim {
            proc: Proc { child },
            addr: hostport.parse().expect("sim address"),
            url,
        }
    }

    /// POSTs a control request to `/sim/<what>`.
    pub fn control(&self, what: &str, body: &Value) -> Value {
        let (code, _, resp) = request(
            self.addr,
            "POST",
            &format!("/sim/{what}"),
            &[("Content-Type", "application/json")],
            &serde_json::to_vec(body).unwrap(),
        );
        assert!(
            code < 300,
            "sim {what}: {code} {}",
            String::from_utf8_lossy(&resp)
        );
        serde_json::from_slice(&resp).unwrap_or(Value::Null)
    }

    /// Starts the demo simulator on two loopback addresses; returns it (its `addr` is the first)
    /// and the second address.
    pub fn start_two_addresses(extra: &[&str]) -> (Sim, SocketAddr) {
        let mut child = Command::new(sim_bin())
            .args(["--fixture", "demo", "--listen", "127.0.0.1:0"])
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start grid-wrapper-sim");
        let mut out = BufReader::new(child.stdout.take().expect("sim stdout"));
        let mut addr = || {
            let mut line = String::new();
            out.read_line(&mut line).expect("sim banner");
            let url = line.split_whitespace().last().expect("a URL").to_string();
            let addr: SocketAddr = url.trim_start_matches("http://").parse().expect("address");
            (url, addr)
        };
        let (url, a) = addr();
        let (_, b) = addr();
        let sim = Sim {
            proc: Proc { child },
            url,
            addr: a,
        };
        (sim, b)
    }

    /// Upserts an object.
    pub fn apply(&self, obj: &Value) {
        self.control("apply", obj);
    }

    /// Merges labels into a node (a `null` value removes the label).
    pub fn label_node(&self, name: &str, labels: Value) {
        self.control(
            "label-node",
            &serde_json::json!({"name": name, "labels": labels}),
        );
    }

    /// Requests the sim recorded (proxied ones).
    pub fn requests(&self) -> Vec<Value> {
        let (_, _, body) = request(self.addr, "GET", "/sim/requests", &[], b"");
        serde_json::from_slice(&body).unwrap_or_default()
    }
}

/// A running grid-wrapper, its output captured (printed when the test panics).
pub struct Wrapper {
    pub proc: Proc,
    pub addr: SocketAddr,
    pub health: SocketAddr,
    pub log: LogSink,
}

impl Drop for Wrapper {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- grid-wrapper on {} (health {}) logged:\n{}",
                self.addr,
                self.health,
                self.log.text()
            );
        }
    }
}

/// The marker of grid-wrapper's startup line that names the kube-proxy port.
const SERVING: &str = "serving kube-proxy on ";

/// The kube-proxy and health addresses grid-wrapper's startup line names (`serving kube-proxy
/// on http://A (health on http://B), ...`), the first such line of `log`.
pub fn bound_addresses(log: &str) -> Option<(SocketAddr, SocketAddr)> {
    let line = log.lines().find(|l| l.contains(SERVING))?;
    let rest = &line[line.find(SERVING)? + SERVING.len()..];
    let api = rest.split_once("://")?.1.split_whitespace().next()?;
    let health = rest.split_once("(health on http://")?.1.split_once(')')?.0;
    Some((api.parse().ok()?, health.parse().ok()?))
}

/// The relay port's address grid-wrapper's startup line names (`serving the site relay on
/// https://A: ...`).
pub fn relay_address(log: &str) -> Option<SocketAddr> {
    const RELAY: &str = "serving the site relay on https://";
    let line = log.lines().find(|l| l.contains(RELAY))?;
    let rest = &line[line.find(RELAY)? + RELAY.len()..];
    rest.split_once(": ")?.0.parse().ok()
}

impl Wrapper {
    /// Starts grid-wrapper against `master` as node `hostname`, with extra flags, on ports the
    /// system picks; waits for both listeners, not for readiness.
    pub fn start_unready(master: &str, hostname: &str, extra: &[&str]) -> Wrapper {
        Wrapper::spawn(
            Command::new(env!("CARGO_BIN_EXE_grid-wrapper"))
                .arg(format!("--master={master}"))
                .arg(format!("--hostname={hostname}"))
                .args(extra),
        )
    }

    /// Spawns `cmd` (grid-wrapper and its flags) with `--bind-address` and
    /// `--metrics-bind-address` on port 0, its output captured; returns once its startup line
    /// names the addresses it bound (both listening then).
    pub fn spawn(cmd: &mut Command) -> Wrapper {
        Wrapper::spawn_at(cmd, "127.0.0.1:0")
    }

    /// [`Wrapper::spawn`] with the kube-proxy port at `bind` (a restart at the same address).
    pub fn spawn_at(cmd: &mut Command, bind: &str) -> Wrapper {
        let (mut proc, log) = spawn_captured(
            cmd.arg(format!("--bind-address={bind}"))
                .arg("--metrics-bind-address=127.0.0.1:0"),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some((addr, health)) = bound_addresses(&log.text()) {
                return Wrapper {
                    proc,
                    addr,
                    health,
                    log,
                };
            }
            if let Ok(Some(status)) = proc.child.try_wait() {
                // What it logged last may still be in the pipe.
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "grid-wrapper exited ({status}) before listening:\n{}",
                    log.text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "grid-wrapper did not log its addresses within 20 s:\n{}",
                log.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The relay port's address, from the startup log (bounded wait).
    pub fn relay_addr(&self) -> SocketAddr {
        let text = self
            .log
            .wait_for_text("serving the site relay on", Duration::from_secs(20));
        relay_address(&text).expect("the relay line names an address")
    }

    /// Starts grid-wrapper and waits for `/readyz` 200.
    pub fn start(master: &str, hostname: &str, extra: &[&str]) -> Wrapper {
        let w = Self::start_unready(master, hostname, extra);
        w.wait_ready();
        w
    }

    /// Waits (bounded) until `/readyz` answers 200.
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok((200, _, _)) = try_request(self.health, "GET", "/readyz", &[], b"") {
                return;
            }
            assert!(Instant::now() < deadline, "grid-wrapper never became ready");
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// GET on the wrapper.
    pub fn get(&self, path: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
        request(self.addr, "GET", path, &[], b"")
    }

    /// GET that must answer 200 with JSON.
    pub fn get_json(&self, path: &str) -> Value {
        let (code, _, body) = self.get(path);
        assert_eq!(code, 200, "GET {path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).expect("JSON body")
    }

    /// GET on the metrics address (`/debug/...`) that must answer 200 with JSON.
    pub fn debug_json(&self, path: &str) -> Value {
        let (code, headers, body) = request(self.health, "GET", path, &[], b"");
        assert_eq!(code, 200, "{path}: {}", String::from_utf8_lossy(&body));
        let ct = header(&headers, "content-type").unwrap_or("");
        assert!(ct.starts_with("application/json"), "{ct}");
        serde_json::from_slice(&body).expect("JSON")
    }

    /// Opens a watch.
    pub fn watch(&self, path: &str) -> Watch {
        Watch::open(self.addr, path, &[])
    }
}

/// kube-proxy's list of its own Node on node `edge-a1` (`fieldSelector=metadata.name=edge-a1`):
/// the only Node list the cache serves there (docs/SEMANTICS.md §1.1); add `&watch=…` to watch.
pub const OWN_NODE: &str = "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-a1";

/// The demo's `web` endpoint on `edge-a2` (zone-a, as `edge-a1`): served on `edge-a1` while
/// `edge-a2` is in its zone.
pub const EDGE_A2_WEB: &str = "10.244.2.10";

/// Whether `w` (on `edge-a1`) serves the demo's `web` endpoint on `edge-a2`: how a test sees the
/// cache take another Node's relabel (it serves that Node only as facts).
pub fn serves_edge_a2_web(w: &Wrapper) -> bool {
    web_ips(&w.get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"))
        .iter()
        .any(|ip| ip == EDGE_A2_WEB)
}

/// `metadata.resourceVersion` as a number.
pub fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Names of a list's items.
pub fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// First addresses of the demo slice `web-abc12` in a list (empty when absent).
pub fn web_ips(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["metadata"]["name"] == "web-abc12"))
        .map(slice_ips)
        .unwrap_or_default()
}

/// First address of each endpoint of a slice.
pub fn slice_ips(slice: &Value) -> Vec<String> {
    slice["endpoints"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["addresses"][0].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

// ---- Helpers added for the protocol conformance tests (tests/it/protocol*.rs). ----

impl Sim {
    /// Deletes an object (`kind` as in `Node`, `Service`, `Endpoints`, `EndpointSlice`).
    pub fn delete(&self, kind: &str, namespace: &str, name: &str) {
        self.control(
            "delete",
            &serde_json::json!({"kind": kind, "namespace": namespace, "name": name}),
        );
    }

    /// `GET /sim/state`.
    pub fn state(&self) -> Value {
        let (_, _, body) = request(self.addr, "GET", "/sim/state", &[], b"");
        serde_json::from_slice(&body).unwrap_or_default()
    }

    /// A GET answered by the simulator itself (bypassing grid-wrapper), as JSON.
    pub fn get_json(&self, path: &str) -> Value {
        let (code, _, body) = request(self.addr, "GET", path, &[], b"");
        assert_eq!(
            code,
            200,
            "sim GET {path}: {}",
            String::from_utf8_lossy(&body)
        );
        serde_json::from_slice(&body).expect("sim JSON body")
    }

    /// Forgets the recorded (proxied) requests.
    pub fn clear_requests(&self) {
        self.control("requests/clear", &Value::Null);
    }

    /// `POST /sim/reset-rv`: the RV counter restarts at `rv` (objects re-stamped `rv+1..`, so
    /// `rv` plus the object count must stay below the current RV), history cleared, watches
    /// ended; RVs above the new current one are then "too large" in form `too_large`
    /// (`Some("http")`: HTTP 504, `Some("event")`: ERROR event, `None`: the sim's default).
    /// Returns the answer; `rv` in it is the new current RV.
    pub fn reset_rv(&self, rv: u64, too_large: Option<&str>) -> Value {
        let mut body = serde_json::json!({"rv": rv});
        if let Some(form) = too_large {
            body["too_large"] = Value::from(form);
        }
        self.control("reset-rv", &body)
    }

    /// `POST /sim/edge-health`: what `GET /sim/edge-health` answers from now on (a JSON string
    /// `body` is sent verbatim, to serve garbage).
    pub fn set_edge_health(&self, status: u16, body: Value) {
        self.control(
            "edge-health",
            &serde_json::json!({"status": status, "body": body}),
        );
    }

    /// The edge-health stub's URL (`<sim url>/sim/edge-health`).
    pub fn edge_health_url(&self) -> String {
        format!("{}/sim/edge-health", self.url)
    }

    /// How many `GET /sim/edge-health` the sim answered so far.
    pub fn edge_health_polls(&self) -> u64 {
        self.state()["edge_health_polls"].as_u64().unwrap_or(0)
    }

    /// `POST /sim/refuse`: returns once the listener is closed and every connection cut; new
    /// connections are refused for `seconds` (1..=600), then the same port listens again.
    pub fn refuse(&self, seconds: u64) {
        self.control("refuse", &serde_json::json!({"seconds": seconds}));
    }

    /// Waits (bounded: 20 s) until the sim accepts connections again (after a refusal).
    pub fn wait_accepting(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(self.addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "the sim did not listen again on {}",
                self.addr
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Wrapper {
    /// Starts grid-wrapper with exactly `args` plus `--bind-address`/`--metrics-bind-address`
    /// on port 0, capturing its output; waits for both listeners, not for readiness.
    pub fn start_captured(args: &[&str]) -> (Wrapper, LogSink) {
        let w = Wrapper::spawn(Command::new(env!("CARGO_BIN_EXE_grid-wrapper")).args(args));
        let log = w.log.clone();
        (w, log)
    }

    /// The current `/readyz` status code (`None` if the health port does not answer).
    pub fn readyz(&self) -> Option<u16> {
        try_request(self.health, "GET", "/readyz", &[], b"")
            .ok()
            .map(|(c, _, _)| c)
    }
}

/// Percent-encodes a query value the way Go's `url.QueryEscape` does (space as `%20` here).
pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// kube-proxy's label selector (docs/SEMANTICS.md §4), percent-encoded as it sends it.
pub const SELECTOR_L: &str =
    "%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name";

/// Starts the demo simulator and a ready grid-wrapper for node `edge-a1` with `extra` flags.
pub fn demo(extra: &[&str]) -> (Sim, Wrapper) {
    let sim = Sim::start(&[]);
    let w = Wrapper::start(&sim.url, "edge-a1", extra);
    (sim, w)
}

/// The demo simulator and a grid-wrapper in front of it (as [`demo`] starts them), shared by the
/// tests that change neither: the upstream's objects, the wrapper's flags, counters or logs.
pub struct SharedDemo {
    pub sim: Sim,
    pub w: Wrapper,
}

/// The [`SharedDemo`] the tests running now hold, started for the first of them; the processes
/// end when the last holder drops it (never left behind when the test binary exits).
pub fn shared_demo() -> std::sync::Arc<SharedDemo> {
    use std::sync::{Arc, Mutex, Weak};
    static SLOT: Mutex<Weak<SharedDemo>> = Mutex::new(Weak::new());
    let mut slot = SLOT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(shared) = slot.upgrade() {
        return shared;
    }
    let (sim, w) = demo(&[]);
    let shared = Arc::new(SharedDemo { sim, w });
    *slot = Arc::downgrade(&shared);
    shared
}

/// Asserts that `body` is a full Kubernetes `Status` failure with `code` (and returns it).
pub fn assert_status(code: u16, headers: &[(String, String)], body: &[u8], want: u16) -> Value {
    assert_eq!(
        code,
        want,
        "HTTP status; body {}",
        String::from_utf8_lossy(body)
    );
    let ct = header(headers, "content-type").unwrap_or("");
    assert!(
        ct.starts_with("application/json"),
        "Status Content-Type {ct:?}"
    );
    let v: Value = serde_json::from_slice(body).unwrap_or_else(|e| {
        panic!(
            "Status body is not JSON ({e}): {}",
            String::from_utf8_lossy(body)
        )
    });
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["apiVersion"], "v1", "{v}");
    assert_eq!(v["status"], "Failure", "{v}");
    assert_eq!(v["code"], u64::from(want), "{v}");
    assert!(
        v["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "reason: {v}"
    );
    assert!(
        v["message"].as_str().is_some_and(|m| !m.is_empty()),
        "message: {v}"
    );
    assert!(v["metadata"].is_object(), "metadata: {v}");
    v
}

/// Polls `cond` every 20 ms until it holds; panics after 10 s naming `what`.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Like [`wait_for`] with another bound: for work whose time grows with the machine's load (a
/// batch of thousands of changes through a debug build), never a speed assertion.
pub fn wait_for_long(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `(type, metadata.name)` of a watch event, for compact comparisons.
pub fn ev_name(ev: &Value) -> (String, String) {
    (
        ev["type"].as_str().unwrap_or("").to_string(),
        ev["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

/// A slice `default/big-1` of Service `big` with `endpoints` endpoints on edge-b1, labelled
/// `round` (each round is a new version): large changes that pile up for a slow watcher.
pub fn big_slice(round: usize, endpoints: usize) -> Value {
    let eps: Vec<Value> = (0..endpoints)
        .map(|i| {
            serde_json::json!({"addresses": [format!("10.{}.{}.{}", 100 + i / 65536, (i / 256) % 256, i % 256)],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "nodeName": "edge-b1", "zone": "zone-b",
                "targetRef": {"kind": "Pod", "namespace": "default", "name": format!("big-{i}")}})
        })
        .collect();
    serde_json::json!({"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"name": "big-1", "namespace": "default",
            "labels": {"kubernetes.io/service-name": "big", "round": round.to_string()}},
        "addressType": "IPv4", "endpoints": eps,
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]})
}
