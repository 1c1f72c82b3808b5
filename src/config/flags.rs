//! The flag table of `crate::config` and the pflag-compatible scanner over it: which names
//! exist, which take a value, how each value is parsed into [`Config`], and the `--help` text.

use std::path::PathBuf;

use super::check::{check_host_port, check_rate, check_url_list};
use super::{
    Autonomy, Config, ConfigError, ConfigErrorKind, AUTONOMY_FLAG, DEFAULT_AUTONOMY,
    DEFAULT_BIND_ADDRESS, DEFAULT_METRICS_BIND_ADDRESS, MAX_MAX_LIST_ITEMS, MAX_MAX_OBJECT_BYTES,
    MAX_NOTIFY_CHANNEL_SIZE, MAX_RELAY_CONNECTIONS, MAX_RELAY_CONNECTION_RATE, MAX_VERBOSITY,
    MIN_MAX_OBJECT_BYTES,
};

/// Identifies a flag in [`FLAGS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Id {
    KubeQps,
    KubeBurst,
    Kubeconfig,
    Master,
    // Following site relays (issue 27).
    RelayKubeconfig,
    RelayServers,
    // End of following site relays.
    BindAddress,
    MetricsBindAddress,
    Insecure,
    CertFile,
    KeyFile,
    CaFile,
    Hostname,
    WrapperInCluster,
    NotifyChannelSize,
    NotReadyHold,
    CacheDir,
    CacheWriteInterval,
    MaxObjectBytes,
    MaxListItems,
    UpstreamGzip,
    UpstreamProtobuf,
    ListProgressTimeout,
    WatchProgressTimeout,
    WatchStallTimeout,
    // Pod addresses from the container runtime (docs/SEMANTICS.md §13).
    ContainerRuntimeEndpoint,
    ContainerRuntimePollInterval,
    ContainerRuntimeRequestTimeout,
    Debug,
    Autonomy,
    SupportEndpointslice,
    Verbosity,
    Output,
    Help,
    Version,
    // The site relay's serving side (docs/SEMANTICS.md §12).
    RelayBindAddress,
    RelayCertFile,
    RelayKeyFile,
    RelayClientCaFile,
    RelayMaxConnections,
    RelayMaxPerSource,
    RelayConnectionRate,
}

/// One flag: canonical long name (with `--`), shorthand, value placeholder (`None` = boolean),
/// default as shown in `--help`, and meaning.
pub(super) struct Flag {
    pub(super) id: Id,
    pub(super) long: &'static str,
    pub(super) short: Option<char>,
    pub(super) value: Option<&'static str>,
    pub(super) default: &'static str,
    pub(super) help: &'static str,
}

const fn flag(
    id: Id,
    long: &'static str,
    value: Option<&'static str>,
    default: &'static str,
    help: &'static str,
) -> Flag {
    Flag {
        id,
        long,
        short: None,
        value,
        default,
        help,
    }
}

