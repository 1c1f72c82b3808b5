//! Command-line flags (README.md, "Flags"): the original's names and defaults plus the new
//! binary's additions, parsed and validated into a [`Config`]. Pure: no file is opened and no
//! address is resolved here; `main` does that with the result.
//!
//! The flag syntax is Go pflag's, which the original used and its manifests rely on:
//! `--flag=value` or `--flag value`; boolean flags are `--flag` or `--flag=<bool>` and never take
//! the next argument; `_` and `-` are interchangeable in names (`cliflag.WordSepNormalizeFunc`);
//! a repeated flag keeps its last value; `-v N`, `-vN`, `-v=N` and `--v=N` set the verbosity.
//! This scanner is written in std rather than on pico-args: pico-args treats any argument equal
//! to a flag name as that flag even in value position, rejects `--flag=` (empty values, which
//! pflag accepts) and cannot normalize `_`, so it would not accept what the original accepted.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use check::{check_url, parse_go_bool};
use flags::{invalid, lookup, set_value, split_flag, Id};

/// Default `--kube-qps`.
pub const DEFAULT_KUBE_QPS: f64 = 1000.0;
/// Default `--kube-burst`.
pub const DEFAULT_KUBE_BURST: u32 = 1000;
/// Default `--bind-address` (kube-proxy's `server:` is rewritten to `http://127.0.0.1:51006`).
pub const DEFAULT_BIND_ADDRESS: &str = "localhost:51006";
/// Default `--metrics-bind-address` (health, readiness and metrics endpoints).
pub const DEFAULT_METRICS_BIND_ADDRESS: &str = "127.0.0.1:51007";
/// Default `--cache-write-interval`: a snapshot is a full write of the cache, which grows with
/// the cluster; at most one per 30 s bounds flash wear and CPU under constant churn (the cost
/// of a write is in BENCHMARKS.md).
pub const DEFAULT_CACHE_WRITE_INTERVAL_SECS: u64 = 30;
/// Default `--notify-channel-size`.
pub const DEFAULT_NOTIFY_CHANNEL_SIZE: usize = 100;
/// Largest accepted `--notify-channel-size` (per-watcher queue bound and history length).
pub const MAX_NOTIFY_CHANNEL_SIZE: usize = 1_000_000;
/// Default `--max-object-bytes`: well above etcd's 1.5 MiB request limit, so only an object
/// no apiserver backed by a default etcd could hold is refused.
pub const DEFAULT_MAX_OBJECT_BYTES: u64 = 4 * 1024 * 1024;
/// Smallest accepted `--max-object-bytes`.
pub const MIN_MAX_OBJECT_BYTES: u64 = 64 * 1024;
/// Largest accepted `--max-object-bytes`.
pub const MAX_MAX_OBJECT_BYTES: u64 = 256 * 1024 * 1024;
/// Default `--max-list-items`: the objects one list may bring into the cache, derived from the
/// memory limit `deploy/daemonset.yaml` ships (128Mi): what is left of it beside the cache of
/// the cluster size it is sized for (scale S, BENCHMARKS.md), divided by the memory one object
/// holds at scale (RSS after sync ÷ objects at ×10); docs/SEMANTICS.md §7 has the figures. A
/// list past it could not be held within that limit: it is refused instead of taking the
/// process with it.
pub const DEFAULT_MAX_LIST_ITEMS: u64 = 40_000;
/// Largest accepted `--max-list-items`.
pub const MAX_MAX_LIST_ITEMS: u64 = 100_000_000;
/// Default `--relay-max-connections`. A follower holds one connection per watched resource
/// plus a few for lists and proxied requests (about six), so this serves a site of about 170
/// followers; with the kube-proxy port's budget and the metrics port's it stays far inside the
/// process's descriptor limit. A bigger site raises it (docs/SEMANTICS.md §12.1).
pub const DEFAULT_RELAY_MAX_CONNECTIONS: usize = 1024;
/// Default `--relay-max-connections-per-source`: room for a NAT address in front of a dozen or
/// so followers (or a load test's hundred watches from one host), while one address holds at
/// most an eighth of the default budget.
pub const DEFAULT_RELAY_MAX_PER_SOURCE: usize = 128;
/// Default `--relay-connection-rate-per-source`, new relay connections a second from one source
/// once it has spent its burst (twice its `--relay-max-connections-per-source`): a follower opens
/// about six connections at its start and as many again after a relay restart, within the burst,
/// and then one now and then (a watch that ended, a proxied request), while a source reopening
/// connections as fast as they are closed is held to this rate (docs/SEMANTICS.md §12.1).
pub const DEFAULT_RELAY_CONNECTION_RATE: u32 = 10;
/// Largest accepted `--relay-connection-rate-per-source`.
pub const MAX_RELAY_CONNECTION_RATE: u32 = 65_536;
/// Largest accepted `--relay-max-connections` and `--relay-max-connections-per-source`.
pub const MAX_RELAY_CONNECTIONS: usize = 65_536;
/// Default `--list-progress-timeout`, seconds.
pub const DEFAULT_LIST_PROGRESS_TIMEOUT_SECS: u64 = 60;
/// Default `--watch-progress-timeout`, seconds: twice the apiserver's bookmark interval (one
/// minute), so one late bookmark never ends a healthy watch.
pub const DEFAULT_WATCH_PROGRESS_TIMEOUT_SECS: u64 = 120;
/// Default `--container-runtime-poll-interval`, seconds.
pub const DEFAULT_RUNTIME_POLL_INTERVAL_SECS: u64 = 5;
/// Default `--container-runtime-request-timeout`, seconds: one poll's deadline, all its CRI
/// calls together.
pub const DEFAULT_RUNTIME_REQUEST_TIMEOUT_SECS: u64 = 10;
/// Default `--watch-stall-timeout`, seconds: a served watch whose client reads nothing for this
/// long while events wait for it is ended (docs/SEMANTICS.md §6). A client-go reflector reads
/// its stream whatever its handlers do (they are fed through an unbounded queue), so only a
/// stopped or wedged client stays unread for two minutes.
pub const DEFAULT_WATCH_STALL_TIMEOUT_SECS: u64 = 120;
/// [`DEFAULT_WATCH_STALL_TIMEOUT_SECS`] as a duration.
pub const DEFAULT_WATCH_STALL_TIMEOUT: std::time::Duration =
    std::time::Duration::from_secs(DEFAULT_WATCH_STALL_TIMEOUT_SECS);
