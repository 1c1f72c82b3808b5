//! Upstream connection settings: a kubeconfig (current-context → cluster + user), `--master`, or
//! the in-cluster ServiceAccount. [`parse`] is pure (YAML text → [`Kubeconfig`], paths joined to the
//! kubeconfig's directory but not read); [`load`] reads the files and yields an
//! [`UpstreamConfig`]. Every malformed input is a [`KubeconfigError`] naming the file or field.

use base64::Engine as _;
use std::fmt;
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

/// Largest kubeconfig (or certificate/key/token file) read.
pub const MAX_KUBECONFIG_BYTES: u64 = 4 * 1024 * 1024;
/// In-cluster ServiceAccount directory.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Everything the upstream client needs for one side (the cloud upstream, or the site relays),
/// files already read (except the token file, which the client re-reads periodically). The
/// credentials and TLS settings apply to every server of this side, never to the other's.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// Base URL of the primary (first, preferred) server, e.g. `https://10.0.0.1:6443` (may
    /// carry a path prefix). It alone names the upstream in logs (the `--cache-dir` snapshot
    /// identity takes every server, as a set).
    pub server: String,
    /// Every server in order of preference, `server` first (`--master=A,B,…`); empty means
    /// `server` alone (see [`UpstreamConfig::server_list`]). All of them serve one cluster.
    pub servers: Vec<String>,
    /// PEM bundle of trusted CAs; `None` means the system bundle.
    pub ca_pem: Option<Vec<u8>>,
    /// Skip server certificate verification (kubeconfig `insecure-skip-tls-verify`).
    pub insecure_skip_tls_verify: bool,
    /// Static bearer token.
    pub token: Option<String>,
    /// Bearer token file, re-read periodically; wins over `token` when readable.
    pub token_file: Option<PathBuf>,
    /// PEM client certificate chain.
    pub client_cert_pem: Option<Vec<u8>>,
    /// PEM client private key.
    pub client_key_pem: Option<Vec<u8>>,
}

impl fmt::Debug for UpstreamConfig {
    /// Never prints secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamConfig")
            .field("server", &self.server)
            .field("servers", &self.servers)
            .field("ca_pem", &self.ca_pem.as_ref().map(|_| "<pem>"))
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_file", &self.token_file)
            .field(
                "client_cert_pem",
                &self.client_cert_pem.as_ref().map(|_| "<pem>"),
            )
            .field(
                "client_key_pem",
                &self.client_key_pem.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl UpstreamConfig {
    /// The servers in order of preference: [`UpstreamConfig::servers`], or `server` alone when
    /// that list is empty.
    pub fn server_list(&self) -> Vec<&str> {
        if self.servers.is_empty() {
            vec![self.server.as_str()]
        } else {
            self.servers.iter().map(String::as_str).collect()
        }
    }
}

/// Splits `--master` (`A` or `A,B,…`; empty items dropped) into its URLs, preferred first.
pub fn split_masters(master: &str) -> Vec<String> {
    master
        .split(',')
        .filter(|m| !m.is_empty())
        .map(str::to_string)
        .collect()
}

/// The parts of a kubeconfig grid-wrapper uses, as written: `*-data` decoded, paths joined to
/// the kubeconfig's directory but not read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Kubeconfig {
    /// `cluster.server`.
    pub server: String,
    /// `cluster.certificate-authority`.
    pub certificate_authority: Option<PathBuf>,
    /// `cluster.certificate-authority-data` (decoded PEM); wins over the path.
    pub certificate_authority_data: Option<Vec<u8>>,
    /// `cluster.insecure-skip-tls-verify`.
    pub insecure_skip_tls_verify: bool,
    /// `user.token`.
    pub token: Option<String>,
    /// `user.tokenFile`.
    pub token_file: Option<PathBuf>,
    /// `user.client-certificate`.
    pub client_certificate: Option<PathBuf>,
    /// `user.client-certificate-data` (decoded PEM); wins over the path.
    pub client_certificate_data: Option<Vec<u8>>,
    /// `user.client-key`.
    pub client_key: Option<PathBuf>,
    /// `user.client-key-data` (decoded PEM); wins over the path.
    pub client_key_data: Option<Vec<u8>>,
}

/// Why the upstream settings could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum KubeconfigError {
    /// A file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file is larger than [`MAX_KUBECONFIG_BYTES`].
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// Not YAML, or not UTF-8.
    Yaml(String),
    /// A field is missing, has the wrong type or an unusable value.
    Field {
        /// Dotted location, e.g. `users[admin].client-key-data`.
        field: String,
        /// What is wrong.
        problem: String,
    },
    /// Neither kubeconfig nor master given and not running in a cluster.
    NotInCluster(&'static str),
    /// The kubeconfig (with its path) failed: wraps the inner error.
    In {
        /// The kubeconfig file.
        path: PathBuf,
        /// What went wrong inside it.
        inner: Box<KubeconfigError>,
    },
}

impl fmt::Display for KubeconfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeconfigError::Read { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            KubeconfigError::TooLarge { path } => {
                write!(
                    f,
                    "{} is larger than {MAX_KUBECONFIG_BYTES} bytes",
                    path.display()
                )
            }
            KubeconfigError::Yaml(e) => write!(f, "invalid YAML: {e}"),
            KubeconfigError::Field { field, problem } => write!(f, "{field}: {problem}"),
            KubeconfigError::NotInCluster(why) => write!(
                f,
                "no --kubeconfig or --master given and not running in a cluster ({why})"
            ),
            KubeconfigError::In { path, inner } => {
                write!(f, "kubeconfig {}: {inner}", path.display())
            }
        }
    }
}

