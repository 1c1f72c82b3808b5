//! The simulator's network shell (its shared state is `shared`'s [`Shared`]),
//! the accept loop of each listener (`--listen A --listen B`: one store, the same RVs on every
//! address) with one thread per connection (closing and reopening a listener for
//! `/sim/refuse`, see `listen`), the keep-alive request loop, bearer-token checking and dispatch
//! of each routed request to lists/gets/watches, discovery, the control API (including the
//! edge-health stub and refusals, which need the connection) or the generic "record and echo"
//! answer for everything else.

use crate::api::{self, Filter};
use crate::conn::Conn;
use crate::control;
use crate::fault;
use crate::gzip;
use crate::httpio::{
    self, read_request, write_coded, write_json, write_response, write_status, Request,
};
use crate::load;
use crate::routes::{route, Discovery, Query, Route, SimOp};
pub use crate::shared::Shared;
use crate::watch::{self, WatchSpec, DEFAULT_WATCH_TIMEOUT};
use grid_wrapper::api::negotiate::Format;
use grid_wrapper::k8s::status::ApiError;
use serde_json::{json, Value};
use std::io;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

/// Idle keep-alive connections are closed after this long without a request.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// [`serve_on`] for the first listener.
pub fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> io::Result<()> {
    serve_on(listener, shared, tls, 0)
}

/// Accepts connections of listener `index` forever, one thread each. A pending refusal
/// (`/sim/refuse`, or one scheduled before the call for `--start-refusing`) closes the listener
/// for its duration, then listens again on the same address; `Err` only if that rebind keeps
/// failing.
pub fn serve_on(
    mut listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<Arc<rustls::ServerConfig>>,
    index: usize,
) -> io::Result<()> {
    let addr = listener.local_addr()?;
    let listen = shared.listen(index);
    listen.set_addr(addr);
    loop {
        if let Some(until) = listen.pending() {
            drop(listener);
            listener = listen.outage(addr, until)?;
            continue;
        }
        let sock = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) => {
                log::warn!("accept: {e}");
                continue;
            }
        };
        if listen.pending().is_some() {
            continue; // the refusal's wake-up, or a client racing it: dropped
        }
        // Registered here, before the thread runs, so a refusal cuts every accepted connection.
        let id = listen.register(&sock);
        let shared2 = Arc::clone(&shared);
        let tls = tls.clone();
        let origin = Origin {
            id,
            listener: index,
        };
        let spawned = std::thread::Builder::new()
            .name("sim-conn".into())
            .spawn(move || handle_conn(sock, &shared2, tls.as_ref(), origin));
        if let Err(e) = spawned {
            drop(listen.guard(id));
            log::warn!("cannot spawn connection thread: {e}");
        }
    }
}

/// Where a request came from: its connection's registry id and listener index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// Registry id of the connection (see `listen`).
    pub id: u64,
    /// Index of the listener that accepted it.
    pub listener: usize,
}

fn handle_conn(
    sock: TcpStream,
    shared: &Shared,
    tls: Option<&Arc<rustls::ServerConfig>>,
    origin: Origin,
) {
    let _registered = shared.listen(origin.listener).guard(origin.id);
    let peer = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let _ = sock.set_nodelay(true);
    let _ = sock.set_read_timeout(Some(IDLE_TIMEOUT));
    let mut conn = match Conn::new(sock, tls) {
        Ok(c) => c,
        Err(e) => {
            log::warn!("{peer}: {e}");
            return;
        }
    };
    let mut reader = httpio::Reader::new();
    loop {
        let req = match read_request(&mut conn, &mut reader) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                if let Some(status) = e.status() {
                    let _ = write_status(&mut conn, &status, true);
                } else {
                    log::debug!("{peer}: {e}");
                }
                break;
            }
        };
        log::debug!("{peer}: {} {}?{}", req.method, req.path, req.query);
        match handle(&mut conn, shared, &req, origin) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                log::debug!("{peer}: {e}");
                break;
            }
        }
    }
    conn.shutdown();
}

fn authorized(shared: &Shared, req: &Request, client_certificate: bool) -> bool {
    if shared.certificate_authenticates && client_certificate {
        return true;
    }
    match &shared.token {
        None => true,
        Some(t) => req
            .header_str("authorization")
            .and_then(|h| h.strip_prefix("Bearer "))
            .is_some_and(|given| given.trim() == t),
    }
}

