//! The `/sim/` control API: apply/delete objects, relabel nodes, compact history, close watches,
//! reset the RV counter (`/sim/reset-rv`), set the edge-health stub's answer, read and clear
//! recorded requests, report state. Each operation returns JSON or a Status error; store changes
//! notify the watchers' `Condvar`. The operations that need the connection (`GET
//! /sim/edge-health`, `/sim/refuse`) are the server's.

use crate::fault::ResetRv;
use crate::routes::SimOp;
use crate::shared::Shared;
use crate::store::{Event, Kind, Store};
use grid_wrapper::k8s::status::ApiError;
use grid_wrapper::k8s::ObjectKey;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, PoisonError};

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))
}

fn summary(ev: &Event) -> Value {
    json!({
        "type": ev.etype.as_str(), "kind": ev.kind.name(),
        "namespace": &*ev.key.namespace, "name": &*ev.key.name,
        "resourceVersion": ev.rv.to_string(),
    })
}

/// Largest `/sim/pad-node` padding.
const MAX_PAD_BYTES: u64 = 256 * 1024 * 1024;

fn str_field<'a>(v: &'a Value, field: &str) -> Result<&'a str, ApiError> {
    v.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::bad_request(format!("field {field:?} (a string) is required")))
}

fn lock(shared: &Shared) -> MutexGuard<'_, Store> {
    shared.store.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs one control operation.
