//! The health listener's loop (see the parent module for why it is shaped so): one mio `Poll`
//! on the `health` thread owns the listening socket and every connection; each connection reads
//! its request head, gets its answer (at once, or from the debug worker), writes it, and is
//! closed once the client has closed too or a deadline passes.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::{
    request_path, response, route, route_debug, MAX_CONNECTIONS, MAX_HEAD, READ_TIMEOUT,
    WORK_TIMEOUT, WRITE_TIMEOUT,
};
use crate::cache::facts::SharedFacts;
use crate::server::extras::Extras;
use crate::writer::WriterHandle;

const LISTENER: Token = Token(0);
/// Wakes the loop when the debug worker has an answer.
const WAKER: Token = Token(1);
/// The first connection's token; tokens are never reused, so the smallest is the oldest.
const FIRST_CLIENT: usize = 2;
/// How long a connection whose answer is written waits for the client to close.
const LINGER: Duration = Duration::from_secs(2);

/// A request path for the debug worker, and the connection to answer.
type Job = (usize, String);
/// A complete response from the debug worker, for its connection.
type Done = (usize, Vec<u8>);

/// Where a connection is.
#[derive(Debug)]
enum Phase {
    /// Reading its request head.
    Reading,
    /// Its request is with the debug worker.
    Waiting,
    /// Writing its answer (`sent` bytes of `out` so far).
    Writing { out: Vec<u8>, sent: usize },
    /// Answer written and our side shut: discarding what the client still sends until it
    /// closes too (closing with unread bytes would reset the connection, and a client could
    /// lose the answer), or until [`LINGER`] has passed.
    Draining,
}

/// What a connection needs from the loop next.
#[derive(Debug)]
enum Next {
    /// Nothing until its socket is ready or its deadline passes.
    Wait,
    /// Done, or given up: close it.
    Close,
    /// Its request head is in: answer the request for this path.
    Answer(String),
}

#[derive(Debug)]
struct Client {
    sock: TcpStream,
    head: Vec<u8>,
    phase: Phase,
    deadline: Instant,
}

