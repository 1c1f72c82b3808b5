//! The I/O shell facing kube-proxy and, with `--relay-bind-address`, a site's followers: the
//! mio event loop with its two listeners (the kube-proxy port and the relay port), connections,
//! watch streams, proxy workers and the health endpoints (`/metrics`, `/debug/state`), with the
//! counters and the registry of open streams the loop records into for them. What a request
//! gets is decided by `api::decide` and written by `api::wire`; this shell only carries it out.

pub mod admission;
pub mod conn;
pub mod counters;
pub mod debug_state;
pub mod debug_topology;
pub mod event_loop;
pub mod exposition;
pub mod extras;
pub mod health;
pub mod metrics;
pub mod outbound;
pub mod process;
pub mod proxy;
pub mod refusals;
pub mod relay;
pub mod schedule;
pub mod signals;
pub mod transport;
pub mod watch;
pub mod watchers;

#[cfg(test)]
mod tests_writer_parked;
