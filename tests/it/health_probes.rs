//! The health listener (`--metrics-bind-address`) under clients that never finish a request
//! (issue 24, point 9), against the real binaries: while silent connections and connections
//! dripping one byte of a request head at a time are open, `/healthz`, `/readyz` and `/metrics`
//! still answer at once. A liveness probe with a 1 s timeout must never wait for them.
//!
//! And what `/readyz` says of the container runtime (`--container-runtime-endpoint`, issue 45):
//! still 200 while the runtime does not answer, with a line saying so; with the real CRI
//! server (`common::cri`), answering, then not once it is gone, its last answer kept.

use crate::common;

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::*;

/// How long a probe waits for its answer before it counts as not answered.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);
/// Silent connections: connected, never a byte sent.
const SILENT: usize = 20;
/// Connections that send one byte of a request head every [`DRIP_EVERY`].
const DRIPPING: usize = 20;
const DRIP_EVERY: Duration = Duration::from_millis(500);

/// A probe's (status, body), or why it got none.
type Probe = Result<(u16, String), String>;

/// GET `path` on a fresh connection; `Err` when no complete answer comes within
/// [`ANSWER_WITHIN`] (each read waits at most that long).
fn probe(addr: SocketAddr, path: &str) -> Probe {
    let mut s = TcpStream::connect_timeout(&addr, ANSWER_WITHIN).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(ANSWER_WITHIN))
        .and_then(|()| s.set_write_timeout(Some(ANSWER_WITHIN)))
        .map_err(|e| e.to_string())?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let (code, _, body) = read_response(&mut BufReader::new(s))
        .map_err(|e| format!("no answer within {ANSWER_WITHIN:?}: {e}"))?;
    Ok((code, String::from_utf8_lossy(&body).into_owned()))
}

/// A client that sends a request head one byte every [`DRIP_EVERY`] until `stop` (a new
/// connection when the server closes one).
fn drip(addr: SocketAddr, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let head = format!(
            "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nX-Slow: {}\r\n\r\n",
            "x".repeat(200)
        );
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut s) = TcpStream::connect(addr) else {
                std::thread::sleep(DRIP_EVERY);
                continue;
            };
            for b in head.as_bytes() {
                if stop.load(Ordering::Relaxed) || s.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(DRIP_EVERY);
            }
        }
    })
}

#[test]
fn probes_answer_while_silent_and_dripping_clients_are_connected() {
    let _heavy = common::heavy();
    let sim = Sim::start(&[]);
    let w = Wrapper::start(&sim.url, "edge-a1", &[]);
    let silent: Vec<TcpStream> = (0..SILENT)
        .map(|_| TcpStream::connect(w.health).expect("connect a silent client"))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let drips: Vec<JoinHandle<()>> = (0..DRIPPING)
        .map(|_| drip(w.health, stop.clone()))
        .collect();
    // Every dripping client has connected and sent its first bytes.
    std::thread::sleep(4 * DRIP_EVERY);

    let answers: Vec<(&str, Probe)> = ["/healthz", "/readyz", "/metrics"]
        .into_iter()
        .map(|path| (path, probe(w.health, path)))
        .collect();

    stop.store(true, Ordering::Relaxed);
    for d in drips {
        let _ = d.join();
    }
    drop(silent);
    for (path, answer) in answers {
        match answer {
            Ok((code, body)) => {
                assert_eq!(code, 200, "{path}: {body}");
                if path == "/metrics" {
                    assert!(body.contains("\ngrid_wrapper_ready 1\n"), "{body}");
                }
            }
            Err(e) => panic!(
                "{path} while {SILENT} silent and {DRIPPING} dripping clients are connected: {e}"
            ),
        }
    }
}

/// `/readyz`'s body once its runtime line satisfies `want` (waited for up to 10 s); its
/// status must be 200 throughout.
fn readyz_once(w: &Wrapper, what: &str, want: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    wait_for(what, || {
        let (code, body) = probe(w.health, "/readyz").unwrap_or_else(|e| panic!("/readyz: {e}"));
        assert_eq!(code, 200, "{body}");
        let hit = body.lines().nth(1).is_some_and(&want);
        last = body;
        hit
    });
    last
}

fn runtime_flags(endpoint: &str) -> Vec<String> {
    vec![
        format!("--container-runtime-endpoint={endpoint}"),
        "--container-runtime-poll-interval=1".into(),
        "--container-runtime-request-timeout=1".into(),
    ]
}

#[test]
fn readyz_says_a_runtime_that_never_answered_is_not_answering_and_stays_ready() {
    let _heavy = common::heavy();
    let dir = common::cri::scratch("readyz-missing");
    let endpoint = format!("unix://{}/nothing.sock", dir.display());
    let sim = Sim::start(&[]);
    let flags = runtime_flags(&endpoint);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let w = Wrapper::start(&sim.url, "edge-a1", &flags);
    let prefix = format!("runtime {endpoint}: not answering for ");
    let body = readyz_once(&w, "the runtime's line", |l| l.starts_with(&prefix));
    let mut lines = body.lines();
    assert_eq!(lines.next(), Some("ok"), "{body}");
    assert!(
        lines.next().is_some_and(|l| l.ends_with(
            " s (unreachable), not once since the start; endpoints are served as the upstream says"
        )),
        "{body}"
    );
    assert_eq!(lines.next(), None, "{body}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn readyz_says_the_real_runtime_answers_and_then_that_its_last_answer_stays_in_force() {
    let _heavy = common::heavy();
    // The demo's local pod of Service web, on a new address: its endpoint in the EndpointSlice
    // and in the Endpoints object are repaired.
    let moved = common::cri::Sb {
        id: "sb-1",
        name: "web-5d8f7-a1x2q",
        attempt: 1,
        ready: true,
        ips: &["10.244.1.99"],
    };
    let Some(fake) = common::cri::Fake::start("readyz", &[moved]) else {
        return;
    };
    let endpoint = fake.endpoint.clone();
    let sim = Sim::start(&[]);
    let flags = runtime_flags(&endpoint);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let w = Wrapper::start(&sim.url, "edge-a1", &flags);
    let answering = format!("runtime {endpoint}: answering (last poll ");
    let body = readyz_once(&w, "the runtime answering, its repairs served", |l| {
        l.starts_with(&answering) && l.ends_with(" s ago), 2 endpoints repaired")
    });
    assert!(body.starts_with("ok\n"), "{body}");
    // The runtime goes away (killed, its socket removed): still ready, and its last answer is
    // what is served.
    drop(fake);
    let failing = format!("runtime {endpoint}: not answering for ");
    let body = readyz_once(&w, "the runtime not answering", |l| l.starts_with(&failing));
    assert!(body.starts_with("ok\n"), "{body}");
    assert!(
        body.contains(" s (unreachable); its last answer, ")
            && body.ends_with(" s ago, stays in force: 2 endpoints repaired"),
        "{body}"
    );
}
