//! An independent decoder of Kubernetes protobuf answers (`application/vnd.kubernetes.protobuf`),
//! built at run time from the official `.proto` files vendored in tests/proto (compiled by
//! `protox`, decoded by `prost-reflect`): nothing here shares code with grid-wrapper's encoder.
//!
//! Wire format (k8s.io/apimachinery/pkg/runtime/serializer/protobuf):
//! - a body is the 4 bytes `k8s\0`, then a `runtime.Unknown` {typeMeta{apiVersion, kind}, raw =
//!   the encoded object or list message, contentEncoding "", contentType ""};
//! - a watch stream (`;stream=watch`) is a sequence of frames, each a 4-byte big-endian length
//!   then a `meta.v1.WatchEvent` {type, object.raw} without magic of its own, whose `object.raw`
//!   is a whole body as above.
//!
//! Decoded messages are converted to the Kubernetes JSON form by walking their descriptors
//! (the message type of each field, never the shape of a value): field names are the proto
//! field names, which are the Kubernetes JSON names in these files (checked by a test in
//! tests/it/protobuf.rs); the types whose JSON differs from their message (`metav1.Time`,
//! `MicroTime`, `resource.Quantity`, `intstr.IntOrString`, `FieldsV1`, `RawExtension`) get
//! their Kubernetes JSON; 64-bit integers are JSON numbers.

use std::collections::BTreeSet;
use std::io::BufReader;
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use prost_reflect::prost::Message;
use prost_reflect::{
    DescriptorPool, DynamicMessage, Kind, MapKey, MessageDescriptor, ReflectMessage,
};
use serde_json::{Map, Value};

/// The magic prefix of every non-streaming protobuf body.
pub const MAGIC: &[u8; 4] = b"k8s\0";
/// The media type of protobuf answers.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The Content-Type of a protobuf watch stream (as the apiserver writes it).
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// kube-proxy's (client-go's) exact Accept header.
pub const KUBE_PROXY_ACCEPT: &str = "application/vnd.kubernetes.protobuf, */*";

const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";
const WATCH_EVENT: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent";
const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";

/// The descriptor pool of core/v1, discovery/v1 and v1beta1, networking/v1 and v1beta1 (and
/// their imports), compiled once per test process.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/proto");
        let fds = protox::compile(
            [
                "k8s.io/api/core/v1/generated.proto",
                "k8s.io/api/discovery/v1/generated.proto",
                "k8s.io/api/discovery/v1beta1/generated.proto",
                "k8s.io/api/networking/v1/generated.proto",
                "k8s.io/api/networking/v1beta1/generated.proto",
            ],
            [root],
        )
        .expect("compile the vendored Kubernetes .proto files");
        DescriptorPool::from_file_descriptor_set(fds).expect("a descriptor pool")
    })
}

/// The descriptor of message `full_name` (panics if the pool lacks it).
pub fn message(full_name: &str) -> MessageDescriptor {
    pool()
        .get_message_by_name(full_name)
        .unwrap_or_else(|| panic!("{full_name} is not in the vendored .proto files"))
}

/// The protobuf message of an object or list of `apiVersion` and `kind` that grid-wrapper
/// serves (or a `Status`).
pub fn message_name(api_version: &str, kind: &str) -> Option<String> {
    let package = match (api_version, kind) {
        ("v1", "Status") => "k8s.io.apimachinery.pkg.apis.meta.v1",
        ("v1", "Node" | "NodeList" | "Service" | "ServiceList" | "Endpoints" | "EndpointsList") => {
            "k8s.io.api.core.v1"
        }
        ("discovery.k8s.io/v1", "EndpointSlice" | "EndpointSliceList") => "k8s.io.api.discovery.v1",
        ("discovery.k8s.io/v1beta1", "EndpointSlice" | "EndpointSliceList") => {
            "k8s.io.api.discovery.v1beta1"
        }
        ("networking.k8s.io/v1", "ServiceCIDR" | "ServiceCIDRList") => "k8s.io.api.networking.v1",
        ("networking.k8s.io/v1beta1", "ServiceCIDR" | "ServiceCIDRList") => {
            "k8s.io.api.networking.v1beta1"
        }
        _ => return None,
    };
    Some(format!("{package}.{kind}"))
}

