//! `grid-wrapper check` against the simulated apiserver: a good node (exit 0, version, slice
//! version, kept/total for `web`), a wrong `--hostname` (a `node` problem), an unreachable or
//! silent upstream (a `connectivity` problem, fast), a wrong token (401 per resource and verb),
//! a node without the topology label (`web` fully pruned), `--output json`, TLS (a wrong CA is
//! a `tls` problem), and that the check binds nothing and writes nothing. With
//! `--container-runtime-endpoint` (the real grpc-go CRI server of `common::cri`): a runtime that
//! answers (its sandboxes and what the repair would change, only the two read-only calls), a
//! missing socket, a socket that is not a CRI server and a stalled runtime (`runtime` problems).
//! Every run is bounded.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Command;
use std::time::{Duration, Instant};

use common::cri::{self, Fake, Sb};
use common::pki::Pki;
use common::{run_bounded, token_kubeconfig, RunOutput, Sim, TempDir};
use serde_json::{json, Value};

/// Upper bound of one check run (a healthy one takes well under a second).
const RUN_LIMIT: Duration = Duration::from_secs(30);

/// Runs `grid-wrapper check <args>`; (exit code, stdout).
fn check(args: &[&str]) -> (i32, String, RunOutput) {
    let out = run_bounded(
        Command::new(env!("CARGO_BIN_EXE_grid-wrapper"))
            .arg("check")
            .args(args),
        RUN_LIMIT,
    )
    .expect("grid-wrapper check finished in time");
    let code = out.status.code().expect("exit code");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (code, stdout, out)
}

/// `problem:` lines of a text report.
fn problems(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("problem: "))
        .collect()
}

#[test]
fn a_good_node_is_ready() {
    let sim = Sim::start(&[]);
    let (code, out, run) = check(&["--master", &sim.url, "--hostname", "edge-a1"]);
    assert_eq!(code, 0, "{out}\n{}", run.stderr_text());
    assert!(out.contains("version v1.28.0-sim"), "{out}");
    assert!(out.contains("EndpointSlices discovery.k8s.io/v1"), "{out}");
    assert!(out.contains(", ServiceCIDRs networking.k8s.io/v1"), "{out}");
    assert!(
        out.contains("node edge-a1: found; topology labels: zone=zone-a"),
        "{out}"
    );
    assert!(
        out.contains("default/web [zone]: EndpointSlices 2/4, Endpoints 2/4"),
        "{out}"
    );
    assert_eq!(
        out.matches("  ok      ").count(),
        10,
        "list+watch x5 (ServiceCIDRs too): {out}"
    );
    assert!(
        out.contains("  ok      watch servicecidrs (networking.k8s.io/v1)"),
        "{out}"
    );
    assert!(problems(&out).is_empty(), "{out}");
    assert!(out.ends_with("result: ready\n"), "{out}");
    // The check's requests are the reflectors' LISTs and short WATCHes, nothing else.
    assert!(
        sim.requests().is_empty(),
        "unexpected requests: {:?}",
        sim.requests()
    );
}

