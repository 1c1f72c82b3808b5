//! The CRI client, the thin I/O shell around [`super::session`]: a blocking unix socket, one
//! connection reused for the calls of one poll and opened again after an error or GOAWAY, and
//! only the two read-only calls, `ListPodSandbox` and `PodSandboxStatus`, with
//! [`Client::list_sandboxes`] combining them into a poll.
//!
//! One deadline bounds a whole poll: the connect, the list and every status call share one end
//! instant (each call's `grpc-timeout` is the time left), so a runtime that stalls, answers each
//! call slowly, or never accepts the connection fails the poll once the deadline passes, never
//! later. The connect is non-blocking (a unix socket's connect waits only while the listener's
//! backlog is full, that is while the runtime's accept loop is stuck), tried again every
//! [`CONNECT_RETRY`] until the deadline.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use super::endpoint::{self, Endpoint};
use super::grpc::GrpcError;
use super::messages::{self, MessageError, PodSandbox, SandboxState, SandboxStatus};
use super::session::{Session, SessionError};

/// `:authority`, as grpc-go clients (the kubelet, crictl) send it for a unix socket.
const AUTHORITY: &str = "localhost";
/// gRPC's NOT_FOUND: a sandbox removed between the list and its status call.
const NOT_FOUND: u32 = 5;
/// How much is read from the socket at a time.
const READ_CHUNK: usize = 64 << 10;
/// How long a connect waits before trying again while the runtime's backlog is full.
pub const CONNECT_RETRY: Duration = Duration::from_millis(10);

/// Which call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    ListPodSandbox,
    PodSandboxStatus,
}

impl Call {
    fn path(self) -> &'static str {
        match self {
            Call::ListPodSandbox => messages::LIST_POD_SANDBOX,
            Call::PodSandboxStatus => messages::POD_SANDBOX_STATUS,
        }
    }

    /// The method's short name.
    pub fn name(self) -> &'static str {
        match self {
            Call::ListPodSandbox => "ListPodSandbox",
            Call::PodSandboxStatus => "PodSandboxStatus",
        }
    }
}

/// What went wrong in a call.
#[derive(Debug)]
pub enum ErrorKind {
    /// The socket could not be connected to.
    Connect(std::io::Error),
    /// Reading or writing the socket failed.
    Io(std::io::Error),
    /// The deadline (the one given to [`Client::new`]: the poll's, or the call's when it is
    /// made alone) passed before the answer was complete, or before the runtime took the
    /// connection.
    Timeout(Duration),
    /// The runtime closed the connection before answering.
    Closed,
    /// The runtime broke HTTP/2, HPACK or gRPC, or answered with an error status.
    Protocol(SessionError),
    /// The answer message is not the expected CRI message.
    Message(MessageError),
}

/// A failed call: which endpoint, which call, what went wrong.
#[derive(Debug)]
pub struct Error {
    pub endpoint: String,
    pub call: Call,
    pub kind: ErrorKind,
}