impl Client {
    /// Moves the connection on as far as it goes without blocking; `timed_out`: its deadline
    /// passed (a head is then answered from what came, as at its end; anything else closed).
    fn advance(&mut self, timed_out: bool) -> Next {
        match &mut self.phase {
            Phase::Reading if timed_out => Next::Answer(request_path(&self.head)),
            Phase::Reading => self.read(),
            Phase::Waiting if timed_out => Next::Close,
            Phase::Waiting => Next::Wait,
            Phase::Writing { .. } | Phase::Draining if timed_out => Next::Close,
            Phase::Writing { out, sent } => loop {
                match self.sock.write(&out[*sent..]) {
                    Ok(0) => break Next::Close,
                    Ok(n) => {
                        *sent += n;
                        if *sent == out.len() {
                            let _ = self.sock.shutdown(std::net::Shutdown::Write);
                            self.phase = Phase::Draining;
                            self.deadline = Instant::now() + LINGER;
                            break self.drain();
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Next::Wait,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        debug!("health: write failed: {e}");
                        break Next::Close;
                    }
                }
            },
            Phase::Draining => self.drain(),
        }
    }

    /// Discards what the client sends after its answer; closes at its end.
    fn drain(&mut self) -> Next {
        let mut buf = [0u8; 1024];
        loop {
            match self.sock.read(&mut buf) {
                Ok(0) => return Next::Close,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
    }

    /// Reads what has come of the request head: complete at its blank line, at [`MAX_HEAD`]
    /// bytes or when the client stops sending (answered from what came, as ever).
    fn read(&mut self) -> Next {
        let mut buf = [0u8; 1024];
        loop {
            let room = MAX_HEAD.saturating_sub(self.head.len()).min(buf.len());
            if room == 0 {
                return Next::Answer(request_path(&self.head));
            }
            match self.sock.read(&mut buf[..room]) {
                Ok(0) => return Next::Answer(request_path(&self.head)),
                Ok(n) => {
                    let from = self.head.len().saturating_sub(3);
                    self.head.extend_from_slice(&buf[..n]);
                    if self.head[from..].windows(4).any(|w| w == b"\r\n\r\n") {
                        return Next::Answer(request_path(&self.head));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    debug!("health: read failed: {e}");
                    return Next::Close;
                }
            }
        }
    }

    /// Starts writing `out`, with [`WRITE_TIMEOUT`] to do it.
    fn reply(&mut self, out: Vec<u8>, now: Instant) {
        self.phase = Phase::Writing { out, sent: 0 };
        self.deadline = now + WRITE_TIMEOUT;
    }
}

/// The listener, its connections and the debug worker's channels.
#[derive(Debug)]
pub(super) struct HealthLoop {
    poll: Poll,
    listener: TcpListener,
    waker: Arc<Waker>,
    clients: BTreeMap<usize, Client>,
    next_id: usize,
    facts: Arc<SharedFacts>,
    writer: WriterHandle,
    extras: Arc<Extras>,
    /// The debug worker's queue, once it is started.
    worker: Option<Sender<Job>>,
    done_tx: Sender<Done>,
    done_rx: Receiver<Done>,
}

impl HealthLoop {
    /// Registers `listener` (made non-blocking) with a new poll.
    pub(super) fn new(
        listener: std::net::TcpListener,
        facts: Arc<SharedFacts>,
        writer: WriterHandle,
        extras: Arc<Extras>,
    ) -> io::Result<HealthLoop> {
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (done_tx, done_rx) = mpsc::channel();
        Ok(HealthLoop {
            poll,
            listener,
            waker,
            clients: BTreeMap::new(),
            next_id: FIRST_CLIENT,
            facts,
            writer,
            extras,
            worker: None,
            done_tx,
            done_rx,
        })
    }

    /// Serves until polling fails (it does not, short of a broken process).
    pub(super) fn run(mut self) {
        let mut events = Events::with_capacity(128);
        loop {
            let now = Instant::now();
            // Wake for the nearest deadline (a millisecond after it: it is then past).
            let timeout = self
                .clients
                .values()
                .map(|c| c.deadline)
                .min()
                .map(|d| d.saturating_duration_since(now) + Duration::from_millis(1));
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    warn!("health: poll failed, the health listener stops: {e}");
                    return;
                }
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => self.take_answers(),
                    Token(id) => self.advance(id, false),
                }
            }
            let now = Instant::now();
            let due: Vec<usize> = self
                .clients
                .iter()
                .filter(|(_, c)| c.deadline <= now)
                .map(|(id, _)| *id)
                .collect();
            for id in due {
                self.advance(id, true);
            }
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut sock, peer)) => {
                    if self.clients.len() >= MAX_CONNECTIONS {
                        if let Some((old, _)) = self.clients.first_key_value() {
                            let old = *old;
                            debug!("health: {MAX_CONNECTIONS} connections open; closing the oldest for {peer}");
                            self.close(old);
                        }
                    }
                    let id = self.next_id;
                    self.next_id += 1;
                    let interest = Interest::READABLE | Interest::WRITABLE;
                    if let Err(e) = self
                        .poll
                        .registry()
                        .register(&mut sock, Token(id), interest)
                    {
                        warn!("health: cannot register {peer}: {e}");
                        continue;
                    }
                    let client = Client {
                        sock,
                        head: Vec::new(),
                        phase: Phase::Reading,
                        deadline: Instant::now() + READ_TIMEOUT,
                    };
                    self.clients.insert(id, client);
                    // The head may be there already.
                    self.advance(id, false);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors, say: the next connection tries again.
                    warn!("health: accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Moves connection `id` on (see [`Client::advance`]) until it waits or is closed.
    fn advance(&mut self, id: usize, timed_out: bool) {
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        match client.advance(timed_out) {
            Next::Wait => {}
            Next::Close => self.close(id),
            Next::Answer(path) => {
                let now = Instant::now();
                match route(&path, &self.facts, &self.extras) {
                    Some((code, content_type, body)) => {
                        client.reply(response(code, content_type, &body), now);
                    }
                    None => {
                        client.phase = Phase::Waiting;
                        client.deadline = now + WORK_TIMEOUT;
                        if !self.queue(id, path) {
                            let body = "debug worker unavailable";
                            if let Some(client) = self.clients.get_mut(&id) {
                                client.reply(response(503, super::TEXT, body), now);
                            }
                        }
                    }
                }
                self.advance(id, false);
            }
        }
    }

    /// Hands `path` to the debug worker (started on first use); false if it cannot be.
    fn queue(&mut self, id: usize, path: String) -> bool {
        if self.worker.is_none() {
            self.worker = self.start_worker();
        }
        let sent = self
            .worker
            .as_ref()
            .is_some_and(|w| w.send((id, path)).is_ok());
        if !sent {
            // Gone (it panicked): the next request starts another.
            self.worker = None;
        }
        sent
    }

    fn start_worker(&self) -> Option<Sender<Job>> {
        let (tx, rx) = mpsc::channel::<Job>();
        let (writer, extras) = (self.writer.clone(), self.extras.clone());
        let (done, waker) = (self.done_tx.clone(), self.waker.clone());
        let started = std::thread::Builder::new()
            .name("health-debug".into())
            .spawn(move || {
                for (id, path) in rx {
                    let (code, content_type, body) = route_debug(&path, &writer, &extras);
                    if done
                        .send((id, response(code, content_type, &body)))
                        .is_err()
                    {
                        return;
                    }
                    if let Err(e) = waker.wake() {
                        warn!("health: cannot wake the loop: {e}");
                    }
                }
            });
        match started {
            Ok(_) => Some(tx),
            Err(e) => {
                warn!("health: cannot start the debug worker: {e}");
                None
            }
        }
    }

    /// The debug worker's answers, to their connections (if still open).
    fn take_answers(&mut self) {
        while let Ok((id, out)) = self.done_rx.try_recv() {
            if let Some(client) = self.clients.get_mut(&id) {
                if matches!(client.phase, Phase::Waiting) {
                    client.reply(out, Instant::now());
                    self.advance(id, false);
                }
            }
        }
    }

    fn close(&mut self, id: usize) {
        if let Some(mut client) = self.clients.remove(&id) {
            let _ = self.poll.registry().deregister(&mut client.sock);
        }
    }
}
