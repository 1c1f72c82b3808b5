//! List/watch query options (PROTOCOL.md §5): parsing and validation. Pure.
// TEMPORARY STUB — replaced by h-selectors.
#![allow(missing_docs, unused_variables)]
use super::selector::{FieldSelector, LabelSelector};
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RvMatch { NotOlderThan, Exact }
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub watch: bool,
    pub label_selector: LabelSelector,
    pub field_selector: FieldSelector,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<RvMatch>,
    pub send_initial_events: Option<bool>,
    pub allow_watch_bookmarks: bool,
    pub timeout_seconds: Option<u64>,
}
pub fn parse(query: &str, supported_fields: &[&str]) -> Result<ListOptions, crate::k8s::status::ApiError> { Ok(ListOptions::default()) }