/// Largest accepted `-v` level.
pub const MAX_VERBOSITY: u8 = 10;
/// Default `--service-autonomy-enhancement`.
pub const DEFAULT_AUTONOMY: &str =
    "enabled=false,address=http://localhost:51005/localinfo,interval=30";
/// Default edge-health address of [`Autonomy`].
pub const DEFAULT_AUTONOMY_ADDRESS: &str = "http://localhost:51005/localinfo";
/// Default edge-health poll interval of [`Autonomy`], seconds.
pub const DEFAULT_AUTONOMY_INTERVAL_SECS: u64 = 30;

/// The validated command line of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `--kube-qps`: upstream client requests per second (> 0).
    pub kube_qps: f64,
    /// `--kube-burst`: upstream client burst (≥ 1).
    pub kube_burst: u32,
    /// `--kubeconfig`: upstream kubeconfig; `None` = in-cluster configuration.
    pub kubeconfig: Option<PathBuf>,
    /// `--master`: upstream URL overriding the kubeconfig's `server:` (http:// or https://), or
    /// several, comma-separated, in order of preference (validated: no empty item, no server
    /// twice, at most 8); `upstream::kubeconfig::load` splits it, the first is the primary.
    pub master: Option<String>,
    // Following site relays (issue 27).
    /// `--relay-kubeconfig`: kubeconfig of the site relays (their CA, this node's client
    /// certificate and key, maybe a token); its `server:` is the first relay. `None` = no relay.
    pub relay_kubeconfig: Option<PathBuf>,
    /// `--relay-servers`: relay URLs in order of preference, overriding the relay kubeconfig's
    /// server (validated as `--master`); requires `--relay-kubeconfig`.
    pub relay_servers: Option<String>,
    // End of following site relays.
    /// `--bind-address`: `host:port` to serve kube-proxy on.
    pub bind_address: String,
    /// `--insecure`: plain HTTP; `false` = TLS with `cert_file` / `key_file`.
    pub insecure: bool,
    /// `--cert-file`: serving certificate (PEM).
    pub cert_file: Option<PathBuf>,
    /// `--key-file`: serving key (PEM).
    pub key_file: Option<PathBuf>,
    /// `--ca-file`: CA that verifies kube-proxy client certificates (TLS mode).
    pub ca_file: Option<PathBuf>,
    /// `--hostname`: the local node's name (never empty).
    pub hostname: String,
    /// `--wrapper-in-cluster`: rewrite `default/kubernetes` endpoints to the local apiserver.
    pub wrapper_in_cluster: bool,
    /// `--notify-channel-size`: per-watcher queue capacity and minimum history per resource.
    pub notify_channel_size: usize,
    /// `--not-ready-hold-seconds`: how long a cache-backed request waits for the first sync.
    pub not_ready_hold_secs: u64,
    /// `--debug`: serve debug/profiling endpoints.
    pub debug: bool,
    /// `--service-autonomy-enhancement`.
    pub autonomy: Autonomy,
    /// `--metrics-bind-address`: `host:port` of the health/metrics listener.
    pub metrics_bind_address: String,
    /// `-v`: log verbosity, 0–[`MAX_VERBOSITY`].
    pub verbosity: u8,
    /// `--support-endpointslice` was given (it is ignored; `main` warns).
    pub support_endpointslice_given: bool,
    /// `--cache-dir`: where the on-disk snapshot lives; `None` = no snapshot.
    pub cache_dir: Option<PathBuf>,
    /// `--cache-write-interval`: least seconds between two snapshot writes.
    pub cache_write_interval_secs: u64,
    /// `--max-object-bytes`: largest upstream object taken into the cache.
    pub max_object_bytes: u64,
    /// `--max-list-items`: most items one list may bring into the cache.
    pub max_list_items: u64,
    /// `--upstream-gzip`: the reflectors' lists ask for gzip.
    pub upstream_gzip: bool,
    /// `--upstream-protobuf`: the reflectors' lists and watches ask for protobuf.
    pub upstream_protobuf: bool,
    /// `--list-progress-timeout`: seconds without a byte after which a list is abandoned.
    pub list_progress_timeout_secs: u64,
    /// `--watch-progress-timeout`: seconds without a byte after which a watch whose upstream
    /// sends bookmarks is abandoned.
    pub watch_progress_timeout_secs: u64,
    /// `--watch-stall-timeout`: seconds a served watch may leave what waits for it unread.
    pub watch_stall_timeout_secs: u64,
    // ---- pod addresses from the container runtime (docs/SEMANTICS.md §13) ----
    /// `--container-runtime-endpoint`: the CRI socket; `None` = no runtime source.
    pub container_runtime_endpoint: Option<String>,
    /// `--container-runtime-poll-interval`: seconds between two polls of the runtime.
    pub container_runtime_poll_interval_secs: u64,
    /// `--container-runtime-request-timeout`: seconds one poll of the runtime may take.
    pub container_runtime_request_timeout_secs: u64,
    // ---- the site relay's serving side (docs/SEMANTICS.md §12) ----
    /// `--relay-bind-address`: `host:port` of the relay port; `None` = no relay.
    pub relay_bind_address: Option<String>,
    /// `--relay-cert-file`: the relay port's certificate (PEM).
    pub relay_cert_file: Option<PathBuf>,
    /// `--relay-key-file`: the relay port's key (PEM).
    pub relay_key_file: Option<PathBuf>,
    /// `--relay-client-ca-file`: the CA the relay port's clients' certificates must chain to.
    pub relay_client_ca_file: Option<PathBuf>,
    /// `--relay-max-connections`: the relay port's connection budget (docs/SEMANTICS.md §12.1).
    pub relay_max_connections: usize,
    /// `--relay-max-connections-per-source`: most relay connections from one source address.
    pub relay_max_per_source: usize,
    /// `--relay-connection-rate-per-source`: new relay connections a second from one source
    /// after its burst; 0 = no limit.
    pub relay_connection_rate: u32,
}

