//! The Kubernetes `Status` object: every error grid-wrapper answers is one (docs/SEMANTICS.md
//! §1, "Errors").

use serde_json::{json, Value};

/// An API error, rendered as a `Status` with `status: "Failure"` and `code` = HTTP status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code, also `Status.code`.
    pub code: u16,
    /// `Status.reason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// Human-readable `Status.message`.
    pub message: String,
    /// `Status.details.name`, when the error is about one object.
    pub name: Option<String>,
    /// `Status.details.kind` (the plural resource), when known.
    pub kind: Option<String>,
    /// `Status.details.retryAfterSeconds` (and the `Retry-After` header).
    pub retry_after: Option<u32>,
}

impl ApiError {
    /// A bare error with code, reason and message.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            name: None,
            kind: None,
            retry_after: None,
        }
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 `NotFound` for one object: message `<plural> "<name>" not found`.
    pub fn not_found(plural: &str, name: &str) -> Self {
        let mut e = Self::new(404, "NotFound", format!("{plural} \"{name}\" not found"));
        e.name = Some(name.to_string());
        e.kind = Some(plural.to_string());
        e
    }

    /// 406 `NotAcceptable`.
    pub fn not_acceptable() -> Self {
        Self::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/vnd.kubernetes.protobuf",
        )
    }

    /// 410 `Expired` for a watch/list resourceVersion that cannot be served.
    pub fn expired(requested: &str, current: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({current})"),
        )
    }

    /// 422 `Invalid`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// 500 `InternalError`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 503 `ServiceUnavailable`, optionally with `Retry-After`.
    pub fn unavailable(message: impl Into<String>, retry_after: Option<u32>) -> Self {
        let mut e = Self::new(503, "ServiceUnavailable", message);
        e.retry_after = retry_after;
        e
    }

    /// The `Status` object as JSON.
    pub fn to_value(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = serde_json::Map::new();
        if let Some(name) = &self.name {
            details.insert("name".into(), json!(name));
        }
        if let Some(kind) = &self.kind {
            details.insert("kind".into(), json!(kind));
        }
        if let Some(secs) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(secs));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }

    /// The `Status` object serialized.
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing a Value built from strings and integers cannot fail.
        serde_json::to_vec(&self.to_value()).unwrap_or_default()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_is_a_full_status() {
        let v = ApiError::not_found("nodes", "edge-1").to_value();
        assert_eq!(v["status"], "Failure");
        assert_eq!(v["code"], 404);
        assert_eq!(v["reason"], "NotFound");
        assert_eq!(v["message"], "nodes \"edge-1\" not found");
        assert_eq!(v["details"]["kind"], "nodes");
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["apiVersion"], "v1");
    }

    #[test]
    fn retry_after_lands_in_details() {
        let v = ApiError::unavailable("not ready", Some(1)).to_value();
        assert_eq!(v["details"]["retryAfterSeconds"], 1);
        assert_eq!(v["code"], 503);
    }
}
