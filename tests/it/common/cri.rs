//! The real grpc-go CRI server of the tests (`e2e/cri-fake`, built by
//! `scripts/cri-fake-build.sh` into out/e2e/bin/): started on a unix socket in a scratch
//! directory with a JSON file of sandboxes (re-read when it changes) and a log of every RPC.
//! Shared by `cri_runtime` (the client) and `cri_repair` (the served repairs).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use grid_wrapper::cri::client::Client;

pub const DEADLINE: Duration = Duration::from_secs(5);

/// A fresh directory for one test's socket and files.
pub fn scratch(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "gw-cri-{}-{}-{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// One sandbox of the fake runtime's JSON file.
pub struct Sb<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub attempt: u32,
    pub ready: bool,
    pub ips: &'a [&'a str],
}

/// One ready pod, `web`, at 10.244.1.7.
pub const WEB: Sb<'static> = Sb {
    id: "sb-1",
    name: "web",
    attempt: 0,
    ready: true,
    ips: &["10.244.1.7"],
};

pub fn sandboxes_json(list: &[Sb<'_>]) -> String {
    let items: Vec<serde_json::Value> = list
        .iter()
        .map(|s| {
            serde_json::json!({
                "id": s.id, "name": s.name, "namespace": "default", "uid": format!("uid-{}", s.name),
                "attempt": s.attempt, "state": if s.ready { "READY" } else { "NOTREADY" },
                "created_at": 1_700_000_000_000_000_000i64 + i64::from(s.attempt),
                "ip": s.ips.first().copied().unwrap_or(""),
                "additional_ips": s.ips.get(1..).unwrap_or(&[]),
            })
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}

/// The real CRI server, killed on drop.
pub struct Fake {
    child: Child,
    pub dir: PathBuf,
    pub endpoint: String,
}

impl Fake {
    /// Starts the server with `list`, or `None` (after one printed line) when it is not built.
    pub fn start(tag: &str, list: &[Sb<'_>]) -> Option<Fake> {
        let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("out/e2e/bin/cri-fake");
        if !bin.exists() {
            println!(
                "skipping: {} is missing (build it with bash scripts/cri-fake-build.sh)",
                bin.display()
            );
            return None;
        }
        let dir = scratch(tag);
        let socket = dir.join("cri.sock");
        let endpoint = format!("unix://{}", socket.display());
        std::fs::write(dir.join("sandboxes.json"), sandboxes_json(list)).expect("write sandboxes");
        let child = Command::new(&bin)
            .arg("-listen")
            .arg(&socket)
            .arg("-sandboxes")
            .arg(dir.join("sandboxes.json"))
            .arg("-calls")
            .arg(dir.join("calls.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn cri-fake");
        let mut f = Fake {
            child,
            dir,
            endpoint,
        };
        // The positive marker: "ready <socket>" once it serves.
        let stdout = f.child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("cri-fake did not start in 30 s");
        assert!(line.starts_with("ready "), "cri-fake: {line:?}");
        Some(f)
    }

    /// Replaces the sandboxes (a new file renamed over the old: the server sees it changed).
    pub fn set(&self, list: &[Sb<'_>]) {
        let tmp = self.dir.join("sandboxes.json.tmp");
        std::fs::write(&tmp, sandboxes_json(list)).expect("write sandboxes");
        std::fs::rename(&tmp, self.dir.join("sandboxes.json")).expect("rename sandboxes");
    }

    /// Every RPC the server received, in order.
    pub fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The server's process id (a test stops it with SIGSTOP to make it stall).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn client(&self) -> Client {
        Client::new(&self.endpoint, DEADLINE).expect("endpoint")
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
