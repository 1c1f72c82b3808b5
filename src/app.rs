//! Startup wiring (I/O shell): configuration → upstream client → cache (a snapshot restored) →
//! serving options → listeners (loop, relay port, health) → writer thread → reflector
//! supervisor ([`crate::upstream::supervisor`]) → event loop. Everything here runs once; the
//! work happens in the threads and the loop it starts.

use std::fmt;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use log::{info, warn};

use crate::cache::collection::Retention;
use crate::cache::compaction::{self, Compaction};
use crate::cache::epoch;
use crate::cache::snapshot::Snapshot;
use crate::cache::store::{Settings, State};
use crate::clock;
use crate::config::Config;
use crate::cri;
use crate::handoff::runtime_pods::RuntimePods;
use crate::handoff::Sink;
use crate::k8s::Resource;
use crate::persist::{self, CacheDir, SnapshotWriter};
use crate::server::conn::{ServerOptions, TlsSlot};
use crate::server::event_loop::Server;
use crate::server::extras::Extras;
use crate::server::health;
use crate::server::relay::RelayPort;
use crate::server::signals::{self, TlsFiles};
use crate::server::transport::{self, TlsFlags};
use crate::upstream::client::{ListSettings, Timeouts, Upstream, UpstreamOptions};
use crate::upstream::edge_health;
use crate::upstream::kubeconfig::{self, UpstreamConfig};
use crate::upstream::site_report;
use crate::upstream::supervisor::{self, Assumed, Expectations};
use crate::writer::{compactor, CacheSink, Callbacks, WriterHandle};

/// The cache hears the versions the reflector supervisor mirrors.
impl Expectations for WriterHandle {
    fn expect_slices(&self, kind: Resource) {
        WriterHandle::expect_slices(self, kind);
    }
    fn expect_cidrs(&self, kind: Option<Resource>) {
        WriterHandle::expect_cidrs(self, kind);
    }
}

/// A fatal startup or loop error.
#[derive(Debug)]
pub enum AppError {
    /// The upstream configuration (kubeconfig, in-cluster files) is unusable.
    Upstream(String),
    /// An address could not be resolved or bound.
    Bind(String, std::io::Error),
    /// A thread could not be started.
    Thread(std::io::Error),
    /// The event loop's `poll` failed.
    Loop(std::io::Error),
    /// The serving TLS files are unusable.
    Tls(String),
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::Upstream(e) => write!(f, "upstream configuration: {e}"),
            AppError::Bind(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            AppError::Thread(e) => write!(f, "cannot start a thread: {e}"),
            AppError::Loop(e) => write!(f, "event loop failed: {e}"),
            AppError::Tls(e) => write!(f, "TLS serving: {e}"),
        }
    }
}

impl std::error::Error for AppError {}

/// Resolves `host:port`, preferring IPv4 (`localhost` → 127.0.0.1).
pub fn resolve(addr: &str) -> Result<SocketAddr, AppError> {
    let all: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| AppError::Bind(addr.to_string(), e))?
        .collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or_else(|| {
            AppError::Bind(
                addr.to_string(),
                std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
            )
        })
}

/// Whether the upstream cannot be reached: some reflector is in a failure episode (the
/// snapshot writer then writes without waiting for `--cache-write-interval`).
fn upstream_lost() -> bool {
    let stats = crate::upstream::stats::global();
    crate::upstream::kind::REFLECTED
        .iter()
        .any(|&kind| stats.kind(kind).failing())
}

/// Opens `--cache-dir` and loads its snapshot; returns the RV seed for this process. Without
/// `--cache-dir` (or when the directory is unusable) the epoch is random.
fn open_cache(
    cfg: &Config,
    ucfg: &kubeconfig::UpstreamConfig,
) -> (Option<CacheDir>, Option<Snapshot>, u64) {
    let Some(dir) = &cfg.cache_dir else {
        return (None, None, epoch::seed(persist::random_epoch()));
    };
    // The cloud upstream's identity, never a relay's: a follower that moves between its relays
    // and the cloud keeps its snapshot (the objects are the cloud's either way). Its servers as
    // a set: the order of `--master` changes nothing.
    let id = persist::identity(&cfg.hostname, &ucfg.server_list(), ucfg.ca_pem.as_deref());
    let cache = match CacheDir::open(dir, id) {
        Ok(c) => c,
        Err(e) => {
            log::error!(
                "--cache-dir {}: {e}; running WITHOUT a snapshot (an offline restart will have nothing to serve)",
                dir.display()
            );
            return (None, None, epoch::seed(persist::random_epoch()));
        }
    };
    let snapshot = cache.load();
    let epoch = cache.next_epoch(snapshot.as_ref().map(|s| s.meta.rv));
    (Some(cache), snapshot, epoch::seed(epoch))
}

