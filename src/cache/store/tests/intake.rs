//! List items that do not fit the resource listed (issue 39, point 5): refused as they are
//! prepared, counted by resource and reason, and never served; the rest of the list is.

use super::*;
use crate::handoff::refused::{self, Reason};

#[test]
fn a_list_item_of_another_kind_or_scope_is_refused_and_counted() {
    let fx = fixture_f();
    let mut st = load(&fx);
    let (kind0, scope0) = (
        refused::count(Resource::Nodes, Reason::Kind),
        refused::count(Resource::Nodes, Reason::Scope),
    );
    let mut list = st.list_preparer(Resource::Nodes);
    for n in fx.node_objects() {
        list.push(&n.to_string());
    }
    list.push(&service("default", "liar", None).to_string());
    // A list item without type meta, in a namespace: the wrong scope for a Node.
    list.push(r#"{"metadata":{"name":"namespaced","namespace":"default"}}"#);
    let rv = st.current_rv();
    st.apply_prepared(Resource::Nodes, list.finish(), 1);
    assert_eq!(st.current_rv(), rv, "nothing changed");
    assert_eq!(served(&st, Resource::Nodes, "default", "liar"), Value::Null);
    assert_eq!(served(&st, Resource::Nodes, "", "liar"), Value::Null);
    assert_eq!(
        served(&st, Resource::Nodes, "default", "namespaced"),
        Value::Null
    );
    // The local node served; every node kept (the others as facts).
    assert_eq!(st.collection(Resource::Nodes).len(), 1);
    assert_eq!(st.upstream.keys(Resource::Nodes).len(), fx.nodes.len());
    // Counted (other tests may count too: at least this one's).
    assert!(refused::count(Resource::Nodes, Reason::Kind) > kind0);
    assert!(refused::count(Resource::Nodes, Reason::Scope) > scope0);
}