pub(super) const FLAGS: &[Flag] = &[
    flag(
        Id::Hostname,
        "--hostname",
        Some("NAME"),
        "",
        "name of the local node (required; the DaemonSet passes $(NODE_NAME))",
    ),
    flag(
        Id::Kubeconfig,
        "--kubeconfig",
        Some("PATH"),
        "",
        "upstream kubeconfig; empty = in-cluster configuration",
    ),
    flag(
        Id::Master,
        "--master",
        Some("URL[,URL...]"),
        "",
        "upstream apiserver URL (http:// or https://), overrides the kubeconfig's server; \
         several, comma-separated, in order of preference: failover to the first healthy one",
    ),
    // Following site relays (issue 27).
    flag(
        Id::RelayKubeconfig,
        "--relay-kubeconfig",
        Some("PATH"),
        "",
        "kubeconfig of the site relays (their CA, this node's client certificate, maybe a token); \
         its server is the first relay. Relays are read from first, the upstream last",
    ),
    flag(
        Id::RelayServers,
        "--relay-servers",
        Some("URL[,URL...]"),
        "",
        "relay URLs in order of preference, overriding --relay-kubeconfig's server; \
         requires --relay-kubeconfig",
    ),
    // End of following site relays.
    flag(
        Id::KubeQps,
        "--kube-qps",
        Some("FLOAT"),
        "1000",
        "requests per second to the upstream apiserver",
    ),
    flag(
        Id::KubeBurst,
        "--kube-burst",
        Some("INT"),
        "1000",
        "request burst to the upstream apiserver",
    ),
    flag(
        Id::BindAddress,
        "--bind-address",
        Some("HOST:PORT"),
        DEFAULT_BIND_ADDRESS,
        "address kube-proxy connects to (port 0: the system picks one; the startup line names it)",
    ),
    flag(
        Id::Insecure,
        "--insecure",
        None,
        "true",
        "serve plain HTTP; false = TLS with --cert-file and --key-file",
    ),
    flag(
        Id::CertFile,
        "--cert-file",
        Some("PATH"),
        "",
        "TLS serving certificate (PEM); required with --insecure=false",
    ),
    flag(
        Id::KeyFile,
        "--key-file",
        Some("PATH"),
        "",
        "TLS serving key (PEM); required with --insecure=false",
    ),
    flag(
        Id::CaFile,
        "--ca-file",
        Some("PATH"),
        "",
        "CA bundle that verifies kube-proxy client certificates (TLS mode)",
    ),
    // ---- the site relay's serving side (docs/SEMANTICS.md §12) ----
    flag(
        Id::RelayBindAddress,
        "--relay-bind-address",
        Some("HOST:PORT"),
        "",
        "serve the site relay here: the upstream's objects unpruned, to other grid-wrappers \
         over TLS with client certificates; empty = off (port 0: the system picks one; it is logged)",
    ),
    flag(
        Id::RelayCertFile,
        "--relay-cert-file",
        Some("PATH"),
        "",
        "the relay port's TLS certificate (PEM); required with --relay-bind-address",
    ),
    flag(
        Id::RelayKeyFile,
        "--relay-key-file",
        Some("PATH"),
        "",
        "the relay port's TLS key (PEM); required with --relay-bind-address",
    ),
    flag(
        Id::RelayClientCaFile,
        "--relay-client-ca-file",
        Some("PATH"),
        "",
        "CA bundle the relay port's clients' certificates must chain to; required with \
         --relay-bind-address",
    ),
    flag(
        Id::RelayMaxConnections,
        "--relay-max-connections",
        Some("COUNT"),
        "1024",
        "most connections open on the relay port; when full, the oldest that has not \
         completed a request is closed to make room (a follower holds about six)",
    ),
    flag(
        Id::RelayMaxPerSource,
        "--relay-max-connections-per-source",
        Some("COUNT"),
        "128",
        "most relay-port connections from one source address (followers behind one NAT \
         address share it)",
    ),
    flag(
        Id::RelayConnectionRate,
        "--relay-connection-rate-per-source",
        Some("PER_SECOND"),
        "10",
        "new relay-port connections a second from one source address after a burst of twice \
         --relay-max-connections-per-source; faster ones are closed; 0 = no limit",
    ),
    // ---- end of the relay's serving side ----
    flag(
        Id::WrapperInCluster,
        "--wrapper-in-cluster",
        None,
        "true",
        "rewrite default/kubernetes endpoints to the node-local apiserver (edge mode)",
    ),
    flag(
        Id::NotifyChannelSize,
        "--notify-channel-size",
        Some("INT"),
        "100",
        "per-watcher queue capacity and minimum event history per resource",
    ),
    flag(
        Id::Autonomy,
        AUTONOMY_FLAG,
        Some("k=v,..."),
        DEFAULT_AUTONOMY,
        "edge-health based endpoint pruning: enabled=BOOL,address=URL,interval=SECONDS",
    ),
    flag(
        Id::CacheDir,
        "--cache-dir",
        Some("DIR"),
        "",
        "keep a crash-safe snapshot of the cache here and serve it after a restart while the \
         upstream is unreachable; empty = off",
    ),
    flag(
        Id::CacheWriteInterval,
        "--cache-write-interval",
        Some("SECONDS"),
        "30",
        "least time between two snapshot writes (a change is written after 1 s of quiet, \
         and always at shutdown)",
    ),
    flag(
        Id::MaxObjectBytes,
        "--max-object-bytes",
        Some("BYTES"),
        "4194304",
        "largest upstream object taken into the cache; a bigger one in a list or a watch is \
         skipped (not served) with a WARN naming it",
    ),
    flag(
        Id::MaxListItems,
        "--max-list-items",
        Some("COUNT"),
        "40000",
        "most items one list (all its pages) may bring into the cache; a longer list is \
         abandoned as it passes it, with a WARN, and retried with backoff while the last \
         complete list stays served",
    ),
    flag(
        Id::UpstreamGzip,
        "--upstream-gzip",
        None,
        "true",
        "ask the upstream for gzip'd lists (an apiserver compresses a list over 128 KiB), \
         decompressed as they are read; false = plain JSON (less CPU, more bytes)",
    ),
    flag(
        Id::UpstreamProtobuf,
        "--upstream-protobuf",
        None,
        "true",
        "the reflectors' lists and watches ask for protobuf, JSON only if the upstream does not \
         serve it; false = JSON (more bytes, less CPU per sync)",
    ),
    flag(
        Id::ListProgressTimeout,
        "--list-progress-timeout",
        Some("SECONDS"),
        "60",
        "an upstream list that receives no byte for this long is abandoned and retried",
    ),
    flag(
        Id::WatchProgressTimeout,
        "--watch-progress-timeout",
        Some("SECONDS"),
        "120",
        "an upstream watch that receives no byte for this long, while its upstream sends \
         bookmarks (an apiserver: about once a minute), is abandoned and restarted",
    ),
    flag(
        Id::WatchStallTimeout,
        "--watch-stall-timeout",
        Some("SECONDS"),
        "120",
        "a served watch whose client reads nothing for this long while events wait for it \
         is ended (counted as stalled); the client resumes from its last resourceVersion",
    ),
    flag(
        Id::ContainerRuntimeEndpoint,
        "--container-runtime-endpoint",
        Some("ENDPOINT"),
        "",
        "the node's container runtime (CRI), e.g. unix:///run/containerd/containerd.sock: \
         local endpoints are served on the addresses its ready sandboxes have (only \
         ListPodSandbox and PodSandboxStatus are called); empty = off",
    ),
    flag(
        Id::ContainerRuntimePollInterval,
        "--container-runtime-poll-interval",
        Some("SECONDS"),
        "5",
        "seconds between two polls of --container-runtime-endpoint",
    ),
    flag(
        Id::ContainerRuntimeRequestTimeout,
        "--container-runtime-request-timeout",
        Some("SECONDS"),
        "10",
        "most seconds one poll of --container-runtime-endpoint may take, its connect, list \
         and one status call per ready sandbox together (unlike the kubelet's \
         --runtime-request-timeout, which bounds each call); a slower runtime is a failed \
         poll, and what is served stays as it was",
    ),
    flag(
        Id::MetricsBindAddress,
        "--metrics-bind-address",
        Some("HOST:PORT"),
        DEFAULT_METRICS_BIND_ADDRESS,
        "address of /healthz, /readyz and /metrics (port 0: the system picks one; the startup line \
         names it)",
    ),
    flag(
        Id::NotReadyHold,
        "--not-ready-hold-seconds",
        Some("INT"),
        "15",
        "how long a request waits for the initial sync before it gets 503 + Retry-After",
    ),
    flag(
        Id::Debug,
        "--debug",
        None,
        "false",
        "serve debug and profiling endpoints",
    ),
    flag(
        Id::SupportEndpointslice,
        "--support-endpointslice",
        None,
        "false",
        "accepted for compatibility and ignored (EndpointSlices are always served)",
    ),
    Flag {
        id: Id::Verbosity,
        long: "--v",
        short: Some('v'),
        value: Some("N"),
        default: "0",
        help: "log verbosity, 0-10",
    },
    flag(
        Id::Output,
        "--output",
        Some("FORMAT"),
        "text",
        "check only: print the report as text or json",
    ),
    Flag {
        id: Id::Help,
        long: "--help",
        short: Some('h'),
        value: None,
        default: "",
        help: "print this help and exit",
    },
    flag(
        Id::Version,
        "--version",
        None,
        "",
        "print the version and exit",
    ),
];

