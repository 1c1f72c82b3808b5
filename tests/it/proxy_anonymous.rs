//! A proxied request that carries no credentials reaches the upstream anonymous (grid-wrapper
//! lends none, docs/SEMANTICS.md §8), which is what kube-proxy's events are over plain http:
//! client-go sends a kubeconfig's token only over https. Against the simulator with `--token`
//! (an apiserver that refuses anonymous writes), such a `POST` of an event through the kube-proxy
//! port gets the upstream's refusal unchanged, and grid-wrapper says why, once per episode, with
//! the fix; the same request with the caller's own token succeeds and adds no such warning.

use crate::common;

use std::time::Duration;

use common::{request, token_kubeconfig, Sim, TempDir, Wrapper};

/// The token the upstream accepts: grid-wrapper's own for its reflectors, and the caller's.
const TOKEN: &str = "the-token";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/default/events";
const EVENT: &[u8] = br#"{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e"}}"#;
/// A phrase of the WARN's hint.
const HINT: &str = "sends its kubeconfig's token only over https";

#[test]
fn a_refused_request_without_credentials_is_relayed_and_explained_once() {
    let sim = Sim::start(&["--token", TOKEN]);
    let dir = TempDir::new("proxy-anonymous");
    let kc = token_kubeconfig(&dir, &sim.url, TOKEN);
    let (w, log) = Wrapper::start_captured(&[&format!("--kubeconfig={kc}"), "--hostname=edge-a1"]);
    w.wait_ready();

    let json = [("Content-Type", "application/json")];
    let direct = request(sim.addr, "POST", EVENTS, &json, EVENT);
    assert_eq!(
        direct.0, 401,
        "the simulator refuses a request without the token"
    );
    for i in 0..4 {
        let (code, _, body) = request(w.addr, "POST", EVENTS, &json, EVENT);
        assert_eq!(
            (code, body.as_slice()),
            (direct.0, direct.2.as_slice()),
            "request {i}: the upstream's refusal, unchanged: {}",
            String::from_utf8_lossy(&body)
        );
    }
    log.wait_for_text(HINT, Duration::from_secs(5));
    // The WARN is written before the answer is relayed; a moment for the pipe.
    std::thread::sleep(Duration::from_millis(300));
    let warns: Vec<String> = log
        .text()
        .lines()
        .filter(|l| l.contains(HINT))
        .map(str::to_string)
        .collect();
    assert_eq!(warns.len(), 1, "one WARN per episode:\n{}", log.text());
    assert!(warns[0].contains("WARN"), "{}", warns[0]);
    assert!(
        warns[0].contains(&format!("POST {EVENTS}")) && warns[0].contains("401"),
        "names the request and the upstream's answer: {}",
        warns[0]
    );
    assert!(warns[0].contains("--bind-address"), "{}", warns[0]);

    let auth = format!("Bearer {TOKEN}");
    let with_token = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    let (code, _, body) = request(w.addr, "POST", EVENTS, &with_token, EVENT);
    assert!(
        (200..300).contains(&code),
        "with the caller's token: {code} {}",
        String::from_utf8_lossy(&body)
    );
    std::thread::sleep(Duration::from_millis(300));
    let text = log.text();
    assert_eq!(
        text.lines().filter(|l| l.contains(HINT)).count(),
        1,
        "a request with credentials adds no such WARN:\n{text}"
    );
}
