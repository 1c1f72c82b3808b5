//! Arbitrary bytes as a served object's JSON: for every resource, the protobuf encoder must not
//! panic, and its message must decode with an independent decoder (prost-reflect) built from
//! the official .proto files vendored in tests/proto, to exactly as many bytes. The encoder from
//! the JSON text (`encode_json`, what the cache uses) must not panic on any bytes, and must give
//! exactly what the encoder of the parsed `Value` gives (bytes and reports); on a text serde_json
//! refuses, what the `Value` encoder gives for `null`.
#![no_main]
use grid_wrapper::k8s::Resource;
use grid_wrapper::proto::encode::{encode_json, encode_object, message_of};
use grid_wrapper::proto::wire::varint_len;
use libfuzzer_sys::fuzz_target;
use prost_reflect::prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage};
use std::sync::OnceLock;

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/proto");
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

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        for res in Resource::ALL {
            let null = encode_object(res, &serde_json::Value::Null);
            assert_eq!(encode_json(res, data), null, "{res:?}: refused text");
        }
        return;
    };
    for res in Resource::ALL {
        let encoded = encode_object(res, &value);
        assert_eq!(encode_json(res, data), encoded, "{res:?}: the encoders differ");
        let bytes = &encoded.bytes;
        assert_eq!(bytes[0], 0x12, "{res:?}: the items/raw field tag");
        // The prefix's varint length is the length of the rest.
        let prefix = bytes[1..].iter().take_while(|&&b| b & 0x80 != 0).count() + 1;
        let len = bytes[1..=prefix]
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 7) | u64::from(b & 0x7f));
        let message = &bytes[1 + prefix..];
        assert_eq!(len, message.len() as u64, "{res:?}: the length prefix");
        assert_eq!(varint_len(len), prefix, "{res:?}: a minimal varint");
        let name = format!("k8s.io.api.{}", message_of(res).name);
        let desc = pool().get_message_by_name(&name).expect("a descriptor");
        let decoded = DynamicMessage::decode(desc, message)
            .unwrap_or_else(|e| panic!("{res:?}: does not decode: {e}"));
        assert_eq!(
            decoded.encoded_len(),
            message.len(),
            "{res:?}: re-encodes to another length"
        );
    }
});
