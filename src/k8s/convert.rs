//! v1 <-> v1beta1 EndpointSlice conversion (TOPOLOGY.md §5.3). Pure.
// TEMPORARY STUB — replaced by the real module (h-topology).
pub fn slice_v1_to_v1beta1(v1: &serde_json::Value) -> serde_json::Value { v1.clone() }
pub fn slice_v1beta1_to_v1(b: &serde_json::Value) -> serde_json::Value { b.clone() }