impl Default for Config {
    /// Every flag at its default. `hostname` is empty, which [`parse_args`] rejects.
    fn default() -> Self {
        Config {
            kube_qps: DEFAULT_KUBE_QPS,
            kube_burst: DEFAULT_KUBE_BURST,
            kubeconfig: None,
            master: None,
            relay_kubeconfig: None,
            relay_servers: None,
            bind_address: DEFAULT_BIND_ADDRESS.to_string(),
            insecure: true,
            cert_file: None,
            key_file: None,
            ca_file: None,
            hostname: String::new(),
            wrapper_in_cluster: true,
            notify_channel_size: DEFAULT_NOTIFY_CHANNEL_SIZE,
            not_ready_hold_secs: 15,
            debug: false,
            autonomy: Autonomy::default(),
            metrics_bind_address: DEFAULT_METRICS_BIND_ADDRESS.to_string(),
            verbosity: 0,
            support_endpointslice_given: false,
            cache_dir: None,
            cache_write_interval_secs: DEFAULT_CACHE_WRITE_INTERVAL_SECS,
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            max_list_items: DEFAULT_MAX_LIST_ITEMS,
            upstream_gzip: true,
            upstream_protobuf: true,
            list_progress_timeout_secs: DEFAULT_LIST_PROGRESS_TIMEOUT_SECS,
            relay_bind_address: None,
            relay_cert_file: None,
            relay_key_file: None,
            relay_client_ca_file: None,
            relay_max_connections: DEFAULT_RELAY_MAX_CONNECTIONS,
            relay_max_per_source: DEFAULT_RELAY_MAX_PER_SOURCE,
            relay_connection_rate: DEFAULT_RELAY_CONNECTION_RATE,
            watch_progress_timeout_secs: DEFAULT_WATCH_PROGRESS_TIMEOUT_SECS,
            watch_stall_timeout_secs: DEFAULT_WATCH_STALL_TIMEOUT_SECS,
            container_runtime_endpoint: None,
            container_runtime_poll_interval_secs: DEFAULT_RUNTIME_POLL_INTERVAL_SECS,
            container_runtime_request_timeout_secs: DEFAULT_RUNTIME_REQUEST_TIMEOUT_SECS,
        }
    }
}

