//! The health listener: its answers, and (over loopback sockets) that no client and no holder
//! of the cache's lock keeps a probe waiting.

use crate::writer::WriterHandle;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use super::{answer, readyz, runtime_line, spawn, Readiness, MAX_CONNECTIONS, MAX_HEAD};
use crate::cache::store::test_support;
use crate::handoff::runtime_pods::{PollOutcome, PollRecord, PollStatus};
use crate::server::extras::Extras;

/// How long a probe waits for its answer before it counts as not answered.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

#[test]
fn readyz_follows_readiness() {
    assert_eq!(answer("/readyz", Readiness::NotReady).0, 503);
    assert_eq!(answer("/readyz", Readiness::Ready).0, 200);
    let (code, body) = answer("/readyz", Readiness::Snapshot { age: 42 });
    assert_eq!(code, 200);
    assert!(body.contains("snapshot written 42 s ago"), "{body}");
    assert_eq!(answer("/healthz", Readiness::NotReady).0, 200);
    assert_eq!(answer("/livez?verbose", Readiness::NotReady).0, 200);
    assert_eq!(answer("/debug/pprof", Readiness::Ready).0, 404);
}

/// The poll record at `now_ms` for the endpoint the tests name.
fn status_at(record: &PollRecord, now_ms: u64) -> PollStatus {
    record.status(SOCK, now_ms)
}

const SOCK: &str = "unix:///run/containerd/containerd.sock";

#[test]
fn the_poll_record_follows_answers_and_failure_episodes() {
    let record = PollRecord::new();
    let secs = Duration::from_secs;
    // Nothing ended yet: the first poll is under way.
    assert_eq!(
        status_at(&record, 500),
        PollStatus {
            endpoint: SOCK.into(),
            last_ok_ago: None,
            failing: None
        }
    );
    record.record(PollOutcome::Ok, 1_000);
    let s = status_at(&record, 3_000);
    assert_eq!((s.last_ok_ago, s.failing), (Some(secs(2)), None));
    // An episode starts at its first failure; later ones keep its start and say how the last
    // one failed.
    record.record(PollOutcome::Timeout, 5_000);
    record.record(PollOutcome::Unreachable, 10_000);
    let s = status_at(&record, 45_000);
    assert_eq!(s.last_ok_ago, Some(secs(44)));
    assert_eq!(s.failing, Some((secs(40), PollOutcome::Unreachable)));
    // An answer ends it; the next failure opens a new one.
    record.record(PollOutcome::Ok, 46_000);
    assert_eq!(status_at(&record, 47_000).failing, None);
    record.record(PollOutcome::BadAnswer, 50_000);
    let s = status_at(&record, 53_000);
    assert_eq!(s.failing, Some((secs(3), PollOutcome::BadAnswer)));
    assert_eq!(s.last_ok_ago, Some(secs(7)));
}

#[test]
fn readyz_says_what_the_runtime_does_without_changing_its_status() {
    let status = |last_ok: Option<u64>, failing: Option<(u64, PollOutcome)>| PollStatus {
        endpoint: SOCK.into(),
        last_ok_ago: last_ok.map(Duration::from_secs),
        failing: failing.map(|(s, how)| (Duration::from_secs(s), how)),
    };
    // Without --container-runtime-endpoint: as before.
    assert_eq!(readyz(Readiness::Ready, None, 0), (200, "ok".into()));
    let answering = status(Some(2), None);
    assert_eq!(
        readyz(Readiness::Ready, Some(&answering), 1),
        (
            200,
            format!("ok\nruntime {SOCK}: answering (last poll 2 s ago), 1 endpoint repaired")
        )
    );
    // A failing runtime: still ready (what is served does not change), and said so.
    let failing = status(Some(45), Some((40, PollOutcome::Timeout)));
    let (code, body) = readyz(Readiness::Ready, Some(&failing), 12);
    assert_eq!(code, 200);
    assert_eq!(
        body,
        format!(
            "ok\nruntime {SOCK}: not answering for 40 s (timeout); its last answer, 45 s ago, \
             stays in force: 12 endpoints repaired"
        )
    );
    let never = status(None, Some((40, PollOutcome::Unreachable)));
    let (code, body) = readyz(Readiness::Snapshot { age: 7 }, Some(&never), 0);
    assert_eq!(code, 200);
    assert!(
        body.starts_with("ok: serving the on-disk snapshot"),
        "{body}"
    );
    assert!(
        body.ends_with(&format!(
            "\nruntime {SOCK}: not answering for 40 s (unreachable), not once since the start; \
             endpoints are served as the upstream says"
        )),
        "{body}"
    );
    let (code, body) = readyz(Readiness::NotReady, Some(&status(None, None)), 0);
    assert_eq!(code, 503);
    assert!(
        body.ends_with(&format!("\nruntime {SOCK}: first poll under way")),
        "{body}"
    );
    let bad = runtime_line(&status(Some(9), Some((3, PollOutcome::BadAnswer))), 0);
    assert!(
        bad.contains("(bad answer)") && bad.contains("0 endpoints repaired"),
        "{bad}"
    );
}

