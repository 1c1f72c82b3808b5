//! Label and field selectors (PROTOCOL.md §5): parsing and matching. Pure.
// TEMPORARY STUB — replaced by h-selectors.
#![allow(missing_docs, unused_variables)]
use std::collections::BTreeMap;
#[derive(Clone, Debug, Default)]
pub struct LabelSelector;
impl LabelSelector {
    pub fn parse(s: &str) -> Result<LabelSelector, SelectorError> { Ok(LabelSelector) }
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool { true }
    pub fn is_empty(&self) -> bool { true }
}
#[derive(Clone, Debug, Default)]
pub struct FieldSelector;
impl FieldSelector {
    pub fn parse(s: &str, supported: &[&str]) -> Result<FieldSelector, SelectorError> { Ok(FieldSelector) }
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool { true }
    pub fn required(&self, field: &str) -> Option<&str> { None }
    pub fn is_empty(&self) -> bool { true }
}
#[derive(Clone, Debug, PartialEq)]
pub struct SelectorError;
