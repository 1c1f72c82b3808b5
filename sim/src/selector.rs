//! The label- and field-selector subset the simulated apiserver understands: label requirements
//! `key`, `!key`, `key=v`, `key==v`, `key!=v` joined by commas (AND), and field requirements on
//! `metadata.name` / `metadata.namespace` (plus `spec.clusterIP` on Services, as 1.31+ apiservers
//! do). Anything else is a parse error the caller turns into a 400 Status. Pure.

use grid_wrapper::k8s::status::ApiError;
use grid_wrapper::k8s::Resource;
use serde_json::Value;

/// Longest selector string accepted (a named bound; real selectors are far shorter).
pub const MAX_SELECTOR_LEN: usize = 4096;

/// One label requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelReq {
    /// `key`: the label exists.
    Exists(String),
    /// `!key`: the label does not exist.
    NotExists(String),
    /// `key=v` / `key==v`.
    Equals(String, String),
    /// `key!=v` (also matches objects without the key).
    NotEquals(String, String),
}

/// A parsed label selector: the AND of its requirements (empty = everything).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<LabelReq>);

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl LabelSelector {
    /// Parses the supported subset; anything else (`in`, `notin`, `<`, `>`, bad keys) is a 400.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        if s.len() > MAX_SELECTOR_LEN {
            return Err(ApiError::bad_request("label selector too long"));
        }
        let bad = |part: &str| {
            ApiError::bad_request(format!(
                "unable to parse requirement: unsupported label selector requirement {part:?}"
            ))
        };
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for part in s.split(',') {
            let p = part.trim();
            let req = if let Some(k) = p.strip_prefix('!') {
                LabelReq::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = p.split_once("!=") {
                LabelReq::NotEquals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = p.split_once("==") {
                LabelReq::Equals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = p.split_once('=') {
                LabelReq::Equals(k.trim().to_string(), v.trim().to_string())
            } else {
                LabelReq::Exists(p.to_string())
            };
            let ok = match &req {
                LabelReq::Exists(k) | LabelReq::NotExists(k) => valid_key(k),
                LabelReq::Equals(k, v) | LabelReq::NotEquals(k, v) => {
                    valid_key(k) && valid_value(v)
                }
            };
            if !ok {
                return Err(bad(p));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object (its `metadata.labels`) satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.get("metadata").and_then(|m| m.get("labels"));
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::Equals(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEquals(k, v) => get(k) != Some(v.as_str()),
        })
    }
}

/// One field requirement: `field=value` (`==`) or `field!=value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldReq {
    /// Field path, e.g. `metadata.name`.
    pub field: String,
    /// Compared value.
    pub value: String,
    /// `true` for `!=`.
    pub negated: bool,
}

/// A parsed field selector: the AND of its requirements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldReq>);

fn field_supported(res: Resource, field: &str) -> bool {
    match field {
        "metadata.name" => true,
        "metadata.namespace" => res.namespaced(),
        "spec.clusterIP" => res == Resource::Services,
        _ => false,
    }
}

impl FieldSelector {
    /// Parses `f=v`, `f==v`, `f!=v` joined by commas; unsupported fields are a 400
    /// `field label not supported: <field>`.
    pub fn parse(s: &str, res: Resource) -> Result<Self, ApiError> {
        if s.len() > MAX_SELECTOR_LEN {
            return Err(ApiError::bad_request("field selector too long"));
        }
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(reqs));
        }
        for part in s.split(',') {
            let p = part.trim();
            let (field, value, negated) = if let Some((f, v)) = p.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = p.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = p.split_once('=') {
                (f, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{p}'"
                )));
            };
            let field = field.trim();
            if !field_supported(res, field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            reqs.push(FieldReq {
                field: field.to_string(),
                value: value.trim().to_string(),
                negated,
            });
        }
        Ok(FieldSelector(reqs))
    }

    /// Whether the object satisfies every requirement (absent fields compare as `""`).
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|r| {
            let actual = r
                .field
                .split('.')
                .try_fold(obj, |v, seg| v.get(seg))
                .and_then(Value::as_str)
                .unwrap_or("");
            (actual == r.value) != r.negated
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default", "labels": labels},
               "spec": {"clusterIP": "None"}})
    }

    #[test]
    fn label_selector_table() {
        let headless = obj(json!({"service.kubernetes.io/headless": ""}));
        let plain = obj(json!({"app": "web"}));
        let none = json!({"metadata": {"name": "x"}});
        let l = "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";
        // (selector, object, expected)
        let cases: &[(&str, &Value, bool)] = &[
            ("", &plain, true),
            (l, &headless, false),
            (l, &plain, true),
            (l, &none, true),
            ("app", &plain, true),
            ("app", &none, false),
            ("app=web", &plain, true),
            ("app==web", &plain, true),
            ("app=api", &plain, false),
            ("app!=api", &plain, true),
            ("app!=web", &plain, false),
            ("app!=web", &none, true),
            ("app=web,!service.kubernetes.io/headless", &plain, true),
            ("app=web,service.kubernetes.io/headless", &plain, false),
            (" app = web ", &plain, true),
            ("service.kubernetes.io/headless=", &headless, true),
        ];
        for (sel, o, want) in cases {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(o), *want, "selector {sel:?}");
        }
    }

    #[test]
    fn label_selector_rejects_unsupported() {
        for sel in [
            "app in (a,b)",
            "app notin (a)",
            "x>1",
            "x<1",
            "a,,b",
            "!",
            "=v",
            "a=b=c",
            "a b",
        ] {
            let e = LabelSelector::parse(sel).expect_err(sel);
            assert_eq!(e.code, 400, "{sel}");
        }
    }

    #[test]
    fn field_selector_table() {
        let o = obj(json!({}));
        let cases: &[(&str, Resource, bool)] = &[
            ("metadata.name=web", Resource::Services, true),
            ("metadata.name==web", Resource::Services, true),
            ("metadata.name=api", Resource::Services, false),
            ("metadata.name!=api", Resource::Services, true),
            ("metadata.namespace=default", Resource::SlicesV1, true),
            ("metadata.namespace=kube-system", Resource::Endpoints, false),
            (
                "metadata.name=web,metadata.namespace=default",
                Resource::Endpoints,
                true,
            ),
            ("spec.clusterIP!=None", Resource::Services, false),
            ("metadata.name=web", Resource::Nodes, true),
        ];
        for (sel, res, want) in cases {
            let s = FieldSelector::parse(sel, *res).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&o), *want, "{sel}");
        }
    }

    #[test]
    fn field_selector_rejects_unknown_fields() {
        let cases: &[(&str, Resource)] = &[
            ("spec.nodeName=x", Resource::Services),
            ("spec.clusterIP=None", Resource::Endpoints),
            ("metadata.namespace=default", Resource::Nodes),
            ("metadata.name", Resource::Nodes),
        ];
        for (sel, res) in cases {
            let e = FieldSelector::parse(sel, *res).expect_err(sel);
            assert_eq!(e.code, 400);
        }
        let e = FieldSelector::parse("spec.nodeName=x", Resource::Services).unwrap_err();
        assert_eq!(e.message, "field label not supported: spec.nodeName");
    }
}