/// `--service-autonomy-enhancement`: edge-health based endpoint pruning (docs/SEMANTICS.md §10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Autonomy {
    /// `enabled`.
    pub enabled: bool,
    /// `address`: edge-health `localinfo` URL (http:// or https://).
    pub address: String,
    /// `interval`: poll period in seconds (> 0).
    pub interval_secs: u64,
}

impl Default for Autonomy {
    fn default() -> Self {
        Autonomy {
            enabled: false,
            address: DEFAULT_AUTONOMY_ADDRESS.to_string(),
            interval_secs: DEFAULT_AUTONOMY_INTERVAL_SECS,
        }
    }
}

impl Autonomy {
    /// Strictly parses `k=v,…` with keys `enabled`, `address`, `interval` (each at most once;
    /// absent keys keep their defaults; blanks around a pair are ignored): the original crashed
    /// or busy-looped on bad values (docs/SEMANTICS.md §9).
    pub fn parse(s: &str) -> Result<Autonomy, ConfigError> {
        let bad = |value: &str, reason: &'static str| {
            ConfigError(ConfigErrorKind::InvalidValue {
                flag: AUTONOMY_FLAG,
                value: value.to_string(),
                reason,
            })
        };
        let mut out = Autonomy::default();
        let mut seen = [false; 3];
        for pair in s.split(',') {
            let pair = pair.trim();
            let Some((key, value)) = pair.split_once('=') else {
                return Err(bad(
                    pair,
                    "each item must be key=value (keys: enabled, address, interval)",
                ));
            };
            let slot = match key {
                "enabled" => 0,
                "address" => 1,
                "interval" => 2,
                _ => return Err(bad(pair, "unknown key (keys: enabled, address, interval)")),
            };
            if std::mem::replace(&mut seen[slot], true) {
                return Err(bad(pair, "key given twice"));
            }
            match slot {
                0 => out.enabled = parse_go_bool(value).ok_or_else(|| bad(pair, BOOL_REASON))?,
                1 => {
                    check_url(value).map_err(|reason| bad(pair, reason))?;
                    out.address = value.to_string();
                }
                _ => {
                    out.interval_secs =
                        value
                            .parse::<u64>()
                            .ok()
                            .filter(|&n| n > 0)
                            .ok_or_else(|| {
                                bad(pair, "interval must be a whole number of seconds > 0")
                            })?;
                }
            }
        }
        Ok(out)
    }
}

/// How `grid-wrapper check` prints its report (`--output`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// `--output=text` (the default): lines for people, problems as `problem: <tag>: ...`.
    #[default]
    Text,
    /// `--output=json`: one JSON document (see `crate::preflight`).
    Json,
}

