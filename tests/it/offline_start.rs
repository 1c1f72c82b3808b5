//! An offline start (docs/SEMANTICS.md §5, and §9 for the original's defect): grid-wrapper starts
//! while the upstream is unreachable, guesses the EndpointSlice version (v1), and re-checks it by
//! API discovery once the upstream answers. Here the upstream turns out to serve only v1beta1 (a
//! 1.19–1.20 cluster): without the re-check the v1 reflector would get 404 forever and the cache
//! would never become ready.

use crate::common;

use std::time::Duration;

use common::{free_port, web_ips, Sim, Wrapper};

#[test]
fn offline_start_rechecks_the_slice_version_once_the_upstream_answers() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let w = Wrapper::start_unready(&url, "edge-a1", &["--not-ready-hold-seconds=0"]);
    // Discovery and both probes fail against the closed port (each logs it).
    for failed in [
        "re-checking the EndpointSlice version until it answers",
        "ServiceCIDRs: the upstream cannot be asked",
    ] {
        w.log.wait_for_text(failed, Duration::from_secs(20));
    }
    let (code, _, _) = w.get("/apis/discovery.k8s.io/v1/endpointslices");
    assert_eq!(code, 503, "not ready while the upstream is down");
    let listen = format!("127.0.0.1:{port}");
    let _sim = Sim::start(&["--listen", &listen, "--slice-version", "v1beta1"]);
    w.wait_ready();
    let beta = w.get_json("/apis/discovery.k8s.io/v1beta1/endpointslices");
    assert_eq!(beta["apiVersion"], "discovery.k8s.io/v1beta1");
    assert_eq!(web_ips(&beta).len(), 2, "pruned to zone-a: {beta}");
    // And the v1 route serves the same slices, converted.
    let v1 = w.get_json("/apis/discovery.k8s.io/v1/endpointslices");
    assert_eq!(web_ips(&v1), web_ips(&beta));
}
