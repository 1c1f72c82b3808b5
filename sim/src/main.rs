//! `grid-wrapper-sim`: a simulated Kubernetes apiserver for `make demo`, the integration tests
//! and benchmarks. It serves LIST/WATCH of Nodes, Services, Endpoints and EndpointSlices (v1
//! and/or v1beta1) with its own resourceVersions and a bounded history (410 past it), records
//! every other request (events…) and echoes it, and offers a `/sim/` control API to change the
//! cluster while clients watch. One thread per connection; state in a `Mutex` + `Condvar`
//! (`shared`, taken from there by the server shell, the control API and the watch streams).
//! `main` only parses flags, loads the fixture, binds, prints the listening line and serves (or,
//! with `--list-bytes`, prints the bytes of the fixture's JSON lists and exits).
//!
//! Fault injection for the autonomy tests (exact bodies and answers in `--help`):
//! - `POST /sim/reset-rv {"rv": N, "too_large": "http"|"event"|"silent", "watches":
//!   "end"|"cut"|"keep"}`: the upstream's RV counter restarts lower (objects re-stamped
//!   `N+1..`, history cleared, watches ended, cut or kept); from then on (or from the start with
//!   `--too-large`) an RV above the current one is "too large": HTTP 504 or one ERROR 504 event
//!   for a watch, or, like a real apiserver, a watch accepted and left silent (no bookmark)
//!   until the counter passes it; HTTP 504 for a LIST (`store`, `fault`, `watch`).
//! - `GET`/`POST /sim/edge-health`: a canned edge-health answer, polls counted (`fault`).
//! - `POST /sim/refuse {"seconds": S, "listen": "HOST:PORT"}` and `--start-refusing S`: the
//!   listener (of that address; all without `listen`) is closed and its connections cut for S
//!   seconds, then the same port listens again (`listen`, `server`).
//! - A loaded apiserver (`--max-in-flight`, `--max-per-second`, `--retry-after`, `POST
//!   /sim/load`): 429 `TooManyRequests` with `Retry-After` over the limits or to the next N
//!   requests, 503 with `Retry-After` while "shutting down"; `GET /sim/load` counts requests,
//!   429s and 503s per second for the benches (`load`).
//!
//! WAN weight: a LIST over 128 KiB is gzip'd for a client whose `Accept-Encoding` names gzip
//! (the apiserver's rule and level, `gzip`); `GET /sim/served` logs every list and watch served
//! from the store with its `Accept-Encoding` and `Content-Encoding`, and `/sim/state` counts
//! list bytes as sent and before compression.
//!
//! Protobuf: a client whose `Accept` prefers `application/vnd.kubernetes.protobuf` (the
//! apiserver's negotiation, `api::negotiate`; a reflector's `application/vnd.kubernetes.protobuf,
//! application/json`) gets lists and GETs in the apiserver's protobuf envelope (gzip'd as JSON
//! lists are) and watches as length-framed protobuf events, BOOKMARK and ERROR included
//! (`proto::encode`, `proto::envelope`); errors stay JSON `Status` bodies. `--no-protobuf`
//! answers JSON whatever the `Accept`, as an upstream that does not serve protobuf. `/sim/served`
//! gives each list's and watch's `format`, `/sim/state` counts protobuf lists, watches and GETs.
//!
//! Failover tests: `--listen A --listen B` serves one store on both addresses (the same objects
//! and RVs, like two apiservers of one cluster); `/sim/refuse` with `listen` takes one down;
//! recorded requests and `/sim/state` `listens` say which address served what.
//!
//! From the product's pure core (`grid-wrapper` without `io`): the request reader and response
//! framing (`http::request`, `http::response`, under `httpio`'s blocking glue), label and field
//! selectors (`api::selector`, matched against stored JSON in `api`), EndpointSlice version
//! conversion (`k8s::convert`), content negotiation (`api::negotiate`), the protobuf encoding
//! and envelope (`proto`), resource names (`k8s::Resource`) and Status errors
//! (`k8s::status::ApiError`); base64 is the `base64` crate. The sim's own: serving as an
//! apiserver (store, RVs, history, watches, discovery), the `/sim/` control API and fault
//! injection, routing that takes path segments literally and lenient query decoding (`routes`
//! says why), and the Status bodies `ApiError` cannot express (`causes` of a too-large RV, a
//! DELETE's `Success`).

#![forbid(unsafe_code)]

mod api;
mod args;
mod conn;
mod control;
mod fault;
mod fixture;
mod gzip;
mod httpio;
mod listen;
mod load;
mod routes;
mod server;
mod shared;
mod store;
mod watch;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_faults;
#[cfg(test)]
mod tests_listen;
#[cfg(test)]
mod tests_protobuf;

use std::io::Write;
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Minimal stderr logger (stdout carries only the listening line). Level from `RUST_LOG`
/// (`error`…`trace`), default `info`.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("grid-wrapper-sim {} {}", r.level(), r.args());
        }
    }

    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger;