/// One decoded protobuf body.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// `typeMeta.apiVersion` of the `runtime.Unknown`.
    pub api_version: String,
    /// `typeMeta.kind` of the `runtime.Unknown`.
    pub kind: String,
    /// The object in Kubernetes JSON form, with `apiVersion` and `kind` set from the typeMeta
    /// (as Go's protobuf serializer sets the GroupVersionKind of what it decodes; list items
    /// have no typeMeta in protobuf and get none).
    pub object: Value,
}

/// A short printable preview of bytes, for failure messages.
pub fn preview(bytes: &[u8]) -> String {
    let n = bytes.len().min(160);
    format!(
        "{} bytes, starting {:?}",
        bytes.len(),
        String::from_utf8_lossy(&bytes[..n])
    )
}

/// Decodes a non-streaming protobuf body: `k8s\0` + `runtime.Unknown` wrapping the object.
pub fn try_decode_body(bytes: &[u8]) -> Result<Decoded, String> {
    let Some(rest) = bytes.strip_prefix(MAGIC) else {
        return Err(format!("no k8s\\0 magic: {}", preview(bytes)));
    };
    let unknown = DynamicMessage::decode(message(UNKNOWN), rest)
        .map_err(|e| format!("not a runtime.Unknown after the magic ({e})"))?;
    check_no_unknown_fields(&unknown, "Unknown")?;
    let type_meta = match unknown.get_field_by_name("typeMeta").as_deref() {
        Some(prost_reflect::Value::Message(m)) if unknown.has_field_by_name("typeMeta") => {
            m.clone()
        }
        _ => return Err("runtime.Unknown without typeMeta".into()),
    };
    let text = |m: &DynamicMessage, f: &str| -> String {
        m.get_field_by_name(f)
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let api_version = text(&type_meta, "apiVersion");
    let kind = text(&type_meta, "kind");
    for f in ["contentEncoding", "contentType"] {
        let v = text(&unknown, f);
        if !v.is_empty() {
            return Err(format!("runtime.Unknown {f} is {v:?}, not empty"));
        }
    }
    let raw = match unknown.get_field_by_name("raw").as_deref() {
        Some(prost_reflect::Value::Bytes(b)) => b.clone(),
        _ => return Err("runtime.Unknown without raw".into()),
    };
    let name = message_name(&api_version, &kind)
        .ok_or_else(|| format!("unexpected typeMeta {api_version:?} {kind:?}"))?;
    let msg = DynamicMessage::decode(message(&name), raw.as_ref())
        .map_err(|e| format!("raw is not a {name} ({e})"))?;
    let mut object = message_json(&msg, &kind)?;
    if let Value::Object(o) = &mut object {
        o.insert("apiVersion".into(), Value::from(api_version.clone()));
        o.insert("kind".into(), Value::from(kind.clone()));
    }
    Ok(Decoded {
        api_version,
        kind,
        object,
    })
}

/// [`try_decode_body`] that panics with a preview of what was received instead.
pub fn decode_body(bytes: &[u8]) -> Decoded {
    try_decode_body(bytes).unwrap_or_else(|e| panic!("not a Kubernetes protobuf body: {e}"))
}

/// Decodes one `meta.v1.WatchEvent` message (a frame's payload, without its length).
pub fn try_decode_watch_event(frame: &[u8]) -> Result<(String, Decoded), String> {
    let ev = DynamicMessage::decode(message(WATCH_EVENT), frame)
        .map_err(|e| format!("frame is not a WatchEvent ({e}): {}", preview(frame)))?;
    check_no_unknown_fields(&ev, "WatchEvent")?;
    let ty = ev
        .get_field_by_name("type")
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let raw = match ev.get_field_by_name("object").as_deref() {
        Some(prost_reflect::Value::Message(o)) if ev.has_field_by_name("object") => {
            check_no_unknown_fields(o, "WatchEvent.object")?;
            match o.get_field_by_name("raw").as_deref() {
                Some(prost_reflect::Value::Bytes(b)) => b.to_vec(),
                _ => Vec::new(),
            }
        }
        _ => return Err(format!("{ty} WatchEvent without object")),
    };
    let obj = try_decode_body(&raw).map_err(|e| format!("{ty} WatchEvent object.raw: {e}"))?;
    Ok((ty, obj))
}

/// Splits a complete protobuf watch body into its events (length-prefixed frames).
pub fn try_decode_watch(mut bytes: &[u8]) -> Result<Vec<(String, Decoded)>, String> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        if bytes.len() < 4 {
            return Err(format!("{} trailing bytes, not a frame", bytes.len()));
        }
        let n = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        if bytes.len() < 4 + n {
            return Err(format!(
                "frame {} announces {n} bytes, {} left: {}",
                out.len(),
                bytes.len() - 4,
                preview(bytes)
            ));
        }
        out.push(
            try_decode_watch_event(&bytes[4..4 + n])
                .map_err(|e| format!("frame {}: {e}", out.len()))?,
        );
        bytes = &bytes[4 + n..];
    }
    Ok(out)
}