#[test]
fn metrics_report_readiness_and_counts() {
    use crate::cache::collection::Retention;
    use crate::cache::store::{Settings, State};
    let st = State::new(
        Settings {
            hostname: "h".into(),
            wrapper_in_cluster: true,
            retention: Retention::for_queue(10),
        },
        42,
    );
    let m = crate::server::metrics::render_cache(&st.facts(), &Extras::default(), 0);
    assert!(m.contains("grid_wrapper_ready 0\n"), "{m}");
    assert!(m.contains("grid_wrapper_resource_version 42\n"));
    assert!(m.contains("grid_wrapper_objects{resource=\"endpointslices.discovery.k8s.io/v1\"} 0\n"));
}

/// A ready (empty) cache and a health listener on it.
fn listening(extras: Extras) -> (WriterHandle, SocketAddr) {
    let mut st = test_support::state("h", 1);
    test_support::list_all_empty(&mut st);
    let writer = WriterHandle::started(st);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("bound address");
    spawn(listener, writer.clone(), extras).expect("spawn");
    (writer, addr)
}

/// Sends `head` on a fresh connection and reads the answer until the server closes;
/// `Err` when it does not come within [`ANSWER_WITHIN`] (status, whole response text).
fn exchange(addr: SocketAddr, head: &[u8]) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(ANSWER_WITHIN))
        .map_err(|e| e.to_string())?;
    s.write_all(head).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .map_err(|e| format!("no answer within {ANSWER_WITHIN:?}: {e}"))?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or(format!("no status line in {text:?}"))?;
    Ok((code, text))
}

fn get_within(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes(),
    )
}

#[test]
fn probes_answer_while_the_writer_is_busy() {
    let (writer, addr) = listening(Extras::default());
    // The writer is applying a relist: busy throughout.
    let busy = writer.hold();
    let answers: Vec<_> = ["/readyz", "/metrics", "/healthz"]
        .into_iter()
        .map(|path| (path, get_within(addr, path)))
        .collect();
    drop(busy);
    for (path, answer) in answers {
        match answer {
            Ok((code, text)) => assert_eq!(code, 200, "{path}: {text}"),
            Err(e) => panic!("{path} while the writer is busy: {e}"),
        }
    }
}

#[test]
fn a_debug_page_waiting_for_the_writer_holds_up_no_probe() {
    let (writer, addr) = listening(Extras {
        debug: true,
        ..Extras::default()
    });
    let busy = writer.hold();
    let waiting = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        s.write_all(b"GET /debug/state HTTP/1.1\r\n\r\n")
            .expect("send");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    });
    // The debug request is (very likely) with the worker, which waits for the writer.
    std::thread::sleep(Duration::from_millis(100));
    let probe = get_within(addr, "/healthz");
    drop(busy);
    let debug = waiting.join().expect("debug client");
    assert!(matches!(probe, Ok((200, _))), "{probe:?}");
    assert!(debug.starts_with("HTTP/1.1 200 OK\r\n"), "{debug}");
    assert!(debug.contains("\"ready\": true"), "{debug}");
}

#[test]
fn a_probe_gets_in_past_the_connection_cap() {
    let (_shared, addr) = listening(Extras::default());
    let idle: Vec<TcpStream> = (0..MAX_CONNECTIONS + 10)
        .map(|_| TcpStream::connect(addr).expect("connect an idle client"))
        .collect();
    let probe = get_within(addr, "/healthz");
    drop(idle);
    assert!(matches!(probe, Ok((200, _))), "{probe:?}");
}

#[test]
fn a_head_too_long_is_answered_from_its_request_line_at_once() {
    let (_shared, addr) = listening(Extras::default());
    // No blank line ever comes: the head ends at the cap, not at the read deadline.
    let mut head = b"GET /readyz HTTP/1.1\r\nX-Long: ".to_vec();
    head.resize(MAX_HEAD + 100, b'a');
    let answer = exchange(addr, &head);
    let Ok((200, text)) = &answer else {
        panic!("{answer:?}");
    };
    assert!(text.ends_with("\r\n\r\nok"), "{text}");
}

#[test]
fn answers_are_framed_as_before() {
    let (_shared, addr) = listening(Extras::default());
    let answer = get_within(addr, "/nowhere");
    assert_eq!(
        answer,
        Ok((
            404,
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: 9\r\nConnection: close\r\n\r\nnot found"
                .to_string()
        ))
    );
    let (code, text) = get_within(addr, "/metrics").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(code, 200);
    assert!(
        text.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
        "{text}"
    );
    assert!(text.contains("\ngrid_wrapper_ready 1\n"), "{text}");
    // Without --debug, /debug/state is not served.
    assert!(matches!(get_within(addr, "/debug/state"), Ok((404, _))));
}