impl std::error::Error for KubeconfigError {}

fn field_err(field: impl Into<String>, problem: impl Into<String>) -> KubeconfigError {
    KubeconfigError::Field {
        field: field.into(),
        problem: problem.into(),
    }
}

/// A scalar as text (YAML may type `name: 1` as an integer).
fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// An optional string field: absent/null → `None`, non-scalar → error.
fn opt_str(map: &Yaml, key: &str, at: &str) -> Result<Option<String>, KubeconfigError> {
    match &map[key] {
        Yaml::BadValue | Yaml::Null => Ok(None),
        y => match scalar(y) {
            Some(s) if s.is_empty() => Ok(None),
            Some(s) => Ok(Some(s)),
            None => Err(field_err(format!("{at}.{key}"), "must be a string")),
        },
    }
}

fn opt_path(
    map: &Yaml,
    key: &str,
    at: &str,
    base: &Path,
) -> Result<Option<PathBuf>, KubeconfigError> {
    Ok(opt_str(map, key, at)?.map(|p| base.join(p)))
}

fn opt_b64(map: &Yaml, key: &str, at: &str) -> Result<Option<Vec<u8>>, KubeconfigError> {
    let Some(text) = opt_str(map, key, at)? else {
        return Ok(None);
    };
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map(Some)
        .map_err(|e| field_err(format!("{at}.{key}"), format!("invalid base64: {e}")))
}

/// Finds `name` in a list of `{name: …, <inner>: {…}}` entries and returns the inner map.
fn named<'a>(
    doc: &'a Yaml,
    list: &str,
    inner: &str,
    name: &str,
) -> Result<&'a Yaml, KubeconfigError> {
    let entries = match &doc[list] {
        Yaml::Array(a) => a.as_slice(),
        Yaml::BadValue | Yaml::Null => &[],
        _ => return Err(field_err(list, "must be a list")),
    };
    let entry = entries
        .iter()
        .find(|e| scalar(&e["name"]).as_deref() == Some(name))
        .ok_or_else(|| field_err(format!("{list}[{name}]"), "not found"))?;
    match &entry[inner] {
        m @ Yaml::Hash(_) => Ok(m),
        _ => Err(field_err(
            format!("{list}[{name}].{inner}"),
            "missing or not a mapping",
        )),
    }
}

