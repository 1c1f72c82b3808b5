//! A throwaway test PKI made with the `openssl` CLI: a CA, a server certificate for
//! 127.0.0.1, a client certificate, and an unrelated CA with a client certificate of its own;
//! plus a ureq client that trusts the CA and presents the client certificate. Shared by the
//! HTTPS tests: generated once per test binary, copied into each test's own directory.

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use super::{find_in_path, run_bounded, Sim, TempDir};

/// One file of the certificate set: its name and contents.
type SetFile = (std::ffi::OsString, Vec<u8>);

/// Limit for one openssl run.
pub const OPENSSL_TIMEOUT: Duration = Duration::from_secs(15);
/// A test PKI in a temporary directory: CA, server cert for 127.0.0.1, client cert, and an
/// unrelated CA that signed only `other-client.crt`.
pub struct Pki {
    /// The directory holding every file.
    pub dir: TempDir,
}

impl Pki {
    pub fn path(&self, name: &str) -> String {
        self.dir.file(name)
    }

    pub fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).expect("read generated file")
    }

    /// A copy of the test binary's certificate set in a directory of this test's own (which it
    /// may add files to or overwrite): the set is generated once per test binary with the
    /// `openssl` CLI, its files kept in memory. `None` (reason printed) when openssl is missing
    /// or fails.
    pub fn generate() -> Option<Pki> {
        static SET: OnceLock<Option<Vec<SetFile>>> = OnceLock::new();
        let Some(files) = SET.get_or_init(Pki::generate_files) else {
            println!("skipping: no test certificates (openssl missing or failing, printed once)");
            return None;
        };
        let pki = Pki {
            dir: TempDir::new("tls"),
        };
        for (name, bytes) in files {
            std::fs::write(pki.dir.path.join(name), bytes).expect("write a certificate file");
        }
        Some(pki)
    }

    /// Every file of a fresh set, read back (its directory is removed).
    fn generate_files() -> Option<Vec<SetFile>> {
        let pki = Pki::generate_with_openssl()?;
        let dir = std::fs::read_dir(&pki.dir.path).expect("read the certificate directory");
        let files = dir
            .map(|e| {
                let e = e.expect("a directory entry");
                (e.file_name(), std::fs::read(e.path()).expect("read a file"))
            })
            .collect();
        Some(files)
    }

    /// Generates everything with the `openssl` CLI; `None` (reason printed) when openssl is
    /// missing or fails.
    fn generate_with_openssl() -> Option<Pki> {
        let Some(openssl) = find_in_path("openssl") else {
            println!("skipping: openssl not found on PATH");
            return None;
        };
        let pki = Pki {
            dir: TempDir::new("tls"),
        };
        let cnf = "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n\
                   [v3_ca]\nbasicConstraints = critical,CA:TRUE\n\
                   keyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n";
        let files = [
            ("openssl.cnf", cnf),
            (
                "server.ext",
                "subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n\
                 keyUsage = critical,digitalSignature,keyEncipherment\nextendedKeyUsage = serverAuth\n",
            ),
            (
                "client.ext",
                "basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature\n\
                 extendedKeyUsage = clientAuth\n",
            ),
        ];
        for (name, text) in files {
            std::fs::write(pki.path(name), text).expect("write openssl input");
        }
        let cnf = pki.path("openssl.cnf");
        let mut steps: Vec<Vec<String>> = Vec::new();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        for key in ["ca", "other-ca", "server", "client", "other-client"] {
            steps.push(s(&[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
                &pki.path(&format!("{key}.key")),
            ]));
        }
        for (ca, cn) in [("ca", "grid-wrapper test CA"), ("other-ca", "unrelated CA")] {
            steps.push(s(&[
                "req",
                "-x509",
                "-new",
                "-config",
                &cnf,
                "-extensions",
                "v3_ca",
                "-key",
                &pki.path(&format!("{ca}.key")),
                "-subj",
                &format!("/CN={cn}"),
                "-days",
                "2",
                "-out",
                &pki.path(&format!("{ca}.crt")),
            ]));
        }
        for (leaf, cn, ca, serial) in [
            ("server", "127.0.0.1", "ca", "2"),
            ("client", "grid-wrapper", "ca", "3"),
            ("other-client", "grid-wrapper", "other-ca", "4"),
        ] {
            let ext = if leaf == "server" { "server" } else { "client" };
            steps.push(s(&[
                "req",
                "-new",
                "-config",
                &cnf,
                "-key",
                &pki.path(&format!("{leaf}.key")),
                "-subj",
                &format!("/CN={cn}"),
                "-out",
                &pki.path(&format!("{leaf}.csr")),
            ]));
            steps.push(s(&[
                "x509",
                "-req",
                "-in",
                &pki.path(&format!("{leaf}.csr")),
                "-CA",
                &pki.path(&format!("{ca}.crt")),
                "-CAkey",
                &pki.path(&format!("{ca}.key")),
                "-set_serial",
                serial,
                "-days",
                "2",
                "-extfile",
                &pki.path(&format!("{ext}.ext")),
                "-out",
                &pki.path(&format!("{leaf}.crt")),
            ]));
        }
        for args in steps {
            let out = run_bounded(
                Command::new(&openssl)
                    .args(&args)
                    .current_dir(&pki.dir.path),
                OPENSSL_TIMEOUT,
            );
            match out {
                Some(o) if o.ok() => {}
                Some(o) => {
                    println!("skipping: openssl {args:?} failed: {}", o.stderr_text());
                    return None;
                }
                None => {
                    println!("skipping: openssl {args:?} timed out");
                    return None;
                }
            }
        }
        Some(pki)
    }

    /// Starts the sim over TLS requiring a client certificate (and `token` if given).
    pub fn sim(&self, token: Option<&str>) -> Sim {
        self.sim_with(token, &[])
    }

    /// Starts the sim over TLS as an apiserver with `--client-ca-file`: a client certificate of
    /// the test CA is verified when given but not required, and authenticates a request as
    /// `token` (if given) does.
    pub fn apiserver(&self, token: Option<&str>) -> Sim {
        self.sim_with(token, &["--client-cert-optional"])
    }

    fn sim_with(&self, token: Option<&str>, extra: &[&str]) -> Sim {
        let (cert, key, ca) = (
            self.path("server.crt"),
            self.path("server.key"),
            self.path("ca.crt"),
        );
        let mut args = vec!["--tls-cert", &cert, "--tls-key", &key, "--client-ca", &ca];
        args.extend(extra);
        if let Some(t) = token {
            args.extend(["--token", t]);
        }
        let sim = Sim::start(&args);
        assert!(sim.url.starts_with("https://"), "TLS sim URL {}", sim.url);
        sim
    }

    /// A ureq agent that trusts only the CA in file `ca` and presents no client certificate.
    /// It keeps no idle connections: every request makes a new TLS handshake.
    pub fn agent_trusting(&self, ca: &str) -> ureq::Agent {
        use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};
        let ca = Certificate::from_pem(&self.read(ca)).expect("CA PEM");
        let tls = TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(std::sync::Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .root_certs(RootCerts::new_with_certs(&[ca]))
            .build();
        ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .build()
            .new_agent()
    }

    /// A ureq agent trusting the test CA and presenting the client certificate.
    pub fn agent(&self) -> ureq::Agent {
        self.agent_as("client")
    }

    /// A ureq agent trusting the test CA and presenting the certificate `<client>.crt`.
    pub fn agent_as(&self, client: &str) -> ureq::Agent {
        use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig, TlsProvider};
        let ca = Certificate::from_pem(&self.read("ca.crt")).expect("CA PEM");
        let cert = Certificate::from_pem(&self.read(&format!("{client}.crt"))).expect("client PEM");
        let key =
            PrivateKey::from_pem(&self.read(&format!("{client}.key"))).expect("client key PEM");
        let tls = TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(std::sync::Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .root_certs(RootCerts::new_with_certs(&[ca]))
            .client_cert(Some(ClientCert::new_with_certs(&[cert], key)))
            .build();
        ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .new_agent()
    }

    /// `GET /sim/requests` over TLS: the requests the sim recorded (proxied ones).
    pub fn recorded(&self, sim: &Sim) -> Vec<Value> {
        let mut resp = self
            .agent()
            .get(format!("{}/sim/requests", sim.url))
            .call()
            .expect("GET /sim/requests over TLS");
        assert_eq!(resp.status().as_u16(), 200, "/sim/requests");
        let body = resp
            .body_mut()
            .with_config()
            .limit(16 * 1024 * 1024)
            .read_to_vec()
            .expect("read /sim/requests");
        serde_json::from_slice(&body).expect("recorded requests JSON")
    }

    /// Writes a kubeconfig for `server`; `creds` are the `user:` lines (indented 4).
    pub fn kubeconfig(&self, name: &str, server: &str, cluster: &str, creds: &str) -> String {
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: edge\n\
             contexts:\n- name: edge\n  context:\n    cluster: sim\n    user: wrapper\n\
             clusters:\n- name: sim\n  cluster:\n    server: {server}\n{cluster}\
             users:\n- name: wrapper\n  user:\n{creds}"
        );
        let path = self.path(name);
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    pub fn b64(&self, name: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.read(name))
    }
}
