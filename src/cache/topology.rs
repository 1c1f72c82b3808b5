//! Topology pruning of Endpoints and EndpointSlices (TOPOLOGY.md). Pure.
// TEMPORARY STUB — replaced by the real module (h-topology).
#![allow(missing_docs, unused_variables)]
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
pub type Labels = BTreeMap<String, String>;
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyKeys(pub BTreeSet<String>);
pub enum KeysAnnotation { Absent, Keys(TopologyKeys), Invalid(String) }
pub fn service_keys(service: &Value) -> KeysAnnotation { KeysAnnotation::Absent }
pub struct Locality<'a> { pub hostname: &'a str, pub nodes: &'a BTreeMap<String, Labels>, pub wrapper_in_cluster: bool }
#[derive(Clone, Copy, Debug)]
pub enum Class<'a> { Dangling, Normal, Topology(&'a TopologyKeys) }
pub fn slice_service(slice: &Value) -> Option<crate::k8s::ObjectKey> { None }
pub fn serve_endpoints(obj: &Value, class: Class<'_>, loc: &Locality<'_>) -> Value { obj.clone() }
pub fn serve_slice_v1(obj: &Value, class: Class<'_>, loc: &Locality<'_>) -> Value { obj.clone() }
pub fn serve_slice_v1beta1(obj: &Value, class: Class<'_>, loc: &Locality<'_>) -> Value { obj.clone() }
pub fn endpoint_nodes(obj: &Value) -> BTreeSet<String> { BTreeSet::new() }