/// `--service-autonomy-enhancement=enabled=true,…`: the edge-health poller feeds its map to the
/// cache (which logs when the set of abnormal nodes changes) and wakes the loop on a change.
fn start_edge_health(
    cfg: &Config,
    writer: &WriterHandle,
    stop: &Arc<AtomicBool>,
) -> Result<(), AppError> {
    let writer = writer.clone();
    let on_poll = Box::new(move |map| {
        writer.set_edge_health(map);
    });
    let interval = Duration::from_secs(cfg.autonomy.interval_secs);
    edge_health::spawn(
        cfg.autonomy.address.clone(),
        interval,
        on_poll,
        stop.clone(),
    )
    .map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => {
            AppError::Upstream(format!("--service-autonomy-enhancement: {e}"))
        }
        _ => AppError::Thread(e),
    })?;
    info!(
        "edge-health filter on: polling {} every {} s; endpoints on nodes it reports abnormal are not served (default/kubernetes excepted)",
        cfg.autonomy.address, cfg.autonomy.interval_secs
    );
    Ok(())
}

/// `--container-runtime-endpoint` (docs/SEMANTICS.md §13): the runtime source's thread hands
/// the cache every new view of the local pods; following site relays (`--relay-kubeconfig`),
/// the reporter's thread sends it to them and hands the cache the site's views they answer
/// with (§13.1). Nothing without the flag.
fn start_runtime_source(
    cfg: &Config,
    upstream: &Upstream,
    writer: &WriterHandle,
    stop: &Arc<AtomicBool>,
) -> Result<(), AppError> {
    let Some(endpoint) = &cfg.container_runtime_endpoint else {
        return Ok(());
    };
    let deadline = Duration::from_secs(cfg.container_runtime_request_timeout_secs);
    let client = cri::Client::new(endpoint, deadline)
        .map_err(|e| AppError::Upstream(format!("--container-runtime-endpoint: {e}")))?;
    let interval = Duration::from_secs(cfg.container_runtime_poll_interval_secs);
    let own: Arc<site_report::OwnView> = Arc::default();
    if !upstream.relay_servers().is_empty() {
        let writer = writer.clone();
        let on_answer = Box::new(move |views| writer.set_relayed_reports(views));
        let (up, host) = (upstream.clone(), cfg.hostname.clone());
        site_report::spawn(up, host, interval, own.clone(), on_answer, stop.clone())
            .map_err(AppError::Thread)?;
    }
    let writer = writer.clone();
    let on_view = Box::new(move |pods: RuntimePods| {
        own.set(pods.clone());
        writer.set_runtime_pods(pods);
    });
    cri::source::spawn(client, interval, on_view, stop.clone()).map_err(AppError::Thread)?;
    Ok(())
}

/// `--relay-bind-address` (docs/SEMANTICS.md §12): the loop serves the relay view on a second
/// listener, over TLS that requires a client certificate chaining to `--relay-client-ca-file`.
/// Returns the relay's TLS files, reloaded as the serving ones; `None` without a relay port.
fn serve_relay(
    cfg: &Config,
    server: &mut Server,
    writer: &WriterHandle,
) -> Result<Option<TlsFiles>, AppError> {
    let (Some(addr), Some(cert), Some(key), Some(ca)) = (
        &cfg.relay_bind_address,
        &cfg.relay_cert_file,
        &cfg.relay_key_file,
        &cfg.relay_client_ca_file,
    ) else {
        return Ok(None);
    };
    let bind_error = |e| AppError::Bind(addr.clone(), e);
    let tls =
        transport::server_config(TlsFlags::RELAY, cert, key, Some(ca)).map_err(AppError::Tls)?;
    let view = writer
        .relay_view()
        .ok_or_else(|| bind_error(std::io::Error::other("the cache keeps no relay view")))?;
    let slot: TlsSlot = Arc::new(Mutex::new(None));
    let port = RelayPort::bind(resolve(addr)?, view, tls, slot.clone()).map_err(bind_error)?;
    let local = port.local_addr().map_err(bind_error)?;
    server.serve_relay(port).map_err(bind_error)?;
    info!(
        "serving the site relay on https://{local}: the upstream's objects unpruned, to clients whose certificate chains to {}",
        ca.display()
    );
    Ok(Some(TlsFiles {
        flags: TlsFlags::RELAY,
        cert: cert.clone(),
        key: key.clone(),
        ca: Some(ca.clone()),
        slot,
    }))
}

