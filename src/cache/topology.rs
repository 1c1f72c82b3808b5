//! Topology pruning of Endpoints and EndpointSlices (TOPOLOGY.md). Pure.
