//! The one decision of a request's fate: from the request read whole, the port it came in on and
//! the facts of the view that port serves, what happens to it — answered now, read from the view
//! (a list, a get or a watch), held until the view can answer, or forwarded upstream, and whether
//! the writer is asked to build v1beta1 EndpointSlices. [`route`], [`negotiate`] and the relay
//! port's own answers ([`relay::answer`]) feed it; only the [`Decision`] leaves it, and the
//! connection (`server::conn`) carries it out. Pure: the caller copies the [`Serving`] out of
//! the view, and the clock comes in as the [`Turn`].

use std::time::{Duration, Instant};

use crate::api::handlers::{not_ready, Reply};
use crate::api::negotiate::{negotiate, Format, Negotiated};
use crate::api::query;
use crate::api::relay::{self, RelayAnswer};
use crate::api::route::{route, Route};
use crate::api::selector::FieldSelector;
use crate::api::serving::Serving;
use crate::http::request::Request;
use crate::k8s::status::ApiError;
use crate::k8s::Resource;

/// Which port a connection came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// `--bind-address`: kube-proxy, served the pruned readers' view.
    KubeProxy,
    /// `--relay-bind-address`: a follower, served the relay view.
    Relay,
}

impl Side {
    /// Both ports, in rendering order.
    pub const ALL: [Side; 2] = [Side::KubeProxy, Side::Relay];

    /// The `port` label value.
    pub fn name(self) -> &'static str {
        match self {
            Side::KubeProxy => "kube-proxy",
            Side::Relay => "relay",
        }
    }
}

/// How long a request for v1beta1 EndpointSlices waits for the writer to build them (the first
/// one, on a ready cache) before it gets 503.
pub const V1BETA1_BUILD_WAIT: Duration = Duration::from_secs(10);

/// When the decision is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// The request was just read: it may be held, before the first sync for `not_ready_hold`
    /// (`--not-ready-hold-seconds`).
    Arrived {
        /// The loop's clock reading.
        now: Instant,
        /// How long a request waits for the first sync.
        not_ready_hold: Duration,
    },
    /// The request has been held until `until`; looked at again at `now` (a wake or its timer).
    Held {
        /// The loop's clock reading.
        now: Instant,
        /// When its hold ends (set when it arrived).
        until: Instant,
    },
}

/// What happens to a request.
#[derive(Debug)]
pub enum Fate {
    /// Answered now with this whole reply: a 406, a 503 (not ready, v1beta1 EndpointSlices still
    /// being built), or the relay port's discovery and 404s.
    Reply(Reply),
    /// A relay-port probe's plain-text answer: status and body.
    Probe(u16, &'static str),
    /// Read from the view in `format`: a get of an object route; a list or a watch of a
    /// collection route, as its query says (parsed by `api::handlers::handle`).
    Serve {
        /// The cache-backed route.
        route: Route,
        /// The negotiated format.
        format: Format,
    },
    /// Held until the view can answer it or `until` passes, then decided again
    /// ([`Turn::Held`]).
    Hold {
        /// When the hold ends: the request is then answered as the view allows (a 503 with
        /// `Retry-After` when it still cannot be).
        until: Instant,
        /// What it waits for.
        wait: Wait,
    },
    /// Forwarded upstream unchanged.
    Proxy(Why),
    /// A follower's runtime report on the relay port, on a ready relay view: taken by
    /// [`crate::api::runtime_report::take`] (docs/SEMANTICS.md §13.1).
    RuntimeReport,
}

/// What a held request waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// The first sync (docs/SEMANTICS.md §7).
    Sync,
    /// The writer building v1beta1 EndpointSlices on a ready cache.
    V1beta1,
}

/// Why a request is forwarded upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// Not a cache-backed route: another method, path or resource (docs/SEMANTICS.md §1).
    NotCached,
    /// ServiceCIDRs on a ready cache whose upstream has none to list (docs/SEMANTICS.md §5).
    CidrsNotServed,
    /// The `Accept` header asks only for conversions the cache does not do (`as=Table` …).
    Conversion,
    /// A request that could select a Node other than the one the view holds whole (a get of
    /// another name; a list or watch without `fieldSelector` `metadata.name=<that node>`):
    /// docs/SEMANTICS.md §1.1.
    OtherNodes,
}

/// What the counters count a request as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Label {
    /// Answered by the relay port itself (docs/SEMANTICS.md §12).
    Relay,
    /// Forwarded upstream as a path the cache does not serve.
    Proxy,
    /// A cache-backed route, whatever its answer.
    Route(Route),
}

/// The decision on one request.
#[derive(Debug)]
pub struct Decision {
    /// What happens to it.
    pub fate: Fate,
    /// What the counters count it as.
    pub label: Label,
    /// Ask the writer (without waiting) to build v1beta1 EndpointSlices: a request for them on
    /// the kube-proxy port before they are built, when it arrives or when its hold ends.
    pub ask_v1beta1: bool,
}

/// Where a hold would end, if the request may (still) be held.
#[derive(Clone, Copy)]
enum HoldEnd {
    /// Just arrived: from `now`.
    From {
        now: Instant,
        not_ready_hold: Duration,
    },
    /// Held already: its end stays.
    Until(Instant),
}

impl HoldEnd {
    fn until(self, wait: Wait) -> Instant {
        match self {
            // Before the first sync, as long as `--not-ready-hold-seconds` says; a ready cache
            // building v1beta1 EndpointSlices, until they are built (a moment, unless the writer
            // is applying a long change).
            HoldEnd::From {
                now,
                not_ready_hold,
            } => match wait {
                Wait::Sync => now + not_ready_hold,
                Wait::V1beta1 => now + not_ready_hold.max(V1BETA1_BUILD_WAIT),
            },
            HoldEnd::Until(until) => until,
        }
    }
}

