//! One listening socket's life and the registry of its accepted connections, for `/sim/refuse`
//! and `--start-refusing` (the simulator may listen on several addresses, `--listen A --listen
//! B`, one [`Listen`] each, all serving the same store): an outage closes the listener (new connections get ECONNREFUSED), cuts
//! every accepted connection (watch streams end without their terminating chunk, idle
//! keep-alive connections are closed), waits, then listens again on the same address and port
//! (`TcpListener::bind` sets `SO_REUSEADDR` on Unix, so connections left in TIME_WAIT do not
//! block the rebind). The accept loop owns the listener; a connection thread asks it to close
//! and waits for that before answering, so a client that got the answer is refused at once.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long a refusal waits for the accept loop to close the listener.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How long the accept loop keeps retrying to listen again after an outage.
const REBIND_FOR: Duration = Duration::from_secs(30);
/// Pause between rebind attempts.
const REBIND_PAUSE: Duration = Duration::from_millis(50);

#[derive(Debug, Default)]
struct ListenerState {
    /// The listener's address, once serving.
    addr: Option<SocketAddr>,
    /// A requested or running outage ends at this instant.
    refuse_until: Option<Instant>,
    /// The listener is closed (an outage is running).
    closed: bool,
    /// Outages completed or running.
    outages: u64,
}

/// Registry ids, unique across every listener of the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Listener state shared by the accept loop and the connection threads.
#[derive(Debug, Default)]
pub struct Listen {
    state: Mutex<ListenerState>,
    changed: Condvar,
    conns: Mutex<HashMap<u64, TcpStream>>,
    /// Bumped when an outage starts: watches served from this listener end.
    generation: AtomicU64,
    /// Watch streams open on connections of this listener.
    pub open_watches: AtomicUsize,
    /// Requests answered on connections of this listener (`/sim/` control requests excepted).
    pub requests: AtomicU64,
}

/// A registered connection; deregistered on drop.
#[derive(Debug)]
pub struct Registered<'a> {
    listen: &'a Listen,
    /// Registry id (to spare the caller's own connection in [`Listen::cut_others`]).
    pub id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.listen.lock_conns().remove(&self.id);
    }
}

