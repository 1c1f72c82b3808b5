//! Issue "edge autonomy", point 4 — graceful shutdown and certificate reload, against the real
//! binary: SIGTERM stops accepting, ends every watch with its terminating chunk, writes the final
//! snapshot and exits 0 within 5 s; SIGHUP (or changed files) reloads the serving certificate
//! without dropping open watches, and a bad new file keeps the old one.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::autonomy::{self, RawWatch};
use common::pki::Pki;
use common::{run_bounded, wait_for, Sim, TempDir};
use serde_json::{json, Value};

#[test]
fn graceful_shutdown_ends_watches_cleanly_writes_the_snapshot_and_exits_0_within_5s() {
    let sim = Sim::start(&[]);
    let dir = TempDir::new("shutdown");
    // No debounced write can happen before the signal: only the final one.
    let flags = [
        format!("--cache-dir={}", dir.path.display()),
        "--cache-write-interval=3600".to_string(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (mut w, log) = autonomy::start(&sim.url, "edge-a1", &flags);
    w.wait_ready();
    let mut watches: Vec<RawWatch> = autonomy::COLLECTIONS
        .iter()
        .map(|p| {
            let sep = if p.contains('?') { '&' } else { '?' };
            RawWatch::open(w.addr, &format!("{p}{sep}watch=true&timeoutSeconds=60"))
        })
        .collect();
    for watch in &mut watches {
        assert!(!watch.read_for(Duration::from_millis(100)), "watch open");
    }

    // A change served just before the signal.
    sim.label_node("edge-a1", json!({"shutdown-test": "served"}));
    wait_for("the relabel to be served", || {
        w.get_json(common::OWN_NODE)["items"][0]["metadata"]["labels"]["shutdown-test"] == "served"
    });
    let before = autonomy::served(&w).expect("served state");

    let t0 = Instant::now();
    autonomy::signal(&w, "TERM");
    let status = autonomy::wait_exit(&mut w, Duration::from_secs(5))
        .expect("grid-wrapper exits within 5 s of SIGTERM");
    let took = t0.elapsed();
    assert!(status.success(), "exit status {status:?}\n{}", log.text());
    for watch in &mut watches {
        assert!(
            watch.read_for(Duration::from_secs(1)),
            "the server closed the watch"
        );
        assert!(
            watch.ended_cleanly(),
            "watch ended with its terminating chunk: …{:?}",
            String::from_utf8_lossy(&watch.bytes[watch.bytes.len().saturating_sub(80)..])
        );
    }
    let text = autonomy::log_until_stopped(&log);
    assert!(text.contains("SIGTERM: shutting down"), "{text}");
    assert!(text.contains("final snapshot written"), "{text}");
    println!("SIGTERM → exit 0 in {} ms", took.as_millis());

    // The next start, with the upstream gone, serves the change.
    let url = sim.url.clone();
    drop(sim);
    let (w2, log2) = autonomy::start(&url, "edge-a1", &flags);
    w2.wait_ready();
    assert_eq!(
        autonomy::served(&w2).as_ref(),
        Some(&before),
        "the snapshot serves exactly what was served before the signal\n{}",
        log2.text()
    );
}

#[test]
fn graceful_shutdown_stops_accepting_and_answers_held_requests() {
    // No upstream: requests are held (not ready); SIGTERM answers them 503 and exits 0.
    let (mut w, log) = autonomy::start(
        &autonomy::dead_master(),
        "edge-a1",
        &["--not-ready-hold-seconds=30"],
    );
    let addr = w.addr;
    let held = std::thread::spawn(move || {
        common::try_request(addr, "GET", "/api/v1/services", &[], b"").map(|(c, _, b)| (c, b))
    });
    std::thread::sleep(Duration::from_millis(300));
    autonomy::signal(&w, "INT");
    let status = autonomy::wait_exit(&mut w, Duration::from_secs(5)).expect("exits within 5 s");
    assert!(status.success(), "{status:?}\n{}", log.text());
    let (code, body) = held
        .join()
        .expect("thread")
        .expect("the held request is answered");
    assert_eq!(code, 503, "{}", String::from_utf8_lossy(&body));
    let st: Value = serde_json::from_slice(&body).expect("Status");
    assert!(
        st["message"]
            .as_str()
            .unwrap_or("")
            .contains("shutting down"),
        "{st}"
    );
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "no longer accepting"
    );
}

/// A server certificate for 127.0.0.1 signed by the PKI's *other* CA.
fn other_server_cert(pki: &Pki) -> Option<String> {
    let openssl = common::find_in_path("openssl")?;
    let out = pki.path("server-other.crt");
    let args = [
        "x509",
        "-req",
        "-in",
        &pki.path("server.csr"),
        "-CA",
        &pki.path("other-ca.crt"),
        "-CAkey",
        &pki.path("other-ca.key"),
        "-set_serial",
        "9",
        "-days",
        "2",
        "-extfile",
        &pki.path("server.ext"),
        "-out",
        &out,
    ];
    let done = run_bounded(Command::new(openssl).args(args), Duration::from_secs(15))?;
    done.ok().then_some(out)
}

fn lists_ok(agent: &ureq::Agent, addr: std::net::SocketAddr) -> bool {
    agent
        .get(format!("https://{addr}/api/v1/nodes"))
        .call()
        .is_ok_and(|r| r.status().as_u16() == 200)
}

#[test]
fn sighup_reloads_the_serving_certificate_without_dropping_open_watches() {
    let Some(pki) = Pki::generate() else { return };
    let Some(other) = other_server_cert(&pki) else {
        println!("skipping: openssl could not sign the second certificate");
        return;
    };
    // The served files are copies the test replaces.
    let (cert, key) = (pki.path("serving.crt"), pki.path("serving.key"));
    std::fs::copy(pki.path("server.crt"), &cert).expect("copy cert");
    std::fs::copy(pki.path("server.key"), &key).expect("copy key");
    let sim = Sim::start(&[]);
    let (w, log) = autonomy::start(
        &sim.url,
        "edge-a1",
        &[
            "--insecure=false",
            &format!("--cert-file={cert}"),
            &format!("--key-file={key}"),
        ],
    );
    w.wait_ready();
    let (old_ca, new_ca) = (
        pki.agent_trusting("ca.crt"),
        pki.agent_trusting("other-ca.crt"),
    );
    assert!(lists_ok(&old_ca, w.addr));
    assert!(
        !lists_ok(&new_ca, w.addr),
        "the other CA does not verify the first certificate"
    );

    // A watch opened with the first certificate.
    let resp = old_ca
        .get(format!(
            "https://{}/api/v1/nodes?watch=true&timeoutSeconds=60&resourceVersion={}",
            w.addr,
            common::rv(&w.get_json_tls(&old_ca))
        ))
        .call()
        .expect("watch over TLS");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let reader = std::io::BufReader::new(resp.into_body().into_reader());
        for line in reader.lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    // A bad new file: the old configuration stays, and the log says why.
    std::fs::write(&cert, b"not a certificate").expect("write garbage");
    autonomy::signal(&w, "HUP");
    wait_for("the failed reload to be logged", || {
        log.text()
            .contains("keeping the current serving certificate")
    });
    assert!(
        lists_ok(&old_ca, w.addr),
        "the old certificate still serves"
    );

    // The new certificate: new connections use it.
    std::fs::copy(&other, &cert).expect("install the new certificate");
    autonomy::signal(&w, "HUP");
    wait_for("new connections to get the new certificate", || {
        lists_ok(&new_ca, w.addr)
    });
    assert!(
        !lists_ok(&old_ca, w.addr),
        "the first CA no longer verifies new connections"
    );

    // The watch opened before both reloads still delivers.
    sim.label_node("edge-b1", json!({"reload": "done"}));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = false;
    while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        if line.contains("\"reload\":\"done\"") {
            seen = true;
            break;
        }
    }
    assert!(
        seen,
        "the open watch received the relabel after the reloads\n{}",
        log.text()
    );
}

trait TlsGet {
    fn get_json_tls(&self, agent: &ureq::Agent) -> Value;
}

impl TlsGet for common::Wrapper {
    fn get_json_tls(&self, agent: &ureq::Agent) -> Value {
        let mut resp = agent
            .get(format!("https://{}/api/v1/nodes", self.addr))
            .call()
            .expect("LIST over TLS");
        serde_json::from_slice(&resp.body_mut().read_to_vec().expect("body")).expect("JSON")
    }
}
