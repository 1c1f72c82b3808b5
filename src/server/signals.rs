//! Signals (I/O shell): SIGTERM/SIGINT start a graceful shutdown, SIGHUP reloads the serving
//! certificate, key and client CA, and the relay port's (`--relay-bind-address`) the same way.
//! The files are also reloaded when they change (checked every few seconds), as a
//! kubelet-rotated or cert-manager-renewed certificate never sends SIGHUP.
//!
//! A reload that fails (unreadable file, key that does not match, bad PEM) keeps the old
//! configuration and logs why; open connections — watches included — always keep the
//! configuration they were accepted with.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use log::{info, warn};
use mio::Waker;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::server::conn::TlsSlot;
use crate::server::transport::{self, TlsFlags};
use crate::sync::lock;

/// How often the signal thread looks for signals.
const TICK: Duration = Duration::from_millis(100);
/// How often the TLS files' modification times are compared.
const FILE_CHECK: Duration = Duration::from_secs(5);

/// One port's TLS files, and where a reloaded configuration goes.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Which port's: the flags its files come from ([`TlsFlags::SERVING`], [`TlsFlags::RELAY`]).
    pub flags: TlsFlags,
    /// The certificate (`--cert-file`, `--relay-cert-file`).
    pub cert: PathBuf,
    /// The key.
    pub key: PathBuf,
    /// The client CA, if any.
    pub ca: Option<PathBuf>,
    /// The loop takes new configurations from here.
    pub slot: TlsSlot,
}

impl TlsFiles {
    fn stamps(&self) -> Vec<Option<SystemTime>> {
        let mut paths = vec![&self.cert, &self.key];
        paths.extend(self.ca.as_ref());
        paths
            .into_iter()
            .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
            .collect()
    }

    fn reload(&self, why: &str) {
        let what = if self.flags == TlsFlags::RELAY {
            "relay certificate"
        } else {
            "serving certificate"
        };
        match transport::server_config(self.flags, &self.cert, &self.key, self.ca.as_deref()) {
            Ok(cfg) => {
                *lock(&self.slot) = Some(cfg);
                info!(
                    "{why}: {what} reloaded from {}; new connections use it, open ones keep theirs",
                    self.cert.display()
                );
            }
            Err(e) => warn!("{why}: keeping the current {what}: {e}"),
        }
    }
}

/// Starts the signal thread. The first SIGTERM/SIGINT sets `stop` and wakes the loop; a second
/// one exits at once (code 1) in case the graceful path hangs. `tls`: every port's TLS files
/// (none when serving plain HTTP without a relay port).
pub fn spawn(stop: Arc<AtomicBool>, waker: Arc<Waker>, tls: Vec<TlsFiles>) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut stamps: Vec<_> = tls.iter().map(TlsFiles::stamps).collect();
            let mut checked = Instant::now();
            loop {
                for sig in signals.pending() {
                    match sig {
                        SIGHUP if tls.is_empty() => {
                            info!("SIGHUP: nothing to reload (serving plain HTTP)");
                        }
                        SIGHUP => {
                            for (files, stamp) in tls.iter().zip(stamps.iter_mut()) {
                                files.reload("SIGHUP");
                                *stamp = files.stamps();
                            }
                            let _ = waker.wake();
                        }
                        _ if stop.swap(true, Ordering::SeqCst) => {
                            warn!("second termination signal: exiting at once");
                            std::process::exit(1);
                        }
                        _ => {
                            let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
                            info!("{name}: shutting down");
                            if let Err(e) = waker.wake() {
                                warn!("cannot wake the event loop: {e}");
                            }
                        }
                    }
                }
                if !tls.is_empty() && checked.elapsed() >= FILE_CHECK {
                    checked = Instant::now();
                    for (files, stamp) in tls.iter().zip(stamps.iter_mut()) {
                        let now = files.stamps();
                        if *stamp != now {
                            *stamp = now;
                            files.reload("certificate files changed");
                            let _ = waker.wake();
                        }
                    }
                }
                std::thread::sleep(TICK);
            }
        })
        .map(|_| ())
}
