//! The relay port faced by a hostile LAN (docs/SEMANTICS.md §12.1): its connections cannot take
//! the kube-proxy port's (separate budgets), a flood of idle sockets is evicted before a new
//! connection is refused, one source is bounded, a TLS handshake and a request head each have a
//! deadline, refusals are counted in `/metrics` and logged once per episode, and an oversized
//! request head is 431 with a Status on both ports. Skips (printing why) without openssl, and
//! the flood without python3 (which binds each socket to one of many loopback sources) or
//! without enough file descriptors.

use crate::common;

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::pki::Pki;
use common::procs::{find_in_path, LogSink};
use common::{read_response, wait_for, wait_for_long, Sim, Wrapper};

/// The relay port's defaults (src/server/event_loop.rs, src/server/conn/options.rs).
const RELAY_MAX_CONNECTIONS: usize = 1024;
const RELAY_MAX_PER_SOURCE: usize = 128;
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// A relay (grid-wrapper with `--relay-bind-address`) in front of the simulator, its output
/// captured, ready; with its relay port's address.
struct Relay {
    w: Wrapper,
    log: LogSink,
    relay: SocketAddr,
}

fn start(pki: &Pki, sim: &Sim) -> Relay {
    start_with(pki, sim, &[])
}

/// [`start`] with more flags.
fn start_with(pki: &Pki, sim: &Sim, extra: &[&str]) -> Relay {
    let mut args = vec![
        format!("--master={}", sim.url),
        "--hostname=edge-a1".to_string(),
        "--relay-bind-address=127.0.0.1:0".to_string(),
        format!("--relay-cert-file={}", pki.path("server.crt")),
        format!("--relay-key-file={}", pki.path("server.key")),
        format!("--relay-client-ca-file={}", pki.path("ca.crt")),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (w, log) = Wrapper::start_captured(&args);
    w.wait_ready();
    let relay = w.relay_addr();
    let r = Relay { w, log, relay };
    wait_for("the probe connection closed", || {
        metric(&r.w, "grid_wrapper_relay_connections", &[]) == 0
    });
    r
}

/// A test PKI, the simulator and a relay in front of it; `None` without openssl.
fn started() -> Option<(Pki, Sim, Relay)> {
    let pki = Pki::generate()?;
    let sim = Sim::start(&[]);
    let r = start(&pki, &sim);
    Some((pki, sim, r))
}

/// A TLS client configuration trusting the test CA and presenting `client.crt`.
fn tls_config(pki: &Pki) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(pki.path("ca.crt")).expect("CA PEM") {
        roots.add(c.expect("CA cert")).expect("add CA");
    }
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(pki.path("client.crt"))
        .expect("client PEM")
        .collect::<Result<_, _>>()
        .expect("client certs");
    let key = PrivateKeyDer::from_pem_file(pki.path("client.key")).expect("client key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .expect("client certificate");
    Arc::new(cfg)
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A TLS connection to `addr` with the client certificate, handshake done.
fn tls_connect(cfg: &Arc<rustls::ClientConfig>, addr: SocketAddr) -> Tls {
    let sock = TcpStream::connect(addr).expect("connect to the relay port");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("server name");
    let conn = rustls::ClientConnection::new(cfg.clone(), name).expect("TLS client");
    let mut tls = rustls::StreamOwned::new(conn, sock);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .expect("TLS handshake with a client certificate");
    }
    tls
}

/// Like [`tls_connect`], then waits until the server has verified the client certificate: in
/// TLS 1.3 the client's handshake ends when it has *sent* its certificate, and the server sends
/// its session tickets only once it has read and verified it. `None` if the server closed the
/// connection first (it may, while it had not seen the certificate).
fn tls_connect_verified(cfg: &Arc<rustls::ClientConfig>, addr: SocketAddr) -> Option<Tls> {
    let mut tls = tls_connect(cfg, addr);
    match tls.conn.read_tls(&mut tls.sock) {
        Ok(n) if n > 0 => {}
        _ => return None,
    }
    tls.conn.process_new_packets().ok()?;
    Some(tls)
}

/// One keep-alive GET on an open connection: the status.
fn get_on<S: Read + Write>(r: &mut BufReader<S>, path: &str) -> u16 {
    let req = format!("GET {path} HTTP/1.1\r\nHost: relay\r\n\r\n");
    r.get_mut()
        .write_all(req.as_bytes())
        .expect("write a request");
    read_response(r).expect("a response").0
}

/// The sum of `/metrics` samples of `name` whose labels contain every one of `labels`.
fn metric(w: &Wrapper, name: &str, labels: &[&str]) -> u64 {
    let (_, _, body) = common::request(w.health, "GET", "/metrics", &[], b"");
    String::from_utf8_lossy(&body)
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

fn refused(w: &Wrapper, port: &str, reason: &str) -> u64 {
    metric(
        w,
        "grid_wrapper_connections_refused_total",
        &[&format!("port=\"{port}\""), &format!("reason=\"{reason}\"")],
    )
}

/// The soft limit on open files of this process (which the servers it starts inherit).
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// [`started`], if this process may open the files a flood of a thousand connections and more
/// needs (`None`, printing why, if not).
fn started_for_a_flood() -> Option<(Pki, Sim, Relay)> {
    match open_files_limit() {
        Some(n) if n >= 4096 => started(),
        other => {
            println!("skipping: the open-files limit ({other:?}) is under 4096 (ulimit -n)");
            None
        }
    }
}

/// How long the counts of a flood may take to settle: each of its connections is accepted, set up
/// and evicted or refused one by one by a debug build, on a machine the other tests load too.
/// A bound on the test, not a speed asserted.
const LOADED: Duration = Duration::from_secs(60);

/// What a flood's sockets do ([`flood_with`]).
struct FloodPlan {
    /// Bytes each socket sends once connected (none: it stays silent).
    payload: &'static [u8],
    /// Whether a socket the server closes is opened again at once.
    reopen: bool,
    /// How long the flood lasts at most (it also ends when the test kills it).
    secs: u64,
}

/// The flood [`flood`] holds: silent sockets, never reopened.
const IDLE: FloodPlan = FloodPlan {
    payload: b"",
    reopen: false,
    secs: 300,
};

/// A python3 process (`scripts/relayflood.py`) holding `sources × per_source` idle plain-TCP
/// connections to `addr`, each bound to a loopback source 127.0.0.(2+i): the relay port's
/// per-source limit counts by address, and std cannot bind a socket before it connects. Returns
/// once they are open (or None, with the reason printed).
fn flood(addr: SocketAddr, sources: usize, per_source: usize) -> Option<Child> {
    flood_with(addr, sources, per_source, &IDLE)
}

/// [`flood`] whose sockets follow `plan`: each sends its payload once connected and, with
/// `reopen`, is opened again from the same source as soon as the server closes it (at most 100
/// times the first round's number in all). Returns once the first round is connected; the
/// process prints its totals when `plan.secs` is over.
fn flood_with(
    addr: SocketAddr,
    sources: usize,
    per_source: usize,
    plan: &FloodPlan,
) -> Option<Child> {
    let Some(python) = find_in_path("python3") else {
        println!("skipping the flood: python3 not found on PATH");
        return None;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/relayflood.py");
    let hex: String = plan.payload.iter().map(|b| format!("{b:02x}")).collect();
    let mut child = Command::new(python)
        .args([script, "flood"])
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .arg(sources.to_string())
        .arg(per_source.to_string())
        .arg(plan.secs.to_string())
        .arg(hex)
        .arg(if plan.reopen { "1" } else { "0" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start python3");
    let mut out = child.stdout.take().expect("python3 stdout");
    let mut line = [0u8; 64];
    let n = out.read(&mut line).unwrap_or(0);
    let text = String::from_utf8_lossy(line.get(..n).unwrap_or_default()).into_owned();
    assert!(text.starts_with("opened"), "python3 flood: {text:?}");
    child.stdout = Some(out);
    Some(child)
}

#[test]
fn idle_connections_flooding_the_relay_port_leave_the_kube_proxy_port_answering() {
    let _heavy = common::heavy();
    let Some((pki, _sim, r)) = started_for_a_flood() else {
        return;
    };
    let cfg = tls_config(&pki);
    // A follower that has completed a request before the flood: it must not be evicted.
    let mut follower = BufReader::new(tls_connect(&cfg, r.relay));
    assert_eq!(get_on(&mut follower, "/api/v1/nodes"), 200);

    // 1,100 idle plain-TCP sockets (no TLS, no certificate) from 20 sources, none at its
    // per-source limit: more than the relay port's whole budget.
    let Some(mut child) = flood(r.relay, 20, 55) else {
        return;
    };
    let t = Instant::now();
    let (code, _, body) = r.w.get("/api/v1/services");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "the kube-proxy port's LIST took {:?}",
        t.elapsed()
    );
    assert_eq!(r.w.readyz(), Some(200), "/readyz on the metrics port");
    // The follower's connection stays, and a new follower gets in: an idle socket made room.
    assert_eq!(get_on(&mut follower, "/api/v1/nodes"), 200);
    let mut late = BufReader::new(tls_connect(&cfg, r.relay));
    assert_eq!(get_on(&mut late, "/api/v1/nodes"), 200);
    // Every socket beyond the budget made room (the last ones may still wait in the listen
    // queue when the late follower got in).
    let beyond = (1100 + 2 - RELAY_MAX_CONNECTIONS) as u64;
    let counts = || {
        format!(
            "evicted {}, cut at the handshake deadline {}, open {}",
            refused(&r.w, "relay", "evicted"),
            refused(&r.w, "relay", "handshake_deadline"),
            metric(&r.w, "grid_wrapper_relay_connections", &[])
        )
    };
    let waited = Instant::now();
    while refused(&r.w, "relay", "evicted") < beyond {
        assert!(
            waited.elapsed() < LOADED,
            "the {beyond} sockets beyond the budget not evicted: {}",
            counts()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(refused(&r.w, "kube-proxy", "budget_full"), 0);
    let open = metric(&r.w, "grid_wrapper_relay_connections", &[]);
    assert!(
        open <= RELAY_MAX_CONNECTIONS as u64,
        "{open} relay connections"
    );
    // One line for the episode, not one per eviction.
    let lines = r
        .log
        .text()
        .lines()
        .filter(|l| l.contains("relay port") && l.contains("refused"))
        .count();
    assert!(lines <= 3, "{lines} log lines:\n{}", r.log.text());
    let _ = child.kill();
    let _ = child.wait();
}

/// The start of a TLS ClientHello (a record header announcing 512 bytes, then the first bytes of
/// the handshake): the server reads it and waits for the rest.
const PARTIAL_CLIENT_HELLO: &[u8] = &[
    0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
];

/// Sockets that send the start of a ClientHello and nothing more, reopened as soon as closed.
const RECONNECTING: FloodPlan = FloodPlan {
    payload: PARTIAL_CLIENT_HELLO,
    reopen: true,
    secs: 120,
};

/// Connections the relay port closed before their first request so far, for any reason.
fn refused_on_relay(w: &Wrapper) -> u64 {
    metric(
        w,
        "grid_wrapper_connections_refused_total",
        &["port=\"relay\""],
    )
}

/// Ends a flood (it stops when its stdin closes): its totals, as it printed them.
fn stop(mut child: Child) -> String {
    drop(child.stdin.take());
    let mut totals = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut totals);
    }
    let _ = child.wait();
    totals
}

#[test]
fn a_reconnect_flood_of_the_relay_port_leaves_the_kube_proxy_ports_lists_fast() {
    let _heavy = common::heavy();
    let Some((_pki, _sim, r)) = started_for_a_flood() else {
        return;
    };
    // 24 sources of 100 sockets each: every source under its limit, together over the budget;
    // each socket evicted or refused is opened again at once.
    let Some(child) = flood_with(r.relay, 24, 100, &RECONNECTING) else {
        return;
    };
    let before = refused_on_relay(&r.w);
    let (mut lists, mut worst) = (0u32, Duration::ZERO);
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(10) {
        let t = Instant::now();
        let answer = common::try_request(r.w.addr, "GET", "/api/v1/services", &[], b"");
        let took = t.elapsed();
        assert!(
            matches!(answer, Ok((200, _, _))),
            "LIST {lists} through the kube-proxy port after {took:?}: {answer:?}"
        );
        worst = worst.max(took);
        lists += 1;
        // kube-proxy's pace of relists is far slower; this one only spreads them over the flood.
        std::thread::sleep(Duration::from_millis(20));
    }
    // The flood went on throughout: the relay port kept closing its sockets.
    let during = refused_on_relay(&r.w) - before;
    let totals = stop(child);
    assert!(
        during >= 1000,
        "only {during} relay connections closed during the flood: {totals}"
    );
    println!(
        "{lists} LISTs, the slowest {worst:?}; {during} relay connections closed; flood {totals}"
    );
    assert!(
        worst < Duration::from_secs(1),
        "the slowest of {lists} LISTs through the kube-proxy port took {worst:?} during the flood"
    );
    assert_eq!(refused(&r.w, "kube-proxy", "budget_full"), 0);
}

#[test]
fn a_certificate_holder_is_never_evicted_and_a_follower_starts_during_a_reconnect_flood() {
    let _heavy = common::heavy();
    let Some(pki) = Pki::generate() else {
        return;
    };
    let sim = Sim::start(&[]);
    let budget = 64;
    let r = start_with(
        &pki,
        &sim,
        &[
            &format!("--relay-max-connections={budget}"),
            "--relay-max-connections-per-source=16",
            // Evictions as fast as the flood reconnects (the rate is the other test's).
            "--relay-connection-rate-per-source=0",
        ],
    );
    // 8 sources of 12 reconnecting sockets: more than the budget.
    let Some(child) = flood_with(r.relay, 8, 12, &RECONNECTING) else {
        return;
    };
    // A certificate holder whose certificate the server has verified, with no request sent
    // yet: the newest connection, at the back of the eviction order. (One the flood evicted
    // before the server had read its certificate is fair game: try again. On a loaded machine
    // the flood's reconnects can outpace a handshake several times in a row.)
    let cfg = tls_config(&pki);
    let holder = (0..20).find_map(|_| tls_connect_verified(&cfg, r.relay));
    let mut holder = BufReader::new(
        holder.expect("20 certificate holders evicted before the relay verified their certificate"),
    );
    let opened = Instant::now();
    let evicted = refused(&r.w, "relay", "evicted");
    // A budget's worth of evictions since (and a few more): every connection evictable when it
    // opened is gone, oldest first, and it would have been next. (Within its request head's
    // deadline, which would close it anyway: the fewer evictions waited for, the more of that
    // deadline a loaded machine leaves for its request.)
    let enough = evicted + budget + 8;
    while refused(&r.w, "relay", "evicted") < enough {
        assert!(
            opened.elapsed() < HEAD_TIMEOUT - Duration::from_secs(2),
            "{} evictions in {:?}",
            refused(&r.w, "relay", "evicted") - evicted,
            opened.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let req = "GET /api/v1/nodes HTTP/1.1\r\nHost: relay\r\n\r\n";
    let code = holder
        .get_mut()
        .write_all(req.as_bytes())
        .and_then(|()| read_response(&mut holder))
        .map(|(code, _, _)| code);
    assert!(
        matches!(code, Ok(200)),
        "the certificate holder's connection after {} evictions, {:?} after it opened: {code:?}",
        refused(&r.w, "relay", "evicted") - evicted,
        opened.elapsed()
    );
    // A follower (re)started now, with only the relay to read from, syncs and answers.
    let ca = pki.path("ca.crt");
    let kubeconfig = pki.kubeconfig(
        "relay.kubeconfig",
        &format!("https://{}", r.relay),
        &format!("    certificate-authority: {ca}\n"),
        &format!(
            "    client-certificate: {}\n    client-key: {}\n",
            pki.path("client.crt"),
            pki.path("client.key")
        ),
    );
    let during = refused_on_relay(&r.w);
    let follower = Wrapper::start(
        &common::autonomy::dead_master(),
        "edge-b1",
        &[&format!("--relay-kubeconfig={kubeconfig}")],
    );
    let (code, _, body) = follower.get("/api/v1/services");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let after = refused_on_relay(&r.w);
    let totals = stop(child);
    assert!(
        after > during,
        "the flood went on while the follower started: {totals}"
    );
}

/// Sends a request head one byte a second (reading with a one-second timeout paces it and
/// notices the close): how long until the server cut the connection (`None`: not within 20 s).
fn trickle<S: Read + Write>(s: &mut S) -> Option<Duration> {
    let head =
        b"GET /api/v1/nodes HTTP/1.1\r\nHost: relay\r\nUser-Agent: trickle\r\nAccept: */*\r\n";
    let t = Instant::now();
    for b in head.iter().take(20) {
        if s.write_all(&[*b]).and_then(|()| s.flush()).is_err() {
            return Some(t.elapsed());
        }
        let mut buf = [0u8; 256];
        match s.read(&mut buf) {
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            _ => return Some(t.elapsed()),
        }
    }
    None
}

fn assert_cut_at_head_deadline(cut: Option<Duration>, port: &str) {
    let cut = cut.unwrap_or_else(|| panic!("{port}: the trickling connection was not cut in 20 s"));
    assert!(
        cut >= HEAD_TIMEOUT - Duration::from_secs(1)
            && cut <= HEAD_TIMEOUT + Duration::from_secs(4),
        "{port}: cut after {cut:?}"
    );
}

#[test]
fn a_certificate_holder_trickling_its_request_head_is_cut_at_the_head_deadline() {
    let Some((pki, _sim, r)) = started() else {
        return;
    };
    // A local process doing the same on the kube-proxy port, at the same time.
    let addr = r.w.addr;
    let local = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).expect("connect to the kube-proxy port");
        s.set_read_timeout(Some(Duration::from_secs(1)))
            .expect("timeout");
        trickle(&mut s)
    });
    let mut tls = tls_connect(&tls_config(&pki), r.relay);
    tls.sock
        .set_read_timeout(Some(Duration::from_secs(1)))
        .expect("timeout");
    assert_cut_at_head_deadline(trickle(&mut tls), "relay port");
    assert_cut_at_head_deadline(
        local.join().expect("kube-proxy port trickler"),
        "kube-proxy port",
    );
    wait_for("head_deadline counted on both ports", || {
        refused(&r.w, "relay", "head_deadline") == 1
            && refused(&r.w, "kube-proxy", "head_deadline") == 1
    });
}

/// Opens `limit` connections to the relay port from 127.0.0.1, waits until they are open, and
/// checks that one more from the same source is closed; returns the ones held.
fn fill_one_source(r: &Relay, limit: usize) -> Vec<TcpStream> {
    let held: Vec<TcpStream> = (0..limit)
        .map(|_| TcpStream::connect(r.relay).expect("connect"))
        .collect();
    wait_for_long("the source's connections open", LOADED, || {
        metric(&r.w, "grid_wrapper_relay_connections", &[]) == limit as u64
    });
    let mut extra = TcpStream::connect(r.relay).expect("connect");
    extra
        .set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    let mut buf = [0u8; 16];
    let closed = matches!(extra.read(&mut buf), Ok(0))
        || matches!(extra.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset);
    assert!(
        closed,
        "the source's connection over its limit ({limit}) was not closed"
    );
    held
}

#[test]
fn one_source_holds_at_most_its_share_of_the_relay_port() {
    let Some((_pki, _sim, r)) = started() else {
        return;
    };
    let held = fill_one_source(&r, RELAY_MAX_PER_SOURCE);
    assert_eq!(refused(&r.w, "relay", "per_source"), 1);
    assert_eq!(
        metric(&r.w, "grid_wrapper_relay_connections", &[]),
        RELAY_MAX_PER_SOURCE as u64
    );
    drop(held);
}

#[test]
fn the_relay_ports_budgets_are_the_operators() {
    let Some(pki) = Pki::generate() else {
        return;
    };
    let sim = Sim::start(&[]);
    let r = start_with(
        &pki,
        &sim,
        &[
            "--relay-max-connections=6",
            "--relay-max-connections-per-source=4",
        ],
    );
    let held = fill_one_source(&r, 4);
    wait_for("the refusal counted", || {
        refused(&r.w, "relay", "per_source") == 1
    });
    // The WARN names the operator's limit (counted first, the line may still be in the pipe).
    r.log
        .wait_for_text("4 connections from 127.0.0.1 open", Duration::from_secs(10));
    drop(held);
}

#[test]
fn refused_handshakes_are_counted_and_logged_once_per_episode() {
    let _heavy = common::heavy();
    let Some((_pki, _sim, r)) = started() else {
        return;
    };
    // Plain HTTP to the TLS port: each handshake fails at its first record.
    for _ in 0..200 {
        let _ = common::raw(r.relay, b"GET / HTTP/1.1\r\nHost: relay\r\n\r\n");
    }
    wait_for_long("200 refused handshakes counted", LOADED, || {
        refused(&r.w, "relay", "handshake_refused") == 200
    });
    // The episode's summary follows its first line within its interval: both are in once it is.
    let text = r
        .log
        .wait_for_text("199 more connections refused", Duration::from_secs(20));
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("TLS refused")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("127.0.0.1"), "{}", lines[0]);
    let warns = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("relay port"))
        .count();
    assert_eq!(warns, 2, "{text}");
}

/// Reads a TLS connection's plaintext without writing: the server answered an oversized head
/// and closed while the rest of it was still being written, which `StreamOwned` would try to
/// send again (a broken pipe) before reading.
struct Answer(Tls);

impl Read for Answer {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.0.conn.reader().read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            if self.0.conn.read_tls(&mut self.0.sock)? == 0 {
                return Ok(0);
            }
            self.0
                .conn
                .process_new_packets()
                .map_err(std::io::Error::other)?;
        }
    }
}