/// [`try_decode_watch`] that panics on malformed input.
pub fn decode_watch(bytes: &[u8]) -> Vec<(String, Decoded)> {
    try_decode_watch(bytes).unwrap_or_else(|e| panic!("not a Kubernetes protobuf watch: {e}"))
}

fn check_no_unknown_fields(msg: &DynamicMessage, path: &str) -> Result<(), String> {
    let n = msg.unknown_fields().count();
    if n > 0 {
        return Err(format!(
            "{path}: {n} field(s) unknown to {}",
            msg.descriptor().full_name()
        ));
    }
    Ok(())
}

/// A message in Kubernetes JSON form (only the fields present on the wire).
pub fn message_json(msg: &DynamicMessage, path: &str) -> Result<Value, String> {
    check_no_unknown_fields(msg, path)?;
    let desc = msg.descriptor();
    let get = |f: &str| msg.get_field_by_name(f).map(|v| v.into_owned());
    match desc.full_name() {
        TIME | MICRO_TIME => {
            // Go's Time.Marshal writes an empty message for the zero time, which its
            // Unmarshal reads back as the zero time: JSON null.
            if !msg.has_field_by_name("seconds") && !msg.has_field_by_name("nanos") {
                return Ok(Value::Null);
            }
            let s = get("seconds").and_then(|v| v.as_i64()).unwrap_or(0);
            let n = get("nanos").and_then(|v| v.as_i32()).unwrap_or(0);
            return Ok(Value::from(rfc3339(s, n, desc.full_name() == MICRO_TIME)));
        }
        QUANTITY => {
            let s = get("string")
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            return Ok(Value::from(if s.is_empty() { "0".to_string() } else { s }));
        }
        INT_OR_STRING => {
            let ty = get("type").and_then(|v| v.as_i64()).unwrap_or(0);
            return match ty {
                0 => Ok(Value::from(
                    get("intVal").and_then(|v| v.as_i32()).unwrap_or(0),
                )),
                1 => Ok(Value::from(
                    get("strVal")
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                )),
                t => Err(format!("{path}: IntOrString type {t}")),
            };
        }
        FIELDS_V1 | RAW_EXTENSION => {
            let f = if desc.full_name() == FIELDS_V1 {
                "Raw"
            } else {
                "raw"
            };
            let raw = match get(f) {
                Some(prost_reflect::Value::Bytes(b)) => b.to_vec(),
                _ => Vec::new(),
            };
            if raw.is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_slice(&raw)
                .map_err(|e| format!("{path}: {} raw is not JSON ({e})", desc.full_name()));
        }
        _ => {}
    }
    let mut out = Map::new();
    for (field, value) in msg.fields() {
        let p = format!("{path}.{}", field.name());
        let v = if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                return Err(format!("{p}: map without entry message"));
            };
            let prost_reflect::Value::Map(m) = value else {
                return Err(format!("{p}: map field without a map value"));
            };
            let _ = entry;
            let mut o = Map::new();
            for (k, v) in m {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    other => return Err(format!("{p}: map key {other:?}")),
                };
                o.insert(key.clone(), value_json(v, &format!("{p}[{key}]"))?);
            }
            Value::Object(o)
        } else if field.is_list() {
            let prost_reflect::Value::List(items) = value else {
                return Err(format!("{p}: repeated field without a list value"));
            };
            let mut a = Vec::with_capacity(items.len());
            for (i, it) in items.iter().enumerate() {
                a.push(value_json(it, &format!("{p}[{i}]"))?);
            }
            Value::Array(a)
        } else {
            value_json(value, &p)?
        };
        out.insert(field.name().to_string(), v);
    }
    Ok(Value::Object(out))
}

