//! Test-only: a cache loaded from a fixture, shared by the store's test modules.

use serde_json::Value;

use super::{Exported, Settings, State};
use crate::cache::snapshot::Objects;
use crate::cache::topology::fixtures::Fixture;
use crate::cache::view::Retention;
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

/// Lists every resource empty: the cache becomes ready with nothing in it.
pub(crate) fn list_all_empty(st: &mut State) {
    for kind in [
        Resource::Nodes,
        Resource::Services,
        Resource::Endpoints,
        Resource::SlicesV1,
    ] {
        st.apply(kind, Change::Replace(vec![]), 0);
    }
}

/// A ready cache: the fixture's nodes, Services and Endpoints listed, then `slices` as the
/// `kind` slice list (not pinned: a later list of the other version switches, as upstream).
pub(crate) fn loaded(fx: &Fixture, seed: u64, kind: Resource, slices: Vec<Value>) -> State {
    let mut st = state(&fx.hostname, seed);
    st.apply(Resource::Nodes, Change::Replace(fx.node_objects()), 0);
    st.apply(Resource::Services, Change::Replace(fx.services.clone()), 0);
    st.apply(
        Resource::Endpoints,
        Change::Replace(fx.endpoints.clone()),
        0,
    );
    let done = st.apply(kind, Change::Replace(slices), 0);
    assert!(done.became_ready && st.is_ready());
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
