//! The CRI messages (`runtime.v1`, k8s.io/cri-api `api.proto`) of the two read-only calls the
//! client makes, and only the fields it needs: the requests, written with `proto::wire`, and the
//! answers, read with [`crate::proto::read`]. Unknown fields are skipped; a repeated singular field
//! keeps its last value (as protobuf's own decoders do for scalars).

use crate::proto::read::{self, PbError, Value};
use crate::proto::wire;

/// `/runtime.v1.RuntimeService/ListPodSandbox`.
pub const LIST_POD_SANDBOX: &str = "/runtime.v1.RuntimeService/ListPodSandbox";
/// `/runtime.v1.RuntimeService/PodSandboxStatus`.
pub const POD_SANDBOX_STATUS: &str = "/runtime.v1.RuntimeService/PodSandboxStatus";

/// The longest sandbox id sent back in a PodSandboxStatus request (runtimes use 64 hex digits).
pub const MAX_SANDBOX_ID: usize = 1024;

/// A sandbox's state (`PodSandboxState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxState {
    /// SANDBOX_READY (0).
    Ready,
    /// SANDBOX_NOTREADY (1), or a value a newer runtime added.
    NotReady(i32),
}

impl Default for SandboxState {
    /// proto3's default, as an absent field reads.
    fn default() -> Self {
        SandboxState::Ready
    }
}

impl SandboxState {
    fn from_wire(v: u64) -> SandboxState {
        match v as i32 {
            0 => SandboxState::Ready,
            other => SandboxState::NotReady(other),
        }
    }
}

/// `PodSandboxMetadata`: the Pod's name, uid and namespace, and the sandbox's attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxMetadata {
    pub name: String,
    pub uid: String,
    pub namespace: String,
    pub attempt: u32,
}

/// One item of a `ListPodSandboxResponse`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSandbox {
    pub id: String,
    pub metadata: SandboxMetadata,
    pub state: SandboxState,
    /// Nanoseconds since the Unix epoch.
    pub created_at: i64,
}

/// The fields of a `PodSandboxStatus` (in `PodSandboxStatusResponse.status`) the client uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxStatus {
    /// The fields a status shares with a [`PodSandbox`] (id, metadata, state, created_at).
    pub sandbox: PodSandbox,
    /// `network.ip`: empty for host-network pods and sandboxes without a network.
    pub ip: String,
    /// `network.additional_ips[].ip`: the other family's address in a dual-stack cluster.
    pub additional_ips: Vec<String>,
}

/// Why an answer message was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageError {
    /// Bad protobuf, in the named message.
    Protobuf {
        message: &'static str,
        error: PbError,
    },
    /// A field with the wrong wire type.
    WireType { message: &'static str, field: u32 },
    /// The status answer had no `status`.
    NoStatus,
}

impl std::fmt::Display for MessageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MessageError::Protobuf { message, error } => write!(f, "{message}: {error}"),
            MessageError::WireType { message, field } => {
                write!(f, "{message}: field {field} has the wrong wire type")
            }
            MessageError::NoStatus => f.write_str("PodSandboxStatusResponse without a status"),
        }
    }
}

/// `ListPodSandboxRequest{filter: {state: {state: SANDBOX_READY}}}`: the empty state message
/// must be sent, READY being proto3's default value.
pub fn list_ready_request() -> Vec<u8> {
    let mut buf = Vec::new();
    wire::put_nested(&mut buf, 1, |filter| {
        wire::put_nested(filter, 2, |_state| {})
    });
    buf
}

/// `ListPodSandboxRequest{}`: every sandbox, whatever its state (an empty message).
pub fn list_all_request() -> Vec<u8> {
    Vec::new()
}

/// `PodSandboxStatusRequest{pod_sandbox_id: id, verbose: false}`.
pub fn status_request(id: &str) -> Vec<u8> {
    let mut buf = Vec::new();
    wire::put_bytes(&mut buf, 1, id.as_bytes());
    buf
}

/// Visits every field of `buf`, naming `message` in errors.
fn each<'a>(
    message: &'static str,
    buf: &'a [u8],
    mut visit: impl FnMut(u32, Value<'a>) -> Result<(), MessageError>,
) -> Result<(), MessageError> {
    for field in read::fields(buf) {
        let (number, value) = field.map_err(|error| MessageError::Protobuf { message, error })?;
        visit(number, value)?;
    }
    Ok(())
}

