//! Which EndpointSlice version to mirror from the upstream, and whether (and which version of)
//! ServiceCIDRs it has (docs/SEMANTICS.md §5).

use crate::k8s::Resource;
use crate::upstream::client::{Upstream, UpstreamError};
use crate::upstream::kind::with_query;
use crate::upstream::reflector::ListWatch;
use serde_json::Value;

/// Which EndpointSlice version to mirror (docs/SEMANTICS.md §5). API discovery
/// (`GET /apis/discovery.k8s.io`, v1 preferred); if that fails, probe LIST v1 then v1beta1,
/// preferring a non-empty answer; default v1.
pub fn discover_slice_kind(upstream: &Upstream) -> Resource {
    discover_with(upstream).0
}

/// Like [`discover_slice_kind`], also saying whether the upstream answered at all (discovery or
/// a probe). When it did not (an offline start), the version is a guess to re-check later.
pub fn discover_slice_kind_checked(upstream: &Upstream) -> (Resource, bool) {
    discover_with(upstream)
}

/// The version API discovery names, or `None` when discovery cannot be reached (then
/// [`discover_slice_kind`] guessed by probing, and the caller re-checks later).
pub fn discovered_slice_kind(upstream: &Upstream) -> Option<Resource> {
    discovery_answer(upstream).ok()
}

pub(crate) fn discover_with(lw: &dyn ListWatch) -> (Resource, bool) {
    match discovery_answer(lw) {
        Ok(kind) => (kind, true),
        Err(e) => {
            log::info!("API discovery failed ({e}); probing EndpointSlice versions");
            let probe = |k: Resource| {
                lw.list(&with_query(k.path(), &[("limit", "1")]), None)
                    .map(|l| !l.items.is_empty())
            };
            let v1 = probe(Resource::SlicesV1);
            let (kind, answered) = if v1 == Ok(true) {
                (Resource::SlicesV1, true)
            } else {
                match (v1.is_ok(), probe(Resource::SlicesV1beta1)) {
                    (_, Ok(true)) => (Resource::SlicesV1beta1, true),
                    (true, _) => (Resource::SlicesV1, true),
                    (false, Ok(false)) => (Resource::SlicesV1beta1, true),
                    (false, Err(_)) => (Resource::SlicesV1, false),
                }
            };
            if answered {
                log::info!("mirroring {kind:?} (probed)");
            } else {
                log::warn!("upstream unreachable: mirroring {kind:?} for now, re-checking the EndpointSlice version until it answers");
            }
            (kind, answered)
        }
    }
}

/// The version to mirror given the `discovery.k8s.io` APIGroup document (v1 unless only
/// v1beta1 is listed), with the versions it lists. Pure.
pub fn slice_kind_from_group(group: &Value) -> (Resource, Vec<String>) {
    let versions: Vec<String> = group
        .get("versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v.get("version").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let has = |v: &str| versions.iter().any(|x| x == v);
    let kind = if has("v1") || !has("v1beta1") {
        Resource::SlicesV1
    } else {
        Resource::SlicesV1beta1
    };
    (kind, versions)
}

fn discovery_answer(lw: &dyn ListWatch) -> Result<Resource, UpstreamError> {
    let group = lw.get_json("/apis/discovery.k8s.io")?;
    let (kind, versions) = slice_kind_from_group(&group);
    log::info!("EndpointSlice versions served upstream: {versions:?}; mirroring {kind:?}");
    Ok(kind)
}

/// What the ServiceCIDR probe found (docs/SEMANTICS.md §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CidrFinding {
    /// This version answered the LIST: ServiceCIDRs are mirrored in it.
    Mirrored(Resource),
    /// Neither version is served (404: an upstream older than 1.33, or the API is off).
    Absent,
    /// A version may not be read (403: the ClusterRole lacks list/watch on servicecidrs).
    Forbidden,
}

impl CidrFinding {
    /// The version mirrored, if any: otherwise requests for ServiceCIDRs are proxied.
    pub fn kind(self) -> Option<Resource> {
        match self {
            CidrFinding::Mirrored(kind) => Some(kind),
            CidrFinding::Absent | CidrFinding::Forbidden => None,
        }
    }
}

/// Whether the upstream has ServiceCIDRs, and in which version (docs/SEMANTICS.md §5.1): a LIST
/// of v1, then of v1beta1 (`limit=1`, the reflector's own path). `Ok(Some(kind))`: the first
/// that answers; `Ok(None)`: neither is served (404, an upstream older than 1.33 or with the API
/// off) or neither may be read (403, RBAC without them), so requests for them are proxied;
/// `Err`: the upstream could not be asked (offline), to be re-checked later. Logs one line.
pub fn discover_cidr_kind(lw: &dyn ListWatch) -> Result<Option<Resource>, UpstreamError> {
    let found = find_cidr_kind(lw)?;
    match found {
        CidrFinding::Mirrored(kind) => log::info!("upstream ServiceCIDRs: mirroring {kind:?}"),
        CidrFinding::Forbidden => log::warn!("ServiceCIDRs may not be read upstream (403: grid-wrapper's ClusterRole lacks list/watch on networking.k8s.io servicecidrs): requests for them are proxied"),
        CidrFinding::Absent => log::info!("the upstream has no ServiceCIDRs (404: older than Kubernetes 1.33, or the API is off): requests for them are proxied"),
    }
    Ok(found.kind())
}

/// [`discover_cidr_kind`] without its log line: the periodic re-check, which logs only a change.
pub fn recheck_cidr_kind(lw: &dyn ListWatch) -> Result<Option<Resource>, UpstreamError> {
    find_cidr_kind(lw).map(CidrFinding::kind)
}

/// The probe itself, without a log line (`grid-wrapper check` reports it its own way).
pub fn find_cidr_kind(lw: &dyn ListWatch) -> Result<CidrFinding, UpstreamError> {
    let (found, refused) = probe_cidr_kind(lw)?;
    Ok(match found {
        Some(kind) => CidrFinding::Mirrored(kind),
        None if refused.contains(&403) => CidrFinding::Forbidden,
        None => CidrFinding::Absent,
    })
}

/// The version that answers, and the codes of the refusals before it.
fn probe_cidr_kind(lw: &dyn ListWatch) -> Result<(Option<Resource>, Vec<u16>), UpstreamError> {
    let mut refused = Vec::new();
    for kind in [Resource::CidrsV1, Resource::CidrsV1beta1] {
        match lw.list(&with_query(kind.path(), &[("limit", "1")]), None) {
            Ok(_) => return Ok((Some(kind), refused)),
            Err(UpstreamError::Status { code, .. }) if code == 404 || code == 403 => {
                refused.push(code);
            }
            Err(e) => return Err(e),
        }
    }
    Ok((None, refused))
}
