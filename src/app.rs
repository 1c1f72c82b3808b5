//! Startup wiring (I/O shell): configuration → upstream client → cache → reflector threads →
//! health listener → event loop. Everything here runs once; the work happens in the threads and
//! the loop it starts.

use std::fmt;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use log::{info, warn};
use mio::Waker;

use crate::cache::store::{Settings, State};
use crate::cache::view::Retention;
use crate::config::Config;
use crate::server::conn::{lock, ServerOptions};
use crate::server::event_loop::Server;
use crate::server::health;
use crate::server::transport;
use crate::upstream::client::Upstream;
use crate::upstream::kubeconfig;
use crate::upstream::reflector::{self, Change, Sink, UpstreamKind};

/// How often an offline start re-checks the upstream's EndpointSlice version.
const SLICE_RECHECK: Duration = Duration::from_secs(5);

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

/// Publishes reflector changes into the cache and wakes the loop (the single writer path).
struct CacheSink {
    shared: Arc<Mutex<State>>,
    waker: Arc<Waker>,
    started: Instant,
}

impl Sink for CacheSink {
    fn apply(&self, kind: UpstreamKind, change: Change) {
        let now = self.started.elapsed().as_secs();
        let mut state = lock(&self.shared);
        let applied = state.apply(kind, change, now);
        if applied.became_ready {
            info!(
                "cache ready at resourceVersion {}: {} nodes, {} services, {} endpoints, {} endpointslices ({:?} upstream)",
                state.current_rv(),
                state.collection(crate::k8s::Resource::Nodes).len(),
                state.collection(crate::k8s::Resource::Services).len(),
                state.collection(crate::k8s::Resource::Endpoints).len(),
                state.collection(crate::k8s::Resource::SlicesV1).len(),
                state.slice_kind(),
            );
        }
        drop(state);
        if applied.events > 0 || applied.became_ready {
            if let Err(e) = self.waker.wake() {
                warn!("cannot wake the event loop: {e}");
            }
        }
    }
}

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

/// The first resourceVersion: wall-clock microseconds, so a restarted process never reissues an
/// RV an earlier one handed out (PROTOCOL.md §8.1).
pub fn rv_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(1)
}

/// Runs grid-wrapper until the process is killed.
pub fn run(cfg: Config) -> Result<(), AppError> {
    if cfg.support_endpointslice_given {
        warn!("--support-endpointslice is accepted for compatibility and ignored: both EndpointSlice versions are always served");
    }
    if cfg.debug {
        warn!("--debug is accepted but grid-wrapper has no profiling endpoints yet");
    }
    if cfg.autonomy.enabled {
        warn!("--service-autonomy-enhancement is not implemented yet; endpoints are not pruned by edge-health");
    }
    let ucfg = kubeconfig::load(cfg.kubeconfig.as_deref(), cfg.master.as_deref())
        .map_err(|e| AppError::Upstream(e.to_string()))?;
    info!("upstream apiserver: {}", ucfg.server);
    let upstream = Upstream::new(&ucfg, cfg.kube_qps, cfg.kube_burst)
        .map_err(|e| AppError::Upstream(e.to_string()))?;

    let settings = Settings {
        hostname: cfg.hostname.clone(),
        wrapper_in_cluster: cfg.wrapper_in_cluster,
        retention: Retention::for_queue(cfg.notify_channel_size),
    };
    let shared = Arc::new(Mutex::new(State::new(settings, rv_seed())));

    let bind = resolve(&cfg.bind_address)?;
    let tls = match (&cfg.insecure, &cfg.cert_file, &cfg.key_file) {
        (false, Some(cert), Some(key)) => Some(
            transport::server_config(cert, key, cfg.ca_file.as_deref()).map_err(AppError::Tls)?,
        ),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let opts = ServerOptions {
        tls,
        queue: cfg.notify_channel_size,
        not_ready_hold: Duration::from_secs(cfg.not_ready_hold_secs),
        ..ServerOptions::default()
    };
    let mut server = Server::bind(bind, shared.clone(), Some(upstream.clone()), opts)
        .map_err(|e| AppError::Bind(cfg.bind_address.clone(), e))?;
    let metrics = resolve(&cfg.metrics_bind_address)?;
    let health_listener = TcpListener::bind(metrics)
        .map_err(|e| AppError::Bind(cfg.metrics_bind_address.clone(), e))?;
    health::spawn(health_listener, shared.clone()).map_err(AppError::Thread)?;
    info!(
        "serving kube-proxy on {scheme}://{} (health on http://{}), local node {:?}",
        server.local_addr().map_err(AppError::Loop)?,
        metrics,
        cfg.hostname
    );

    let sink: Arc<dyn Sink> = Arc::new(CacheSink {
        shared: shared.clone(),
        waker: server.waker(),
        started: Instant::now(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    // Version discovery talks to the upstream and may wait for its timeouts: it runs on its own
    // thread so the loop answers (holds, then 503) from the first moment.
    let starter_stop = stop.clone();
    let starter_shared = shared.clone();
    std::thread::Builder::new()
        .name("start-reflectors".into())
        .spawn(move || {
            let start = |kind: UpstreamKind, stop: Arc<AtomicBool>| {
                if let Err(e) = reflector::spawn(upstream.clone(), kind, sink.clone(), stop) {
                    // Without every reflector the cache never becomes ready: fail loudly.
                    log::error!("cannot start the {kind:?} reflector: {e}; exiting");
                    std::process::exit(1);
                }
            };
            let (mut slices, answered) = reflector::discover_slice_kind_checked(&upstream);
            info!("upstream EndpointSlice version: {slices:?}");
            lock(&starter_shared).expect_slices(slices);
            for kind in [
                UpstreamKind::Nodes,
                UpstreamKind::Services,
                UpstreamKind::Endpoints,
            ] {
                start(kind, starter_stop.clone());
            }
            let mut slice_stop = Arc::new(AtomicBool::new(false));
            start(slices, slice_stop.clone());
            // Offline start: the version was a guess. Re-check by API discovery until the
            // upstream answers (TOPOLOGY.md §5.3); switch reflectors if the guess was wrong.
            if !answered {
                loop {
                    std::thread::sleep(SLICE_RECHECK);
                    let Some(found) = reflector::discovered_slice_kind(&upstream) else {
                        continue;
                    };
                    if found != slices {
                        warn!("upstream serves {found:?}, not the guessed {slices:?}: switching");
                        slice_stop.store(true, std::sync::atomic::Ordering::Relaxed);
                        lock(&starter_shared).expect_slices(found);
                        slices = found;
                        slice_stop = Arc::new(AtomicBool::new(false));
                        start(slices, slice_stop.clone());
                    }
                    break;
                }
            }
        })
        .map_err(AppError::Thread)?;
    server.run(&stop).map_err(AppError::Loop)
}
