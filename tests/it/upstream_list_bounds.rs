//! Issue 39, point 4: memory from a hostile upstream is bounded per list. After a good first
//! sync, the upstream turns hostile on the Nodes relist: a gzip'd NodeList of 7 million tiny
//! items (231 MB decompressed from a few MB on the wire), generated as it is sent. grid-wrapper
//! abandons it as it passes `--max-list-items`, says so in one WARN, keeps serving the Nodes of
//! its last complete list, and retries with a growing backoff (no busy loop), its peak RSS far
//! below the DaemonSet's memory limit. The same for 4 GB of whitespace before a list (a few MB
//! gzip'd): refused at 64 KiB outside the items. Against the real binaries, through the fault
//! proxy.

use crate::common;

use std::io::{BufWriter, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::fault_proxy::{Fault, FaultProxy, Misbehaviour};
use common::{names, wait_for, wait_for_long, Sim};
use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::json;

/// Items of the hostile list (`GRID_WRAPPER_HOSTILE_ITEMS` overrides it, to show the old code's
/// behaviour with a list it can survive).
const HOSTILE_ITEMS: u64 = 7_000_000;
/// The peak RSS allowed to the wrapper through it all: the DaemonSet's memory limit.
const MAX_HWM_KIB: u64 = 128 * 1024;
/// Hostile lists armed (each fault fires once).
const ARMED: usize = 40;
/// How long the retries are watched, and the most lists in that time: the backoff's delays
/// (0.8 s doubling, jittered into [½, 1½)) allow at most 6 in 10 s.
const RETRY_WINDOW: Duration = Duration::from_secs(10);
const MAX_LISTS_IN_WINDOW: usize = 6;

fn hostile_items() -> u64 {
    std::env::var("GRID_WRAPPER_HOSTILE_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(HOSTILE_ITEMS)
}

/// Answers a LIST with a gzip'd body written by `body` as it is sent (the body ends with the
/// connection); the writing stops when the reader goes away (a write fails).
fn gzip_answer(client: &mut TcpStream, body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n\
                Connection: close\r\n\r\n";
    if client.write_all(head.as_bytes()).is_err() {
        return;
    }
    let Ok(stream) = client.try_clone() else {
        return;
    };
    let mut gz = GzEncoder::new(BufWriter::new(stream), Compression::fast());
    if body(&mut gz).is_ok() {
        let _ = gz.finish();
    }
}

/// The hostile NodeList: [`hostile_items`] tiny items.
fn hostile_list(client: &mut TcpStream) {
    gzip_answer(client, |gz| {
        gz.write_all(
            br#"{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"999999"},"items":["#,
        )?;
        let n = hostile_items();
        for i in 0..n {
            let sep = if i + 1 < n { "," } else { "" };
            write!(gz, r#"{{"metadata":{{"name":"n{i:07}"}}}}{sep}"#)?;
        }
        gz.write_all(b"]}")
    });
}

/// `VmHWM` of process `pid`, KiB.
fn hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// Request lines of the Nodes lists (not watches) the proxy saw, with whether each was hostile.
fn node_lists(proxy: &FaultProxy) -> Vec<(String, bool)> {
    proxy
        .seen()
        .into_iter()
        .filter(|(l, _)| l.starts_with("GET /api/v1/nodes") && !l.contains("watch=true"))
        .collect()
}

/// A good sync, then every Nodes list answered by `answer` (from a relist forced by an RV
/// reset): after [`RETRY_WINDOW`], the wrapper's peak RSS is under [`MAX_HWM_KIB`], the Nodes of
/// the good list are still served, one WARN containing `marker` holds every one of `parts`, and
/// the hostile lists were retried, spaced by the backoff.
fn refused_on_relist(answer: fn(&mut TcpStream), marker: &str, parts: &[&str]) {
    let sim = Sim::start(&[]);
    let proxy = FaultProxy::start(sim.addr);
    let (w, log) = common::autonomy::start(&proxy.url, "edge-a1", &[]);
    w.wait_ready();
    let pid = w.proc.child.id();
    // Move the upstream's RV well above where the reset will put it.
    for i in 0..40 {
        sim.label_node("edge-a1", json!({"bump": i.to_string()}));
    }
    wait_for("the bumps to be served", || {
        w.get_json("/api/v1/nodes/edge-a1")["metadata"]["labels"]["bump"] == "39"
    });
    // kube-proxy's list of its own Node: from the cache (any other Node list is proxied, to
    // the hostile upstream).
    let nodes = names(&w.get_json(common::OWN_NODE));
    assert!(nodes.contains(&"edge-a1".to_string()), "{nodes:?}");

    // From now on every Nodes list is hostile; the RV reset ends the watches and makes every
    // reflector relist (the others through the proxy to the sim, as before).
    for _ in 0..ARMED {
        proxy.add(Fault {
            matches: "GET /api/v1/nodes".into(),
            unless: Some("watch=true".into()),
            what: Misbehaviour::Answer(answer),
        });
    }
    sim.reset_rv(20, Some("http"));
    wait_for_long("the first hostile list", Duration::from_secs(60), || {
        node_lists(&proxy).iter().any(|(_, hostile)| *hostile)
    });
    // The retries: spaced by the backoff, however fast the upstream answers.
    let first = Instant::now();
    std::thread::sleep(RETRY_WINDOW);
    let hostile = node_lists(&proxy).iter().filter(|(_, h)| *h).count();
    let hwm = hwm_kib(pid);
    let served = names(&w.get_json(common::OWN_NODE));
    let marker_warn = |l: &str| l.contains("WARN") && l.contains(marker);
    let text = log.wait_for_line("the refusal's WARN", Duration::from_secs(20), marker_warn);
    let warns: Vec<&str> = text.lines().filter(|l| marker_warn(l)).collect();
    println!(
        "VmHWM {hwm} KiB; {hostile} hostile lists in {:?}; {} Nodes served; WARN: {warns:?}",
        first.elapsed(),
        served.len()
    );
    assert!(
        hwm < MAX_HWM_KIB,
        "peak RSS {hwm} KiB, over {MAX_HWM_KIB} KiB"
    );
    // The last complete list is still served: nothing of the abandoned ones was applied.
    assert_eq!(served, nodes);
    assert_eq!(warns.len(), 1, "one WARN:\n{text}");
    for part in parts {
        assert!(warns[0].contains(part), "{part:?} in {}", warns[0]);
    }
    assert!(
        (2..=MAX_LISTS_IN_WINDOW).contains(&hostile),
        "{hostile} hostile lists in {RETRY_WINDOW:?}: retried, and no busy retry"
    );
}

#[test]
fn a_seven_million_item_list_is_refused_with_one_warn_the_last_view_kept_and_backoff() {
    let _heavy = common::heavy();
    refused_on_relist(
        hostile_list,
        "--max-list-items",
        &[
            "Nodes",
            "more than 40000 items",
            "raise --max-list-items",
            "stay served",
        ],
    );
}

/// 4 GB of whitespace before a valid empty NodeList (a few MB gzip'd).
fn whitespace_flood(client: &mut TcpStream) {
    gzip_answer(client, |gz| {
        let spaces = vec![b' '; 1 << 20];
        for _ in 0..4096 {
            gz.write_all(&spaces)?;
        }
        gz.write_all(
            br#"{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[]}"#,
        )
    });
}

#[test]
fn whitespace_before_a_list_is_refused_at_the_envelope_bound() {
    let _heavy = common::heavy();
    refused_on_relist(
        whitespace_flood,
        "outside its items",
        &["Nodes", "more than 65536 bytes outside its items"],
    );
}
