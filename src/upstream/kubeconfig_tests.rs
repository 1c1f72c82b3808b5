//! Tests of `kubeconfig.rs`: good and malformed kubeconfigs, file loading, in-cluster.
use super::*;

const B64_PEM: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="; // "-----BEGIN CERTIFICATE-----\n"

fn good(user: &str, cluster_extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: edge\n\
         contexts:\n- name: other\n  context: {{cluster: nope, user: nope}}\n\
         - name: edge\n  context:\n    cluster: c1\n    user: u1\n\
         clusters:\n- name: c1\n  cluster:\n    server: https://10.0.0.1:6443\n{cluster_extra}\
         users:\n- name: u1\n  user:\n{user}"
    )
}

#[test]
fn follows_current_context_and_resolves_relative_paths() {
    let y = good(
        "    token: abc\n    tokenFile: tok\n    client-certificate: pki/c.crt\n    client-key: /abs/k.key\n",
        "    certificate-authority: ca.crt\n    insecure-skip-tls-verify: false\n",
    );
    let kc = parse(&y, Path::new("/etc/kube")).unwrap();
    assert_eq!(kc.server, "https://10.0.0.1:6443");
    assert_eq!(
        kc.certificate_authority,
        Some(PathBuf::from("/etc/kube/ca.crt"))
    );
    assert_eq!(kc.token.as_deref(), Some("abc"));
    assert_eq!(kc.token_file, Some(PathBuf::from("/etc/kube/tok")));
    assert_eq!(
        kc.client_certificate,
        Some(PathBuf::from("/etc/kube/pki/c.crt"))
    );
    assert_eq!(kc.client_key, Some(PathBuf::from("/abs/k.key")));
    assert!(!kc.insecure_skip_tls_verify);
}

#[test]
fn data_fields_are_base64_decoded() {
    let y = good(
        &format!("    client-certificate-data: {B64_PEM}\n    client-key-data: {B64_PEM}\n"),
        &format!("    certificate-authority-data: {B64_PEM}\n    insecure-skip-tls-verify: true\n"),
    );
    let kc = parse(&y, Path::new("/x")).unwrap();
    let pem = b"-----BEGIN CERTIFICATE-----\n".to_vec();
    assert_eq!(kc.certificate_authority_data, Some(pem.clone()));
    assert_eq!(kc.client_certificate_data, Some(pem.clone()));
    assert_eq!(kc.client_key_data, Some(pem));
    assert!(kc.insecure_skip_tls_verify);
    assert_eq!(kc.token, None);
}

#[test]
fn context_without_user_is_anonymous() {
    let y = "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:8080'}\n";
    let kc = parse(y, Path::new("/")).unwrap();
    assert_eq!(kc.server, "http://127.0.0.1:8080");
    assert_eq!(kc.token, None);
    assert_eq!(kc.client_certificate, None);
}

#[test]
fn malformed_kubeconfigs_are_errors_naming_the_field() {
    let cases: Vec<(String, &str)> = vec![
        ("current-context: [".into(), "invalid YAML"),
        ("- a\n- b\n".into(), "not a mapping"),
        ("".into(), "not a mapping"),
        ("kind: Config\n".into(), "current-context"),
        ("current-context: x\ncontexts: []\n".into(), "contexts[x]"),
        ("current-context: x\ncontexts: {a: 1}\n".into(), "contexts: must be a list"),
        ("current-context: x\ncontexts:\n- name: x\n  context: 5\n".into(), "contexts[x].context"),
        ("current-context: x\ncontexts:\n- name: x\n  context: {user: u}\n".into(), "contexts[x].context.cluster"),
        ("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n".into(), "clusters[c]"),
        ("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {}\n".into(), "clusters[c].cluster.server"),
        ("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {server: [1]}\n".into(), "clusters[c].cluster.server: must be a string"),
        (good("    token: t\n", "    insecure-skip-tls-verify: maybe\n"), "insecure-skip-tls-verify"),
        (good("    token: t\n", "    certificate-authority-data: '!!notbase64'\n"), "certificate-authority-data: invalid base64"),
        (good("    client-certificate: a.crt\n", ""), "must be given together"),
        (good("    exec: {command: aws}\n", ""), "users[u1].user.exec"),
        (good("    auth-provider: {name: gcp}\n", ""), "auth-provider"),
        (good("    token: {a: b}\n", ""), "users[u1].user.token"),
        (good("    token: t\n", "").replace("- name: u1", "- name: u2"), "users[u1]: not found"),
    ];
    for (yaml, want) in cases {
        let err = parse(&yaml, Path::new("/")).expect_err(&yaml).to_string();
        assert!(err.contains(want), "{yaml:?}: {err:?} lacks {want:?}");
    }
}