/// Loads the upstream's configuration (kubeconfig or in-cluster, and the site relays before it)
/// and builds the client every reflector and proxy worker clones.
fn connect_upstream(cfg: &Config) -> Result<(UpstreamConfig, Upstream), AppError> {
    let ucfg = kubeconfig::load(cfg.kubeconfig.as_deref(), cfg.master.as_deref())
        .map_err(|e| AppError::Upstream(e.to_string()))?;
    info!("upstream apiserver: {}", ucfg.server);
    let relays = kubeconfig::load_relays(
        cfg.relay_kubeconfig.as_deref(),
        cfg.relay_servers.as_deref(),
    )
    .map_err(|e| AppError::Upstream(format!("--relay-kubeconfig: {e}")))?;
    if let Some(r) = &relays {
        info!(
            "following site relays: {} (each with --relay-kubeconfig's credentials), then the upstream apiserver (with its own)",
            r.server_list().join(", ")
        );
    }
    let timeouts = Timeouts {
        list_progress: Duration::from_secs(cfg.list_progress_timeout_secs),
        watch_progress: Duration::from_secs(cfg.watch_progress_timeout_secs),
        ..Timeouts::default()
    };
    let lists = ListSettings {
        max_object_bytes: usize::try_from(cfg.max_object_bytes).unwrap_or(usize::MAX),
        gzip: cfg.upstream_gzip,
        protobuf: cfg.upstream_protobuf,
        max_list_items: usize::try_from(cfg.max_list_items).unwrap_or(usize::MAX),
    };
    let opts = UpstreamOptions {
        relays: relays.as_ref(),
        qps: cfg.kube_qps,
        burst: cfg.kube_burst,
        timeouts,
        lists,
    };
    let upstream = Upstream::new(&ucfg, opts).map_err(|e| AppError::Upstream(e.to_string()))?;
    Ok((ucfg, upstream))
}

/// Opens `--cache-dir` and restores its snapshot into a new cache state, served offline until
/// the upstream answers. Returns the directory, the state, the health endpoint's extras so far
/// and the versions the snapshot assumed (the reflector supervisor's guesses while the upstream
/// is silent).
fn restore(
    cfg: &Config,
    ucfg: &UpstreamConfig,
    compaction: Compaction,
) -> (Option<CacheDir>, State, Extras, Assumed) {
    let settings = Settings {
        hostname: cfg.hostname.clone(),
        wrapper_in_cluster: cfg.wrapper_in_cluster,
        retention: Retention::for_queue(cfg.notify_channel_size),
    };
    let (cache, snapshot, seed) = open_cache(cfg, ucfg);
    let mut state = State::new(settings, seed);
    state.set_object_bound(cfg.max_object_bytes);
    state.compact_with(compaction);
    if cfg.relay_bind_address.is_some() {
        // Before anything is applied, a snapshot's restore included (docs/SEMANTICS.md §12).
        state.keep_relay_view();
    }
    let mut extras = Extras::default();
    let assumed = Assumed {
        slices: snapshot.as_ref().map(|s| s.meta.slice_kind),
        cidrs: snapshot.as_ref().and_then(|s| s.meta.cidr_kind),
    };
    if let Some(snap) = snapshot {
        let age = clock::unix_now().saturating_sub(snap.meta.written_unix_secs);
        let (objects, written) = (snap.objects.len(), snap.meta.written_unix_secs);
        // Served offline as the snapshot has them; the upstream, once it answers, decides.
        state.expect_cidrs(snap.meta.cidr_kind, 0);
        if state.restore(snap.objects, snap.meta.slice_kind, 0) {
            extras.snapshot_written = Some(written);
            let [nodes, services, endpoints, slices, cidrs] = state.served_counts();
            info!(
                "serving the snapshot from {} written {age} s ago ({objects} objects: {nodes} nodes, {services} services, {endpoints} endpoints, {slices} endpointslices, {cidrs} servicecidrs) at resourceVersion {} until the upstream answers",
                cache.as_ref().map_or(String::new(), |c| c.path().display().to_string()),
                state.current_rv(),
            );
        }
    }
    (cache, state, extras, assumed)
}

/// With `--cache-dir`: the `snapshot-writer` thread, which writes the snapshot of what
/// `writer` holds, debounced by `--cache-write-interval` (at once while the upstream is lost).
fn spawn_snapshots(
    cfg: &Config,
    cache: Option<&CacheDir>,
    writer: &WriterHandle,
) -> Result<Option<Arc<SnapshotWriter>>, AppError> {
    let Some(c) = cache else {
        return Ok(None);
    };
    let min_gap = Duration::from_secs(cfg.cache_write_interval_secs);
    SnapshotWriter::spawn(c.clone(), writer.clone(), min_gap, Box::new(upstream_lost))
        .map(Some)
        .map_err(AppError::Thread)
}

