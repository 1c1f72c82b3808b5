//! Tests of `failover.rs`: the selection state machine against scripted (fake) health results,
//! and — with the `io` feature — the client's failover against tiny servers on 127.0.0.1.

use super::*;

fn ups(s: &Selection) -> Vec<bool> {
    (0..s.len())
        .map(|i| s.health(i) == Some(ServerHealth::Up))
        .collect()
}

#[test]
fn selection_follows_the_first_healthy_server_through_scripted_health_results() {
    use Signal::*;
    const T: bool = true;
    const F: bool = false;
    let mut s = Selection::new(3);
    assert_eq!(
        (s.selected(), s.attempt_order(), s.to_probe()),
        (0, vec![0, 1, 2], vec![])
    );
    // (server, signal) → (selected, health, outcome)
    type Step = (usize, Signal, usize, [bool; 3], Outcome);
    let none = Outcome::default();
    let o = |healthy, switched| Outcome { healthy, switched };
    let script: [Step; 16] = [
        (0, Answered, 0, [T, T, T], none),
        // The primary stops answering: fail over to the next healthy one.
        (0, Unreachable, 1, [F, T, T], o(Some(false), Some((0, 1)))),
        (0, Unreachable, 1, [F, T, T], none),
        // It needs RISE probes in a row: a failed probe starts the count again.
        (0, ProbePassed, 1, [F, T, T], none),
        (0, ProbeFailed, 1, [F, T, T], none),
        (0, ProbePassed, 1, [F, T, T], none),
        // The secondary fails too: the third takes over.
        (1, Unreachable, 2, [F, F, T], o(Some(false), Some((1, 2)))),
        // Nothing healthy: the selection stays where it is.
        (2, Unreachable, 2, [F, F, F], o(Some(false), None)),
        (2, ProbeFailed, 2, [F, F, F], none),
        // The secondary recovers first (RISE probes): back to it.
        (1, ProbePassed, 2, [F, F, F], none),
        (1, ProbePassed, 1, [F, T, F], o(Some(true), Some((2, 1)))),
        // The primary's second probe in a row: fail back to it.
        (0, ProbePassed, 0, [T, T, F], o(Some(true), Some((1, 0)))),
        // A probe of a healthy server that fails marks it down (no switch: not selected).
        (1, ProbeFailed, 0, [T, F, F], o(Some(false), None)),
        (1, ProbePassed, 0, [T, F, F], none),
        // A real answer counts at once, without probes.
        (2, Answered, 0, [T, F, T], o(Some(true), None)),
        // Unknown servers are ignored.
        (7, Unreachable, 0, [T, F, T], none),
    ];
    for (n, (server, signal, selected, health, outcome)) in script.into_iter().enumerate() {
        let got = s.observe(server, signal);
        assert_eq!(got, outcome, "step {n}: {signal:?} on #{server}");
        assert_eq!(s.selected(), selected, "step {n}");
        assert_eq!(ups(&s), health, "step {n}");
    }
    assert_eq!(s.to_probe(), vec![1]);
    // Attempts: the selected server, the healthy ones, then the unhealthy ones.
    assert_eq!(s.attempt_order(), vec![0, 2, 1]);
    s.observe(0, Unreachable);
    assert_eq!((s.selected(), s.attempt_order()), (2, vec![2, 0, 1]));
}

#[test]
fn one_server_never_switches() {
    let mut s = Selection::new(1);
    let down = s.observe(0, Signal::Unreachable);
    assert_eq!((down.healthy, down.switched), (Some(false), None));
    assert_eq!((s.selected(), s.attempt_order()), (0, vec![0]));
    assert_eq!(s.observe(0, Signal::Answered).healthy, Some(true));
    // Zero servers is one.
    assert_eq!(Selection::new(0).len(), 1);
    assert!(!Selection::new(0).is_empty());
}