impl Error {
    /// The gRPC status code, when the runtime answered with one.
    pub fn grpc_code(&self) -> Option<u32> {
        match &self.kind {
            ErrorKind::Protocol(SessionError::Grpc(GrpcError::Status { code, .. })) => Some(*code),
            _ => None,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "container runtime {}: {}: ",
            self.endpoint,
            self.call.name()
        )?;
        match &self.kind {
            ErrorKind::Connect(e) => write!(f, "cannot connect: {e}"),
            ErrorKind::Io(e) => write!(f, "socket error: {e}"),
            ErrorKind::Timeout(d) => write!(
                f,
                "no complete answer within {} ms, the poll's deadline",
                d.as_millis()
            ),
            ErrorKind::Closed => f.write_str("the runtime closed the connection before answering"),
            ErrorKind::Protocol(e) => e.fmt(f),
            ErrorKind::Message(e) => write!(f, "bad answer: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// A READY sandbox with its Pod's identity and its addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadySandbox {
    pub namespace: String,
    pub name: String,
    /// The sandbox metadata's uid: the Pod's, except for static pods (the kubelet's hash).
    pub uid: String,
    pub attempt: u32,
    /// Nanoseconds since the Unix epoch.
    pub created_at: i64,
    /// `ip` then `additional_ips`, empty ones left out (a host-network pod has none).
    pub ips: Vec<String>,
}

/// What one poll of every sandbox saw ([`Client::list_sandboxes`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandboxes {
    /// Every READY sandbox with its addresses.
    pub ready: Vec<ReadySandbox>,
    /// The pods (namespace, name) of the sandboxes listed NOTREADY, or READY but no longer by
    /// their status.
    pub not_ready: Vec<(String, String)>,
}

/// A connection and its HTTP/2 state.
struct Conn {
    socket: UnixStream,
    session: Session,
}

/// A client of one runtime endpoint.
pub struct Client {
    endpoint: Endpoint,
    deadline: Duration,
    conn: Option<Conn>,
}

impl Client {
    /// A client of `endpoint` (`unix:///path` or a bare path) whose polls each end within
    /// `deadline` (a call made alone, within the same). No connection is made until the first
    /// call.
    pub fn new(endpoint: &str, deadline: Duration) -> Result<Client, endpoint::EndpointError> {
        Ok(Client {
            endpoint: endpoint::parse(endpoint)?,
            deadline,
            conn: None,
        })
    }

    /// The endpoint as given.
    pub fn endpoint(&self) -> &str {
        &self.endpoint.text
    }

    /// `ListPodSandbox` with the READY filter, alone (within one deadline).
    pub fn list_pod_sandbox_ready(&mut self) -> Result<Vec<PodSandbox>, Error> {
        let end = Instant::now() + self.deadline;
        self.list_pod_sandbox(&messages::list_ready_request(), end)
    }

    /// `ListPodSandbox` with the request `request`, answered before `end`.
    fn list_pod_sandbox(&mut self, request: &[u8], end: Instant) -> Result<Vec<PodSandbox>, Error> {
        let answer = self.call(Call::ListPodSandbox, request, end)?;
        messages::decode_list(&answer)
            .map_err(|e| self.error(Call::ListPodSandbox, ErrorKind::Message(e)))
    }

    /// `PodSandboxStatus` of one sandbox, alone (within one deadline).
    pub fn pod_sandbox_status(&mut self, id: &str) -> Result<SandboxStatus, Error> {
        let end = Instant::now() + self.deadline;
        self.pod_sandbox_status_until(id, end)
    }

    /// `PodSandboxStatus` of one sandbox, answered before `end`.
    fn pod_sandbox_status_until(&mut self, id: &str, end: Instant) -> Result<SandboxStatus, Error> {
        let answer = self.call(Call::PodSandboxStatus, &messages::status_request(id), end)?;
        messages::decode_status(&answer)
            .map_err(|e| self.error(Call::PodSandboxStatus, ErrorKind::Message(e)))
    }

    /// One poll: every READY sandbox with its addresses, on one connection closed at the end,
    /// within one deadline. A sandbox gone between the list and its status (NOT_FOUND), or no
    /// longer ready, is left out; any other failure fails the poll.
    pub fn list_ready_sandboxes(&mut self) -> Result<Vec<ReadySandbox>, Error> {
        let result = self.poll(&messages::list_ready_request());
        self.conn = None;
        result.map(|s| s.ready)
    }

    /// One poll of every sandbox (`ListPodSandbox` without a filter), within one deadline: the
    /// READY ones with their addresses as [`Client::list_ready_sandboxes`] gives them, and the
    /// pods of the others.
    pub fn list_sandboxes(&mut self) -> Result<Sandboxes, Error> {
        let result = self.poll(&messages::list_all_request());
        self.conn = None;
        result
    }

    /// The calls of one poll, all of them before one end instant.
    fn poll(&mut self, request: &[u8]) -> Result<Sandboxes, Error> {
        let end = Instant::now() + self.deadline;
        let mut seen = Sandboxes::default();
        for sandbox in self.list_pod_sandbox(request, end)? {
            if sandbox.id.len() > messages::MAX_SANDBOX_ID {
                continue;
            }
            let pod = || {
                let m = &sandbox.metadata;
                (m.namespace.clone(), m.name.clone())
            };
            if sandbox.state != SandboxState::Ready {
                seen.not_ready.push(pod());
                continue;
            }
            let status = match self.pod_sandbox_status_until(&sandbox.id, end) {
                Ok(status) => status,
                Err(e) if e.grpc_code() == Some(NOT_FOUND) => continue,
                Err(e) => return Err(e),
            };
            if status.sandbox.state != SandboxState::Ready {
                seen.not_ready.push(pod());
                continue;
            }
            let ips = std::iter::once(status.ip)
                .chain(status.additional_ips)
                .filter(|ip| !ip.is_empty())
                .collect();
            let m = sandbox.metadata;
            seen.ready.push(ReadySandbox {
                namespace: m.namespace,
                name: m.name,
                uid: m.uid,
                attempt: m.attempt,
                created_at: sandbox.created_at,
                ips,
            });
        }
        Ok(seen)
    }

    fn error(&self, call: Call, kind: ErrorKind) -> Error {
        Error {
            endpoint: self.endpoint.text.clone(),
            call,
            kind,
        }
    }

    /// One unary call answered before `end`; any error drops the connection.
    fn call(&mut self, call: Call, message: &[u8], end: Instant) -> Result<Vec<u8>, Error> {
        let result = self.exchange(call, message, end);
        if result.is_err() || !self.conn.as_ref().is_some_and(|c| c.session.reusable()) {
            self.conn = None;
        }
        result.map_err(|kind| self.error(call, kind))
    }

    fn exchange(&mut self, call: Call, message: &[u8], end: Instant) -> Result<Vec<u8>, ErrorKind> {
        let deadline = self.deadline;
        let conn = match &mut self.conn {
            Some(conn) => conn,
            None => {
                let socket = connect(&self.endpoint.path, end, deadline)?;
                self.conn.insert(Conn {
                    socket,
                    session: Session::new(),
                })
            }
        };
        // The time left, as the runtime is told it (`grpc-timeout`, whole milliseconds).
        let timeout_ms = u64::try_from(remaining(end, deadline)?.as_millis())
            .unwrap_or(u64::MAX)
            .clamp(1, 99_999_999);
        conn.session
            .start_call(call.path(), AUTHORITY, timeout_ms, message)
            .map_err(ErrorKind::Protocol)?;
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            write_before(&mut conn.socket, &conn.session.take_output(), end, deadline)?;
            conn.socket
                .set_read_timeout(Some(remaining(end, deadline)?))
                .map_err(ErrorKind::Io)?;
            let n = match conn.socket.read(&mut buf) {
                Ok(0) => return Err(ErrorKind::Closed),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_error(e, deadline)),
            };
            if let Some(answer) = conn
                .session
                .receive(&buf[..n])
                .map_err(ErrorKind::Protocol)?
            {
                // Acknowledgements owed for the last frames (best effort: the call is done).
                let out = conn.session.take_output();
                if write_before(&mut conn.socket, &out, end, deadline).is_err() {
                    self.conn = None;
                }
                return Ok(answer);
            }
        }
    }
}