impl OutputFormat {
    /// `text` or `json`.
    pub fn parse(s: &str) -> Option<OutputFormat> {
        match s {
            "text" => Some(OutputFormat::Text),
            "json" => Some(OutputFormat::Json),
            _ => None,
        }
    }
}

/// The subcommand word that selects [`Command::Check`] (first argument only).
pub const CHECK_COMMAND: &str = "check";

/// What the command line asks for.
// Built once at startup and matched at once: boxing the config would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Run the proxy.
    Run(Config),
    /// `grid-wrapper check [flags]`: preflight the node against the upstream with the same
    /// flags, print the report in the given format, exit 0 (ready) or 1 (problems).
    Check(Config, OutputFormat),
    /// `--help` / `-h`: print [`help_text`] and exit 0.
    Help,
    /// `--version`: print the version and exit 0.
    Version,
}

/// What is wrong with the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// A flag that does not exist (as written).
    UnknownFlag(String),
    /// A value flag at the end of the command line without its value.
    MissingValue(&'static str),
    /// A flag value that cannot be used.
    InvalidValue {
        /// The flag, e.g. `--kube-qps`.
        flag: &'static str,
        /// The value as given.
        value: String,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A flag that must be set (or set differently) given the others.
    Required {
        /// The flag, e.g. `--hostname`.
        flag: &'static str,
        /// What is needed.
        reason: &'static str,
    },
    /// A non-flag argument (grid-wrapper takes none).
    UnexpectedArgument(String),
    /// An argument that is not UTF-8 (shown lossily).
    NotUtf8(String),
}

/// A command-line error; `Display` is one line naming the flag and the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(ConfigErrorKind);

impl ConfigError {
    /// What is wrong.
    pub fn kind(&self) -> &ConfigErrorKind {
        &self.0
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            ConfigErrorKind::UnknownFlag(flag) => write!(f, "unknown flag {flag:?} (see --help)"),
            ConfigErrorKind::MissingValue(flag) => write!(f, "flag {flag} needs a value"),
            ConfigErrorKind::InvalidValue {
                flag,
                value,
                reason,
            } => write!(f, "invalid value {value:?} for {flag}: {reason}"),
            ConfigErrorKind::Required { flag, reason } => write!(f, "{flag}: {reason}"),
            ConfigErrorKind::UnexpectedArgument(arg) => write!(
                f,
                "unexpected argument {arg:?}: grid-wrapper takes only flags \
                 (a boolean flag takes its value as --flag=false)"
            ),
            ConfigErrorKind::NotUtf8(arg) => write!(f, "argument {arg:?} is not valid UTF-8"),
        }
    }
}

impl std::error::Error for ConfigError {}

const AUTONOMY_FLAG: &str = "--service-autonomy-enhancement";
const BOOL_REASON: &str =
    "must be a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)";

/// The `--help` text: every flag with its default and meaning.
pub fn help_text() -> String {
    flags::help_text()
}

/// Parses the command line (without `argv[0]`) and validates it. A first argument `check`
/// selects [`Command::Check`]; `--output` is accepted only then.
pub fn parse_args(args: Vec<OsString>) -> Result<Command, ConfigError> {
    let err = |kind| Err(ConfigError(kind));
    let mut cfg = Config::default();
    let check = args.first().is_some_and(|a| a == CHECK_COMMAND);
    let mut output: Option<OutputFormat> = None;
    let mut it = args.into_iter().skip(usize::from(check)).map(|a| {
        a.into_string()
            .map_err(|a| ConfigError(ConfigErrorKind::NotUtf8(a.to_string_lossy().into_owned())))
    });
    while let Some(arg) = it.next() {
        let arg = arg?;
        if arg == "--" {
            return match it.next() {
                Some(next) => err(ConfigErrorKind::UnexpectedArgument(next?)),
                None => break,
            };
        }
        let Some((name, inline)) = split_flag(&arg) else {
            return err(ConfigErrorKind::UnexpectedArgument(arg));
        };
        let Some(flag) = lookup(&name) else {
            return err(ConfigErrorKind::UnknownFlag(arg));
        };
        if flag.value.is_none() {
            let on = match inline {
                None => true,
                Some(v) => parse_go_bool(&v).ok_or_else(|| invalid(flag.long, &v, BOOL_REASON))?,
            };
            match flag.id {
                Id::Help if on => return Ok(Command::Help),
                Id::Version if on => return Ok(Command::Version),
                Id::Insecure => cfg.insecure = on,
                Id::WrapperInCluster => cfg.wrapper_in_cluster = on,
                Id::Debug => cfg.debug = on,
                Id::UpstreamGzip => cfg.upstream_gzip = on,
                Id::UpstreamProtobuf => cfg.upstream_protobuf = on,
                Id::SupportEndpointslice => cfg.support_endpointslice_given = true,
                _ => {}
            }
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => match it.next() {
                Some(v) => v?,
                None => return err(ConfigErrorKind::MissingValue(flag.long)),
            },
        };
        if flag.id == Id::Output {
            output = Some(
                OutputFormat::parse(&value)
                    .ok_or_else(|| invalid(flag.long, &value, "must be text or json"))?,
            );
            continue;
        }
        set_value(&mut cfg, flag, value)?;
    }
    if output.is_some() && !check {
        return err(ConfigErrorKind::Required {
            flag: "--output",
            reason:
                "is accepted only with the check command: grid-wrapper check [flags] --output=json",
        });
    }
    validate(&cfg)?;
    if check {
        return Ok(Command::Check(cfg, output.unwrap_or_default()));
    }
    Ok(Command::Run(cfg))
}

