//! Port 0 on grid-wrapper's listeners: the startup log names the addresses actually bound, the
//! way the tests (and an operator who lets the system pick) find them.

use crate::common;

use common::{bound_addresses, request, Sim, Wrapper};

#[test]
fn port_zero_is_logged_as_the_port_bound() {
    let sim = Sim::start(&[]);
    let w = Wrapper::start_unready(&sim.url, "edge-a1", &[]);
    let (api, health) = bound_addresses(&w.log.text()).expect("the startup line");
    assert_ne!(api.port(), 0, "{}", w.log.text());
    assert_ne!(health.port(), 0, "{}", w.log.text());
    assert_ne!(api, health);
    w.wait_ready();
    let (code, _, _) = request(health, "GET", "/readyz", &[], b"");
    assert_eq!(code, 200, "the health listener at the logged address");
    let (code, _, _) = request(api, "GET", "/api/v1/nodes", &[], b"");
    assert_eq!(code, 200, "the kube-proxy listener at the logged address");
}
