//! `deploy/relay/`: the site overlay its kustomization.yaml describes (the base deployment plus
//! the relay Component) builds with `kubectl kustomize`, and what it builds fits together: the
//! relay DaemonSet runs on the labelled nodes with the relay flags and its Secret mounted where
//! the flags point; the base DaemonSet keeps off them and follows the relays, its relay kubeconfig
//! (read with grid-wrapper's own kubeconfig parser) naming files of the Secret it mounts; and
//! every flag in either DaemonSet is one grid-wrapper knows. Skips (printing why) without kubectl.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::procs::TempDir;
use common::{find_in_path, run_bounded};
use grid_wrapper::upstream::kubeconfig;
use yaml_rust2::{Yaml, YamlLoader};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read deploy/") {
        let entry = entry.expect("entry");
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).expect("copy");
        }
    }
}

/// The documents `kubectl kustomize` builds for a site overlay over a copy of `deploy/`.
fn built() -> Option<Vec<Yaml>> {
    let Some(kubectl) = find_in_path("kubectl") else {
        println!("skipping: kubectl not found on PATH");
        return None;
    };
    let dir = TempDir::new("deploy-relay");
    copy_dir(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy"),
        &dir.path.join("deploy"),
    );
    let site = dir.path.join("sites/site-a");
    std::fs::create_dir_all(&site).expect("mkdir site");
    // The overlay deploy/relay/kustomization.yaml shows.
    std::fs::write(
        site.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources: [../../deploy]\ncomponents: [../../deploy/relay]\n",
    )
    .expect("write the overlay");
    let out = run_bounded(
        Command::new(kubectl).arg("kustomize").arg(&site),
        Duration::from_secs(60),
    )
    .expect("kubectl kustomize ran");
    assert!(out.ok(), "kubectl kustomize: {}", out.stderr_text());
    Some(YamlLoader::load_from_str(&String::from_utf8_lossy(&out.stdout)).expect("YAML"))
}

fn named<'a>(docs: &'a [Yaml], kind: &str, name: &str) -> &'a Yaml {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind) && d["metadata"]["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec()
        .map(|v| {
            v.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The value of `--flag=` in `args`.
fn flag<'a>(args: &'a [String], name: &str) -> &'a str {
    args.iter()
        .find_map(|a| a.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {args:?}"))
}

/// Where the pod spec mounts the volume that holds `secret` (a Secret's name).
fn secret_mount(pod: &Yaml, secret: &str) -> String {
    let volume = pod["volumes"]
        .as_vec()
        .and_then(|v| {
            v.iter()
                .find(|v| v["secret"]["secretName"].as_str() == Some(secret))
        })
        .and_then(|v| v["name"].as_str())
        .unwrap_or_else(|| panic!("no volume of Secret {secret}"));
    pod["containers"][0]["volumeMounts"]
        .as_vec()
        .and_then(|m| m.iter().find(|m| m["name"].as_str() == Some(volume)))
        .and_then(|m| m["mountPath"].as_str())
        .unwrap_or_else(|| panic!("volume {volume} not mounted"))
        .to_string()
}

fn known_flags() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_grid-wrapper"))
        .arg("--help")
        .output()
        .expect("grid-wrapper --help");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_site_overlay_builds_and_its_parts_fit_together() {
    let Some(docs) = built() else { return };
    let help = known_flags();
    // The relay.
    let relay =
        &named(&docs, "DaemonSet", "application-grid-wrapper-relay")["spec"]["template"]["spec"];
    assert_eq!(
        relay["nodeSelector"]["grid-wrapper.superedge.io/relay"].as_str(),
        Some("true")
    );
    let args = strings(&relay["containers"][0]["args"]);
    let serving = secret_mount(relay, "grid-wrapper-relay-serving");
    for f in [
        "--relay-cert-file",
        "--relay-key-file",
        "--relay-client-ca-file",
    ] {
        assert!(
            flag(&args, f).starts_with(&format!("{serving}/")),
            "{f} points into the Secret's mount {serving}"
        );
    }
    assert!(flag(&args, "--relay-bind-address").ends_with(":51010"));
    // The followers.
    let base = &named(&docs, "DaemonSet", "application-grid-wrapper")["spec"]["template"]["spec"];
    let term = &base["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchExpressions"][0];
    assert_eq!(
        term["key"].as_str(),
        Some("grid-wrapper.superedge.io/relay")
    );
    assert_eq!(term["operator"].as_str(), Some("NotIn"));
    let args = strings(&base["containers"][0]["args"]);
    let servers = flag(&args, "--relay-servers");
    assert!(servers
        .split(',')
        .all(|s| s.starts_with("https://") && s.ends_with(":51010")));
    // Its relay kubeconfig is the ConfigMap's, mounted where the flag says, and names files of
    // the client Secret as it is mounted.
    let kc_path = flag(&args, "--relay-kubeconfig");
    let cm = named(&docs, "ConfigMap", "grid-wrapper-relay-kubeconfig");
    let cm_volume = base["volumes"]
        .as_vec()
        .and_then(|v| {
            v.iter()
                .find(|v| v["configMap"]["name"].as_str() == Some("grid-wrapper-relay-kubeconfig"))
        })
        .and_then(|v| v["name"].as_str())
        .expect("the relay kubeconfig's volume");
    let cm_mount = base["containers"][0]["volumeMounts"]
        .as_vec()
        .and_then(|m| m.iter().find(|m| m["name"].as_str() == Some(cm_volume)))
        .and_then(|m| m["mountPath"].as_str())
        .expect("mounted");
    assert_eq!(kc_path, format!("{cm_mount}/kubeconfig.conf"));
    let text = cm["data"]["kubeconfig.conf"]
        .as_str()
        .expect("kubeconfig.conf");
    let kc = kubeconfig::parse(text, Path::new("/")).expect("grid-wrapper reads it");
    assert!(kc.server.starts_with("https://"));
    assert!(
        kc.token.is_none() && kc.token_file.is_none(),
        "no token for relays"
    );
    let client = secret_mount(base, "grid-wrapper-relay-client");
    for file in [
        kc.certificate_authority,
        kc.client_certificate,
        kc.client_key,
    ] {
        let file = file.expect("a file of the client Secret");
        assert!(
            file.starts_with(&client),
            "{} not under {client}",
            file.display()
        );
    }
    // Every flag of both DaemonSets is grid-wrapper's.
    for args in [&args, &strings(&relay["containers"][0]["args"])] {
        for a in args.iter() {
            let name = a.split('=').next().unwrap_or(a);
            assert!(help.contains(name), "{name} is not a grid-wrapper flag");
        }
    }
}