/// The `--help` text, built from [`FLAGS`].
pub(super) fn help_text() -> String {
    let mut out = String::from(
        "grid-wrapper: node-local, topology-aware cache that kube-proxy talks to instead of the \
         apiserver\n(drop-in for SuperEdge application-grid-wrapper).\n\n\
         Usage: grid-wrapper --hostname=NODE [flags]\n       \
         grid-wrapper check --hostname=NODE [flags] [--output=text|json]\n\n\
         check: preflight this node before kube-proxy is rewired: one pass against the upstream \
         with the\nsame flags (connectivity, TLS, credentials, list+watch access per resource, \
         the local node and its\ntopology labels, what would be served), then a report. Starts \
         no server and writes nothing.\nExit 0: ready; 1: problems, one 'problem: <tag>: ...' \
         line each; 2: invalid flags.\n\n\
         Flags ('_' and '-' are interchangeable; --flag=value or --flag value; \
         booleans as --flag or --flag=false):\n",
    );
    let column = |f: &Flag| {
        let short = f.short.map_or("    ".to_string(), |c| format!("-{c}, "));
        match f.value {
            Some(v) => format!("{short}{} {v}", f.long),
            None => format!("{short}{}", f.long),
        }
    };
    let width = FLAGS.iter().map(|f| column(f).len()).max().unwrap_or(0);
    for f in FLAGS {
        let default = match (f.default, f.value) {
            ("", _) => String::new(),
            (d, Some(_)) if d.parse::<f64>().is_err() => format!(" (default \"{d}\")"),
            (d, _) => format!(" (default {d})"),
        };
        out.push_str(&format!("  {:<width$}  {}{default}\n", column(f), f.help));
    }
    out
}