/// Checks that need several flags.
fn validate(cfg: &Config) -> Result<(), ConfigError> {
    let required = |flag, reason| Err(ConfigError(ConfigErrorKind::Required { flag, reason }));
    if cfg.hostname.trim().is_empty() {
        return required(
            "--hostname",
            "is required: the name of the local node (the DaemonSet passes $(NODE_NAME))",
        );
    }
    if !cfg.insecure && cfg.cert_file.is_none() {
        return required("--cert-file", "is required with --insecure=false");
    }
    if !cfg.insecure && cfg.key_file.is_none() {
        return required("--key-file", "is required with --insecure=false");
    }
    // Following site relays (issue 27).
    if cfg.relay_servers.is_some() && cfg.relay_kubeconfig.is_none() {
        return required(
            "--relay-servers",
            "requires --relay-kubeconfig (the relays' CA and this node's client certificate)",
        );
    }
    // End of following site relays.
    if same_listener(&cfg.bind_address, &cfg.metrics_bind_address) {
        return required("--metrics-bind-address", "must differ from --bind-address");
    }
    validate_relay(cfg)
}

/// Whether two listening `host:port` flags name one socket: port 0 is a port of each one's own.
fn same_listener(a: &str, b: &str) -> bool {
    a == b && !a.ends_with(":0")
}

/// The relay port's flags (docs/SEMANTICS.md §12): all three files with the address, none
/// without it, and an address of its own.
fn validate_relay(cfg: &Config) -> Result<(), ConfigError> {
    let required = |flag, reason| Err(ConfigError(ConfigErrorKind::Required { flag, reason }));
    let Some(addr) = &cfg.relay_bind_address else {
        if cfg.relay_cert_file.is_some()
            || cfg.relay_key_file.is_some()
            || cfg.relay_client_ca_file.is_some()
        {
            return required(
                "--relay-bind-address",
                "is required with --relay-cert-file, --relay-key-file or --relay-client-ca-file \
                 (they configure the relay port)",
            );
        }
        return Ok(());
    };
    if cfg.relay_cert_file.is_none() {
        return required(
            "--relay-cert-file",
            "is required with --relay-bind-address (the relay serves TLS only)",
        );
    }
    if cfg.relay_key_file.is_none() {
        return required(
            "--relay-key-file",
            "is required with --relay-bind-address (the relay serves TLS only)",
        );
    }
    if cfg.relay_client_ca_file.is_none() {
        return required(
            "--relay-client-ca-file",
            "is required with --relay-bind-address: the relay serves the whole cluster's \
             unpruned objects to any client it accepts, so it accepts only clients whose \
             certificate chains to this CA",
        );
    }
    if same_listener(addr, &cfg.bind_address) || same_listener(addr, &cfg.metrics_bind_address) {
        return required(
            "--relay-bind-address",
            "must differ from --bind-address and --metrics-bind-address",
        );
    }
    Ok(())
}

mod check;
mod flags;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_check;
#[cfg(test)]
mod tests_relay;