/// Connects to the runtime's socket before `end`. A full backlog (the runtime takes no new
/// connection) is waited out by trying again every [`CONNECT_RETRY`], never by a blocking
/// connect, which std cannot bound; any other failure is at once a connect error.
fn connect(path: &Path, end: Instant, deadline: Duration) -> Result<UnixStream, ErrorKind> {
    loop {
        match mio::net::UnixStream::connect(path) {
            Ok(socket) => {
                let socket = UnixStream::from(socket);
                socket.set_nonblocking(false).map_err(ErrorKind::Io)?;
                return Ok(socket);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(CONNECT_RETRY.min(remaining(end, deadline)?));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ErrorKind::Connect(e)),
        }
    }
}

/// Writes all of `out` before `end` (each write waits at most the time left).
fn write_before(
    socket: &mut UnixStream,
    mut out: &[u8],
    end: Instant,
    deadline: Duration,
) -> Result<(), ErrorKind> {
    while !out.is_empty() {
        socket
            .set_write_timeout(Some(remaining(end, deadline)?))
            .map_err(ErrorKind::Io)?;
        match socket.write(out) {
            Ok(0) => return Err(ErrorKind::Closed),
            Ok(n) => out = out.get(n..).unwrap_or_default(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e, deadline)),
        }
    }
    Ok(())
}

/// The time left before `end`, or the timeout error once none is.
fn remaining(end: Instant, deadline: Duration) -> Result<Duration, ErrorKind> {
    let left = end.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(ErrorKind::Timeout(deadline));
    }
    Ok(left)
}

fn io_error(e: std::io::Error, deadline: Duration) -> ErrorKind {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            ErrorKind::Timeout(deadline)
        }
        _ => ErrorKind::Io(e),
    }
}