/// Answers one request from `origin`; `Ok(true)` when the connection stays open.
pub fn handle(conn: &mut Conn, shared: &Shared, req: &Request, origin: Origin) -> io::Result<bool> {
    let r = match route(&req.method, &req.path, shared.slices) {
        // An apiserver without the resource: answered as any path it does not serve.
        r if !shared.cidrs && r.resource().is_some_and(|res| res.is_cidr()) => Route::Other,
        Route::Discovery(Discovery::NetworkingV1 { .. }) => {
            Route::Discovery(Discovery::NetworkingV1 {
                servicecidrs: shared.cidrs,
            })
        }
        r => r,
    };
    let close = !req.keep_alive();
    let mut _in_flight = None;
    if !matches!(r, Route::Sim(_) | Route::SimBad) {
        shared
            .listen(origin.listener)
            .requests
            .fetch_add(1, Ordering::Relaxed);
        let long_running = Query::parse(&req.query).is_watch();
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let (verdict, guard) = shared.load.admit(long_running, Instant::now(), unix);
        if let Some((code, secs, body)) = load::refusal_status(verdict) {
            let body = serde_json::to_vec(&body).unwrap_or_default();
            let secs = secs.to_string();
            let headers = [
                ("Content-Type", "application/json"),
                ("Retry-After", secs.as_str()),
            ];
            httpio::write_with_headers(conn, code, &headers, &body, close)?;
            return Ok(!close);
        }
        _in_flight = Some(guard);
    }
    match r {
        Route::Sim(SimOp::Refuse) => match refuse(shared, &req.body, origin) {
            Ok(v) => write_json(conn, 200, &v, true).map(|()| false),
            Err(e) => write_status(conn, &e, close).map(|()| !close),
        },
        Route::Sim(SimOp::EdgeHealth) => {
            let (code, body) = shared.edge_health.poll();
            write_response(conn, code, "application/json", &body, close)?;
            Ok(!close)
        }
        r => answer(conn, shared, req, r, origin.listener).map(|()| !close),
    }
}

/// `/sim/refuse`: closes the listener named by `listen` (every listener without it), waiting
/// until it is closed, cuts its connections but the caller's own (open watches end abruptly,
/// keep-alive connections close) and ends its watch threads; returns the answer for this
/// connection, which the caller then closes. The other listeners keep serving the same store.
fn refuse(shared: &Shared, body: &[u8], origin: Origin) -> Result<Value, ApiError> {
    let req = fault::parse_refuse(body)?;
    let targets: Vec<usize> = match &req.listen {
        None => (0..shared.listens().count()).collect(),
        Some(want) => {
            let found = shared.listens().position(|l| {
                l.addr()
                    .is_some_and(|a| a.to_string() == *want || Some(a) == want.parse().ok())
            });
            let known: Vec<String> = shared
                .listens()
                .filter_map(|l| l.addr().map(|a| a.to_string()))
                .collect();
            vec![found.ok_or_else(|| {
                ApiError::bad_request(format!(
                    "no listener {want:?} (listening on {})",
                    known.join(", ")
                ))
            })?]
        }
    };
    let conflict = |m: String| ApiError::new(409, "Conflict", m);
    if targets.iter().any(|&i| shared.listen(i).refusing()) {
        return Err(conflict("a refusal is already in progress".into()));
    }
    let until = Instant::now() + req.duration;
    let (mut addrs, mut cut, mut watches) = (Vec::new(), 0, 0);
    for &i in &targets {
        let listen = shared.listen(i);
        watches += listen.open_watches.load(Ordering::SeqCst);
        addrs.push(listen.refuse(until).map_err(conflict)?.to_string());
        cut += listen.cut_others(origin.id);
    }
    // Watch threads of the refused listeners see the new generation and end.
    shared.changed.notify_all();
    Ok(json!({"refusing": req.duration.as_secs(),
              "listen": addrs.first().cloned().unwrap_or_default(), "listens": addrs,
              "closedConnections": cut, "closedWatches": watches}))
}