/// A request head of `size` bytes (one long header).
fn oversized_head(size: usize) -> Vec<u8> {
    format!(
        "GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(size)
    )
    .into_bytes()
}

fn assert_431(code: u16, body: &[u8], port: &str) {
    assert_eq!(code, 431, "{port}: {}", String::from_utf8_lossy(body));
    let status: serde_json::Value = serde_json::from_slice(body).expect("a Status body");
    assert_eq!(status["kind"], "Status", "{port}");
    assert_eq!(status["code"], 431, "{port}");
    assert_eq!(status["reason"], "RequestHeaderFieldsTooLarge", "{port}");
}

#[test]
fn an_oversized_request_head_is_431_on_both_ports() {
    let Some((pki, _sim, r)) = started() else {
        return;
    };
    let cfg = tls_config(&pki);
    for size in [64 * 1024, 6 * 1024 * 1024] {
        let head = oversized_head(size);
        // The kube-proxy port (plain HTTP).
        let mut s = TcpStream::connect(r.w.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let _ = s.write_all(&head);
        let resp = read_response(&mut BufReader::new(s)).expect("a response");
        assert_431(resp.0, &resp.2, &format!("kube-proxy port, {size} bytes"));
        // The relay port (TLS with a client certificate).
        let mut tls = tls_connect(&cfg, r.relay);
        let _ = tls.write_all(&head);
        let resp = read_response(&mut BufReader::new(Answer(tls))).expect("a response");
        assert_431(resp.0, &resp.2, &format!("relay port, {size} bytes"));
    }
}
