//! Real client-go clients (`kubectl` 1.27 and 1.33, and every other `kubectl.1.*` installed)
//! talking to grid-wrapper over plain HTTP with a kubeconfig like kube-proxy's: pruned
//! EndpointSlice lists, a streamed watch that sees a relabelled node's endpoint arrive, the
//! field selectors kube-proxy uses on Nodes and Services, and ServiceCIDRs from the cache. Discovery requests are proxied to the
//! simulated apiserver. When no kubectl is installed each test prints "skipping" and passes.

use crate::common;

use common::{find_in_path, run_bounded, spawn_streaming, Sim, TempDir, Wrapper};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Limit for one non-watch kubectl run.
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(20);
/// Limit for each phase of the watch test.
const WATCH_PHASE_TIMEOUT: Duration = Duration::from_secs(12);
/// The node grid-wrapper runs on (zone-a, like edge-a2).
const HOSTNAME: &str = "edge-a1";

/// `kubectl.<version>` on `PATH` or beside the resolved `kubectl`, else plain `kubectl`; `None`
/// when there is no kubectl at all.
fn kubectl(version: &str) -> Option<PathBuf> {
    let name = format!("kubectl.{version}");
    if let Some(p) = find_in_path(&name) {
        return Some(p);
    }
    let plain = find_in_path("kubectl")?;
    let resolved = std::fs::canonicalize(&plain).unwrap_or(plain.clone());
    if let Some(p) = resolved
        .parent()
        .map(|d| d.join(&name))
        .filter(|p| p.is_file())
    {
        return Some(p);
    }
    println!("note: {name} not found; using {} instead", plain.display());
    Some(plain)
}

/// Every `kubectl.1.*` beside the resolved `kubectl` or on `PATH` (sorted, deduplicated).
fn installed_versions() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(resolved) = find_in_path("kubectl").and_then(|p| std::fs::canonicalize(p).ok()) {
        dirs.extend(resolved.parent().map(Path::to_path_buf));
    }
    let mut found: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("kubectl.1."))
        .filter_map(|e| std::fs::canonicalize(e.path()).ok())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// A sim (demo fixture), a grid-wrapper for [`HOSTNAME`] and a kubeconfig pointing at it, used
/// through one kubectl binary.
struct Setup {
    kubectl: PathBuf,
    sim: Sim,
    _wrapper: Wrapper,
    dir: TempDir,
}

impl Setup {
    /// `None` (after printing why) when no kubectl exists.
    fn new(version: &str) -> Option<Setup> {
        let Some(kubectl) = kubectl(version) else {
            println!("skipping: kubectl not found (looked for kubectl.{version} and kubectl)");
            return None;
        };
        println!("using {}", kubectl.display());
        Some(Self::with(kubectl))
    }

    fn with(kubectl: PathBuf) -> Setup {
        let sim = Sim::start(&[]);
        let wrapper = Wrapper::start(&sim.url, HOSTNAME, &[]);
        let dir = TempDir::new("kubectl");
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: wrapper\n  cluster:\n    server: http://{}\n\
             contexts:\n- name: kube-proxy\n  context:\n    cluster: wrapper\n    user: kube-proxy\n\
             current-context: kube-proxy\nusers:\n- name: kube-proxy\n  user: {{}}\n",
            wrapper.addr
        );
        std::fs::write(dir.file("kubeconfig"), kubeconfig).expect("write kubeconfig");
        Setup {
            kubectl,
            sim,
            _wrapper: wrapper,
            dir,
        }
    }

    /// A kubectl command with the temporary kubeconfig and discovery cache.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.kubectl);
        cmd.env_remove("KUBECONFIG")
            .arg(format!("--kubeconfig={}", self.dir.file("kubeconfig")))
            .arg(format!("--cache-dir={}", self.dir.file("cache")))
            .arg("--request-timeout=15s")
            .args(args);
        cmd
    }

    /// Runs kubectl (bounded), which must succeed and print JSON.
    fn json(&self, args: &[&str]) -> Value {
        let out = run_bounded(&mut self.command(args), KUBECTL_TIMEOUT)
            .unwrap_or_else(|| panic!("{} {args:?} timed out", self.kubectl.display()));
        assert!(
            out.ok(),
            "{} {args:?} failed ({}): {}",
            self.kubectl.display(),
            out.status,
            out.stderr_text()
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{} {args:?}: not JSON ({e}): {}",
                self.kubectl.display(),
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or("")
}

fn items(list: &Value) -> Vec<Value> {
    list["items"].as_array().cloned().unwrap_or_default()
}

fn find<'a>(items: &'a [Value], wanted: &str) -> Option<&'a Value> {
    items.iter().find(|i| name(i) == wanted)
}