/// `--name[=value]` / `-c[=value]` / `-vN` → (normalized long name without dashes, inline
/// value). `None` for a non-flag argument.
pub(super) fn split_flag(arg: &str) -> Option<(String, Option<String>)> {
    if let Some(body) = arg.strip_prefix("--") {
        if body.is_empty() || body.starts_with('-') || body.starts_with('=') {
            // `---x` and `--=x` are bad flag syntax; report them as unknown flags.
            return Some((String::new(), None));
        }
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        return Some((name.replace('_', "-"), inline));
    }
    let body = arg.strip_prefix('-')?;
    let mut chars = body.chars();
    let c = chars.next()?;
    let rest = chars.as_str();
    let long = FLAGS
        .iter()
        .find(|f| f.short == Some(c))
        .map_or(String::new(), |f| {
            f.long.trim_start_matches('-').to_string()
        });
    match rest {
        "" => Some((long, None)),
        _ if rest.starts_with('=') => Some((long, Some(rest.get(1..).unwrap_or("").to_string()))),
        // `-v3`: a shorthand value flag takes an attached value, as in pflag.
        _ if c == 'v' => Some((long, Some(rest.to_string()))),
        // `-hostname` and the like: long flags take two dashes.
        _ => Some((String::new(), None)),
    }
}

pub(super) fn lookup(name: &str) -> Option<&'static Flag> {
    FLAGS
        .iter()
        .find(|f| !name.is_empty() && f.long.strip_prefix("--") == Some(name))
}

pub(super) fn invalid(flag: &'static str, value: &str, reason: &'static str) -> ConfigError {
    ConfigError(ConfigErrorKind::InvalidValue {
        flag,
        value: value.to_string(),
        reason,
    })
}

/// A comma-separated URL list (`--master`, `--relay-servers`) checked by [`check_url_list`];
/// empty = none.
fn url_list(flag: &'static str, value: String) -> Result<Option<String>, ConfigError> {
    if value.is_empty() {
        return Ok(None);
    }
    check_url_list(&value).map_err(|(item, reason)| invalid(flag, &item, reason))?;
    Ok(Some(value))
}