pub fn handle(shared: &Shared, op: SimOp, body: &[u8]) -> Result<Value, ApiError> {
    match op {
        SimOp::Apply => {
            let v = parse_body(body)?;
            let result = {
                let mut store = lock(shared);
                match v {
                    Value::Array(items) => {
                        let mut out = Vec::with_capacity(items.len());
                        let mut err = None;
                        for item in items {
                            match store.apply(item) {
                                Ok(ev) => out.push(summary(&ev)),
                                Err(e) => {
                                    err = Some(e);
                                    break;
                                }
                            }
                        }
                        match err {
                            Some(e) if out.is_empty() => Err(e),
                            Some(e) => {
                                let mut e = e;
                                e.message = format!("{} (after {} applied)", e.message, out.len());
                                Err(e)
                            }
                            None => Ok(Value::Array(out)),
                        }
                    }
                    obj => store.apply(obj).map(|ev| summary(&ev)),
                }
            };
            shared.changed.notify_all();
            result
        }
        SimOp::Delete => {
            let v = parse_body(body)?;
            let kind_s = str_field(&v, "kind")?;
            let kind = Kind::from_kind(kind_s)
                .ok_or_else(|| ApiError::bad_request(format!("unknown kind {kind_s:?}")))?;
            let name = str_field(&v, "name")?;
            let ns = match kind {
                Kind::Node | Kind::Cidr => "",
                _ => v
                    .get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("default"),
            };
            let ev = lock(shared).delete(kind, &ObjectKey::new(ns, name))?;
            shared.changed.notify_all();
            Ok(summary(&ev))
        }
        SimOp::LabelNode => {
            let v = parse_body(body)?;
            let name = str_field(&v, "name")?;
            let labels = v
                .get("labels")
                .and_then(Value::as_object)
                .ok_or_else(|| ApiError::bad_request("field \"labels\" (an object) is required"))?;
            let ev = lock(shared).label_node(name, labels)?;
            shared.changed.notify_all();
            Ok(summary(&ev))
        }
        SimOp::PadNode => {
            let v = parse_body(body)?;
            let name = str_field(&v, "name")?;
            let bytes = v
                .get("bytes")
                .and_then(Value::as_u64)
                .filter(|&b| b <= MAX_PAD_BYTES)
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "field \"bytes\" (a whole number up to {MAX_PAD_BYTES}) is required"
                    ))
                })?;
            let ev = lock(shared).pad_node(name, bytes as usize)?;
            shared.changed.notify_all();
            Ok(summary(&ev))
        }
        SimOp::Compact => {
            let horizon = lock(shared).compact();
            Ok(json!({"horizon": horizon.to_string(), "resourceVersion": horizon.to_string()}))
        }
        SimOp::CloseWatches => {
            let open = shared.open_watches.load(Ordering::SeqCst);
            let epoch = lock(shared).close_watches();
            shared.changed.notify_all();
            Ok(json!({"closed": open, "epoch": epoch}))
        }
        SimOp::ResetRv => {
            let req = ResetRv::parse(body)?;
            let open = shared.open_watches.load(Ordering::SeqCst);
            let r = lock(shared).reset_rv(req.rv, req.too_large, req.watches)?;
            shared.changed.notify_all();
            Ok(json!({
                "previous": r.previous.to_string(),
                "resourceVersion": r.current.to_string(),
                "rv": r.current,
                "horizon": r.current,
                "restamped": r.restamped,
                "too_large": r.mode.as_str(),
                "watches": r.watches.as_str(),
                "closed": open,
                "epoch": r.epoch,
            }))
        }
        SimOp::SetEdgeHealth => shared.edge_health.set(body),
        SimOp::Load => Ok(shared.load.report(std::time::Instant::now())),
        SimOp::SetLoad => shared.load.set(body, std::time::Instant::now()),
        SimOp::EdgeHealth | SimOp::Refuse => Err(ApiError::internal(
            "this control operation is answered by the server loop",
        )),
        SimOp::Requests => {
            let rec = shared
                .recorded
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            Ok(Value::Array(rec.iter().map(|r| r.to_json()).collect()))
        }
        SimOp::ClearRequests => {
            let mut rec = shared
                .recorded
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let n = rec.len();
            rec.clear();
            drop(rec);
            let mut served = shared.served.lock().unwrap_or_else(PoisonError::into_inner);
            let served_n = served.len();
            served.clear();
            Ok(json!({"cleared": n, "clearedServed": served_n}))
        }
        SimOp::Served => {
            let log = shared.served.lock().unwrap_or_else(PoisonError::into_inner);
            Ok(Value::Array(log.iter().map(|r| r.to_json()).collect()))
        }
        SimOp::State => {
            let store = lock(shared);
            let counts: serde_json::Map<String, Value> = Kind::ALL
                .iter()
                .map(|k| (k.plural().to_string(), json!(store.count(*k))))
                .collect();
            let recorded = shared
                .recorded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len();
            let listens: Vec<Value> = shared
                .listens()
                .map(|l| {
                    json!({
                        "listen": l.addr().map(|a| a.to_string()),
                        "refusing": l.refusing(),
                        "refusals": l.outages(),
                        "openWatches": l.open_watches.load(Ordering::SeqCst),
                        "requests": l.requests.load(Ordering::Relaxed),
                    })
                })
                .collect();
            Ok(json!({
                "resourceVersion": store.rv().to_string(),
                "rv": store.rv(),
                "horizon": store.horizon(),
                "history": store.history_len(),
                "counts": counts,
                "openWatches": shared.open_watches.load(Ordering::SeqCst),
                "served": {
                    "lists": shared.served_lists.load(Ordering::Relaxed),
                    "watches": shared.served_watches.load(Ordering::Relaxed),
                    "gets": shared.served_gets.load(Ordering::Relaxed),
                    "listBytes": shared.list_bytes.load(Ordering::Relaxed),
                    "watchBytes": shared.watch_bytes.load(Ordering::Relaxed),
                    "listPlainBytes": shared.list_plain_bytes.load(Ordering::Relaxed),
                    "gzippedLists": shared.gzipped_lists.load(Ordering::Relaxed),
                    "protobufLists": shared.protobuf_lists.load(Ordering::Relaxed),
                    "protobufWatches": shared.protobuf_watches.load(Ordering::Relaxed),
                    "protobufGets": shared.protobuf_gets.load(Ordering::Relaxed),
                },
                "recorded": recorded,
                "too_large": store.too_large().map(|m| m.as_str()),
                "edge_health_polls": shared.edge_health.polls(),
                "refusals": shared.outages(),
                "servesProtobuf": shared.protobuf,
                "listens": listens,
            }))
        }
    }
}