#[test]
fn probe_verdicts_and_redacted_urls() {
    for (code, up) in [
        (200, true),
        (401, true),
        (403, true),
        (404, true),
        (500, false),
        (503, false),
    ] {
        assert_eq!(probe_passed(code), up, "{code}");
    }
    for (url, shown) in [
        ("https://10.0.0.1:6443", "https://10.0.0.1:6443"),
        ("https://u:p@cp:6443/prefix", "https://cp:6443/prefix"),
        ("http://cp/a@b", "http://cp/a@b"),
        ("not a url", "not a url"),
    ] {
        assert_eq!(redact_userinfo(url), shown);
    }
}

#[cfg(feature = "io")]
mod io {
    use super::super::*;
    use crate::upstream::client::tests::{canned, serve};
    use crate::upstream::client::{Upstream, UpstreamError, UpstreamOptions};
    use crate::upstream::domain::Role;
    use crate::upstream::forward::ForwardRequest;
    use crate::upstream::kubeconfig::UpstreamConfig;
    use crate::upstream::stats::{Stats, Verb};
    use std::io::{BufRead, BufReader, Cursor, Read};
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::time::Instant;

    /// A loopback URL nothing listens on (bound, then released).
    fn closed() -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    }

    fn upstream(servers: &[&str], stats: &Stats) -> Upstream {
        let cfg = UpstreamConfig {
            server: servers[0].into(),
            servers: servers.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        Upstream::with_stats(&cfg, UpstreamOptions::default(), stats).unwrap()
    }

    /// Proxies an event POST (no credentials of the client's); its status.
    fn post_event(up: &Upstream) -> u16 {
        let resp = up
            .forward(ForwardRequest {
                method: "POST".into(),
                path_and_query: "/api/v1/namespaces/default/events".into(),
                body: b"{}".to_vec(),
                ..Default::default()
            })
            .unwrap();
        resp.status
    }

    #[test]
    fn requests_move_to_the_next_server_when_the_selected_one_refuses() {
        let a = closed();
        let (b, server) = serve(vec![
            canned(
                "200 OK",
                r#"{"metadata":{"resourceVersion":"7"},"items":[]}"#,
            ),
            canned("201 Created", "{}"),
            canned(
                "200 OK",
                r#"{"metadata":{"resourceVersion":"8"},"items":[]}"#,
            ),
        ]);
        let stats = Stats::new();
        let up = upstream(&[&a, &b], &stats);
        assert_eq!((up.server(), up.current_server()), (a.as_str(), a.as_str()));
        // The LIST tries A (refused), then B at once.
        assert_eq!(up.list("/api/v1/nodes").unwrap().resource_version, "7");
        assert_eq!(up.current_server(), b);
        let (servers, requests) = (stats.servers(), stats.requests());
        assert_eq!((servers.selected(), servers.switches(false)), (1, 1));
        assert!(!servers.healthy(0) && servers.healthy(1));
        assert_eq!(requests.count(Verb::List, None), 1);
        assert_eq!(requests.count(Verb::List, Some(200)), 1);
        // A proxied POST goes straight to B.
        assert_eq!(post_event(&up), 201);
        assert_eq!(requests.count(Verb::Forward, Some(201)), 1);
        assert_eq!(up.list("/api/v1/nodes").unwrap().resource_version, "8");
        let seen = server.join().unwrap();
        assert_eq!(
            seen[1].request_line,
            "POST /api/v1/namespaces/default/events HTTP/1.1"
        );
        // Everything refuses: the error is the last server's, every attempt counted.
        let up = upstream(&[&closed(), &closed()], &stats);
        let err = up.get_json("/version").unwrap_err();
        assert!(matches!(err, UpstreamError::Unreachable(_)), "{err:?}");
        assert_eq!(requests.count(Verb::Get, None), 2);
        // A proxied request refused everywhere fails (each server tried once).
        let err = up
            .forward(ForwardRequest {
                method: "POST".into(),
                path_and_query: "/x".into(),
                ..Default::default()
            })
            .unwrap_err();
        assert!(matches!(err, UpstreamError::Unreachable(_)), "{err:?}");
        assert_eq!(requests.count(Verb::Forward, None), 2);
    }

    #[test]
    fn an_error_status_is_an_answer_and_is_not_retried_elsewhere() {
        let (a, server) = serve(vec![canned(
            "410 Gone",
            r#"{"kind":"Status","reason":"Expired","code":410}"#,
        )]);
        let b = closed();
        let stats = Stats::new();
        let up = upstream(&[&a, &b], &stats);
        let err = up.watch("/api/v1/nodes?watch=true", false).err().unwrap();
        assert_eq!(err.status_code(), Some(410));
        assert_eq!(stats.requests().count(Verb::Watch, Some(410)), 1);
        assert_eq!(stats.requests().count(Verb::Watch, None), 0, "B not tried");
        assert_eq!(stats.servers().selected(), 0);
        server.join().unwrap();
    }

    /// Following a relay: each server gets its own side's credentials only, and an RV issued by
    /// the relay is never sent to the cloud.
    #[test]
    fn relays_and_the_cloud_get_their_own_credentials_and_rvs_stay_in_their_domain() {
        let list = |rv: &str| {
            canned(
                "200 OK",
                &format!(r#"{{"metadata":{{"resourceVersion":"{rv}"}},"items":[]}}"#),
            )
        };
        let (relay, relay_seen) = serve(vec![list("7")]);
        let (cloud, cloud_seen) = serve(vec![list("900"), canned("201 Created", "{}")]);
        let relays = UpstreamConfig {
            server: relay.clone(),
            servers: vec![relay.clone()],
            token: Some("relay-token".into()),
            ..Default::default()
        };
        let cloud_cfg = UpstreamConfig {
            server: cloud.clone(),
            token: Some("cloud-token".into()),
            ..Default::default()
        };
        let stats = Stats::new();
        let up = Upstream::with_stats(
            &cloud_cfg,
            UpstreamOptions {
                relays: Some(&relays),
                ..UpstreamOptions::default()
            },
            &stats,
        )
        .unwrap();
        let servers = stats.servers().servers();
        let roles: Vec<_> = servers.iter().map(|s| (s.url.as_str(), s.role)).collect();
        assert_eq!(
            roles,
            [(relay.as_str(), Role::Relay), (cloud.as_str(), Role::Cloud)]
        );
        // The relay first, with the relay's token.
        let l = up.list("/api/v1/nodes").unwrap();
        assert_eq!(l.resource_version, "7");
        let from_relay = l.origin.unwrap();
        assert_eq!(from_relay.server, 0);
        assert_eq!(up.current_role(), Role::Relay);
        let seen = relay_seen.join().unwrap();
        assert_eq!(
            seen[0].header("authorization"),
            Some(&b"Bearer relay-token"[..])
        );
        // The relay is gone: a relist at its RV is not sent to the cloud.
        let mut items = crate::handoff::Texts::default();
        let err = up
            .list_into_from(
                "/api/v1/nodes?resourceVersion=7",
                &mut items,
                Some(from_relay),
            )
            .unwrap_err();
        assert!(
            matches!(&err, UpstreamError::ForeignResourceVersion { issued_by, now }
                if issued_by == &format!("relay {relay}") && now == &format!("cloud {cloud}")),
            "{err:?}"
        );
        assert_eq!(up.current_role(), Role::Cloud);
        // From scratch on the cloud, with the cloud's token; a proxied request gets none.
        let l = up.list("/api/v1/nodes").unwrap();
        assert_eq!(
            (l.resource_version.as_str(), l.origin.map(|o| o.server)),
            ("900", Some(1))
        );
        assert_ne!(l.origin.map(|o| o.domain), Some(from_relay.domain));
        assert_eq!(post_event(&up), 201);
        let seen = cloud_seen.join().unwrap();
        assert_eq!(seen[0].request_line, "GET /api/v1/nodes HTTP/1.1");
        assert_eq!(
            seen[0].header("authorization"),
            Some(&b"Bearer cloud-token"[..])
        );
        assert_eq!(seen[1].header("authorization"), None);
        assert_eq!(seen.len(), 2);
    }

    fn failover(n: usize) -> Arc<Failover> {
        let bases = (0..n).map(|i| format!("http://s{i}")).collect();
        Arc::new(Failover::new(
            bases,
            Vec::new(),
            Arc::new(Default::default()),
        ))
    }

    fn line(r: &mut impl BufRead) -> String {
        let mut s = String::new();
        r.read_line(&mut s).unwrap();
        s
    }

    #[test]
    fn a_watch_stream_ends_at_its_next_read_once_another_server_is_selected() {
        let f = failover(2);
        // Small buffer: each fill reads at most 4 bytes, like data arriving in pieces.
        let data = Cursor::new(b"{\"a\"}\n{\"b\"}\n{\"c\"}\n".to_vec());
        let mut r = FollowSelection::new(BufReader::with_capacity(4, data), f.clone(), 0, LIMIT);
        assert_eq!(line(&mut r), "{\"a\"}\n");
        f.observe(0, Signal::Unreachable, "test");
        assert_eq!(f.selected(), 1);
        // What was already received is still delivered; then the stream ends.
        let rest = line(&mut r);
        assert!("{\"b\"}\n".starts_with(&rest), "{rest:?}");
        assert!(line(&mut r).is_empty(), "ended");
        let mut buf = [0u8; 8];
        assert_eq!(r.read(&mut buf).unwrap(), 0, "stays ended");

        // A stream from the selected server is untouched; one from another server still
        // delivers its first data (it may have started just before the switch).
        let data = Cursor::new(b"x\ny\n".to_vec());
        let mut on_selected = FollowSelection::new(BufReader::new(data), f.clone(), 1, LIMIT);
        assert_eq!(
            (line(&mut on_selected), line(&mut on_selected)),
            ("x\n".into(), "y\n".into())
        );
        let data = Cursor::new(b"x\ny\n".to_vec());
        let mut stale =
            FollowSelection::new(BufReader::with_capacity(2, data), f.clone(), 0, LIMIT);
        assert_eq!(line(&mut stale), "x\n");
        assert!(line(&mut stale).is_empty());
    }

    /// A stream's read limit in these tests.
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

    /// A network body: its bytes, then reads that time out (after `wait` each, as a socket's
    /// read timeout does), counted.
    struct Quiet {
        data: Cursor<Vec<u8>>,
        wait: std::time::Duration,
        timeouts: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Read for Quiet {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.data.read(buf)? {
                0 => {
                    std::thread::sleep(self.wait);
                    self.timeouts
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "read timed out",
                    ))
                }
                n => Ok(n),
            }
        }
    }

    /// Runs `then` on a thread once `timeouts` reached 3 (or after 5 s).
    fn after_three(
        timeouts: &Arc<std::sync::atomic::AtomicUsize>,
        then: impl FnOnce() + Send + 'static,
    ) -> std::thread::JoinHandle<()> {
        let timeouts = timeouts.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + std::time::Duration::from_secs(5);
            while timeouts.load(std::sync::atomic::Ordering::SeqCst) < 3
                && Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            then();
        })
    }

    fn quiet(data: &[u8]) -> (Quiet, Arc<std::sync::atomic::AtomicUsize>) {
        let timeouts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let q = Quiet {
            data: Cursor::new(data.to_vec()),
            wait: std::time::Duration::from_millis(5),
            timeouts: timeouts.clone(),
        };
        (q, timeouts)
    }

    /// A quiet stream (its reads time out, as sliced reads do) follows the selection too:
    /// the timeouts within its limit are tried again, and once another server is selected the
    /// stream ends at the next timeout, data or none; past its limit since its last data, the
    /// timeout is the stream's (a stall).
    #[test]
    fn a_quiet_watch_stream_ends_once_another_server_is_selected_and_stalls_past_its_limit() {
        use std::sync::atomic::Ordering::SeqCst;
        let f = failover(2);
        let (body, timeouts) = quiet(b"a\n");
        let mut r = FollowSelection::new(BufReader::new(body), f.clone(), 0, LIMIT);
        assert_eq!(line(&mut r), "a\n");
        let moved = f.clone();
        let switcher = after_three(&timeouts, move || {
            moved.observe(0, Signal::Unreachable, "test");
        });
        assert!(line(&mut r).is_empty(), "ended once the selection moved");
        switcher.join().unwrap();
        assert!(
            timeouts.load(SeqCst) >= 3,
            "the timeouts before were tried again"
        );

        // Opened on a server that was not the selected one (every server down), with nothing
        // received: it stays until the selection moves again.
        let f = failover(2);
        f.observe(0, Signal::Unreachable, "test");
        let (body, timeouts) = quiet(b"");
        let mut r = FollowSelection::new(BufReader::new(body), f.clone(), 0, LIMIT);
        let moved = f.clone();
        let switcher = after_three(&timeouts, move || {
            // Back to server 0, then away again: two switches, the stream's server not selected.
            moved.observe(0, Signal::Answered, "");
            moved.observe(0, Signal::Unreachable, "test");
        });
        assert!(line(&mut r).is_empty(), "ended once the selection moved");
        switcher.join().unwrap();
        assert!(timeouts.load(SeqCst) >= 3);

        // Past the limit since its last data: the timeout is returned, a stall.
        let (body, _) = quiet(b"a\n");
        let limit = std::time::Duration::from_millis(50);
        let mut r = FollowSelection::new(BufReader::new(body), failover(2), 0, limit);
        assert_eq!(line(&mut r), "a\n");
        let started = Instant::now();
        let mut s = String::new();
        let e = r.read_line(&mut s).unwrap_err();
        assert!(crate::upstream::client::is_stall(&e), "{e}");
        assert!(started.elapsed() >= limit - std::time::Duration::from_millis(10));
    }

    #[test]
    fn the_prober_fails_back_once_the_primary_answers_readyz_again() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let a_addr = listener.local_addr().unwrap();
        drop(listener);
        let a = format!("http://{a_addr}");
        let (b, _b_server) = serve(vec![canned(
            "200 OK",
            r#"{"metadata":{"resourceVersion":"1"},"items":[]}"#,
        )]);
        let stats = Stats::new();
        let up = upstream(&[&a, &b], &stats);
        up.list("/api/v1/nodes").unwrap();
        assert_eq!(stats.servers().selected(), 1);
        // A comes back (same port) and answers the probes.
        let Ok(listener) = TcpListener::bind(a_addr) else {
            return; // the port was taken meanwhile: nothing to check
        };
        let probes = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for _ in 0..RISE {
                let (mut s, _) = listener.accept().unwrap();
                let mut head = [0u8; 1024];
                let n = s.read(&mut head).unwrap();
                seen.push(
                    String::from_utf8_lossy(&head[..n])
                        .lines()
                        .next()
                        .unwrap_or("")
                        .to_string(),
                );
                std::io::Write::write_all(&mut s, &canned("200 OK", "ok")).unwrap();
            }
            seen
        });
        let deadline = Instant::now() + PROBE_INTERVAL * (RISE + 3);
        while stats.servers().selected() != 0 {
            assert!(Instant::now() < deadline, "no failback");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(stats.servers().switches(true), 1);
        assert!(stats.servers().healthy(0));
        assert_eq!(up.current_server(), a);
        let seen = probes.join().unwrap();
        assert!(seen.iter().all(|l| l == "GET /readyz HTTP/1.1"), "{seen:?}");
        // Probes are not counted as requests.
        assert_eq!(stats.requests().count(Verb::Get, Some(200)), 0);
    }
}