/// Parses kubeconfig YAML text, following `current-context`. Relative paths are joined to
/// `base_dir` (the kubeconfig's directory); no file is read.
pub fn parse(yaml: &str, base_dir: &Path) -> Result<Kubeconfig, KubeconfigError> {
    let docs = YamlLoader::load_from_str(yaml).map_err(|e| KubeconfigError::Yaml(e.to_string()))?;
    let doc = match docs.first() {
        Some(d @ Yaml::Hash(_)) => d,
        _ => {
            return Err(KubeconfigError::Yaml(
                "the document is not a mapping".into(),
            ))
        }
    };
    let current = opt_str(doc, "current-context", "")?
        .ok_or_else(|| field_err("current-context", "missing or empty"))?;
    let context = named(doc, "contexts", "context", &current)?;
    let ctx_at = format!("contexts[{current}].context");
    let cluster_name = opt_str(context, "cluster", &ctx_at)?
        .ok_or_else(|| field_err(format!("{ctx_at}.cluster"), "missing or empty"))?;
    let cluster = named(doc, "clusters", "cluster", &cluster_name)?;
    let cl_at = format!("clusters[{cluster_name}].cluster");
    let server = opt_str(cluster, "server", &cl_at)?
        .ok_or_else(|| field_err(format!("{cl_at}.server"), "missing or empty"))?;
    let insecure = match &cluster["insecure-skip-tls-verify"] {
        Yaml::BadValue | Yaml::Null => false,
        Yaml::Boolean(b) => *b,
        Yaml::String(s) if s == "true" || s == "false" => s == "true",
        _ => {
            return Err(field_err(
                format!("{cl_at}.insecure-skip-tls-verify"),
                "must be true or false",
            ))
        }
    };
    let mut kc = Kubeconfig {
        server,
        certificate_authority: opt_path(cluster, "certificate-authority", &cl_at, base_dir)?,
        certificate_authority_data: opt_b64(cluster, "certificate-authority-data", &cl_at)?,
        insecure_skip_tls_verify: insecure,
        ..Kubeconfig::default()
    };
    // A context without a user means anonymous access.
    let Some(user_name) = opt_str(context, "user", &ctx_at)? else {
        return Ok(kc);
    };
    let user = named(doc, "users", "user", &user_name)?;
    let us_at = format!("users[{user_name}].user");
    for unsupported in ["exec", "auth-provider"] {
        if !user[unsupported].is_badvalue() && !user[unsupported].is_null() {
            return Err(field_err(format!("{us_at}.{unsupported}"), "credential plugins are not supported; use a token, tokenFile or client certificate"));
        }
    }
    kc.token = opt_str(user, "token", &us_at)?;
    kc.token_file = opt_path(user, "tokenFile", &us_at, base_dir)?;
    kc.client_certificate = opt_path(user, "client-certificate", &us_at, base_dir)?;
    kc.client_certificate_data = opt_b64(user, "client-certificate-data", &us_at)?;
    kc.client_key = opt_path(user, "client-key", &us_at, base_dir)?;
    kc.client_key_data = opt_b64(user, "client-key-data", &us_at)?;
    let has_cert = kc.client_certificate.is_some() || kc.client_certificate_data.is_some();
    let has_key = kc.client_key.is_some() || kc.client_key_data.is_some();
    if has_cert != has_key {
        return Err(field_err(
            us_at,
            "client-certificate and client-key must be given together",
        ));
    }
    Ok(kc)
}

