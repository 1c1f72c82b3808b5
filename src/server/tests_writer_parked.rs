//! No reader waits for the writer: with the cache's writer parked in the middle of applying a
//! list, the event loop and the health listener still answer a LIST, a watch (with a change
//! applied before), `/readyz` and `/metrics`, and the first request for v1beta1
//! EndpointSlices (which the writer is to build) is held, not waited for by the loop.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cache::store::test_support;
use crate::handoff::{Change, Sink};
use crate::k8s::Resource;
use crate::server::conn::ServerOptions;
use crate::server::event_loop::Server;
use crate::server::extras::Extras;
use crate::server::health;
use crate::writer::{self, CacheSink, Callbacks, WriterHandle};

/// How long an answer may take before it counts as waiting for the writer.
const WITHIN: Duration = Duration::from_secs(3);

/// A Service (the readers' view serves every one, as the upstream has it).
fn service(name: &str) -> serde_json::Value {
    json!({"kind": "Service", "apiVersion": "v1", "metadata": {"name": name, "namespace": "default"}})
}

/// Sends one request and reads the whole answer (the server closes: `Connection: close`).
fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(WITHIN))
        .map_err(|e| e.to_string())?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .map_err(|e| format!("{path}: no answer within {WITHIN:?}: {e}"))?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or(format!("{path}: no status line in {text:?}"))?;
    Ok((code, text))
}

/// Opens a watch and reads until `needle` comes (or [`WITHIN`] passes).
fn watch_until(addr: SocketAddr, path: &str, needle: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(|e| e.to_string())?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let until = Instant::now() + WITHIN;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
        if String::from_utf8_lossy(&out).contains(needle) {
            return Ok(String::from_utf8_lossy(&out).into_owned());
        }
    }
    Err(format!(
        "{path}: {needle} not delivered within {WITHIN:?}; got {:?}",
        String::from_utf8_lossy(&out)
    ))
}

#[test]
fn readers_answer_while_the_writer_is_parked_mid_apply() {
    let mut st = test_support::state("h", 1);
    test_support::list_all_empty(&mut st);
    let rv0 = st.current_rv();
    let (writer, unstarted) = WriterHandle::new(st);
    let opts = ServerOptions {
        not_ready_hold: Duration::from_secs(30),
        ..ServerOptions::default()
    };
    let mut server = Server::bind(
        "127.0.0.1:0".parse().expect("address"),
        writer.clone(),
        None,
        opts,
    )
    .expect("bind");
    let addr = server.local_addr().expect("address");
    let waker = server.waker();
    unstarted
        .start(
            Instant::now(),
            Callbacks {
                wake: writer::wake_with(waker.clone()),
                changed: Box::new(|| {}),
            },
        )
        .expect("writer thread");
    let probes = TcpListener::bind("127.0.0.1:0").expect("bind");
    let probes_addr = probes.local_addr().expect("address");
    health::spawn(probes, writer.clone(), Extras::default()).expect("health");
    let stop = Arc::new(AtomicBool::new(false));
    let loop_stop = stop.clone();
    let looping = std::thread::spawn(move || server.run(&loop_stop));

    // An earlier change, applied and served.
    // The reflectors' sink, as the server gives it them.
    let sink = Arc::new(CacheSink::new(writer.clone()));
    sink.apply(Resource::Services, Change::upsert(&service("early")));
    let rv1 = writer.ask(|s| s.current_rv()).expect("the writer answers");
    assert_eq!(rv1, rv0 + 1, "the early change applied");

    // A relist the writer parks in the middle of (after its first published object).
    let parked = writer.park_mid_apply(1);
    let relist_sink = sink.clone();
    let relist = std::thread::spawn(move || {
        let mut list = relist_sink.list_items(Resource::Services);
        for name in ["early", "m1", "m2", "m3"] {
            list.push(service(name).to_string().into());
        }
        list.apply();
    });
    parked.wait_parked();

    // The first v1beta1 request: the writer is to build them; the loop must not wait for it.
    let beta =
        std::thread::spawn(move || get(addr, "/apis/discovery.k8s.io/v1beta1/endpointslices"));
    std::thread::sleep(Duration::from_millis(100));

    let readyz = get(probes_addr, "/readyz");
    let metrics = get(probes_addr, "/metrics");
    let list = get(addr, "/api/v1/services");
    let watched = watch_until(
        addr,
        &format!("/api/v1/services?watch=1&resourceVersion={rv0}"),
        "\"early\"",
    );
    // Still parked: a question waits behind the relist.
    let still_parked = writer.ask_within(Duration::from_millis(200), |s| s.current_rv());
    parked.release();

    assert!(
        still_parked.is_err(),
        "the writer was not parked while the readers answered"
    );
    match readyz {
        Ok((code, text)) => assert_eq!(code, 200, "{text}"),
        Err(e) => panic!("/readyz while the writer is parked: {e}"),
    }
    match metrics {
        Ok((code, text)) => {
            assert_eq!(code, 200, "{text}");
            assert!(text.contains("grid_wrapper_ready 1\n"), "{text}");
        }
        Err(e) => panic!("/metrics while the writer is parked: {e}"),
    }
    match list {
        Ok((code, text)) => {
            assert_eq!(code, 200, "{text}");
            assert!(text.contains("\"early\""), "{text}");
        }
        Err(e) => panic!("LIST while the writer is parked: {e}"),
    }
    if let Err(e) = watched {
        panic!("watch while the writer is parked: {e}");
    }
    // Released: the relist completes, and the held v1beta1 request is answered.
    relist.join().expect("relist thread");
    let rv = writer.ask(|s| s.current_rv()).expect("the writer answers");
    assert_eq!(rv, rv1 + 3, "m1, m2, m3 added");
    match beta.join().expect("v1beta1 client") {
        Ok((code, text)) => assert_eq!(code, 200, "{text}"),
        Err(e) => panic!("the held v1beta1 request: {e}"),
    }
    stop.store(true, Ordering::Relaxed);
    let _ = waker.wake();
    let _ = looping.join();
}