/// The serving options: TLS when `--cert-file`/`--key-file` are given (and the files to reload
/// on SIGHUP), the queue, hold and relay limits. Returns the scheme served too.
fn serving_options(
    cfg: &Config,
) -> Result<(ServerOptions, Option<TlsFiles>, &'static str), AppError> {
    let tls = match (&cfg.insecure, &cfg.cert_file, &cfg.key_file) {
        (false, Some(cert), Some(key)) => Some(
            transport::server_config(TlsFlags::SERVING, cert, key, cfg.ca_file.as_deref())
                .map_err(AppError::Tls)?,
        ),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let tls_slot: TlsSlot = Arc::new(Mutex::new(None));
    let tls_files = match (&tls, &cfg.cert_file, &cfg.key_file) {
        (Some(_), Some(cert), Some(key)) => Some(TlsFiles {
            flags: TlsFlags::SERVING,
            cert: cert.clone(),
            key: key.clone(),
            ca: cfg.ca_file.clone(),
            slot: tls_slot.clone(),
        }),
        _ => None,
    };
    let opts = ServerOptions {
        tls,
        tls_reload: Some(tls_slot),
        queue: cfg.notify_channel_size,
        not_ready_hold: Duration::from_secs(cfg.not_ready_hold_secs),
        relay_max_connections: cfg.relay_max_connections,
        relay_max_per_source: cfg.relay_max_per_source,
        relay_connection_rate: cfg.relay_connection_rate,
        watch_stall: Duration::from_secs(cfg.watch_stall_timeout_secs),
        ..ServerOptions::default()
    };
    Ok((opts, tls_files, scheme))
}

/// Runs grid-wrapper until SIGTERM/SIGINT, then shuts down gracefully: the loop ends every
/// stream and drains (at most [`crate::server::event_loop::SHUTDOWN_GRACE`]), the final
/// snapshot is written, and `run` returns `Ok` (exit code 0).
pub fn run(cfg: Config) -> Result<(), AppError> {
    if cfg.support_endpointslice_given {
        warn!("--support-endpointslice is accepted for compatibility and ignored: both EndpointSlice versions are always served");
    }
    let (ucfg, upstream) = connect_upstream(&cfg)?;
    let (compaction, pending) = compaction::queue();
    let (cache, state, mut extras, assumed) = restore(&cfg, &ucfg, compaction);
    let started = Instant::now();
    let (writer, unstarted) = WriterHandle::new(state);
    compactor::spawn(pending, writer.facts()).map_err(AppError::Thread)?;
    let snapshots = spawn_snapshots(&cfg, cache.as_ref(), &writer)?;
    extras.writer = snapshots.as_ref().map(|w| w.stats.clone());
    extras.debug = cfg.debug;

    let bind = resolve(&cfg.bind_address)?;
    let (opts, tls_files, scheme) = serving_options(&cfg)?;
    let mut server = Server::bind(bind, writer.clone(), Some(upstream.clone()), opts)
        .map_err(|e| AppError::Bind(cfg.bind_address.clone(), e))?;
    let tls_files: Vec<TlsFiles> = tls_files
        .into_iter()
        .chain(serve_relay(&cfg, &mut server, &writer)?)
        .collect();
    let health_bind_error = |e| AppError::Bind(cfg.metrics_bind_address.clone(), e);
    let health_listener =
        TcpListener::bind(resolve(&cfg.metrics_bind_address)?).map_err(health_bind_error)?;
    // The address bound, which names the port when the flag's is 0.
    let metrics = health_listener.local_addr().map_err(health_bind_error)?;
    health::spawn(health_listener, writer.clone(), extras).map_err(AppError::Thread)?;
    info!(
        "serving kube-proxy on {scheme}://{} (health on http://{}), local node {:?}",
        server.local_addr().map_err(AppError::Loop)?,
        metrics,
        cfg.hostname
    );
    if cfg.debug {
        info!("--debug: /debug/state on http://{metrics}/debug/state");
    }

    let changed_snapshots = snapshots.clone();
    unstarted
        .start(
            started,
            Callbacks::waking(
                server.waker(),
                Box::new(move || {
                    if let Some(w) = &changed_snapshots {
                        w.changed();
                    }
                }),
            ),
        )
        .map_err(AppError::Thread)?;
    let sink: Arc<dyn Sink> = Arc::new(CacheSink::new(writer.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    signals::spawn(stop.clone(), server.waker(), tls_files).map_err(AppError::Thread)?;
    if cfg.autonomy.enabled {
        start_edge_health(&cfg, &writer, &stop)?;
    }
    start_runtime_source(&cfg, &upstream, &writer, &stop)?;
    let told = Box::new(writer.clone());
    supervisor::spawn(upstream, sink, told, assumed, stop.clone()).map_err(AppError::Thread)?;
    server.run(&stop).map_err(AppError::Loop)?;
    if let (Some(w), Some(c)) = (&snapshots, &cache) {
        w.finish(c, &writer, false);
    }
    info!("stopped");
    Ok(())
}