fn value_json(v: &prost_reflect::Value, path: &str) -> Result<Value, String> {
    use prost_reflect::Value as P;
    Ok(match v {
        P::Bool(b) => Value::from(*b),
        P::I32(n) => Value::from(*n),
        P::I64(n) => Value::from(*n),
        P::U32(n) => Value::from(*n),
        P::U64(n) => Value::from(*n),
        P::F32(f) => serde_json::Number::from_f64(f64::from(*f))
            .map(Value::Number)
            .unwrap_or(Value::Null),
        P::F64(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        P::String(s) => Value::from(s.clone()),
        // Go's encoding/json writes []byte as standard base64.
        P::Bytes(b) => Value::from(base64(b)),
        P::EnumNumber(n) => Value::from(*n),
        P::Message(m) => message_json(m, path)?,
        P::List(_) | P::Map(_) => return Err(format!("{path}: nested list or map")),
    })
}

/// Go's `time.RFC3339` (`metav1.Time`, whole seconds) or `RFC3339Micro` (`MicroTime`), UTC.
pub fn rfc3339(seconds: i64, nanos: i32, micro: bool) -> String {
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (hh, mm, ss) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let frac = if micro {
        format!(".{:06}", nanos.max(0) / 1000)
    } else {
        String::new()
    };
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}{frac}Z")
}

/// Standard base64 with padding.
pub fn base64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

// ---- Comparison with the JSON answer. ----

/// Whether `v` is a zero value: null, "", 0, false, or an array/object of only zero values
/// (what a Go struct field holds when neither JSON nor protobuf set it).
pub fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_zero),
    }
}

/// `v` without zero values, recursively (object members that are zero are dropped; array
/// elements are kept, normalized). A zero top level becomes null. Symmetric and lossy: a
/// meaningful `false` or `0` (`conditions.ready: false`) vanishes on both sides; the tests
/// compare with the stricter [`diff`] instead and use this only for display.
pub fn normalize(v: &Value) -> Value {
    match v {
        Value::Object(o) => {
            let m: Map<String, Value> = o
                .iter()
                .map(|(k, v)| (k.clone(), normalize(v)))
                .filter(|(_, v)| !is_zero(v))
                .collect();
            if m.is_empty() {
                Value::Null
            } else {
                Value::Object(m)
            }
        }
        Value::Array(a) if a.is_empty() => Value::Null,
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        v if is_zero(v) => Value::Null,
        v => v.clone(),
    }
}

/// Differences between a JSON answer and the protobuf-decoded answer to the same request, as
/// a Go client decoding either into the same struct would see them. One-sided:
/// - a member in both must match (recursively; arrays element by element);
/// - a member only in the protobuf decode must be zero ([`is_zero`]): gogo protobuf writes
///   non-pointer fields even when zero (`spec: {}`, `port: 0`) where JSON omits them;
/// - a member only in the JSON must be null, `[]` or `{}` (nil pointer, empty list or map,
///   which protobuf cannot write); a scalar, even `false`, `0` or `""`, must be on the wire
///   too (`conditions.ready: false` is a set pointer, distinct from nil).
pub fn diff(json: &Value, proto: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_at("", json, proto, &mut out);
    out
}

