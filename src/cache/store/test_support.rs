//! Test-only: a cache loaded from a fixture, shared by the store's test modules.

use serde_json::Value;

use super::{Exported, Settings, State};
use crate::cache::collection::Retention;
use crate::cache::snapshot::Objects;
use crate::cache::topology::fixtures::Fixture;
use crate::handoff::Change;
use crate::k8s::Resource;

/// A cache for `host` whose RVs start above `seed` (retention of 100 entries).
pub(crate) fn state(host: &str, seed: u64) -> State {
    State::new(
        Settings {
            hostname: host.to_string(),
            wrapper_in_cluster: true,
            retention: Retention::for_queue(100),
        },
        seed,
    )
}

/// Each object's JSON text, as an apiserver's list item is read ([`State::apply_list`] takes
/// them as the server takes a reflector's list).
pub(crate) fn texts(objects: &[Value]) -> Vec<String> {
    objects.iter().map(Value::to_string).collect()
}

/// Lists every resource empty: the cache becomes ready with nothing in it.
pub(crate) fn list_all_empty(st: &mut State) {
    for kind in [
        Resource::Nodes,
        Resource::Services,
        Resource::Endpoints,
        Resource::SlicesV1,
    ] {
        st.apply_list(kind, texts(&[]), 0);
    }
}

/// A ready cache: the fixture's nodes, Services and Endpoints listed, then `slices` as the
/// `kind` slice list (not pinned: a later list of the other version switches, as upstream).
pub(crate) fn loaded(fx: &Fixture, seed: u64, kind: Resource, slices: Vec<Value>) -> State {
    let mut st = nodes_and_services(fx, seed);
    st.apply_list(Resource::Endpoints, texts(&fx.endpoints), 0);
    let done = st.apply_list(kind, texts(&slices), 0);
    assert!(done.became_ready && st.is_ready());
    st
}

/// The same cache, but its endpoint objects (the fixture's Endpoints, then `slices`) came as
/// watch events after empty lists, each prepared as a list's item is (packed as it is read, the
/// copy kept where it is served pruned).
pub(crate) fn watched(fx: &Fixture, seed: u64, kind: Resource, slices: Vec<Value>) -> State {
    let mut st = nodes_and_services(fx, seed);
    st.apply_list(Resource::Endpoints, texts(&[]), 0);
    let done = st.apply_list(kind, texts(&[]), 0);
    assert!(done.became_ready && st.is_ready());
    for ep in &fx.endpoints {
        st.apply(Resource::Endpoints, Change::upsert(&ep.clone()), 0);
    }
    for slice in slices {
        st.apply(kind, Change::upsert(&slice), 0);
    }
    st
}

/// A cache for the fixture's host with its nodes and Services listed.
fn nodes_and_services(fx: &Fixture, seed: u64) -> State {
    let mut st = state(&fx.hostname, seed);
    st.apply_list(Resource::Nodes, texts(&fx.node_objects()), 0);
    st.apply_list(Resource::Services, texts(&fx.services), 0);
    st
}

/// Every exported object made whole at once (the snapshot writer makes them whole one at a
/// time): what the tests compare with the objects listed.
pub(crate) trait Whole {
    /// `None` for bytes that do not unpack.
    fn whole(&self) -> Option<Objects>;
}

impl Whole for Objects<Exported> {
    fn whole(&self) -> Option<Objects> {
        let whole =
            |objs: &[Exported]| -> Option<Vec<_>> { objs.iter().map(Exported::bytes).collect() };
        Some(Objects {
            nodes: whole(&self.nodes)?,
            services: whole(&self.services)?,
            endpoints: whole(&self.endpoints)?,
            slices: whole(&self.slices)?,
            cidrs: whole(&self.cidrs)?,
        })
    }
}
