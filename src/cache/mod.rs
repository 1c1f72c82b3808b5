//! The cache: upstream objects, the topology-pruned served view, RVs and the event log.

pub mod topology;
