//! Which served objects a request sees: path namespace AND label selector AND field selector.

use crate::api::selector::{FieldSelector, LabelLookup, LabelSelector};
use crate::cache::collection::{admission_filtered, LabelSet, Served, EXCLUDING_LABELS};
use crate::k8s::Resource;

/// The selection of one list or watch: what "matches" means (docs/SEMANTICS.md §1, §6).
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Namespace of a namespaced path.
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
}

/// How a [`Filter`] picks from the served objects of one resource ([`Filter::scope`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every served object: no per-item matching is needed.
    Everything,
    /// Each object must be matched ([`Filter::matches`]).
    PerItem,
}

impl Filter {
    /// Whether `obj` is selected.
    pub fn matches(&self, obj: &Served) -> bool {
        if let Some(ns) = &self.namespace {
            if *obj.key.namespace != **ns {
                return false;
            }
        }
        self.labels.matches(&obj.labels) && self.fields.matches(|f| obj.field(f))
    }

    /// Classifies this filter for the served objects of `res`. [`Scope::Everything`] when
    /// there is no path namespace and no field selector, and the label selector is empty or
    /// implied by the admission filter: `res` is admission-filtered (not Nodes) and every
    /// requirement is `!key` for a key of [`EXCLUDING_LABELS`] (kube-proxy's selector L), which
    /// no admitted object carries. Otherwise [`Scope::PerItem`].
    pub fn scope(&self, res: Resource) -> Scope {
        if self.namespace.is_some() || !self.fields.is_empty() {
            return Scope::PerItem;
        }
        if self.labels.is_empty()
            || (admission_filtered(res) && self.labels.only_absence_of(&EXCLUDING_LABELS))
        {
            Scope::Everything
        } else {
            Scope::PerItem
        }
    }
}

/// A served object's labels, for label selectors (the cache keeps them; the selectors are the
/// API's).
impl LabelLookup for LabelSet {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: &str = "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";

    fn filter(labels: &str, fields: &str, ns: Option<&str>, res: Resource) -> Filter {
        Filter {
            namespace: ns.map(str::to_string),
            labels: LabelSelector::parse(labels).unwrap_or_else(|e| panic!("{labels}: {e}")),
            fields: FieldSelector::parse(fields, res.selectable_fields())
                .unwrap_or_else(|e| panic!("{fields}: {e}")),
        }
    }

    fn class(labels: &str, fields: &str, ns: Option<&str>, res: Resource) -> Scope {
        filter(labels, fields, ns, res).scope(res)
    }

    #[test]
    fn selectors_implied_by_admission_select_everything() {
        for res in [
            Resource::Services,
            Resource::Endpoints,
            Resource::SlicesV1,
            Resource::SlicesV1beta1,
        ] {
            for sel in [
                L,
                "",
                "!service.kubernetes.io/headless",
                "!service.kubernetes.io/service-proxy-name",
            ] {
                assert_eq!(
                    class(sel, "", None, res),
                    Scope::Everything,
                    "{res:?} {sel}"
                );
            }
        }
    }

    #[test]
    fn any_other_requirement_matches_per_item() {
        for res in Resource::ALL {
            for sel in [
                format!("{L},app=web"),
                format!("{L},!app"),
                "!service.kubernetes.io/other".to_string(),
                "service.kubernetes.io/headless".to_string(),
                "service.kubernetes.io/headless!=x".to_string(),
                "service.kubernetes.io/service-proxy-name notin (x)".to_string(),
            ] {
                assert_eq!(class(&sel, "", None, res), Scope::PerItem, "{res:?} {sel}");
            }
        }
        // Such a selector still rejects an object per item.
        let f = filter(&format!("{L},app=web"), "", None, Resource::Services);
        let labels: std::collections::BTreeMap<String, String> =
            [("app".to_string(), "db".to_string())]
                .into_iter()
                .collect();
        assert!(!f.labels.matches(&labels));
    }

    #[test]
    fn field_selectors_and_namespaces_match_per_item() {
        let res = Resource::Services;
        assert_eq!(class(L, "spec.clusterIP!=None", None, res), Scope::PerItem);
        assert_eq!(class("", "metadata.name=x", None, res), Scope::PerItem);
        assert_eq!(class(L, "", Some("default"), res), Scope::PerItem);
        assert_eq!(class("", "", Some("default"), res), Scope::PerItem);
    }

    #[test]
    fn nodes_are_never_skipped_on_admission() {
        // Nodes are not admission-filtered: a node may carry the excluding labels.
        for sel in [L, "!service.kubernetes.io/headless"] {
            assert_eq!(
                class(sel, "", None, Resource::Nodes),
                Scope::PerItem,
                "{sel}"
            );
        }
        assert!(!admission_filtered(Resource::Nodes));
        // Only the empty selector (which matches any object) selects every node.
        assert_eq!(class("", "", None, Resource::Nodes), Scope::Everything);
    }
}
