//! The CRI client against a real grpc-go CRI server (`e2e/cri-fake`, built by
//! `scripts/cri-fake-build.sh` into out/e2e/bin/): READY sandboxes listed with their addresses
//! (dual stack too), NOTREADY ones left out, an address change seen on the next poll, an answer
//! over 64 KiB (flow control), and only the two read-only RPCs sent. Then scripted unix servers
//! in the test: one that stalls, one that closes, one that sends GOAWAY or RST_STREAM mid-call,
//! one that answers every call just inside the deadline (one deadline bounds the whole poll),
//! and one that never accepts with its backlog full (the connect is bounded by it too).
//! The server's harness is `common::cri`'s. Without the server binary the server tests print
//! one line and pass.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use grid_wrapper::cri::client::{Client, ErrorKind};
use grid_wrapper::cri::session::SessionError;
use grid_wrapper::cri::ReadySandbox;

use crate::common::cri::{scratch, Fake, Sb, DEADLINE, WEB};

fn by_name(mut v: Vec<ReadySandbox>) -> Vec<ReadySandbox> {
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

#[test]
fn ready_sandboxes_are_listed_with_their_addresses_and_notready_ones_left_out() {
    let list = [
        Sb {
            id: "sb-web",
            name: "web",
            attempt: 1,
            ready: true,
            ips: &["10.244.1.7", "fd00:10:244:1::7"],
        },
        Sb {
            id: "sb-db",
            name: "db",
            attempt: 0,
            ready: true,
            ips: &["10.244.1.8"],
        },
        Sb {
            id: "sb-old",
            name: "old",
            attempt: 3,
            ready: false,
            ips: &["10.244.1.9"],
        },
    ];
    let Some(fake) = Fake::start("list", &list) else {
        return;
    };
    let got = by_name(fake.client().list_ready_sandboxes().expect("poll"));
    let want = [
        ReadySandbox {
            namespace: "default".into(),
            name: "db".into(),
            uid: "uid-db".into(),
            attempt: 0,
            created_at: 1_700_000_000_000_000_000,
            ips: vec!["10.244.1.8".into()],
        },
        ReadySandbox {
            namespace: "default".into(),
            name: "web".into(),
            uid: "uid-web".into(),
            attempt: 1,
            created_at: 1_700_000_000_000_000_001,
            ips: vec!["10.244.1.7".into(), "fd00:10:244:1::7".into()],
        },
    ];
    assert_eq!(got, want);
}

#[test]
fn an_address_change_is_seen_on_the_next_poll() {
    let Some(fake) = Fake::start("move", &[WEB]) else {
        return;
    };
    let mut client = fake.client();
    let first = client.list_ready_sandboxes().expect("first poll");
    assert_eq!(first[0].ips, ["10.244.1.7"]);
    // The node "rebooted": the old sandbox is gone, a new one has the next address.
    fake.set(&[
        Sb {
            id: "sb-1",
            name: "web",
            attempt: 0,
            ready: false,
            ips: &["10.244.1.7"],
        },
        Sb {
            id: "sb-2",
            name: "web",
            attempt: 1,
            ready: true,
            ips: &["10.244.1.12"],
        },
    ]);
    let second = client.list_ready_sandboxes().expect("second poll");
    assert_eq!(second.len(), 1);
    assert_eq!(
        (second[0].attempt, second[0].ips.clone()),
        (1, vec!["10.244.1.12".to_string()])
    );
}

#[test]
fn an_answer_over_64_kib_is_read_with_flow_control() {
    let names: Vec<String> = (0..700)
        .map(|i| format!("pod-{i:04}-{}", "x".repeat(120)))
        .collect();
    let ids: Vec<String> = (0..700).map(|i| format!("{i:064x}")).collect();
    let ips: Vec<String> = (0..700)
        .map(|i| format!("10.244.{}.{}", i / 250, i % 250 + 1))
        .collect();
    let ip_refs: Vec<[&str; 1]> = ips.iter().map(|ip| [ip.as_str()]).collect();
    let list: Vec<Sb<'_>> = (0..700)
        .map(|i| Sb {
            id: &ids[i],
            name: &names[i],
            attempt: 0,
            ready: true,
            ips: &ip_refs[i],
        })
        .collect();
    let Some(fake) = Fake::start("big", &list) else {
        return;
    };
    let mut client = fake.client();
    // The list answer alone is over 64 KiB: the default stream window.
    let listed = client.list_pod_sandbox_ready().expect("list");
    let size: usize = listed
        .iter()
        .map(|s| s.id.len() + s.metadata.name.len() + s.metadata.uid.len())
        .sum();
    assert!(
        size > 65_535,
        "the answer is too small to need a WINDOW_UPDATE ({size} octets)"
    );
    let got = by_name(client.list_ready_sandboxes().expect("poll"));
    assert_eq!(got.len(), 700);
    assert_eq!(got[699].ips, [ips[699].clone()]);
}

#[test]
fn only_the_two_read_only_rpcs_are_sent() {
    let Some(fake) = Fake::start("rpcs", &[WEB]) else {
        return;
    };
    let mut client = fake.client();
    for _ in 0..3 {
        client.list_ready_sandboxes().expect("poll");
    }
    let calls = fake.calls();
    for call in &calls {
        assert!(
            call == "/runtime.v1.RuntimeService/ListPodSandbox"
                || call == "/runtime.v1.RuntimeService/PodSandboxStatus",
            "an RPC other than the two read-only ones: {call}"
        );
    }
    // Three polls of one ready sandbox: a list and a status call each.
    assert_eq!(calls.len(), 6, "{calls:?}");
}

#[test]
fn a_missing_socket_is_a_clear_connect_error() {
    let dir = scratch("missing");
    let endpoint = format!("unix://{}/nothing.sock", dir.display());
    let err = Client::new(&endpoint, DEADLINE)
        .unwrap()
        .list_ready_sandboxes()
        .unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Connect(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&endpoint)
            && text.contains("ListPodSandbox")
            && text.contains("cannot connect"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scripted server on a unix socket: `script` runs once per accepted connection, in order.
fn scripted(
    tag: &str,
    scripts: Vec<Box<dyn FnOnce(std::os::unix::net::UnixStream) + Send>>,
) -> (String, PathBuf) {
    let dir = scratch(tag);
    let socket = dir.join("s.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    std::thread::spawn(move || {
        for script in scripts {
            let Ok((conn, _)) = listener.accept() else {
                return;
            };
            script(conn);
        }
    });
    (format!("unix://{}", socket.display()), dir)
}

#[test]
fn a_server_that_says_nothing_is_an_error_after_the_deadline() {
    let (tx, rx) = mpsc::channel::<()>();
    let (endpoint, dir) = scripted(
        "stall",
        vec![Box::new(move |conn| {
            // Accept, read nothing, answer nothing; hold the connection until the test ends.
            let _ = rx.recv();
            drop(conn);
        })],
    );
    let deadline = Duration::from_millis(300);
    let start = Instant::now();
    let err = Client::new(&endpoint, deadline)
        .unwrap()
        .list_ready_sandboxes()
        .unwrap_err();
    let took = start.elapsed();
    let _ = tx.send(());
    assert!(matches!(err.kind, ErrorKind::Timeout(_)), "{err}");
    assert!(
        took >= deadline && took < Duration::from_secs(10),
        "took {took:?}"
    );
    assert!(
        err.to_string()
            .contains("no complete answer within 300 ms, the poll's deadline"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads until the client's first request (preface, SETTINGS, ..., DATA with END_STREAM) has
/// arrived: at least `n` octets.
fn read_some(conn: &mut std::os::unix::net::UnixStream, n: usize) {
    let mut got = 0;
    let mut buf = [0u8; 4096];
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while got < n {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(k) => got += k,
        }
    }
}

fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// `:status 200` (static index 8) and `content-type: application/grpc` (literal, indexed name).
const RESPONSE_HEADERS: &[u8] = b"\x88\x0f\x10\x10application/grpc";

#[test]
fn goaway_and_rst_stream_mid_call_are_errors_and_the_next_call_reconnects() {
    let answer_then = |last: Vec<u8>| -> Box<dyn FnOnce(std::os::unix::net::UnixStream) + Send> {
        Box::new(move |mut conn| {
            read_some(&mut conn, 24 + 9);
            let mut out = h2_frame(4, 0, 0, &[]);
            out.extend(h2_frame(1, 4, 1, RESPONSE_HEADERS));
            out.extend(h2_frame(0, 0, 1, b"\0\0\0\0\x10partial"));
            out.extend(last);
            let _ = conn.write_all(&out);
            // Keep the connection open: the client must act on the frame, not on EOF.
            let mut sink = [0u8; 1024];
            while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
        })
    };
    let goaway = h2_frame(7, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 2, b'b', b'y', b'e']);
    let rst = h2_frame(3, 0, 1, &[0, 0, 0, 2]);
    let (endpoint, dir) = scripted("reset", vec![answer_then(goaway), answer_then(rst)]);
    let mut client = Client::new(&endpoint, DEADLINE).unwrap();
    let err = client.list_pod_sandbox_ready().unwrap_err();
    match &err.kind {
        ErrorKind::Protocol(SessionError::GoAway {
            last_stream: 0,
            code: 2,
            debug,
        }) => assert_eq!(debug, "bye"),
        _ => panic!("not a GOAWAY error: {err}"),
    }
    assert!(err.to_string().contains("GOAWAY (INTERNAL_ERROR"), "{err}");
    // The second call is on a new connection (the scripted server's second one).
    let err = client.list_pod_sandbox_ready().unwrap_err();
    assert!(
        matches!(
            err.kind,
            ErrorKind::Protocol(SessionError::Reset { code: 2 })
        ),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_that_closes_is_a_clear_error() {
    let (endpoint, dir) = scripted(
        "close",
        vec![Box::new(|mut conn| {
            read_some(&mut conn, 24);
        })],
    );
    let err = Client::new(&endpoint, DEADLINE)
        .unwrap()
        .list_ready_sandboxes()
        .unwrap_err();
    assert!(
        matches!(err.kind, ErrorKind::Closed | ErrorKind::Io(_)),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scripted server's connection: the server's SETTINGS, then every call answered `delay`
/// after its request is complete (DATA with END_STREAM), the first with `first`, the others
/// with `rest`, each as HEADERS, one DATA and trailers-with-`grpc-status: 0`. Each request's
/// `grpc-timeout` (milliseconds) is sent to `timeouts`.
fn answer_each_after(
    delay: Duration,
    first: Vec<u8>,
    rest: Vec<u8>,
    timeouts: mpsc::Sender<u64>,
) -> Box<dyn FnOnce(std::os::unix::net::UnixStream) + Send> {
    Box::new(move |mut conn| {
        let trailers = b"\x00\x0bgrpc-status\x010";
        let _ = conn.write_all(&h2_frame(4, 0, 0, &[]));
        let mut input = Vec::new();
        let mut buf = [0u8; 4096];
        let mut preface = true;
        let mut answered = 0;
        loop {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => input.extend_from_slice(&buf[..n]),
            }
            if preface {
                if input.len() < 24 {
                    continue;
                }
                input.drain(..24);
                preface = false;
            }
            while input.len() >= 9 {
                let len = u32::from_be_bytes([0, input[0], input[1], input[2]]) as usize;
                if input.len() < 9 + len {
                    break;
                }
                let (kind, flags) = (input[3], input[4]);
                let stream = u32::from_be_bytes([input[5], input[6], input[7], input[8]]);
                let payload: Vec<u8> = input.drain(..9 + len).skip(9).collect();
                if kind == 1 {
                    // The client's header fields are literals without Huffman coding.
                    let name = b"grpc-timeout";
                    if let Some(at) = payload.windows(name.len()).position(|w| w == name) {
                        let value = payload.get(at + name.len() + 1..).unwrap_or_default();
                        let size = usize::from(payload[at + name.len()]).min(value.len());
                        let text = String::from_utf8_lossy(&value[..size]).into_owned();
                        let _ = timeouts.send(text.trim_end_matches('m').parse().unwrap_or(0));
                    }
                }
                if kind != 0 || flags & 1 == 0 {
                    continue;
                }
                std::thread::sleep(delay);
                let message = if answered == 0 { &first } else { &rest };
                answered += 1;
                let mut body = vec![0];
                body.extend((message.len() as u32).to_be_bytes());
                body.extend(message);
                let mut out = h2_frame(1, 4, stream, RESPONSE_HEADERS);
                out.extend(h2_frame(0, 0, stream, &body));
                out.extend(h2_frame(1, 5, stream, trailers));
                if conn.write_all(&out).is_err() {
                    return;
                }
            }
        }
    })
}

/// A `ListPodSandboxResponse` of `n` READY sandboxes, and a `PodSandboxStatusResponse` of a
/// READY one at 10.244.1.7.
fn list_and_status(n: usize) -> (Vec<u8>, Vec<u8>) {
    use grid_wrapper::proto::wire;
    let sandbox = |b: &mut Vec<u8>, i: usize| {
        wire::put_bytes(b, 1, format!("sb-{i}").as_bytes());
        wire::put_nested(b, 2, |m| {
            wire::put_bytes(m, 1, format!("pod-{i}").as_bytes());
            wire::put_bytes(m, 2, format!("uid-{i}").as_bytes());
            wire::put_bytes(m, 3, b"default");
        });
    };
    let mut list = Vec::new();
    for i in 0..n {
        wire::put_nested(&mut list, 1, |b| sandbox(b, i));
    }
    let mut status = Vec::new();
    wire::put_nested(&mut status, 1, |b| {
        sandbox(b, 0);
        wire::put_nested(b, 5, |net| wire::put_bytes(net, 1, b"10.244.1.7"));
    });
    (list, status)
}

#[test]
fn a_runtime_answering_each_call_just_inside_the_deadline_fails_the_poll_within_one_deadline() {
    let deadline = Duration::from_millis(1000);
    let (list, status) = list_and_status(4);
    // Each call of the poll is answered after 0.8 of the deadline: within it, call by call.
    let delay = deadline * 4 / 5;
    let (tx, timeouts) = mpsc::channel();
    let (endpoint, dir) = scripted(
        "slow",
        vec![
            answer_each_after(delay, list.clone(), status.clone(), tx.clone()),
            answer_each_after(delay, list, status, tx),
        ],
    );
    // The scripted answers decode, and one call alone is answered in time (on a connection of
    // its own, closed with its client).
    let alone = Client::new(&endpoint, deadline)
        .unwrap()
        .list_pod_sandbox_ready()
        .expect("one call");
    assert_eq!(alone.len(), 4);
    let alone_timeout = timeouts.recv().expect("the call's grpc-timeout");
    assert!(
        alone_timeout > 500 && alone_timeout <= 1000,
        "{alone_timeout}"
    );
    let start = Instant::now();
    let err = Client::new(&endpoint, deadline)
        .unwrap()
        .list_ready_sandboxes()
        .unwrap_err();
    let took = start.elapsed();
    assert!(matches!(err.kind, ErrorKind::Timeout(_)), "{err}");
    assert!(
        took >= deadline && took < deadline * 3 / 2,
        "a poll of 1 list and 4 status calls took {took:?} with a deadline of {deadline:?}"
    );
    assert!(err.to_string().contains("PodSandboxStatus"), "{err}");
    // Each call tells the runtime the time left of the poll, not a whole deadline.
    let list_timeout = timeouts.recv().expect("the list's grpc-timeout");
    let status_timeout = timeouts
        .recv()
        .expect("the first status call's grpc-timeout");
    assert!(list_timeout > 500 && list_timeout <= 1000, "{list_timeout}");
    assert!(status_timeout <= 200, "{status_timeout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_runtime_that_never_accepts_with_its_backlog_full_fails_the_poll_within_the_deadline() {
    // Thousands of sockets of this process's file table, and a timing bound: alone.
    let _g = crate::common::heavy();
    let dir = scratch("backlog");
    let socket = dir.join("s.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    // Fill the backlog: connect without blocking until the kernel says it is full.
    let mut queued = Vec::new();
    loop {
        match mio::net::UnixStream::connect(&socket) {
            Ok(s) => queued.push(s),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("filling the backlog, after {} connects: {e}", queued.len()),
        }
        assert!(queued.len() < 100_000, "the backlog never filled");
    }
    let deadline = Duration::from_millis(500);
    let endpoint = format!("unix://{}", socket.display());
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    std::thread::spawn(move || {
        let result = Client::new(&endpoint, deadline)
            .unwrap()
            .list_sandboxes()
            .map(|_| ());
        let _ = tx.send((result, start.elapsed()));
    });
    let got = rx.recv_timeout(deadline + Duration::from_secs(5));
    // The listener closes only now: a connect still blocked on it wakes up and the thread ends.
    drop(listener);
    drop(queued);
    let (result, took) = got.expect("the poll did not end within the deadline and 5 s more");
    let err = result.expect_err("a poll of a runtime that accepts nothing");
    assert!(matches!(err.kind, ErrorKind::Timeout(_)), "{err}");
    assert!(
        took >= deadline && took < deadline * 2,
        "took {took:?} with a deadline of {deadline:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