fn bytes<'a>(message: &'static str, field: u32, v: Value<'a>) -> Result<&'a [u8], MessageError> {
    match v {
        Value::Bytes(b) => Ok(b),
        _ => Err(MessageError::WireType { message, field }),
    }
}

fn varint(message: &'static str, field: u32, v: Value<'_>) -> Result<u64, MessageError> {
    match v {
        Value::Varint(n) => Ok(n),
        _ => Err(MessageError::WireType { message, field }),
    }
}

fn string(message: &'static str, field: u32, v: Value<'_>) -> Result<String, MessageError> {
    read::string(field, bytes(message, field, v)?)
        .map_err(|error| MessageError::Protobuf { message, error })
}

fn metadata(buf: &[u8]) -> Result<SandboxMetadata, MessageError> {
    const M: &str = "PodSandboxMetadata";
    let mut m = SandboxMetadata::default();
    each(M, buf, |n, v| {
        match n {
            1 => m.name = string(M, n, v)?,
            2 => m.uid = string(M, n, v)?,
            3 => m.namespace = string(M, n, v)?,
            4 => m.attempt = varint(M, n, v)? as u32,
            _ => {}
        }
        Ok(())
    })?;
    Ok(m)
}

impl PodSandbox {
    /// Reads field `n` of a `PodSandbox` or a `PodSandboxStatus`: their first four fields are
    /// the same (id, metadata, state, created_at).
    fn field(&mut self, message: &'static str, n: u32, v: Value<'_>) -> Result<(), MessageError> {
        match n {
            1 => self.id = string(message, n, v)?,
            2 => self.metadata = metadata(bytes(message, n, v)?)?,
            3 => self.state = SandboxState::from_wire(varint(message, n, v)?),
            4 => self.created_at = varint(message, n, v)? as i64,
            _ => {}
        }
        Ok(())
    }
}

fn pod_sandbox(buf: &[u8]) -> Result<PodSandbox, MessageError> {
    let mut s = PodSandbox::default();
    each("PodSandbox", buf, |n, v| s.field("PodSandbox", n, v))?;
    Ok(s)
}

/// Decodes a `ListPodSandboxResponse`: its sandboxes, in the runtime's order.
pub fn decode_list(buf: &[u8]) -> Result<Vec<PodSandbox>, MessageError> {
    const M: &str = "ListPodSandboxResponse";
    let mut items = Vec::new();
    each(M, buf, |n, v| {
        if n == 1 {
            items.push(pod_sandbox(bytes(M, n, v)?)?);
        }
        Ok(())
    })?;
    Ok(items)
}

/// `PodSandboxNetworkStatus`: `ip` and `additional_ips[].ip`.
fn network(buf: &[u8], ip: &mut String, additional: &mut Vec<String>) -> Result<(), MessageError> {
    const M: &str = "PodSandboxNetworkStatus";
    each(M, buf, |n, v| {
        match n {
            1 => *ip = string(M, n, v)?,
            2 => {
                let mut one = String::new();
                each("PodIP", bytes(M, n, v)?, |n, v| {
                    if n == 1 {
                        one = string("PodIP", n, v)?;
                    }
                    Ok(())
                })?;
                additional.push(one);
            }
            _ => {}
        }
        Ok(())
    })
}

/// Decodes a `PodSandboxStatusResponse` into its status's fields the client uses.
pub fn decode_status(buf: &[u8]) -> Result<SandboxStatus, MessageError> {
    const R: &str = "PodSandboxStatusResponse";
    const M: &str = "PodSandboxStatus";
    let mut status = None;
    each(R, buf, |n, v| {
        if n == 1 {
            status = Some(bytes(R, n, v)?);
        }
        Ok(())
    })?;
    let buf = status.ok_or(MessageError::NoStatus)?;
    let mut s = SandboxStatus {
        sandbox: PodSandbox::default(),
        ip: String::new(),
        additional_ips: Vec::new(),
    };
    each(M, buf, |n, v| {
        if n == 5 {
            s.ip.clear();
            s.additional_ips.clear();
            return network(bytes(M, n, v)?, &mut s.ip, &mut s.additional_ips);
        }
        s.sandbox.field(M, n, v)
    })?;
    Ok(s)
}

/// Test helpers: the answers' encodings, as a runtime writes them.
#[cfg(test)]
pub mod encode {
    use super::*;

