//! Arbitrary bytes as the CRI answers the client decodes (ListPodSandboxResponse,
//! PodSandboxStatusResponse) and as a gRPC answer body: no panic, and a decoded list has no
//! more items than the input has octets (each item costs at least two).
#![no_main]
use grid_wrapper::cri::{grpc, messages};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(items) = messages::decode_list(data) {
        assert!(items.len() * 2 <= data.len());
    }
    let _ = messages::decode_status(data);
    if let Ok(message) = grpc::unframe(data) {
        assert_eq!(message.len() + grpc::PREFIX_LEN, data.len());
    }
});