fn diff_at(path: &str, json: &Value, proto: &Value, out: &mut Vec<String>) {
    match (json, proto) {
        (Value::Object(j), Value::Object(p)) => {
            let keys: BTreeSet<&String> = j.keys().chain(p.keys()).collect();
            for k in keys {
                let sub = format!("{path}.{k}");
                match (j.get(k), p.get(k)) {
                    (Some(a), Some(b)) => diff_at(&sub, a, b, out),
                    (Some(a), None) => {
                        let empty = match a {
                            Value::Null => true,
                            Value::Array(x) => x.is_empty(),
                            Value::Object(x) => x.is_empty(),
                            _ => false,
                        };
                        if !empty {
                            out.push(format!("{sub}: {a} in JSON, absent in protobuf"));
                        }
                    }
                    (None, Some(b)) => {
                        if !is_zero(b) {
                            out.push(format!("{sub}: {b} in protobuf, absent in JSON"));
                        }
                    }
                    (None, None) => unreachable!(),
                }
            }
        }
        (Value::Array(j), Value::Array(p)) => {
            if j.len() != p.len() {
                out.push(format!(
                    "{path}: {} elements in JSON, {} in protobuf",
                    j.len(),
                    p.len()
                ));
            }
            for (i, (a, b)) in j.iter().zip(p).enumerate() {
                diff_at(&format!("{path}[{i}]"), a, b, out);
            }
        }
        // An empty object decoded from an empty message may stand for JSON null (a nil
        // pointer struct that gogo writes as an empty message is a set pointer; JSON null is
        // nil): only a zero on both sides is tolerated.
        (Value::Null, b) if is_zero(b) => {}
        (a, Value::Null) if is_zero(a) && !a.is_boolean() && !a.is_number() => {}
        (a, b) => {
            if a != b {
                out.push(format!("{path}: {a} in JSON, {b} in protobuf"));
            }
        }
    }
}

/// Asserts that [`diff`] finds nothing, showing both sides (normalized) otherwise.
pub fn assert_same(json: &Value, proto: &Value, what: &str) {
    let d = diff(json, proto);
    assert!(
        d.is_empty(),
        "{what}: JSON and protobuf answers differ:\n  {}\nJSON (normalized): {}\nprotobuf (normalized): {}",
        d.join("\n  "),
        normalize(json),
        normalize(proto)
    );
}

/// A JSON list item without its `kind`/`apiVersion` (list items carry no typeMeta in protobuf).
pub fn without_type_meta(item: &Value) -> Value {
    let mut v = item.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("kind");
        o.remove("apiVersion");
    }
    v
}

// ---- A live protobuf watch over a socket. ----

/// An open protobuf watch: HTTP/1.1 chunked response whose body is length-prefixed frames.
pub struct ProtoWatch {
    reader: BufReader<TcpStream>,
    pub code: u16,
    pub headers: Vec<(String, String)>,
    buf: Vec<u8>,
    ended: bool,
}