#[test]
fn an_upstream_without_servicecidrs_is_ready_and_says_they_are_proxied() {
    let sim = Sim::start(&["--no-servicecidrs"]);
    let (code, out, _) = check(&["--master", &sim.url, "--hostname", "edge-a1"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(", no ServiceCIDRs (proxied)"), "{out}");
    assert!(!out.contains("servicecidrs ("), "no access line: {out}");
    assert!(!out.contains("warning:"), "a 404 is not a warning: {out}");
    assert_eq!(out.matches("  ok      ").count(), 8, "list+watch x4: {out}");
}

#[test]
fn a_v1beta1_upstream_is_checked_in_its_version() {
    let sim = Sim::start(&["--slice-version", "v1beta1"]);
    let (code, out, _) = check(&["--master", &sim.url, "--hostname", "edge-a1"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("EndpointSlices discovery.k8s.io/v1beta1 (API discovery lists v1beta1)"),
        "{out}"
    );
    assert!(
        out.contains("  ok      watch endpointslices (discovery.k8s.io/v1beta1)"),
        "{out}"
    );
    assert!(
        out.contains("default/web [zone]: EndpointSlices 2/4, Endpoints 2/4"),
        "{out}"
    );
}

#[test]
fn a_wrong_hostname_is_a_node_problem() {
    let sim = Sim::start(&[]);
    let (code, out, _) = check(&["--master", &sim.url, "--hostname", "edge-zz"]);
    assert_eq!(code, 1, "{out}");
    let p = problems(&out);
    assert_eq!(p.len(), 1, "{out}");
    assert!(
        p[0].starts_with("problem: node: node \"edge-zz\" not found upstream"),
        "{out}"
    );
    assert!(out.contains("FULLY PRUNED"), "{out}");
    assert!(out.ends_with("result: NOT ready (1 problem)\n"), "{out}");
}

#[test]
fn an_unreachable_upstream_is_a_connectivity_problem_fast() {
    // A closed port: refused at once.
    let port = common::free_port();
    let master = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let (code, out, _) = check(&["--master", &master, "--hostname", "edge-a1"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let p = problems(&out);
    assert_eq!(p.len(), 1, "nothing else is tried: {out}");
    assert!(
        p[0].starts_with(&format!("problem: connectivity: GET {master}/version: ")),
        "{out}"
    );
    assert!(out.contains("upstream: NOT reachable"), "{out}");

    // A listener that never answers (the kernel accepts, nobody reads): the response limit.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let master = format!("http://{}", silent.local_addr().expect("addr"));
    let started = Instant::now();
    let (code, out, _) = check(&["--master", &master, "--hostname", "edge-a1"]);
    let took = started.elapsed();
    assert_eq!(code, 1, "{out}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(problems(&out).len(), 1, "{out}");
    assert!(out.contains("problem: connectivity: "), "{out}");
    assert!(out.contains("timeout"), "{out}");
    drop(silent);
}

#[test]
fn a_wrong_token_gives_401_problems_per_resource_and_verb() {
    let sim = Sim::start(&["--token", "right-token"]);
    let dir = TempDir::new("preflight-token");
    let kc = token_kubeconfig(&dir, &sim.url, "wrong-token");
    let (code, out, _) = check(&["--kubeconfig", &kc, "--hostname", "edge-a1"]);
    assert_eq!(code, 1, "{out}");
    let p = problems(&out);
    assert_eq!(p.len(), 8, "4 resources x list/watch: {out}");
    // /version (which the server never asks for) is a warning.
    assert!(out.contains("warning: auth: GET http://"), "{out}");
    assert!(p.iter().all(|l| l.starts_with("problem: auth: ")), "{out}");
    assert!(p.iter().all(|l| l.contains(": 401 Unauthorized")), "{out}");
    for what in [
        "list nodes (v1)",
        "watch nodes (v1)",
        "list services (v1)",
        "watch services (v1)",
        "list endpoints (v1)",
        "watch endpoints (v1)",
        "list endpointslices (discovery.k8s.io/v1)",
        "watch endpointslices (discovery.k8s.io/v1)",
    ] {
        assert!(
            p.iter()
                .any(|l| l.starts_with(&format!("problem: auth: {what}: 401"))),
            "{what}: {out}"
        );
    }
    // The right token: ready.
    let kc = token_kubeconfig(&dir, &sim.url, "right-token");
    let (code, out, _) = check(&["--kubeconfig", &kc, "--hostname", "edge-a1"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn an_unreadable_token_file_is_a_config_problem() {
    let sim = Sim::start(&[]);
    let dir = TempDir::new("preflight-tokenfile");
    let path = dir.file("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: edge\n\
         contexts:\n- name: edge\n  context:\n    cluster: sim\n    user: wrapper\n\
         clusters:\n- name: sim\n  cluster:\n    server: {}\n\
         users:\n- name: wrapper\n  user:\n    tokenFile: {}\n",
        sim.url,
        dir.file("absent-token")
    );
    std::fs::write(&path, text).expect("write kubeconfig");
    let (code, out, _) = check(&["--kubeconfig", &path, "--hostname", "edge-a1"]);
    assert_eq!(code, 1, "{out}");
    let p = problems(&out);
    assert_eq!(p.len(), 1, "{out}");
    assert!(
        p[0].starts_with("problem: config: bearer token file unusable"),
        "{out}"
    );
}

#[test]
fn a_node_without_the_topology_label_lists_the_services_fully_pruned() {
    let sim = Sim::start(&[]);
    sim.label_node("edge-a1", json!({"zone": null}));
    let (code, out, _) = check(&["--master", &sim.url, "--hostname", "edge-a1"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        problems(&out),
        [
            "problem: topology: service default/web: node \"edge-a1\" has no label zone \
          (its topologyKeys): all 4 endpoints would be pruned"
        ],
        "{out}"
    );
    assert!(out.contains("topology labels: zone MISSING"), "{out}");
    assert!(
        out.contains("default/web [zone]: EndpointSlices 0/4, Endpoints 0/4 - FULLY PRUNED"),
        "{out}"
    );
}

#[test]
fn json_output_parses_and_has_the_fields() {
    let sim = Sim::start(&[]);
    let (code, out, _) = check(&[
        "--master",
        &sim.url,
        "--hostname",
        "edge-a1",
        "--output",
        "json",
    ]);
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(&out).expect("one JSON document on stdout");
    assert_eq!(v["reportFormat"], 1);
    assert_eq!(v["ready"], true);
    assert_eq!(v["hostname"], "edge-a1");
    assert_eq!(v["upstream"]["server"], sim.url.as_str());
    assert_eq!(v["upstream"]["reachable"], true);
    assert_eq!(v["upstream"]["gitVersion"], "v1.28.0-sim");
    assert_eq!(v["upstream"]["endpointSliceVersion"], "discovery.k8s.io/v1");
    assert_eq!(v["upstream"]["endpointSliceVersionSource"], "discovery");
    assert_eq!(v["upstream"]["serviceCidrVersion"], "networking.k8s.io/v1");
    assert_eq!(v["upstream"]["serviceCidrs"], "mirrored");
    let access = v["access"].as_array().expect("access");
    assert_eq!(access.len(), 10, "list+watch x5: {v}");
    assert!(access.iter().all(|a| a["allowed"] == true), "{v}");
    assert_eq!(v["node"]["found"], true);
    assert_eq!(v["node"]["topologyLabels"], json!({"zone": "zone-a"}));
    assert_eq!(v["topologyKeys"], json!(["zone"]));
    let web = &v["topologyServices"][0];
    assert_eq!(
        (&web["namespace"], &web["name"]),
        (&json!("default"), &json!("web"))
    );
    assert_eq!(
        web["endpointSliceEndpoints"],
        json!({"kept": 2, "total": 4})
    );
    assert_eq!(web["fullyPruned"], false);
    assert_eq!(v["totals"]["topologyServices"], 1);
    // The local Node only: the others are held as facts (docs/SEMANTICS.md §1.1).
    assert_eq!(v["totals"]["served"]["nodes"], 1);
    assert_eq!(v["problems"], json!([]));

    // Problems are in the document too, and the exit code follows `ready`.
    let (code, out, _) = check(&[
        "--master",
        &sim.url,
        "--hostname",
        "edge-zz",
        "--output=json",
    ]);
    assert_eq!(code, 1, "{out}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["ready"], false);
    assert_eq!(v["problems"][0]["tag"], "node");
}

#[test]
fn the_check_binds_nothing_and_writes_nothing() {
    let sim = Sim::start(&[]);
    // The serving ports are taken (a running grid-wrapper would hold them) and the cache dir
    // does not exist: the check neither listens nor creates anything.
    let busy = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = busy.local_addr().expect("addr").to_string();
    let dir = TempDir::new("preflight-nowrite");
    let cache = dir.path.join("cache");
    let cache = cache.to_string_lossy();
    let (code, out, _) = check(&[
        "--master",
        &sim.url,
        "--hostname=edge-a1",
        "--bind-address",
        &addr,
        "--cache-dir",
        &cache,
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        !dir.path.join("cache").exists(),
        "the check created --cache-dir"
    );
}

#[test]
fn flag_errors_exit_2() {
    for args in [
        &["--hostname=edge-a1", "--output=json"][..],
        &["check"],
        &["check", "--hostname=x", "--output=yaml"],
    ] {
        let out = run_bounded(
            Command::new(env!("CARGO_BIN_EXE_grid-wrapper")).args(args),
            RUN_LIMIT,
        )
        .expect("finished");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            out.stderr_text()
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn tls_upstream_ready_and_a_wrong_ca_is_a_tls_problem() {
    let Some(pki) = Pki::generate() else { return };
    let token = "sim-secret-token";
    let sim = pki.sim(Some(token));
    let creds = format!(
        "    token: {token}\n    client-certificate: {}\n    client-key: {}\n",
        pki.path("client.crt"),
        pki.path("client.key")
    );
    let good = format!("    certificate-authority: {}\n", pki.path("ca.crt"));
    let kc = pki.kubeconfig("good.kubeconfig", &sim.url, &good, &creds);
    let (code, out, _) = check(&["--kubeconfig", &kc, "--hostname", "edge-a1"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("default/web [zone]: EndpointSlices 2/4"),
        "{out}"
    );

    let wrong = format!("    certificate-authority: {}\n", pki.path("other-ca.crt"));
    let kc = pki.kubeconfig("wrong-ca.kubeconfig", &sim.url, &wrong, &creds);
    let (code, out, _) = check(&["--kubeconfig", &kc, "--hostname", "edge-a1"]);
    assert_eq!(code, 1, "{out}");
    let p = problems(&out);
    assert_eq!(p.len(), 1, "{out}");
    assert!(
        p[0].starts_with("problem: tls: GET https://127.0.0.1:"),
        "{out}"
    );
    assert!(p[0].to_ascii_lowercase().contains("certificate"), "{out}");

    // No kubeconfig at all: a config problem, nothing contacted.
    let (code, out, _) = check(&[
        "--kubeconfig",
        &pki.path("absent.kubeconfig"),
        "--hostname",
        "edge-a1",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(problems(&out)[0].starts_with("problem: config: "), "{out}");
}

/// On a 1.35+ upstream, a Service annotated exactly `["topology.kubernetes.io/zone"]` gets an
/// advisory line (native `trafficDistribution: PreferSameZone` could serve it, with a fallback);
/// on an older upstream it does not. Advice does not change the result.
#[test]
fn native_traffic_distribution_is_advised_on_1_35() {
    for (version, advised) in [("1.35", true), ("1.34", false)] {
        let sim = Sim::start(&["--kube-version", version]);
        let mut web = sim.get_json("/api/v1/namespaces/default/services/web");
        web["metadata"]["annotations"]["topologyKeys"] =
            json!(r#"["topology.kubernetes.io/zone"]"#);
        sim.apply(&web);
        let (code, out, run) = check(&["--master", &sim.url, "--hostname", "edge-a1"]);
        assert_eq!(code, 0, "{out}\n{}", run.stderr_text());
        let advice: Vec<&str> = out.lines().filter(|l| l.starts_with("advice: ")).collect();
        let want = format!(
            "advice: topology: service default/web: topologyKeys [\"topology.kubernetes.io/zone\"]: \
             the upstream (v{version}.0-sim) has native spec.trafficDistribution: PreferSameZone, \
             which does this with a fallback to other endpoints; grid-wrapper keeps it strict \
             (no fallback) and serving offline"
        );
        match advised {
            true => assert_eq!(advice, [want.as_str()], "{out}"),
            false => assert!(advice.is_empty(), "{out}"),
        }
    }
}

// ---- the container runtime (`--container-runtime-endpoint`, docs/SEMANTICS.md §13) ----

/// The demo's web pod on `edge-a1`, served upstream at 10.244.1.10.
const RUNTIME_POD: &str = "web-5d8f7-a1x2q";

/// The `runtime …` line of a text report.
fn runtime_line(stdout: &str) -> &str {
    stdout
        .lines()
        .find(|l| l.starts_with("runtime "))
        .unwrap_or("")
}

/// `check` of node `edge-a1` against `sim` with the runtime at `endpoint`, then `extra`.
fn check_runtime(sim: &Sim, endpoint: &str, extra: &[&str]) -> (i32, String, RunOutput) {
    let args = [
        "--master",
        &sim.url,
        "--hostname",
        "edge-a1",
        "--container-runtime-endpoint",
        endpoint,
    ];
    check(&[&args[..], extra].concat())
}

#[test]
fn the_runtime_answers_and_the_check_counts_what_it_would_repair() {
    let moved = |ready| Sb {
        id: "sb-1",
        name: RUNTIME_POD,
        attempt: 1,
        ready,
        ips: &["10.244.1.99"],
    };
    let Some(fake) = Fake::start("check-ok", &[moved(true)]) else {
        return;
    };
    let sim = Sim::start(&[]);
    let (code, out, run) = check_runtime(&sim, &fake.endpoint, &[]);
    assert_eq!(code, 0, "{out}\n{}", run.stderr_text());
    assert_eq!(
        runtime_line(&out),
        format!(
            "runtime {}: answers, 1 sandbox (1 ready), 1 pod with an address, 0 known without \
             a ready sandbox; would repair now: EndpointSlice endpoints 1 to the runtime's \
             address, 0 not ready; Endpoints addresses 1 to the runtime's address, 0 not ready",
            fake.endpoint
        ),
        "{out}"
    );
    // Only the two read-only calls, as the runtime source makes them.
    let calls = fake.calls();
    assert!(!calls.is_empty(), "the check called the runtime");
    assert!(
        calls
            .iter()
            .all(|c| c.ends_with("/ListPodSandbox") || c.ends_with("/PodSandboxStatus")),
        "{calls:?}"
    );

    // JSON, and a pod whose sandbox is not ready: served not ready.
    fake.set(&[moved(false)]);
    let (code, out, _) = check_runtime(&sim, &fake.endpoint, &["--output", "json"]);
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        v["runtime"],
        json!({
            "endpoint": fake.endpoint, "reachable": true, "failure": null, "error": null,
            "sandboxes": 1, "readySandboxes": 0, "podsWithAddress": 0, "podsNotReady": 1,
            "repairs": {"endpointSliceAddresses": 0, "endpointSliceNotReady": 1,
                        "endpointsAddresses": 0, "endpointsNotReady": 1},
        }),
        "{v}"
    );
}

#[test]
fn a_missing_runtime_socket_is_a_runtime_problem_fast() {
    let sim = Sim::start(&[]);
    let dir = TempDir::new("check-no-cri");
    let endpoint = format!("unix://{}", dir.path.join("absent.sock").display());
    let started = Instant::now();
    let (code, out, _) = check_runtime(&sim, &endpoint, &[]);
    assert!(started.elapsed() < Duration::from_secs(10), "fast");
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        runtime_line(&out),
        format!("runtime {endpoint}: NOT answering (socket-missing)"),
        "{out}"
    );
    let p = problems(&out);
    assert_eq!(p.len(), 1, "{out}");
    assert!(
        p[0].starts_with(&format!(
            "problem: runtime: container runtime {endpoint}: ListPodSandbox: cannot connect: "
        )),
        "{out}"
    );
    let (code, out, _) = check_runtime(&sim, &endpoint, &["--output=json"]);
    assert_eq!(code, 1, "{out}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["runtime"]["reachable"], false, "{v}");
    assert_eq!(v["runtime"]["failure"], "socket-missing", "{v}");
    assert_eq!(v["runtime"]["repairs"], Value::Null, "{v}");
    assert_eq!(v["problems"][0]["tag"], "runtime", "{v}");
}

#[test]
fn a_socket_that_is_not_a_cri_server_is_a_runtime_problem() {
    let sim = Sim::start(&[]);
    let dir = TempDir::new("check-not-cri");
    let socket = dir.path.join("http1.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    // An HTTP/1.1 server: it reads the preface's first bytes and answers 400.
    let server = std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            let mut buf = [0u8; 64];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let endpoint = format!("unix://{}", socket.display());
    let (code, out, _) = check_runtime(&sim, &endpoint, &[]);
    // Unblocks the accept when the check never connected (then the thread ends at once).
    let _ = UnixStream::connect(&socket);
    let _ = server.join();
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        runtime_line(&out),
        format!("runtime {endpoint}: NOT answering (not-cri)"),
        "{out}"
    );
    assert!(
        problems(&out)
            .iter()
            .any(|p| p.starts_with("problem: runtime: ")),
        "{out}"
    );
}

#[test]
fn a_stalled_runtime_is_a_timeout_within_the_request_timeout() {
    let Some(fake) = Fake::start("check-stall", &[cri::WEB]) else {
        return;
    };
    let sim = Sim::start(&[]);
    let pid = fake.pid().to_string();
    let stop = Command::new("kill").args(["-STOP", &pid]).status();
    assert!(stop.is_ok_and(|s| s.success()), "SIGSTOP the runtime");
    let started = Instant::now();
    let (code, out, _) = check_runtime(
        &sim,
        &fake.endpoint,
        &["--container-runtime-request-timeout", "1"],
    );
    let took = started.elapsed();
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        runtime_line(&out),
        format!("runtime {}: NOT answering (timeout)", fake.endpoint),
        "{out}"
    );
    assert!(
        problems(&out)
            .iter()
            .any(|p| p.starts_with("problem: runtime: ")
                && p.contains("no complete answer within 1000 ms")),
        "{out}"
    );
    assert!(
        took < Duration::from_secs(15),
        "bounded by the deadline: {took:?}"
    );
}