/// Whether a cache-backed request for `res` can be answered from a view with `serving` now: the
/// view is ready and, for v1beta1 EndpointSlices, they are built. (On the relay port a slice
/// version the relay view does not serve was answered 404 before: docs/SEMANTICS.md §12.)
fn can_answer(serving: &Serving, res: Resource) -> bool {
    serving.ready && (serving.serves_v1beta1 || res != Resource::SlicesV1beta1)
}

/// Whether a request of route `r` with `query` selects nothing the view does not hold whole:
/// always, but for Nodes on a view that holds only one ([`Serving::only_node`]), where a get
/// must name it and a list or watch must require `metadata.name=<it>` in its `fieldSelector`
/// (other terms may be ANDed with it). A `fieldSelector` the cache does not take (a field only
/// the apiserver selects by), or a query that does not decode, proves nothing: the apiserver's
/// to answer. The query's other parameters are then checked as for any cache-backed request
/// (docs/SEMANTICS.md §1.1).
fn selects_only(r: &Route, query: &str, serving: &Serving) -> bool {
    let Some(node) = serving.only_node.as_deref() else {
        return true;
    };
    match r {
        Route::Object { res, name, .. } if *res == Resource::Nodes => name == node,
        Route::Collection { res, .. } if *res == Resource::Nodes => {
            let Ok(params) = query::decode_query(query) else {
                return false;
            };
            // The first `fieldSelector`, as `query::parse` reads it.
            let fields = params.iter().find(|(k, _)| k == "fieldSelector");
            let fields = fields.map_or("", |(_, v)| v.as_str());
            FieldSelector::parse(fields, res.selectable_fields())
                .is_ok_and(|f| f.required("metadata.name") == Some(node))
        }
        _ => true,
    }
}

/// Decides the fate of `req`, read on `side`'s port whose view has `serving`, at `turn`.
pub fn decide(req: &Request, side: Side, serving: &Serving, turn: Turn) -> Decision {
    let hold = match turn {
        Turn::Arrived {
            now,
            not_ready_hold,
        } => Some(HoldEnd::From {
            now,
            not_ready_hold,
        }),
        Turn::Held { now, until } if now < until => Some(HoldEnd::Until(until)),
        Turn::Held { .. } => None,
    };
    let decision = |fate, label| Decision {
        fate,
        label,
        ask_v1beta1: false,
    };
    if side == Side::Relay {
        let fate = match relay::answer(&req.method, &req.path, serving) {
            RelayAnswer::Routed => None,
            RelayAnswer::Probe(code, text) => Some(Fate::Probe(code, text)),
            RelayAnswer::Reply(reply) => Some(Fate::Reply(reply)),
            RelayAnswer::RuntimeReport => Some(Fate::RuntimeReport),
            RelayAnswer::NotReady => Some(match hold {
                Some(hold) => Fate::Hold {
                    until: hold.until(Wait::Sync),
                    wait: Wait::Sync,
                },
                None => Fate::Reply(Reply::error(&not_ready())),
            }),
        };
        if let Some(fate) = fate {
            return decision(fate, Label::Relay);
        }
    }
    let Some(r) = route(&req.method, &req.path) else {
        return decision(Fate::Proxy(Why::NotCached), Label::Proxy);
    };
    let res = r.resource();
    if res.is_cidr() && serving.ready && !serving.serves_cidrs {
        // An upstream without ServiceCIDRs (docs/SEMANTICS.md §5): proxied, as any path the
        // cache does not serve.
        return decision(Fate::Proxy(Why::CidrsNotServed), Label::Proxy);
    }
    if !selects_only(&r, &req.query, serving) {
        // Another Node, which the view holds only as facts: the apiserver's to answer.
        return decision(Fate::Proxy(Why::OtherNodes), Label::Proxy);
    }
    let label = Label::Route(r.clone());
    // The relay view is never asked to build them (the relay's answer above was a 404).
    let builds_v1beta1 =
        res == Resource::SlicesV1beta1 && !serving.serves_v1beta1 && side == Side::KubeProxy;
    // Once per process: the writer builds them; the request waits as one before the first sync
    // does, without holding up the loop. A held request asked when it arrived.
    let ask_v1beta1 = builds_v1beta1 && !matches!(hold, Some(HoldEnd::Until(_)));
    let fate = match hold {
        Some(hold) if !can_answer(serving, res) => {
            let wait = if serving.ready {
                Wait::V1beta1
            } else {
                Wait::Sync
            };
            Some(Fate::Hold {
                until: hold.until(wait),
                wait,
            })
        }
        None if builds_v1beta1 => Some(Fate::Reply(Reply::error(&ApiError::unavailable(
            "v1beta1 EndpointSlices are still being built; retry",
            Some(1),
        )))),
        _ => None,
    };
    if let Some(fate) = fate {
        return Decision {
            fate,
            label,
            ask_v1beta1,
        };
    }
    let fate = match negotiate(req.header_str("accept")) {
        // A conversion the cache does not do (`Accept: …;as=Table`): the apiserver's.
        Negotiated::Forward => Fate::Proxy(Why::Conversion),
        Negotiated::NotAcceptable => Fate::Reply(Reply::error(&ApiError::not_acceptable())),
        // Its hold ended before the first sync: 503, in the negotiated format.
        Negotiated::Serve(format) if !serving.ready => {
            Fate::Reply(Reply::error_as(format, &not_ready()))
        }
        Negotiated::Serve(format) => Fate::Serve { route: r, format },
    };
    decision(fate, label)
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
