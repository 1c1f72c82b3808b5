//! Tests only: an independent protobuf decoder (prost-reflect) over the official `.proto` files
//! vendored in `tests/proto`, compiled once with protox.

use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, ReflectMessage};
use std::sync::OnceLock;

/// The descriptor pool of k8s.io/api core/v1, discovery and networking (and everything they
/// import).
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/proto");
        let files = protox::compile(
            [
                "k8s.io/api/core/v1/generated.proto",
                "k8s.io/api/discovery/v1/generated.proto",
                "k8s.io/api/discovery/v1beta1/generated.proto",
                "k8s.io/api/networking/v1/generated.proto",
                "k8s.io/api/networking/v1beta1/generated.proto",
            ],
            [dir],
        )
        .expect("the vendored .proto files compile");
        DescriptorPool::from_file_descriptor_set(files).expect("a descriptor pool")
    })
}

/// The descriptor of a schema message name (`core.v1.Service`) or a full protobuf name.
pub fn descriptor(name: &str) -> MessageDescriptor {
    let full = match name.split_once('.') {
        Some(("core" | "discovery" | "networking", _)) => format!("k8s.io.api.{name}"),
        Some(("meta", _)) => format!("k8s.io.apimachinery.pkg.apis.{name}"),
        _ => name.to_owned(),
    };
    pool()
        .get_message_by_name(&full)
        .unwrap_or_else(|| panic!("no message {full}"))
}

/// Decodes `bytes` as message `name`, and checks that re-encoding it (prost: fields in number
/// order) gives the same bytes back: the encoding is canonical. prost-reflect keeps map entries
/// in a hash map, so with maps only the length is compared (the exact-bytes tests check the
/// entries' order).
pub fn decode(name: &str, bytes: &[u8]) -> DynamicMessage {
    use prost_reflect::prost::Message as _;
    let msg = DynamicMessage::decode(descriptor(name), bytes)
        .unwrap_or_else(|e| panic!("{name} does not decode: {e}"));
    let again = msg.encode_to_vec();
    if again != bytes {
        assert_eq!(again.len(), bytes.len(), "{name} re-encodes differently");
        assert!(has_map(&msg.descriptor()), "{name} re-encodes differently");
    }
    msg
}

/// The decoded message as JSON (prost-reflect's mapping: proto JSON names, int64 as strings).
pub fn json(msg: &DynamicMessage) -> serde_json::Value {
    serde_json::to_value(msg).expect("a decoded message serializes")
}

/// Whether a message of `desc` can hold a map, directly or in a nested message.
fn has_map(desc: &MessageDescriptor) -> bool {
    fn walk(desc: &MessageDescriptor, seen: &mut Vec<String>) -> bool {
        if seen.iter().any(|s| s == desc.full_name()) {
            return false;
        }
        seen.push(desc.full_name().to_owned());
        desc.fields().any(|f| {
            f.is_map()
                || match f.kind() {
                    prost_reflect::Kind::Message(m) => walk(&m, seen),
                    _ => false,
                }
        })
    }
    walk(desc, &mut Vec::new())
}