/// Reads a file of at most [`MAX_KUBECONFIG_BYTES`].
pub(crate) fn read_bounded(path: &Path) -> Result<Vec<u8>, KubeconfigError> {
    use std::io::Read as _;
    let read_err = |source| KubeconfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut buf = Vec::new();
    file.take(MAX_KUBECONFIG_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(read_err)?;
    if buf.len() as u64 > MAX_KUBECONFIG_BYTES {
        return Err(KubeconfigError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    Ok(buf)
}

fn data_or_file(
    data: Option<Vec<u8>>,
    file: Option<PathBuf>,
) -> Result<Option<Vec<u8>>, KubeconfigError> {
    match (data, file) {
        (Some(d), _) => Ok(Some(d)),
        (None, Some(p)) => read_bounded(&p).map(Some),
        (None, None) => Ok(None),
    }
}

/// Reads a parsed kubeconfig's files into an [`UpstreamConfig`]; `master` (one URL, or several
/// comma-separated) overrides `server`.
pub fn resolve(kc: Kubeconfig, master: Option<&str>) -> Result<UpstreamConfig, KubeconfigError> {
    let servers = match master.map(split_masters) {
        Some(list) if !list.is_empty() => list,
        _ => vec![kc.server],
    };
    Ok(UpstreamConfig {
        server: servers.first().cloned().unwrap_or_default(),
        servers,
        ca_pem: data_or_file(kc.certificate_authority_data, kc.certificate_authority)?,
        insecure_skip_tls_verify: kc.insecure_skip_tls_verify,
        token: kc.token,
        token_file: kc.token_file,
        client_cert_pem: data_or_file(kc.client_certificate_data, kc.client_certificate)?,
        client_key_pem: data_or_file(kc.client_key_data, kc.client_key)?,
    })
}

/// In-cluster settings from `KUBERNETES_SERVICE_HOST`/`_PORT` (via `env`) and the ServiceAccount
/// directory `sa_dir` (token re-read from its `token` file, CA from `ca.crt`).
pub fn in_cluster(
    env: &dyn Fn(&str) -> Option<String>,
    sa_dir: &Path,
) -> Result<UpstreamConfig, KubeconfigError> {
    let host = env("KUBERNETES_SERVICE_HOST").filter(|h| !h.is_empty());
    let port = env("KUBERNETES_SERVICE_PORT").filter(|p| !p.is_empty());
    let (Some(host), Some(port)) = (host, port) else {
        return Err(KubeconfigError::NotInCluster(
            "KUBERNETES_SERVICE_HOST/PORT unset",
        ));
    };
    if port.parse::<u16>().is_err() {
        return Err(field_err(
            "KUBERNETES_SERVICE_PORT",
            format!("{port:?} is not a port"),
        ));
    }
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    let token_file = sa_dir.join("token");
    // Fail early (and clearly) if the token is unreadable; the client re-reads it later.
    read_bounded(&token_file)?;
    let server = format!("https://{host}:{port}");
    Ok(UpstreamConfig {
        servers: vec![server.clone()],
        server,
        ca_pem: Some(read_bounded(&sa_dir.join("ca.crt"))?),
        token_file: Some(token_file),
        ..UpstreamConfig::default()
    })
}

/// Builds the upstream settings the way `clientcmd.BuildConfigFromFlags` does: a kubeconfig
/// (with `master` overriding its server), else `master` alone without credentials, else
/// in-cluster. `master` may list several servers, comma-separated, preferred first (see
/// [`split_masters`]); they share the kubeconfig's credentials and TLS settings.
pub fn load(
    kubeconfig: Option<&Path>,
    master: Option<&str>,
) -> Result<UpstreamConfig, KubeconfigError> {
    let master = master.filter(|m| !m.is_empty());
    match (kubeconfig, master) {
        (Some(path), _) => {
            let wrap = |inner| KubeconfigError::In {
                path: path.to_path_buf(),
                inner: Box::new(inner),
            };
            let bytes = read_bounded(path)?;
            let text = std::str::from_utf8(&bytes)
                .map_err(|_| wrap(KubeconfigError::Yaml("not UTF-8".into())))?;
            let base = path.parent().unwrap_or(Path::new("."));
            let kc = parse(text, base).map_err(wrap)?;
            resolve(kc, master).map_err(wrap)
        }
        (None, Some(m)) => {
            let servers = split_masters(m);
            Ok(UpstreamConfig {
                server: servers.first().cloned().unwrap_or_default(),
                servers,
                ..UpstreamConfig::default()
            })
        }
        (None, None) => in_cluster(&|k| std::env::var(k).ok(), Path::new(SERVICE_ACCOUNT_DIR)),
    }
}

/// The site relays' settings (`--relay-kubeconfig`, `--relay-servers`): the kubeconfig's CA,
/// client certificate and token, its server or `servers` (comma-separated, preferred first)
/// overriding it. `None` without a relay kubeconfig. Never in-cluster: a relay's credentials
/// are its kubeconfig's alone.
pub fn load_relays(
    kubeconfig: Option<&Path>,
    servers: Option<&str>,
) -> Result<Option<UpstreamConfig>, KubeconfigError> {
    kubeconfig.map(|path| load(Some(path), servers)).transpose()
}

#[cfg(test)]
#[path = "kubeconfig_tests.rs"]
mod tests;
