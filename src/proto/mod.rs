//! The Kubernetes protobuf encoding (`application/vnd.kubernetes.protobuf`), written by hand and
//! byte-compatible with the apiserver's gogo-generated marshal code.
//!
//! Pure: no I/O, threads or clocks. A served object's JSON text becomes its protobuf message with
//! [`encode::encode_json`] (without a `serde_json::Value`; [`encode::encode_object`] encodes a
//! `Value` the same way), driven by the generated message tables of [`schema`]; the
//! [`envelope`] helpers put that message in the apiserver's envelope (`k8s\0` + `runtime.Unknown`),
//! a List, or a length-framed watch event, without copying the message. [`read`] reads the wire
//! format back (the container runtime's CRI answers are protobuf). The other way round,
//! [`envelope`]'s decoders take an apiserver's protobuf body, List or watch frame apart, and
//! [`decode::decode_object`] writes an object's message as the JSON the apiserver would have
//! sent (the same tables, plus the Go JSON order and `omitempty` rules they carry), or
//! [`decode::decode_object_sorted`] the same object in the form the cache serves JSON in.
//!
//! The rules, from the Go types (see `scripts/gen-proto-schema.py`, which generates [`schema`]):
//! fields go out in ascending field number; a pointer field only when present; a slice per
//! element; a map per entry, sorted by key; any other field always, its Go zero value included
//! (an absent string is `""`, an absent struct is written with all its own zero fields).

pub mod decode;
pub mod encode;
pub mod envelope;
mod json;
pub mod read;
mod sorted;
#[rustfmt::skip]
pub mod schema;
pub mod unknown;
pub mod wire;

#[cfg(test)]
mod testpool;

pub use encode::{encode_json, encode_object, encode_status, Encoded};

/// A protobuf message: one Go struct of k8s.io/api or k8s.io/apimachinery.
#[derive(Debug)]
pub struct Message {
    /// The Go package and type, e.g. `core.v1.Service`.
    pub name: &'static str,
    /// JSON keys the object may have that are not encoded (TypeMeta's `apiVersion`, `kind`).
    pub known: &'static [&'static str],
    /// The fields, in ascending field number (the order gogo writes them in).
    pub fields: &'static [Field],
    /// Indexes into `fields` in the Go struct's order: the order of the keys in Go's JSON.
    pub json_order: &'static [u8],
}

/// One field of a [`Message`].
#[derive(Debug)]
pub struct Field {
    /// The JSON name.
    pub json: &'static str,
    /// The protobuf field number.
    pub number: u32,
    /// What one value is.
    pub kind: Kind,
    /// How many values and when they are written.
    pub card: Card,
    /// When Go's JSON leaves the field out.
    pub omit: Omit,
}

/// When Go's `encoding/json` leaves a field out of an object (its struct tag's options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Omit {
    /// Never: a nil pointer, slice or map is written `null`.
    No,
    /// `omitempty`: when false, 0, "", a nil pointer, or an empty slice or map (never a struct).
    Empty,
    /// `omitzero`: when the Go zero value (for `metav1.Time`, its `IsZero`).
    Zero,
}

/// What one value of a field is, and so how it is encoded.
#[derive(Debug)]
pub enum Kind {
    /// A string (or a named string type): length-delimited.
    String,
    /// A bool: varint 0 or 1.
    Bool,
    /// An int32: varint, negative values sign-extended to ten bytes (Go's `uint64(int32)`).
    Int32,
    /// An int64: varint, two's complement.
    Int64,
    /// A nested struct.
    Message(&'static Message),
    /// `metav1.Time`: a Timestamp {seconds=1, nanos=2 (always 0)}; empty for the zero time.
    Time,
    /// `metav1.MicroTime`: a Timestamp {seconds=1, nanos=2 (microseconds)}; empty for zero.
    MicroTime,
    /// `resource.Quantity`: {string=1}, the quantity's text.
    Quantity,
    /// `intstr.IntOrString`: {type=1, intVal=2, strVal=3}, all three always.
    IntOrString,
    /// `metav1.FieldsV1`: {raw=1} the compact JSON, written only when non-empty.
    FieldsV1,
}

/// When a field is written, and how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Card {
    /// A Go value field: always written, the zero value when absent.
    Value,
    /// A Go pointer field: written only when present (not absent, not `null`).
    Pointer,
    /// A Go slice: one field per element, nothing when empty.
    Repeated,
    /// A Go `map[string]V`: one entry message {key=1, value=2} per key, in key order.
    Map,
}