/// A temporary directory, removed when dropped.
struct Tmp(PathBuf);

impl std::ops::Deref for Tmp {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmp(name: &str) -> Tmp {
    let d = std::env::temp_dir().join(format!("gw-kubeconfig-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    Tmp(d)
}

#[test]
fn load_reads_files_and_master_overrides_server() {
    let d = tmp("load");
    std::fs::write(d.join("ca.crt"), "CA").unwrap();
    std::fs::write(d.join("c.crt"), "CERT").unwrap();
    let y = good(
        &format!(
            "    client-certificate: c.crt\n    client-key-data: {B64_PEM}\n    tokenFile: t\n"
        ),
        "    certificate-authority: ca.crt\n",
    );
    std::fs::write(d.join("config"), y).unwrap();
    let cfg = load(Some(&d.join("config")), None).unwrap();
    assert_eq!(cfg.server, "https://10.0.0.1:6443");
    assert_eq!(cfg.server_list(), ["https://10.0.0.1:6443"]);
    assert_eq!(cfg.ca_pem.as_deref(), Some(&b"CA"[..]));
    assert_eq!(cfg.client_cert_pem.as_deref(), Some(&b"CERT"[..]));
    assert_eq!(
        cfg.client_key_pem.as_deref(),
        Some(&b"-----BEGIN CERTIFICATE-----\n"[..])
    );
    assert_eq!(cfg.token_file, Some(d.join("t")));
    let cfg = load(Some(&d.join("config")), Some("https://lb:443")).unwrap();
    assert_eq!(cfg.server, "https://lb:443");
    // Several: the kubeconfig's credentials and CA apply to each; the first is the primary.
    let cfg = load(
        Some(&d.join("config")),
        Some("https://cp1:6443,https://cp2:6443"),
    )
    .unwrap();
    assert_eq!(cfg.server, "https://cp1:6443");
    assert_eq!(cfg.server_list(), ["https://cp1:6443", "https://cp2:6443"]);
    assert_eq!(cfg.ca_pem.as_deref(), Some(&b"CA"[..]));
    assert_eq!(cfg.token_file, Some(d.join("t")));
    assert!(
        !format!("{cfg:?}").contains("BEGIN"),
        "Debug must not print key material"
    );

    // A referenced file that does not exist: error names the kubeconfig and the file.
    std::fs::remove_file(d.join("ca.crt")).unwrap();
    let err = load(Some(&d.join("config")), None).unwrap_err().to_string();
    assert!(err.contains("config") && err.contains("ca.crt"), "{err}");
    let err = load(Some(&d.join("missing")), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing"), "{err}");
    std::fs::write(d.join("bin"), [0xffu8, 0xfe, 0]).unwrap();
    assert!(load(Some(&d.join("bin")), None)
        .unwrap_err()
        .to_string()
        .contains("UTF-8"));
}

#[test]
fn master_alone_has_no_credentials() {
    let cfg = load(None, Some("http://127.0.0.1:8080")).unwrap();
    assert_eq!(
        cfg,
        UpstreamConfig {
            server: "http://127.0.0.1:8080".into(),
            servers: vec!["http://127.0.0.1:8080".into()],
            ..Default::default()
        }
    );
    let cfg = load(None, Some("http://127.0.0.1:8080,https://cp2:6443")).unwrap();
    assert_eq!(
        cfg.server, "http://127.0.0.1:8080",
        "the first is the primary"
    );
    assert_eq!(
        cfg.server_list(),
        ["http://127.0.0.1:8080", "https://cp2:6443"]
    );
    // A config built by hand (tests, edge-health) has no list: the server alone.
    let bare = UpstreamConfig {
        server: "https://x".into(),
        ..Default::default()
    };
    assert_eq!(bare.server_list(), ["https://x"]);
}

#[test]
fn in_cluster_uses_env_and_service_account() {
    let d = tmp("sa");
    std::fs::write(d.join("token"), "tok").unwrap();
    std::fs::write(d.join("ca.crt"), "CA").unwrap();
    let env = |k: &str| match k {
        "KUBERNETES_SERVICE_HOST" => Some("fd00::1".to_string()),
        "KUBERNETES_SERVICE_PORT" => Some("443".to_string()),
        _ => None,
    };
    let cfg = in_cluster(&env, &d).unwrap();
    assert_eq!(cfg.server, "https://[fd00::1]:443");
    assert_eq!(cfg.server_list(), ["https://[fd00::1]:443"]);
    assert_eq!(cfg.token_file, Some(d.join("token")));
    assert_eq!(cfg.token, None);
    assert_eq!(cfg.ca_pem.as_deref(), Some(&b"CA"[..]));

    assert!(matches!(
        in_cluster(&|_| None, &d),
        Err(KubeconfigError::NotInCluster(_))
    ));
    let bad_port = |k: &str| {
        Some(if k.ends_with("PORT") {
            "https".into()
        } else {
            "h".into()
        })
    };
    assert!(in_cluster(&bad_port, &d)
        .unwrap_err()
        .to_string()
        .contains("KUBERNETES_SERVICE_PORT"));
    std::fs::remove_file(d.join("token")).unwrap();
    assert!(in_cluster(&env, &d)
        .unwrap_err()
        .to_string()
        .contains("token"));
}

#[test]
fn relay_kubeconfig_errors_are_one_clear_line_and_never_fall_back_to_in_cluster() {
    // No relay kubeconfig: no relays (never the in-cluster settings).
    assert!(load_relays(None, None).unwrap().is_none());
    let d = tmp("relays");
    for (name, text) in [
        ("missing", None),
        ("garbage", Some(": : [ not yaml")),
        ("empty", Some("")),
        (
            "no-server",
            Some("apiVersion: v1\nkind: Config\nclusters: []\n"),
        ),
    ] {
        let path = d.join(name);
        if let Some(text) = text {
            std::fs::write(&path, text).unwrap();
        }
        let e = load_relays(Some(&path), Some("https://r1:51010")).unwrap_err();
        let msg = e.to_string();
        assert!(!msg.is_empty() && !msg.contains('\n'), "{name}: {msg:?}");
    }
    // A good one: the servers override its server, its credentials are its own.
    std::fs::write(d.join("ca.crt"), "CA").unwrap();
    let y = good(
        &format!("    client-certificate-data: {B64_PEM}\n    client-key-data: {B64_PEM}\n"),
        "    certificate-authority: ca.crt\n",
    );
    std::fs::write(d.join("relays"), y).unwrap();
    let cfg = load_relays(
        Some(&d.join("relays")),
        Some("https://r1:51010,https://r2:51010"),
    )
    .unwrap()
    .expect("relays");
    assert_eq!(cfg.server_list(), ["https://r1:51010", "https://r2:51010"]);
    assert_eq!(cfg.ca_pem.as_deref(), Some(&b"CA"[..]));
    assert!(cfg.token.is_none() && cfg.token_file.is_none());
}