/// Where to connect to reach a listener bound to `addr` (unspecified → loopback).
fn reachable(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

impl Listen {
    fn lock(&self) -> MutexGuard<'_, ListenerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_conns(&self) -> MutexGuard<'_, HashMap<u64, TcpStream>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Called by the accept loop once with its address.
    pub fn set_addr(&self, addr: SocketAddr) {
        self.lock().addr = Some(addr);
    }

    /// The listener's address, once serving.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.lock().addr
    }

    /// Whether an outage is requested or running.
    pub fn refusing(&self) -> bool {
        let st = self.lock();
        st.closed || st.refuse_until.is_some()
    }

    /// Outages started so far; a watch that sees it change ends.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Asks for an outage ending at `until` (taken up by the accept loop at its next turn; a
    /// refusal in progress keeps its own end).
    pub fn schedule(&self, until: Instant) {
        let mut st = self.lock();
        if st.refuse_until.is_none() {
            st.refuse_until = Some(until);
        }
    }

    /// The end of a requested outage, if one is pending.
    pub fn pending(&self) -> Option<Instant> {
        self.lock().refuse_until
    }

    /// Outages completed or running.
    pub fn outages(&self) -> u64 {
        self.lock().outages
    }

    /// Registers an accepted connection (a clone of its socket, to cut it in an outage).
    /// Without a clone (fd exhaustion) the connection is served but cannot be cut.
    pub fn register(&self, sock: &TcpStream) -> u64 {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        if let Ok(clone) = sock.try_clone() {
            self.lock_conns().insert(id, clone);
        }
        id
    }

    /// The guard a connection thread holds for the registration `id`.
    pub fn guard(&self, id: u64) -> Registered<'_> {
        Registered { listen: self, id }
    }

    /// Shuts down every registered connection except `own` (both directions: the peer sees
    /// EOF, a blocked read returns, later writes fail). Returns how many.
    pub fn cut_others(&self, own: u64) -> usize {
        let conns = self.lock_conns();
        conns
            .iter()
            .filter(|(id, _)| **id != own)
            .map(|(_, s)| {
                let _ = s.shutdown(Shutdown::Both);
            })
            .count()
    }

    /// Connection-thread side of `/sim/refuse`: asks the accept loop to close the listener until
    /// `until` and waits (bounded) until it has. Returns the listener's address.
    pub fn refuse(&self, until: Instant) -> Result<SocketAddr, String> {
        let addr = {
            let mut st = self.lock();
            let addr = st.addr.ok_or("the simulator is not listening")?;
            if st.refuse_until.is_some() {
                return Err("a refusal is already in progress".into());
            }
            st.refuse_until = Some(until);
            addr
        };
        // Wake the accept loop (it sees the request after `accept` returns); refused or reset
        // once the listener is gone, which is fine.
        let _ = TcpStream::connect_timeout(&reachable(addr), Duration::from_secs(1));
        let deadline = Instant::now() + CLOSE_WAIT;
        let mut st = self.lock();
        while !st.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("the accept loop did not close the listener".into());
            }
            st = self
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        Ok(addr)
    }

    /// Accept-loop side: `listener` has just been dropped; marks the outage, waits until its
    /// end, and listens again on `addr` (retrying for a while if the port is busy).
    pub fn outage(&self, addr: SocketAddr, until: Instant) -> io::Result<TcpListener> {
        {
            let mut st = self.lock();
            st.closed = true;
            st.outages += 1;
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        self.changed.notify_all();
        log::info!(
            "refusing connections on {addr} for {:?}",
            until - Instant::now()
        );
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
        let give_up = Instant::now() + REBIND_FOR;
        let listener = loop {
            match TcpListener::bind(addr) {
                Ok(l) => break l,
                Err(e) if Instant::now() < give_up => {
                    log::warn!("listen again on {addr}: {e} (retrying)");
                    std::thread::sleep(REBIND_PAUSE);
                }
                Err(e) => return Err(e),
            }
        };
        {
            let mut st = self.lock();
            st.closed = false;
            st.refuse_until = None;
        }
        self.changed.notify_all();
        log::info!("listening again on {addr}");
        Ok(listener)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reachable_maps_unspecified_to_loopback() {
        let a: SocketAddr = "0.0.0.0:8080".parse().expect("addr");
        assert_eq!(reachable(a), "127.0.0.1:8080".parse().expect("addr"));
        let a: SocketAddr = "[::]:81".parse().expect("addr");
        assert_eq!(reachable(a), "[::1]:81".parse().expect("addr"));
        let a: SocketAddr = "127.0.0.2:1".parse().expect("addr");
        assert_eq!(reachable(a), a);
    }

    #[test]
    fn registry_cuts_all_but_the_own_connection() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let listen = Listen::default();
        let c1 = TcpStream::connect(addr).expect("c1");
        let s1 = l.accept().expect("s1").0;
        let c2 = TcpStream::connect(addr).expect("c2");
        let s2 = l.accept().expect("s2").0;
        listen.register(&s1);
        let id2 = listen.register(&s2);
        {
            let _g = listen.guard(id2);
        }
        assert_eq!(listen.cut_others(id2), 1, "id2 deregistered, id1 cut");
        c1.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut b = [0u8; 1];
        assert_eq!(c1.peek(&mut b).expect("EOF"), 0);
        // c2's server side was not cut.
        c2.set_nonblocking(true).expect("nonblocking");
        assert!(c2.peek(&mut b).is_err(), "still open (would block)");
        drop((s1, s2));
    }

    #[test]
    fn refuse_needs_a_listener_and_one_at_a_time() {
        let listen = Listen::default();
        let now = Instant::now();
        assert!(listen.refuse(now).is_err(), "not serving");
        listen.set_addr("127.0.0.1:9".parse().expect("addr"));
        listen.schedule(now);
        assert!(listen.refuse(now).is_err(), "already refusing");
        assert_eq!(listen.pending(), Some(now));
    }
}
