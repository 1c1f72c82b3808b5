//! The relay port (`--relay-bind-address`, docs/SEMANTICS.md §12), the event loop's second
//! listener: its socket, its TLS configuration (a client certificate chaining to
//! `--relay-client-ca-file` is always required; reloaded as the serving one), the relay view its
//! connections read (the upstream's objects unpruned; the writer ages its logs).
//!
//! A relay connection is a [`crate::server::conn::Conn`] of [`crate::api::decide::Side::Relay`], driven by the same
//! loop as kube-proxy's. Where the two differ:
//! - its requests' fate ([`crate::api::decide::decide`]) asks [`crate::api::relay::answer`] first (probes, discovery, 404 for what
//!   the relay view does not serve), never asks the writer for v1beta1 slices, and answers the
//!   cache routes from the relay view;
//! - the loop takes the relay port's reloaded TLS configuration ([`RelayPort`]);
//! - `/metrics` and `/debug/state` count its connections and watches apart;
//! - it has its own connection budget, a per-source limit and a per-source rate of new
//!   connections, and when full it closes its oldest connection that has completed neither a
//!   request nor a TLS handshake with a client certificate rather than refuse a new one
//!   (`server::admission`, docs/SEMANTICS.md §12.1).
//!
//! Everything proxied goes to the relay's upstream exactly as from the kube-proxy port: with the
//! caller's own `Authorization`, never the relay's credentials.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use mio::net::TcpListener;

use crate::cache::published::View;
use crate::server::conn::TlsSlot;
use crate::sync::lock;

/// The relay port: listener, TLS, and the view its connections read.
#[derive(Debug)]
pub struct RelayPort {
    /// `None` once shutting down.
    pub(super) listener: Option<TcpListener>,
    /// The relay view (the writer publishes into it).
    pub(super) view: View,
    tls: Arc<rustls::ServerConfig>,
    reload: TlsSlot,
}

impl RelayPort {
    /// Binds `addr`, serving `view` with `tls` (which must require client certificates);
    /// reloaded configurations come through `reload`.
    pub fn bind(
        addr: SocketAddr,
        view: View,
        tls: Arc<rustls::ServerConfig>,
        reload: TlsSlot,
    ) -> io::Result<RelayPort> {
        Ok(RelayPort {
            listener: Some(TcpListener::bind(addr)?),
            view,
            tls,
            reload,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.listener {
            Some(l) => l.local_addr(),
            None => Err(io::Error::new(io::ErrorKind::NotConnected, "shut down")),
        }
    }

    /// The TLS configuration new relay connections get.
    pub(super) fn tls(&self) -> &Arc<rustls::ServerConfig> {
        &self.tls
    }

    /// Takes a reloaded TLS configuration, if one was handed over; open connections keep theirs.
    pub(super) fn reload_tls(&mut self) {
        if let Some(cfg) = lock(&self.reload).take() {
            self.tls = cfg;
        }
    }
}