pub(super) fn set_value(cfg: &mut Config, flag: &Flag, value: String) -> Result<(), ConfigError> {
    let path = |v: String| (!v.is_empty()).then(|| PathBuf::from(v));
    let bad = |reason| invalid(flag.long, &value, reason);
    match flag.id {
        Id::KubeQps => {
            cfg.kube_qps = value
                .parse::<f64>()
                .ok()
                .filter(|q| q.is_finite() && *q > 0.0)
                .ok_or_else(|| bad("must be a number greater than 0"))?
        }
        Id::KubeBurst => {
            cfg.kube_burst = value
                .parse::<u32>()
                .ok()
                .filter(|&b| b >= 1)
                .ok_or_else(|| bad("must be a whole number of at least 1"))?
        }
        Id::NotifyChannelSize => {
            cfg.notify_channel_size = value
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_NOTIFY_CHANNEL_SIZE).contains(n))
                .ok_or_else(|| bad("must be a whole number from 1 to 1000000"))?
        }
        Id::CacheWriteInterval => {
            cfg.cache_write_interval_secs = value
                .parse::<u64>()
                .ok()
                .filter(|&v| v <= 3600)
                .ok_or_else(|| bad("must be a whole number from 0 to 3600"))?
        }
        Id::MaxObjectBytes => {
            cfg.max_object_bytes = value
                .parse::<u64>()
                .ok()
                .filter(|v| (MIN_MAX_OBJECT_BYTES..=MAX_MAX_OBJECT_BYTES).contains(v))
                .ok_or_else(|| bad("must be a whole number of bytes from 65536 to 268435456"))?
        }
        Id::RelayMaxConnections | Id::RelayMaxPerSource => {
            let n = value
                .parse::<usize>()
                .ok()
                .filter(|v| (1..=MAX_RELAY_CONNECTIONS).contains(v))
                .ok_or_else(|| bad("must be a whole number from 1 to 65536"))?;
            if flag.id == Id::RelayMaxConnections {
                cfg.relay_max_connections = n;
            } else {
                cfg.relay_max_per_source = n;
            }
        }
        Id::RelayConnectionRate => {
            cfg.relay_connection_rate = check_rate(&value, MAX_RELAY_CONNECTION_RATE)
                .ok_or_else(|| bad("must be a whole number from 0 (no limit) to 65536"))?
        }
        Id::MaxListItems => {
            cfg.max_list_items = value
                .parse::<u64>()
                .ok()
                .filter(|v| (1..=MAX_MAX_LIST_ITEMS).contains(v))
                .ok_or_else(|| bad("must be a whole number from 1 to 100000000"))?
        }
        Id::ListProgressTimeout | Id::WatchProgressTimeout | Id::WatchStallTimeout => {
            let secs = value
                .parse::<u64>()
                .ok()
                .filter(|v| (1..=3600).contains(v))
                .ok_or_else(|| bad("must be a whole number of seconds from 1 to 3600"))?;
            match flag.id {
                Id::ListProgressTimeout => cfg.list_progress_timeout_secs = secs,
                Id::WatchProgressTimeout => cfg.watch_progress_timeout_secs = secs,
                _ => cfg.watch_stall_timeout_secs = secs,
            }
        }
        Id::NotReadyHold => {
            cfg.not_ready_hold_secs = value
                .parse::<u64>()
                .ok()
                .filter(|&v| v <= 300)
                .ok_or_else(|| bad("must be a whole number from 0 to 300"))?
        }
        Id::Verbosity => {
            cfg.verbosity = value
                .parse::<u8>()
                .ok()
                .filter(|&v| v <= MAX_VERBOSITY)
                .ok_or_else(|| bad("must be a whole number from 0 to 10"))?
        }
        Id::BindAddress | Id::MetricsBindAddress => {
            check_host_port(&value).map_err(bad)?;
            if flag.id == Id::BindAddress {
                cfg.bind_address = value;
            } else {
                cfg.metrics_bind_address = value;
            }
        }
        Id::Master => cfg.master = url_list(flag.long, value)?,
        // Following site relays (issue 27).
        Id::RelayServers => cfg.relay_servers = url_list(flag.long, value)?,
        Id::RelayKubeconfig => cfg.relay_kubeconfig = path(value),
        // End of following site relays.
        Id::Autonomy => cfg.autonomy = Autonomy::parse(&value)?,
        Id::Hostname => cfg.hostname = value,
        Id::Kubeconfig => cfg.kubeconfig = path(value),
        Id::CertFile => cfg.cert_file = path(value),
        Id::KeyFile => cfg.key_file = path(value),
        Id::CaFile => cfg.ca_file = path(value),
        Id::CacheDir => cfg.cache_dir = path(value),
        Id::ContainerRuntimeEndpoint => {
            cfg.container_runtime_endpoint = match value.as_str() {
                "" => None,
                v => {
                    crate::cri::endpoint::parse(v).map_err(|e| bad(e.reason))?;
                    Some(v.to_string())
                }
            }
        }
        Id::ContainerRuntimePollInterval | Id::ContainerRuntimeRequestTimeout => {
            let secs = value
                .parse::<u64>()
                .ok()
                .filter(|v| (1..=3600).contains(v))
                .ok_or_else(|| bad("must be a whole number of seconds from 1 to 3600"))?;
            if flag.id == Id::ContainerRuntimePollInterval {
                cfg.container_runtime_poll_interval_secs = secs;
            } else {
                cfg.container_runtime_request_timeout_secs = secs;
            }
        }
        // The site relay's serving side.
        Id::RelayBindAddress => {
            cfg.relay_bind_address = match value.as_str() {
                "" => None,
                v => {
                    check_host_port(v).map_err(bad)?;
                    Some(value)
                }
            }
        }
        Id::RelayCertFile => cfg.relay_cert_file = path(value),
        Id::RelayKeyFile => cfg.relay_key_file = path(value),
        Id::RelayClientCaFile => cfg.relay_client_ca_file = path(value),
        // Boolean flags never reach here.
        Id::Insecure
        | Id::WrapperInCluster
        | Id::Debug
        | Id::UpstreamGzip
        | Id::UpstreamProtobuf
        | Id::SupportEndpointslice
        | Id::Help
        | Id::Version => {}
        // `parse_args` keeps it out of `Config` (it belongs to `check`).
        Id::Output => {}
    }
    Ok(())
}
