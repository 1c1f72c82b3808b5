//! The I/O shell facing kube-proxy: the mio event loop, connections, watch streams, proxy
//! workers and the health endpoints (`/metrics`, `/debug/state`), with the counters and the
//! registry of open streams the loop records into for them.

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
pub mod signals;
pub mod transport;
pub mod watch;
pub mod watchers;

#[cfg(test)]
mod tests_writer_parked;