/// Sorted `nodeName`s of a slice's endpoints.
fn slice_nodes(slice: &Value) -> Vec<String> {
    let mut nodes: Vec<String> = slice["endpoints"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["nodeName"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    nodes.sort();
    nodes
}

fn service_of(slice: &Value) -> &str {
    slice["metadata"]["labels"]["kubernetes.io/service-name"]
        .as_str()
        .unwrap_or("")
}

/// `get endpointslices -A -o json`: web pruned to zone-a, api whole, headless db absent.
fn check_list_slices(s: &Setup) {
    let list = s.json(&["get", "endpointslices", "-A", "-o", "json"]);
    let items = items(&list);
    let who = s.kubectl.display();
    let web = find(&items, "web-abc12").unwrap_or_else(|| panic!("{who}: no web-abc12 in {list}"));
    assert_eq!(
        slice_nodes(web),
        ["edge-a1", "edge-a2"],
        "{who}: web pruned to zone-a"
    );
    let api = find(&items, "api-xyz89").unwrap_or_else(|| panic!("{who}: no api-xyz89 in {list}"));
    assert_eq!(
        slice_nodes(api),
        ["edge-a1", "edge-b1", "edge-c1"],
        "{who}: api unpruned"
    );
    assert!(
        !items
            .iter()
            .any(|i| name(i) == "db-hl7q2" || service_of(i) == "db"),
        "{who}: headless db slice served: {list}"
    );
}

/// `get endpointslices -n default -w -o json --output-watch-events`: after the initial objects,
/// relabelling edge-b1 into zone-a brings its endpoint into web-abc12 as a MODIFIED event.
fn check_watch_slices(s: &Setup) {
    let who = s.kubectl.display().to_string();
    let mut cmd = s.command(&[
        "get",
        "endpointslices",
        "-n",
        "default",
        "-w",
        "-o",
        "json",
        "--output-watch-events",
    ]);
    let (mut proc, stdout, log) = spawn_streaming(&mut cmd);
    // Objects are pretty-printed over several lines: decode a stream of JSON values.
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for v in serde_json::Deserializer::from_reader(stdout).into_iter::<Value>() {
            let Ok(v) = v else { return };
            if tx.send(v).is_err() {
                return;
            }
        }
    });
    let next = |deadline: Instant| -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "{who}: no further watch output in time; stderr:\n{}",
                log.text()
            )
        })
    };
    // Initial state: ADDED for every slice in default, web pruned.
    let deadline = Instant::now() + WATCH_PHASE_TIMEOUT;
    let mut seen = Vec::new();
    let web_rv = loop {
        let ev = next(deadline);
        assert_eq!(ev["type"], "ADDED", "{who}: initial event {ev}");
        let obj = &ev["object"];
        seen.push(name(obj).to_string());
        if name(obj) == "web-abc12" {
            assert_eq!(
                slice_nodes(obj),
                ["edge-a1", "edge-a2"],
                "{who}: initial web"
            );
            break obj["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("")
                .to_string();
        }
    };
    assert!(
        !web_rv.is_empty(),
        "{who}: web-abc12 without resourceVersion"
    );
    s.sim.label_node("edge-b1", json!({"zone": "zone-a"}));
    let deadline = Instant::now() + WATCH_PHASE_TIMEOUT;
    loop {
        let ev = next(deadline);
        let obj = &ev["object"];
        if name(obj) != "web-abc12" {
            // The rest of the initial list (api-xyz89, kubernetes) may still be arriving.
            continue;
        }
        assert_eq!(ev["type"], "MODIFIED", "{who}: web change {ev}");
        let rv = obj["metadata"]["resourceVersion"].as_str().unwrap_or("");
        assert_ne!(rv, web_rv, "{who}: new resourceVersion expected");
        assert_eq!(
            slice_nodes(obj),
            ["edge-a1", "edge-a2", "edge-b1"],
            "{who}: edge-b1 joined zone-a"
        );
        break;
    }
    assert!(
        seen.iter().all(|n| n != "db-hl7q2"),
        "{who}: headless slice in the watch: {seen:?}"
    );
    let _ = proc.child.kill();
}