impl ProtoWatch {
    /// Opens a watch (the path carries `watch=true`) with the given headers.
    pub fn open(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> ProtoWatch {
        let (reader, code, headers) = super::open_stream(addr, path, headers);
        ProtoWatch {
            reader,
            code,
            headers,
            buf: Vec::new(),
            ended: false,
        }
    }

    /// Opens a watch with kube-proxy's Accept header and asserts a 200 protobuf stream.
    pub fn kube_proxy(addr: SocketAddr, path: &str) -> ProtoWatch {
        let w = ProtoWatch::open(addr, path, &[("Accept", KUBE_PROXY_ACCEPT)]);
        assert_eq!(w.code, 200, "protobuf watch {path}");
        w.assert_stream_content_type(path);
        w
    }

    /// Asserts the `;stream=watch` protobuf Content-Type.
    pub fn assert_stream_content_type(&self, what: &str) {
        let ct = super::header(&self.headers, "content-type").unwrap_or("");
        assert_eq!(
            ct, WATCH_CONTENT_TYPE,
            "{what}: Content-Type of a protobuf watch"
        );
    }

    /// The next event, waiting at most `timeout`; `None` on timeout or end of stream. Panics
    /// on a frame that does not decode.
    pub fn next(&mut self, timeout: Duration) -> Option<(String, Decoded)> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.buf.len() >= 4 {
                let n = u32::from_be_bytes(self.buf[..4].try_into().unwrap()) as usize;
                assert!(
                    n <= 64 << 20,
                    "implausible frame length {n}: not a protobuf watch frame ({})",
                    preview(&self.buf)
                );
                if self.buf.len() >= 4 + n {
                    let frame: Vec<u8> = self.buf.drain(..4 + n).skip(4).collect();
                    return Some(
                        try_decode_watch_event(&frame)
                            .unwrap_or_else(|e| panic!("protobuf watch frame: {e}")),
                    );
                }
            }
            if self.ended {
                assert!(
                    self.buf.is_empty(),
                    "stream ended inside a frame: {}",
                    preview(&self.buf)
                );
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.reader.get_ref().set_read_timeout(Some(left)).ok()?;
            match super::read_chunk(&mut self.reader) {
                Ok(Some(data)) => self.buf.extend_from_slice(&data),
                Ok(None) => self.ended = true,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return None
                }
                Err(_) => self.ended = true,
            }
        }
    }

    /// The next event, which must arrive within 10 s.
    pub fn expect(&mut self) -> (String, Decoded) {
        self.next(Duration::from_secs(10))
            .expect("a protobuf watch event within 10 s")
    }

    /// Every event until the stream is quiet for `quiet` (or ends), bounded by 15 s overall.
    pub fn drain(&mut self, quiet: Duration) -> Vec<(String, Decoded)> {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut out = Vec::new();
        while Instant::now() < deadline {
            match self.next(quiet) {
                Some(ev) => out.push(ev),
                None => break,
            }
        }
        out
    }

    /// Whether the server ended the stream (reads until end or `timeout`).
    pub fn ended_within(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.next(left).is_none() {
                break;
            }
        }
        self.ended
    }
}

// ---- Hand-made encoding, for the decoder's own tests. ----

/// A protobuf varint.
pub fn varint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// A length-delimited field `number` holding `bytes`.
pub fn len_field(number: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = varint(u64::from(number) << 3 | 2);
    out.extend(varint(bytes.len() as u64));
    out.extend_from_slice(bytes);
    out
}

/// `k8s\0` + a `runtime.Unknown` written by hand (as gogo writes it: every field, the empty
/// strings included) around `raw`.
pub fn wrap_unknown(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = len_field(1, api_version.as_bytes());
    type_meta.extend(len_field(2, kind.as_bytes()));
    let mut out = MAGIC.to_vec();
    out.extend(len_field(1, &type_meta));
    out.extend(len_field(2, raw));
    out.extend(len_field(3, b""));
    out.extend(len_field(4, b""));
    out
}

/// A watch frame written by hand: length, then WatchEvent{type, object{raw: body}}.
pub fn watch_frame(ty: &str, body: &[u8]) -> Vec<u8> {
    let mut ev = len_field(1, ty.as_bytes());
    ev.extend(len_field(2, &len_field(1, body)));
    let mut out = (ev.len() as u32).to_be_bytes().to_vec();
    out.extend(ev);
    out
}

/// The protobuf encoding of message `full_name` given in protobuf's JSON mapping
/// (prost-reflect's serde deserializer: int64 as strings, bytes as base64, nested messages as
/// objects: `{"seconds": "1704164705"}` for a Time).
pub fn encode_proto_json(full_name: &str, proto_json: &Value) -> Vec<u8> {
    let msg = DynamicMessage::deserialize(message(full_name), proto_json.clone())
        .unwrap_or_else(|e| panic!("{full_name} from {proto_json}: {e}"));
    msg.encode_to_vec()
}