fn init_logging() {
    let level = std::env::var("RUST_LOG")
        .ok()
        .and_then(|s| s.parse::<log::LevelFilter>().ok())
        .unwrap_or(log::LevelFilter::Info);
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}

/// Builds the shared state with the fixture loaded.
fn build(flags: &args::Flags) -> Result<server::Shared, grid_wrapper::k8s::status::ApiError> {
    let mut store = store::Store::new(flags.history);
    if let Some(mode) = flags.too_large {
        store.enable_too_large(mode);
    }
    for obj in fixture::objects(flags.fixture) {
        store.apply(obj)?;
    }
    let interval = (flags.bookmark_secs > 0).then(|| Duration::from_secs(flags.bookmark_secs));
    let mut shared = server::Shared::new(store, flags.slices, interval, flags.token.clone());
    shared.cidrs = flags.cidrs;
    shared.protobuf = flags.protobuf;
    shared.certificate_authenticates = flags.client_cert_optional;
    shared.load = load::Load::new(load::Settings {
        max_in_flight: flags.max_in_flight.filter(|n| *n > 0),
        max_per_second: flags.max_per_second.filter(|n| *n > 0),
        retry_after: flags.retry_after,
        ..load::Settings::default()
    });
    Ok(shared)
}

fn run(flags: &args::Flags) -> Result<(), Box<dyn std::error::Error>> {
    let tls = match (&flags.tls_cert, &flags.tls_key) {
        (Some(c), Some(k)) => Some(conn::server_config(
            c,
            k,
            flags.client_ca.as_deref(),
            flags.client_cert_optional,
        )?),
        _ => None,
    };
    let mut shared = build(flags)?.with_listeners(flags.listen.len());
    shared.kube_minor = flags.kube_minor;
    let shared = Arc::new(shared);
    let mut listeners = Vec::new();
    for addr in &flags.listen {
        listeners.push(TcpListener::bind(addr)?);
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Every line in one write: a reader that stops after the first line cannot make a later
    // write fail.
    let mut banner = String::new();
    for l in &listeners {
        banner.push_str(&format!(
            "grid-wrapper-sim listening on {scheme}://{}\n",
            l.local_addr()?
        ));
    }
    {
        let mut out = std::io::stdout().lock();
        out.write_all(banner.as_bytes())?;
        out.flush()?;
    }
    log::info!(
        "fixture loaded: resourceVersion {}",
        shared.store.lock().map(|s| s.rv()).unwrap_or_default()
    );
    if let Some(secs) = flags.start_refusing {
        let until = std::time::Instant::now() + Duration::from_secs(secs);
        for l in shared.listens() {
            l.schedule(until);
        }
    }
    let mut listeners = listeners.into_iter().enumerate();
    let Some((_, first)) = listeners.next() else {
        return Err("no --listen address".into());
    };
    for (i, listener) in listeners {
        let (shared, tls) = (Arc::clone(&shared), tls.clone());
        std::thread::Builder::new()
            .name(format!("sim-accept-{i}"))
            .spawn(move || {
                if let Err(e) = server::serve_on(listener, shared, tls, i) {
                    eprintln!("grid-wrapper-sim: listener {i}: {e}");
                    std::process::exit(1);
                }
            })?;
    }
    server::serve(first, shared, tls)?;
    Ok(())
}

/// `--list-bytes`: the fixture's list sizes on stdout.
fn print_list_bytes(flags: &args::Flags) -> Result<(), Box<dyn std::error::Error>> {
    let shared = build(flags)?;
    let store = shared.store.lock().map_err(|_| "store lock poisoned")?;
    let shape = match flags.fixture {
        fixture::Fixture::Scale(p) => format!("scale, shape {}", p.shape.as_str()),
        fixture::Fixture::Demo => "demo".into(),
        fixture::Fixture::Empty => "empty".into(),
    };
    println!(
        "grid-wrapper-sim fixture {shape}: JSON list bytes: {}",
        fixture::list_bytes_line(&fixture::list_bytes(&store))
    );
    Ok(())
}

fn main() -> ExitCode {
    init_logging();
    // GRID_WRAPPER_SIM_SHAPE: the default --shape, for benches that start the simulator
    // themselves (scripts/loadbench.sh's LOADBENCH_SHAPE); a --shape flag after it wins.
    let argv: Vec<String> = std::env::var("GRID_WRAPPER_SIM_SHAPE")
        .ok()
        .filter(|s| !s.is_empty())
        .map(|s| format!("--shape={s}"))
        .into_iter()
        .chain(std::env::args().skip(1))
        .collect();
    let flags = match args::parse(&argv) {
        Ok(args::Parsed::Help) => {
            print!("{}", args::HELP);
            return ExitCode::SUCCESS;
        }
        Ok(args::Parsed::Run(f)) => f,
        Err(msg) => {
            eprintln!("grid-wrapper-sim: {msg}");
            return ExitCode::from(2);
        }
    };
    let done = if flags.list_bytes {
        print_list_bytes(&flags)
    } else {
        run(&flags)
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("grid-wrapper-sim: {e}");
            ExitCode::FAILURE
        }
    }
}
