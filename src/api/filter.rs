//! Which served objects a request sees: path namespace AND label selector AND field selector.

use crate::api::selector::{FieldSelector, LabelSelector};
use crate::cache::view::Served;

/// The selection of one list or watch (PROTOCOL.md §9: "matches").
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Namespace of a namespaced path.
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
}

impl Filter {
    /// Whether `obj` is selected.
    pub fn matches(&self, obj: &Served) -> bool {
        if let Some(ns) = &self.namespace {
            if &obj.key.namespace != ns {
                return false;
            }
        }
        self.labels.matches(&obj.labels) && self.fields.matches(|f| obj.field(f))
    }
}
