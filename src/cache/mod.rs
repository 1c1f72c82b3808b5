//! The cache: upstream objects, the topology-pruned served view, RVs and the event log.

pub mod canonical;
pub mod epoch;
pub mod facts;
pub mod health;
pub mod pack;
pub mod published;
pub mod snapshot;
pub mod store;
pub mod topology;
pub mod view;