fn answer(
    conn: &mut Conn,
    shared: &Shared,
    req: &Request,
    r: Route,
    listener: usize,
) -> io::Result<()> {
    let close = !req.keep_alive();
    let client_certificate = conn.client_certificate();
    // Health endpoints are public, as on an apiserver (system:public-info-viewer).
    if !matches!(r, Route::Sim(_) | Route::SimBad | Route::Health)
        && !authorized(shared, req, client_certificate)
    {
        let e = ApiError::new(401, "Unauthorized", "Unauthorized");
        return write_status(conn, &e, close);
    }
    match r {
        Route::Collection { res, ns } => {
            let q = Query::parse(&req.query);
            let format = shared.format(req.header_str("accept"));
            let filter = match Filter::new(res, ns, &q) {
                Ok(f) => f,
                Err(e) => return write_status(conn, &e, close),
            };
            if q.get("sendInitialEvents").is_some() {
                // WatchList is not simulated: answer like an apiserver with the gate off.
                let msg = if q.is_watch() {
                    "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: \
                     sendInitialEvents is forbidden for watch unless the WatchList feature gate \
                     is enabled"
                } else {
                    "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: \
                     sendInitialEvents is forbidden for list"
                };
                let mut e = ApiError::invalid(msg);
                e.kind = Some("ListOptions".into());
                return write_status(conn, &e, close);
            }
            if q.is_watch() {
                let timeout = match q.get("timeoutSeconds") {
                    None | Some("") => DEFAULT_WATCH_TIMEOUT,
                    Some(s) => match s.parse::<i64>() {
                        Ok(n) if n > 0 => Duration::from_secs(n.unsigned_abs()),
                        Ok(_) => DEFAULT_WATCH_TIMEOUT,
                        Err(_) => {
                            let e = ApiError::bad_request(format!("invalid timeoutSeconds {s:?}"));
                            return write_status(conn, &e, close);
                        }
                    },
                };
                let spec = WatchSpec {
                    res,
                    filter,
                    rv: q.get("resourceVersion").map(str::to_string),
                    bookmarks: q.get("allowWatchBookmarks") == Some("true"),
                    timeout,
                    format,
                };
                shared.log_served(req, "watch", format, None, (0, 0));
                return watch::run(conn, shared, &spec, close, listener);
            }
            shared.served_lists.fetch_add(1, Ordering::Relaxed);
            let (objs, rv) = {
                let store = shared.store.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(st) = store.too_large_status(q.get("resourceVersion")) {
                    drop(store);
                    let body = serde_json::to_vec(&st).unwrap_or_default();
                    return write_response(conn, 504, "application/json", &body, close);
                }
                api::list(&store, res)
            };
            let body = match format {
                Format::Json => api::list_body(res, &objs, rv, &filter),
                Format::Protobuf => api::list_body_protobuf(res, &objs, rv, &filter),
            };
            drop(objs);
            let plain = body.len();
            let (coding, sent) = match gzip::compress(req.header_str("accept-encoding"), &body) {
                Some(packed) => (Some("gzip"), packed),
                None => (None, body),
            };
            shared.log_served(req, "list", format, coding, (sent.len(), plain));
            write_coded(conn, 200, format.content_type(), coding, &sent, close)
        }
        Route::Object { res, ns, name } => {
            shared.served_gets.fetch_add(1, Ordering::Relaxed);
            let got = {
                let store = shared.store.lock().unwrap_or_else(PoisonError::into_inner);
                api::get(&store, res, ns.as_deref(), &name)
            };
            match (got, shared.format(req.header_str("accept"))) {
                (Ok(v), Format::Json) => write_json(conn, 200, &v, close),
                (Ok(v), Format::Protobuf) => {
                    shared.protobuf_gets.fetch_add(1, Ordering::Relaxed);
                    let body = api::object_body_protobuf(res, &v);
                    write_response(conn, 200, Format::Protobuf.content_type(), &body, close)
                }
                (Err(e), _) => write_status(conn, &e, close),
            }
        }
        Route::Discovery(Discovery::Version) => {
            write_json(conn, 200, &api::version(shared.kube_minor), close)
        }
        Route::Discovery(d) => write_json(conn, 200, &api::discovery(&d, shared.slices), close),
        Route::Health => write_response(conn, 200, "text/plain; charset=utf-8", b"ok", close),
        Route::Sim(op) => match control::handle(shared, op, &req.body) {
            Ok(v) => write_json(conn, 200, &v, close),
            Err(e) => write_status(conn, &e, close),
        },
        Route::SimBad => {
            let e = ApiError::new(
                404,
                "NotFound",
                format!("no control operation {} {}", req.method, req.path),
            );
            write_status(conn, &e, close)
        }
        Route::Other => {
            shared.record(req, listener, client_certificate);
            other(conn, req)
        }
    }
}

/// The generic answer for unserved requests: POST echoes with 201, PATCH/PUT with 200,
/// DELETE gets a Success Status, anything else a 404 Status.
fn other(conn: &mut Conn, req: &Request) -> io::Result<()> {
    let close = !req.keep_alive();
    let ctype = req.header_str("content-type").unwrap_or("application/json");
    match req.method.as_str() {
        "POST" => write_response(conn, 201, ctype, &req.body, close),
        "PATCH" | "PUT" => write_response(conn, 200, ctype, &req.body, close),
        "DELETE" => {
            let ok = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Success", "code": 200});
            write_json(conn, 200, &ok, close)
        }
        m => {
            let e = ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            );
            // A HEAD answer must not carry a body; closing keeps the framing honest.
            httpio::write_status(conn, &e, close || m == "HEAD")
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::shared::Recorded;

    #[test]
    fn recorded_bodies_are_padded_standard_base64() {
        let cases: &[(&[u8], &str)] = &[
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
            (b"k8s\x00\xff\xfe", "azhzAP/+"),
        ];
        for (input, want) in cases {
            let rec = Recorded {
                method: "POST".into(),
                path: "/".into(),
                query: String::new(),
                headers: Vec::new(),
                body: input.to_vec(),
                listen: String::new(),
                client_certificate: false,
            };
            assert_eq!(rec.to_json()["body"], *want);
            assert_eq!(rec.to_json()["bodyLength"], input.len());
        }
    }
}