/// `get nodes --field-selector metadata.name=edge-a1` returns exactly that node.
fn check_nodes_field_selector(s: &Setup) {
    let list = s.json(&[
        "get",
        "nodes",
        "--field-selector",
        "metadata.name=edge-a1",
        "-o",
        "json",
    ]);
    let names: Vec<&str> = list["items"]
        .as_array()
        .map(|a| a.iter().map(name).collect())
        .unwrap_or_default();
    assert_eq!(names, ["edge-a1"], "{}: {list}", s.kubectl.display());
}

/// `get services -A --field-selector spec.clusterIP!=None` drops headless db; without the
/// selector db is listed.
fn check_services_field_selector(s: &Setup) {
    let who = s.kubectl.display();
    let names =
        |list: &Value| -> Vec<String> { items(list).iter().map(|i| name(i).to_string()).collect() };
    let selected = s.json(&[
        "get",
        "services",
        "-A",
        "--field-selector",
        "spec.clusterIP!=None",
        "-o",
        "json",
    ]);
    let got = names(&selected);
    assert!(
        got.iter().any(|n| n == "web") && got.iter().any(|n| n == "api"),
        "{who}: web and api expected: {got:?}"
    );
    assert!(
        !got.iter().any(|n| n == "db"),
        "{who}: headless db selected: {got:?}"
    );
    let all = names(&s.json(&["get", "services", "-A", "-o", "json"]));
    assert!(
        ["web", "api", "db"]
            .iter()
            .all(|w| all.iter().any(|n| n == w)),
        "{who}: all services expected: {all:?}"
    );
}

/// ServiceCIDRs (kube-proxy ≥ 1.33 watches them): `get servicecidrs` (found by discovery,
/// proxied) and `get --raw` of both versions, served by grid-wrapper's cache (its own
/// resourceVersions; the simulator serves no v1beta1 at all).
fn check_servicecidrs(s: &Setup) {
    let who = s.kubectl.display();
    let list = s.json(&["get", "servicecidrs", "-o", "json"]);
    let its = items(&list);
    let got: Vec<&str> = its.iter().map(name).collect();
    assert_eq!(got, ["kubernetes"], "{who}: {list}");
    let rv: u64 = its[0]["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(rv >= 1 << 40, "{who}: not grid-wrapper's RV: {list}");
    for v in ["v1", "v1beta1"] {
        let path = format!("/apis/networking.k8s.io/{v}/servicecidrs");
        let list = s.json(&["get", "--raw", &path]);
        assert_eq!(list["kind"], "ServiceCIDRList", "{who} {path}: {list}");
        let its = items(&list);
        let got: Vec<&str> = its.iter().map(name).collect();
        assert_eq!(got, ["kubernetes"], "{who} {path}");
        let rv: u64 = list["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        assert!(rv >= 1 << 40, "{who} {path}: not grid-wrapper's RV: {list}");
    }
}

macro_rules! per_version {
    ($($module:ident => $version:literal),* $(,)?) => {$(
        mod $module {
            use super::*;

            #[test]
            fn list_endpointslices_pruned() {
                if let Some(s) = Setup::new($version) {
                    check_list_slices(&s);
                }
            }

            #[test]
            fn watch_endpointslices_sees_relabel() {
                if let Some(s) = Setup::new($version) {
                    check_watch_slices(&s);
                }
            }

            #[test]
            fn nodes_field_selector() {
                if let Some(s) = Setup::new($version) {
                    check_nodes_field_selector(&s);
                }
            }

            #[test]
            fn services_field_selector() {
                if let Some(s) = Setup::new($version) {
                    check_services_field_selector(&s);
                }
            }

            #[test]
            fn servicecidrs_from_the_cache() {
                if let Some(s) = Setup::new($version) {
                    check_servicecidrs(&s);
                }
            }
        }
    )*};
}

per_version! {
    kubectl_1_27 => "1.27",
    kubectl_1_33 => "1.33",
}

/// Every installed `kubectl.1.*` lists pruned slices through the same wrapper.
#[test]
fn every_installed_version_lists_pruned_slices() {
    let versions = installed_versions();
    let Some(first) = versions.first() else {
        println!("skipping: no kubectl.1.* binaries found");
        return;
    };
    let mut s = Setup::with(first.clone());
    for k in &versions {
        println!("checking {}", k.display());
        s.kubectl = k.clone();
        check_list_slices(&s);
    }
}
