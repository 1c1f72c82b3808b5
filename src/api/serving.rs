//! What a request's [decision](crate::api::decide) reads of the view its port serves: four facts,
//! copied out by the connection while it holds the view, so that the decision itself locks
//! nothing. Pure.

use std::sync::Arc;

use crate::cache::published::Published;

/// What one view serves now, which a request's fate depends on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Serving {
    /// The initial sync is complete: cache-backed answers are served (docs/SEMANTICS.md §7).
    pub ready: bool,
    /// v1beta1 EndpointSlices are built (the readers' view), or the upstream has only v1beta1
    /// (the relay view: the one slice version it serves, docs/SEMANTICS.md §12).
    pub serves_v1beta1: bool,
    /// ServiceCIDRs are served from the cache; until then they are proxied (docs/SEMANTICS.md §5).
    pub serves_cidrs: bool,
    /// The one Node the view holds whole (the readers' view: `--hostname`); a request that could
    /// select another Node is proxied (docs/SEMANTICS.md §1.1). `None`: it holds every Node.
    pub only_node: Option<Arc<str>>,
}

impl Serving {
    /// What `view` serves now.
    pub fn of(view: &Published) -> Serving {
        Serving {
            ready: view.is_ready(),
            serves_v1beta1: view.serves_v1beta1(),
            serves_cidrs: view.serves_cidrs(),
            only_node: view.only_node().cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::collection::Retention;

    #[test]
    fn the_facts_are_the_views() {
        let mut v = Published::new(7, Retention::for_queue(100));
        assert_eq!(Serving::of(&v), Serving::default());
        v.set_ready();
        let ready = Serving {
            ready: true,
            ..Serving::default()
        };
        assert_eq!(Serving::of(&v), ready);
        v.set_v1beta1();
        v.set_cidrs();
        let all = Serving {
            ready: true,
            serves_v1beta1: true,
            serves_cidrs: true,
            only_node: None,
        };
        assert_eq!(Serving::of(&v), all);
        v.set_only_node("edge-1");
        assert_eq!(Serving::of(&v).only_node.as_deref(), Some("edge-1"));
    }
}
