//! v1 <-> v1beta1 EndpointSlice conversion (TOPOLOGY.md §5.3). Pure.