    fn metadata(buf: &mut Vec<u8>, m: &SandboxMetadata) {
        wire::put_nested(buf, 2, |b| {
            wire::put_bytes(b, 1, m.name.as_bytes());
            wire::put_bytes(b, 2, m.uid.as_bytes());
            wire::put_bytes(b, 3, m.namespace.as_bytes());
            wire::put_varint_field(b, 4, u64::from(m.attempt));
        });
    }

    fn state(s: SandboxState) -> u64 {
        match s {
            SandboxState::Ready => 0,
            SandboxState::NotReady(v) => v as i64 as u64,
        }
    }

    fn common(b: &mut Vec<u8>, s: &PodSandbox) {
        wire::put_bytes(b, 1, s.id.as_bytes());
        metadata(b, &s.metadata);
        wire::put_varint_field(b, 3, state(s.state));
        wire::put_varint_field(b, 4, s.created_at as u64);
    }

    /// A `ListPodSandboxResponse` with these items.
    pub fn list(items: &[PodSandbox]) -> Vec<u8> {
        let mut buf = Vec::new();
        for s in items {
            wire::put_nested(&mut buf, 1, |b| {
                common(b, s);
                wire::put_nested(b, 5, |l| {
                    wire::put_nested(l, 1, |e| wire::put_bytes(e, 1, b"k"))
                });
            });
        }
        buf
    }

    /// A `PodSandboxStatusResponse` for this status.
    pub fn status(s: &SandboxStatus) -> Vec<u8> {
        let mut buf = Vec::new();
        wire::put_nested(&mut buf, 1, |b| {
            common(b, &s.sandbox);
            wire::put_nested(b, 5, |n| {
                wire::put_bytes(n, 1, s.ip.as_bytes());
                for ip in &s.additional_ips {
                    wire::put_nested(n, 2, |p| wire::put_bytes(p, 1, ip.as_bytes()));
                }
            });
        });
        wire::put_nested(&mut buf, 2, |info| wire::put_bytes(info, 1, b"info"));
        buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str) -> SandboxMetadata {
        SandboxMetadata {
            name: name.into(),
            uid: format!("uid-{name}"),
            namespace: "default".into(),
            attempt: 2,
        }
    }

    #[test]
    fn the_ready_filter_is_the_documented_bytes() {
        assert_eq!(list_ready_request(), [0x0a, 0x02, 0x12, 0x00]);
        assert_eq!(status_request("ab"), [0x0a, 0x02, b'a', b'b']);
    }

    #[test]
    fn list_answers_decode() {
        let items = vec![
            PodSandbox {
                id: "a".into(),
                metadata: meta("web"),
                state: SandboxState::Ready,
                created_at: 1_700_000_000_000_000_000,
            },
            PodSandbox {
                id: "b".into(),
                metadata: meta("db"),
                state: SandboxState::NotReady(1),
                created_at: -1,
            },
        ];
        assert_eq!(decode_list(&encode::list(&items)).unwrap(), items);
        assert_eq!(decode_list(&[]).unwrap(), []);
    }

    #[test]
    fn status_answers_decode_with_both_families() {
        let s = SandboxStatus {
            sandbox: PodSandbox {
                id: "a".into(),
                metadata: meta("web"),
                state: SandboxState::Ready,
                created_at: 5,
            },
            ip: "10.244.1.7".into(),
            additional_ips: vec!["fd00:10:244:1::7".into()],
        };
        assert_eq!(decode_status(&encode::status(&s)).unwrap(), s);
        assert_eq!(decode_status(&[]), Err(MessageError::NoStatus));
    }

    #[test]
    fn bad_answers_are_refused() {
        // Item 1 as a varint.
        assert_eq!(
            decode_list(&[0x08, 0x01]),
            Err(MessageError::WireType {
                message: "ListPodSandboxResponse",
                field: 1
            })
        );
        // A truncated item.
        let mut list = encode::list(&[PodSandbox {
            id: "a".into(),
            metadata: meta("web"),
            state: SandboxState::Ready,
            created_at: 1,
        }]);
        list.pop();
        assert!(matches!(
            decode_list(&list),
            Err(MessageError::Protobuf { .. })
        ));
        // A name that is not UTF-8.
        let bad = [0x0a, 0x05, 0x12, 0x03, 0x0a, 0x01, 0xff];
        assert_eq!(
            decode_list(&bad),
            Err(MessageError::Protobuf {
                message: "PodSandboxMetadata",
                error: PbError::NotUtf8 { field: 1 }
            })
        );
    }
}