/// Kubernetes JSON `v` as protobuf's JSON mapping of message `desc` (the inverse of
/// [`message_json`], by the same descriptor walk), to encode test input with prost-reflect.
/// `kind`/`apiVersion` members without a field are dropped (typeMeta lives in the Unknown);
/// any other member without a field panics: the JSON has something the schema cannot carry.
pub fn to_proto_json(desc: &MessageDescriptor, v: &Value, path: &str) -> Value {
    let b64 = |v: &Value| Value::from(base64(&serde_json::to_vec(v).unwrap()));
    match desc.full_name() {
        TIME | MICRO_TIME => {
            let Some(s) = v.as_str() else {
                return json_obj(&[]);
            };
            let (secs, nanos) = parse_rfc3339(s).unwrap_or_else(|| panic!("{path}: time {s:?}"));
            return serde_json::json!({"seconds": secs.to_string(), "nanos": nanos});
        }
        QUANTITY => {
            let s = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            return serde_json::json!({ "string": s });
        }
        INT_OR_STRING => {
            return match v {
                Value::String(s) => serde_json::json!({"type": "1", "strVal": s}),
                n => serde_json::json!({"type": "0", "intVal": n}),
            }
        }
        FIELDS_V1 => return serde_json::json!({ "Raw": b64(v) }),
        RAW_EXTENSION => return serde_json::json!({ "raw": b64(v) }),
        _ => {}
    }
    let Value::Object(o) = v else {
        panic!("{path}: {v} is not an object for {}", desc.full_name());
    };
    let mut out = Map::new();
    for (k, val) in o {
        let p = format!("{path}.{k}");
        let Some(field) = desc.get_field_by_name(k) else {
            assert!(
                k == "kind" || k == "apiVersion",
                "{p}: no such field in {}",
                desc.full_name()
            );
            continue;
        };
        if val.is_null() {
            continue;
        }
        let one = |x: &Value, p: &str| -> Value {
            match field.kind() {
                Kind::Message(m) => to_proto_json(&m, x, p),
                Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 | Kind::Uint64 | Kind::Fixed64 => {
                    Value::from(
                        x.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| x.to_string()),
                    )
                }
                _ => x.clone(),
            }
        };
        let converted = if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                unreachable!()
            };
            let vf = entry.map_entry_value_field();
            let m: Map<String, Value> = val
                .as_object()
                .unwrap_or_else(|| panic!("{p}: a map"))
                .iter()
                .map(|(mk, mv)| {
                    let c = match vf.kind() {
                        Kind::Message(m) => to_proto_json(&m, mv, &p),
                        _ => mv.clone(),
                    };
                    (mk.clone(), c)
                })
                .collect();
            Value::Object(m)
        } else if field.is_list() {
            let a = val.as_array().unwrap_or_else(|| panic!("{p}: a list"));
            Value::Array(a.iter().map(|x| one(x, &p)).collect())
        } else {
            one(val, &p)
        };
        out.insert(field.json_name().to_string(), converted);
    }
    Value::Object(out)
}

fn json_obj(pairs: &[(&str, Value)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z` into (seconds, nanos).
pub fn parse_rfc3339(s: &str) -> Option<(i64, i32)> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.split(':').map(|x| x.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let nanos = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}")[..9].parse().ok()?
    };
    Some((days * 86_400 + hh * 3600 + mm * 60 + ss, nanos))
}

/// `k8s\0` + Unknown around Kubernetes JSON `v` encoded as the message of its
/// `apiVersion`/`kind` (what a correct server would send), for the decoder's own tests.
pub fn encode_k8s_json(v: &Value) -> Vec<u8> {
    let api = v["apiVersion"].as_str().expect("apiVersion");
    let kind = v["kind"].as_str().expect("kind");
    let name = message_name(api, kind).unwrap_or_else(|| panic!("{api} {kind}"));
    let pj = to_proto_json(&message(&name), v, kind);
    wrap_unknown(api, kind, &encode_proto_json(&name, &pj))
}
