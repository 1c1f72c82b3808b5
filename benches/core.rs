//! Criterion benches of the hot paths (issue: fuzzing and benchmarks). Scale S = 500 nodes,
//! 2,000 Services (half with `topologyKeys`), 2,000 EndpointSlices × 10 endpoints, 20 zones.
//! Run with `make bench` (or `cargo bench --bench core`). Figures go to BENCHMARKS.md.

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use serde_json::{json, Value};

use grid_wrapper::api::filter::Filter;
use grid_wrapper::api::handlers::{self, InitialEnd, WatchPlan};
use grid_wrapper::api::negotiate::Format;
use grid_wrapper::api::route::Route;
use grid_wrapper::api::selector::{FieldSelector, LabelSelector};
use grid_wrapper::cache::collection::Retention;
use grid_wrapper::cache::pack::{pack, Packed};
use grid_wrapper::cache::store::{Hold, ListPreparer, Prepared, Settings, State, WatchPreparer};
use grid_wrapper::cache::topology::{self, Class, Locality, ServedBy, TopologyKeys};
use grid_wrapper::handoff::Change;
use grid_wrapper::http::request::{Limits, RequestReader};
use grid_wrapper::k8s::Resource;
use grid_wrapper::proto::decode::{decode_object, decode_object_sorted, TypeMeta};
use grid_wrapper::proto::{encode_json, encode_object};
use grid_wrapper::server::outbound::Outbound;
use grid_wrapper::server::watch::{StreamOptions, Watcher};
use grid_wrapper::upstream::decode::decode_list;
use grid_wrapper::upstream::list_split::ListSplitter;

const NODES: usize = 500;
const SERVICES: usize = 2000;
const ZONES: usize = 20;
const EPS: usize = 10;

fn node(i: usize, zone: usize) -> Value {
    json!({"apiVersion":"v1","kind":"Node","metadata":{"name":format!("node-{i:05}"),
        "labels":{"zone":format!("zone-{zone}"),"kubernetes.io/hostname":format!("node-{i:05}")}},
        "status":{"addresses":[{"type":"InternalIP","address":format!("192.168.{}.{}", i / 250, i % 250)}]}})
}

fn service(i: usize) -> Value {
    let mut s = json!({"apiVersion":"v1","kind":"Service","metadata":{"namespace":"default","name":format!("svc-{i:05}")},
        "spec":{"clusterIP":format!("10.96.{}.{}", i / 250, i % 250),"ports":[{"name":"http","port":80,"protocol":"TCP"}]}});
    if i % 2 == 0 {
        s["metadata"]["annotations"] = json!({"topologyKeys":"[\"zone\"]"});
    }
    s
}

fn slice(i: usize, eps: usize) -> Value {
    let endpoints: Vec<Value> = (0..eps)
        .map(|e| {
            let n = (i * 7 + e * 13) % NODES;
            json!({"addresses":[format!("10.{}.{}.{}", e, i / 250, i % 250)],
                "conditions":{"ready":true,"serving":true,"terminating":false},
                "nodeName":format!("node-{n:05}"),"zone":format!("zone-{}", n % ZONES),
                "targetRef":{"kind":"Pod","namespace":"default","name":format!("svc-{i:05}-{e}")}})
        })
        .collect();
    json!({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
        "metadata":{"namespace":"default","name":format!("svc-{i:05}-s0"),
            "labels":{"kubernetes.io/service-name":format!("svc-{i:05}")}},
        "addressType":"IPv4","endpoints":endpoints,"ports":[{"name":"http","port":80,"protocol":"TCP"}]})
}

fn scale_state() -> State {
    let mut st = State::new(
        Settings {
            hostname: "node-00000".into(),
            wrapper_in_cluster: true,
            retention: Retention::for_queue(10_000),
        },
        1,
    );
    for kind in [
        Resource::Nodes,
        Resource::Services,
        Resource::Endpoints,
        Resource::SlicesV1,
    ] {
        st.apply_list(kind, list_texts(kind), 0);
    }
    assert!(st.is_ready());
    st
}

const KUBE_PROXY_WATCH: &[u8] = b"GET /apis/discovery.k8s.io/v1/endpointslices?allowWatchBookmarks=true&labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name&resourceVersion=1732890000000123&timeout=7m36s&timeoutSeconds=456&watch=true HTTP/1.1\r\nHost: 127.0.0.1:51006\r\nUser-Agent: kube-proxy/v1.28.0 (linux/amd64) kubernetes/abcdef0\r\nAccept: application/vnd.kubernetes.protobuf, */*\r\nAuthorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789\r\nAccept-Encoding: gzip\r\n\r\n";

fn request_parse(c: &mut Criterion) {
    c.bench_function("request_parse/kube_proxy_watch", |b| {
        b.iter(|| {
            let mut r = RequestReader::new(Limits::default());
            let _ = r.push(black_box(KUBE_PROXY_WATCH));
            black_box(r.next_request().ok().flatten())
        })
    });
}

fn selectors(c: &mut Criterion) {
    let labels: BTreeMap<String, String> = [
        ("kubernetes.io/service-name", "web"),
        (
            "endpointslice.kubernetes.io/managed-by",
            "endpointslice-controller.k8s.io",
        ),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    c.bench_function("selector/parse_and_match_kube_proxy_L", |b| {
        b.iter(|| {
            let s = LabelSelector::parse(black_box(
                "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name",
            ))
            .ok();
            black_box(s.map(|s| s.matches(&labels)))
        })
    });
    c.bench_function("selector/field_parse_and_match_cluster_ip", |b| {
        b.iter(|| {
            let f = FieldSelector::parse(
                black_box("spec.clusterIP!=None"),
                Resource::Services.selectable_fields(),
            )
            .ok();
            black_box(f.map(|f| f.matches(|_| Some("10.96.0.10"))))
        })
    });
}

fn prune(c: &mut Criterion) {
    let nodes: BTreeMap<String, grid_wrapper::cache::collection::LabelSet> = (0..NODES)
        .map(|i| {
            let zone = format!("zone-{}", i % ZONES);
            let l = [("zone".into(), zone.into())].into_iter().collect();
            (format!("node-{i:05}"), l)
        })
        .collect();
    let keys = TopologyKeys::any(["zone".to_string()].into_iter().collect());
    let abnormal = BTreeSet::new();
    let loc = Locality {
        hostname: "node-00000",
        nodes: &nodes,
        wrapper_in_cluster: true,
        abnormal: &abnormal,
    };
    let big = slice(1, 1000);
    c.bench_function("prune/slice_1000_endpoints", |b| {
        b.iter(|| {
            black_box(topology::serve_slice_v1(
                black_box(big.clone()),
                Class::Topology(ServedBy::AnyKey(&keys)),
                &loc,
            ))
        })
    });
}

fn list_and_fanout(c: &mut Criterion) {
    let st = scale_state();
    let route = Route::Collection {
        res: Resource::SlicesV1,
        namespace: None,
    };
    let q = "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name&limit=500&resourceVersion=0";
    c.bench_function("list/encode_all_slices_scale_S", |b| {
        b.iter(|| {
            match st
                .with_view(|v| handlers::handle(&route, q, Format::Json, v, 0.5))
                .into_reply()
            {
                Some(r) => {
                    // What the socket would get: the concatenated body.
                    let mut body = Vec::with_capacity(r.len());
                    for s in &r.body {
                        body.extend_from_slice(s.as_bytes());
                    }
                    black_box(body.len())
                }
                _ => 0,
            }
        })
    });

    // kube-proxy's LIST (selector L): the reply as the socket gets it (vectored segments), no copy.
    c.bench_function("list_selector_L/all_slices_scale_S", |b| {
        b.iter(|| {
            match st
                .with_view(|v| handlers::handle(&route, q, Format::Json, v, 0.5))
                .into_reply()
            {
                Some(r) => black_box(r.len()),
                None => 0,
            }
        })
    });

    // kube-proxy's LIST in protobuf, each item's protobuf form already encoded (shared).
    c.bench_function("list_selector_L/all_slices_protobuf_scale_S", |b| {
        b.iter(|| {
            match st
                .with_view(|v| handlers::handle(&route, q, Format::Protobuf, v, 0.5))
                .into_reply()
            {
                Some(r) => black_box(r.len()),
                None => 0,
            }
        })
    });

    // One slice of EPS endpoints encoded to protobuf: what a first protobuf read costs per
    // object (a LIST of a resource no protobuf client read yet pays it for every item).
    let one = slice(3, EPS);
    c.bench_function("proto/encode_one_slice", |b| {
        b.iter(|| black_box(encode_object(Resource::SlicesV1, &one).bytes.len()))
    });
    // What a first protobuf read of that slice costs from its served JSON: parsed into a
    // `serde_json::Value`, then encoded (`from_json_value`), or encoded from the text itself.
    let one_json = serde_json::to_vec(&one).expect("a slice serializes");
    c.bench_function("proto/encode_one_slice_from_json_value", |b| {
        b.iter(|| {
            let value: Value = serde_json::from_slice(black_box(&one_json)).unwrap_or_default();
            black_box(encode_object(Resource::SlicesV1, &value).bytes.len())
        })
    });
    c.bench_function("proto/encode_one_slice_from_json", |b| {
        b.iter(|| {
            black_box(
                encode_json(Resource::SlicesV1, black_box(&one_json))
                    .bytes
                    .len(),
            )
        })
    });

    // The same LIST right after a change of one slice (nothing is rebuilt: the body shares items).
    let changing = std::cell::RefCell::new(scale_state());
    c.bench_function("list_selector_L/after_a_change_scale_S", |b| {
        let mut gen = 0u64;
        b.iter_batched(
            || {
                gen += 1;
                let mut s = slice(3, EPS);
                s["metadata"]["annotations"] = json!({"gen": gen.to_string()});
                changing
                    .borrow_mut()
                    .apply(Resource::SlicesV1, Change::upsert(&s), 0);
            },
            |()| match changing
                .borrow()
                .with_view(|v| handlers::handle(&route, q, Format::Json, v, 0.5))
                .into_reply()
            {
                Some(r) => black_box(r.len()),
                None => 0,
            },
            // One change before every LIST (a batch would share one rebuild).
            BatchSize::PerIteration,
        )
    });

    // One upstream change fanned out to 100 in-process watchers.
    let st = std::cell::RefCell::new(scale_state());
    c.bench_function("fanout/one_event_100_watchers", |b| {
        let mut gen = 0u64;
        b.iter_batched(
            || {
                let now = Instant::now();
                let watchers: Vec<(Watcher, Outbound)> = (0..100)
                    .map(|_| {
                        let mut out = Outbound::default();
                        let plan = WatchPlan {
                            res: Resource::SlicesV1,
                            filter: Filter::default(),
                            cursor: st.borrow().current_rv(),
                            initial: false,
                            initial_end: InitialEnd::None,
                            bookmarks: false,
                            timeout_secs: 600,
                            expired: None,
                            format: Format::Json,
                        };
                        let opts = StreamOptions {
                            stall: Duration::from_secs(120),
                            chunked: true,
                        };
                        let w = Watcher::start(plan, now, opts, &mut out);
                        (w.expect("plan is not expired"), out)
                    })
                    .collect();
                gen += 1;
                let mut s = slice(3, EPS);
                s["metadata"]["annotations"] = json!({"gen": gen.to_string()});
                st.borrow_mut()
                    .apply(Resource::SlicesV1, Change::upsert(&s), 0);
                watchers
            },
            |mut watchers| {
                let now = Instant::now();
                st.borrow().with_view(|v| {
                    for (w, out) in watchers.iter_mut() {
                        let _ = w.pump(v, out, 10_000, now);
                    }
                });
                black_box(watchers.iter().map(|(_, o)| o.len()).sum::<usize>())
            },
            BatchSize::SmallInput,
        )
    });
}

fn relabel(c: &mut Criterion) {
    let mut st = scale_state();
    let mut flip = false;
    c.bench_function("relabel/local_node_refilter_scale_S", |b| {
        b.iter(|| {
            flip = !flip;
            let zone = if flip { 1 } else { 0 };
            black_box(st.apply(Resource::Nodes, Change::upsert(&node(0, zone)), 0))
        })
    });
    // Another node: only the objects with an endpoint on it are recomputed.
    c.bench_function("relabel/remote_node_refilter_scale_S", |b| {
        b.iter(|| {
            flip = !flip;
            let zone = if flip { 1 } else { 7 };
            black_box(st.apply(Resource::Nodes, Change::upsert(&node(7, zone)), 0))
        })
    });
}

/// Publication: one upstream slice change through the writer (decode-free `Change::Upsert`,
/// topology, serialization) into the readers' view.
fn publish(c: &mut Criterion) {
    let mut st = scale_state();
    let mut gen = 0u64;
    c.bench_function("publish/one_slice_change_scale_S", |b| {
        b.iter(|| {
            gen += 1;
            let mut s = slice(3, EPS);
            s["metadata"]["annotations"] = json!({"gen": gen.to_string()});
            black_box(st.apply(Resource::SlicesV1, Change::upsert(&s), 0))
        })
    });
}

/// How many watch events one iteration of `watch_writer` applies.
const WATCH_EVENTS: usize = 100;

/// The writer thread's part of watch events at scale S: `WATCH_EVENTS` events, prepared as the
/// reflector's thread hands them over (not timed), applied to the state, and what the writer
/// packs after them (timed). Slices of every other Service are pruned by topology; the Nodes'
/// changes are heartbeats (their facts unchanged).
fn watch_writer(c: &mut Criterion) {
    let mut st = scale_state();
    let mut gen = 0u64;
    let mut next = |kind: Resource| -> Vec<Prepared> {
        gen += 1;
        let objects: Vec<Value> = (0..WATCH_EVENTS)
            .map(|i| match kind {
                Resource::Nodes => {
                    let mut n = node(i + 1, (i + 1) % ZONES);
                    n["status"]["conditions"] = json!([{"type":"Ready","status":"True",
                        "lastHeartbeatTime": format!("2026-01-01T00:{:02}:00Z", gen % 60)}]);
                    n
                }
                _ => {
                    let mut s = slice(i, EPS);
                    s["metadata"]["annotations"] = json!({"gen": gen.to_string()});
                    s
                }
            })
            .collect();
        watch_prepared(kind, &objects)
    };
    for (name, kind) in [
        ("watch_writer/100_slice_changes_scale_S", Resource::SlicesV1),
        ("watch_writer/100_node_heartbeats_scale_S", Resource::Nodes),
    ] {
        c.bench_function(name, |b| {
            b.iter_batched(
                || next(kind),
                |events| {
                    for e in events {
                        black_box(st.apply_prepared(kind, e, 0));
                    }
                    // What the writer packs after the changes (pruned objects it took whole).
                    black_box(st.pack_pending(usize::MAX));
                },
                BatchSize::PerIteration,
            )
        });
    }
}

/// Watch events' objects as the reflector's thread hands them to the writer.
fn watch_prepared(kind: Resource, objects: &[Value]) -> Vec<Prepared> {
    let mut preparer = WatchPreparer::new(Some("node-00000"));
    objects
        .iter()
        .filter_map(|o| preparer.prepare(kind, Change::upsert(o)))
        .collect()
}

/// `kind`'s upstream list of scale S as a reflector reads it: each item its JSON text (no
/// Endpoints).
fn list_texts(kind: Resource) -> Vec<Box<str>> {
    let items: Vec<Value> = match kind {
        Resource::Nodes => (0..NODES).map(|i| node(i, i % ZONES)).collect(),
        Resource::Services => (0..SERVICES).map(service).collect(),
        Resource::Endpoints => Vec::new(),
        _ => (0..SERVICES).map(|i| slice(i, EPS)).collect(),
    };
    items.iter().map(|v| v.to_string().into()).collect()
}

/// A state with every list of scale S applied but `last`'s, and `last`'s list as texts.
fn all_but(last: Resource) -> (State, Vec<Box<str>>) {
    let mut st = State::new(
        Settings {
            hostname: "node-00000".into(),
            wrapper_in_cluster: true,
            retention: Retention::for_queue(10_000),
        },
        1,
    );
    for kind in [
        Resource::Nodes,
        Resource::Services,
        Resource::Endpoints,
        Resource::SlicesV1,
    ] {
        if kind != last {
            st.apply_list(kind, list_texts(kind), 0);
        }
    }
    (st, list_texts(last))
}

/// Last upstream list → ready: the reflector's taking of the list (each item made canonical
/// bytes off the lock, by the `ListPreparer` the cache chooses) and the writer's apply of the
/// list that completes the sync, for each kind arriving last.
fn sync(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync");
    g.sample_size(10);
    for (name, kind) in [
        ("last_list_slices_scale_S", Resource::SlicesV1),
        ("last_list_services_scale_S", Resource::Services),
        ("last_list_nodes_scale_S", Resource::Nodes),
    ] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || all_but(kind),
                |(mut st, texts)| {
                    let applied = st.apply_list(kind, texts, 0);
                    assert!(applied.became_ready);
                    (st, applied)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

/// Slice `i` as an apiserver writes a list item: keys in Go struct field order (not sorted),
/// no `kind`/`apiVersion`, the metadata a real object carries.
fn slice_go_order(i: usize, eps: usize) -> Box<str> {
    let endpoints: Vec<String> = (0..eps)
        .map(|e| {
            let n = (i * 7 + e * 13) % NODES;
            format!(
                r#"{{"addresses":["10.{e}.{}.{}"],"conditions":{{"ready":true,"serving":true,"terminating":false}},"targetRef":{{"kind":"Pod","namespace":"default","name":"svc-{i:05}-{e}","uid":"6a1f0c2e-{i:04x}-{e:04x}-9d7e-0242ac120002"}},"nodeName":"node-{n:05}","zone":"zone-{}"}}"#,
                i / 250,
                i % 250,
                n % ZONES
            )
        })
        .collect();
    format!(
        r#"{{"metadata":{{"name":"svc-{i:05}-s0","generateName":"svc-{i:05}-","namespace":"default","uid":"0f6a2b1c-{i:04x}-4e5d-9a8b-0242ac120002","resourceVersion":"{}","generation":3,"creationTimestamp":"2026-11-30T10:00:00Z","labels":{{"kubernetes.io/service-name":"svc-{i:05}","endpointslice.kubernetes.io/managed-by":"endpointslice-controller.k8s.io"}},"annotations":{{"endpoints.kubernetes.io/last-change-trigger-time":"2026-11-30T10:00:00Z"}},"ownerReferences":[{{"apiVersion":"v1","kind":"Service","name":"svc-{i:05}","uid":"0f6a2b1c-{i:04x}-4e5d-9a8b-0242ac120003","controller":true,"blockOwnerDeletion":true}}]}},"addressType":"IPv4","endpoints":[{}],"ports":[{{"name":"http","protocol":"TCP","port":80}}]}}"#,
        1000 + i,
        endpoints.join(",")
    )
    .into()
}

/// A list's items made canonical bytes off the lock (a `ListPreparer` holding them whole, as a
/// first list's are), from text in sorted key order (as the simulator and `serde_json::Value` write it) and in an apiserver's
/// Go struct field order.
fn prepare_lists(c: &mut Criterion) {
    let sorted: Vec<Box<str>> = (0..SERVICES)
        .map(|i| {
            let mut v = slice(i, EPS);
            if let Some(m) = v.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            v.to_string().into()
        })
        .collect();
    let go: Vec<Box<str>> = (0..SERVICES).map(|i| slice_go_order(i, EPS)).collect();
    let kind = Resource::SlicesV1;
    for (name, texts) in [
        ("prepare/slices_list_sorted_keys_scale_S", sorted),
        ("prepare/slices_list_go_order_scale_S", go),
    ] {
        c.bench_function(name, |b| {
            b.iter_batched(
                || texts.clone(),
                |texts| {
                    let mut list = ListPreparer::new(kind, Hold::Whole);
                    texts.into_iter().for_each(|text| list.push(&text));
                    list.finish()
                },
                BatchSize::LargeInput,
            )
        });
    }
}

/// A LIST body at S (2,000 slices in an apiserver's field order) into its items: decoded whole
/// (`decode_list`, the body in memory) and split as it arrives in 32 KiB reads (the client's
/// way since the tenth pass).
fn split_lists(c: &mut Criterion) {
    let items: Vec<Box<str>> = (0..SERVICES).map(|i| slice_go_order(i, EPS)).collect();
    let body = format!(
        r#"{{"kind":"EndpointSliceList","apiVersion":"discovery.k8s.io/v1","metadata":{{"resourceVersion":"4242"}},"items":[{}]}}"#,
        items.join(",")
    );
    c.bench_function("list_body/decode_whole_scale_S", |b| {
        b.iter(|| decode_list(body.as_bytes()).map(|l| l.items.len()))
    });
    c.bench_function("list_body/split_in_32k_reads_scale_S", |b| {
        b.iter(|| {
            let mut s = ListSplitter::new();
            for chunk in body.as_bytes().chunks(32 * 1024) {
                s.feed(chunk);
            }
            s.finish().map(|l| l.items.len())
        })
    });
}

/// Packing the upstream bytes the cache keeps for pruned objects (half a list's slices at S are
/// a topology Service's: packed under the cache lock when published), and unpacking them (a
/// relabel's recompute, a relist's comparison). The apiserver's texts, with their uids.
fn pack_bytes(c: &mut Criterion) {
    let texts: Vec<Box<str>> = (0..SERVICES / 2)
        .map(|i| slice_go_order(i * 2, EPS))
        .collect();
    let bytes: usize = texts.iter().map(|t| t.len()).sum();
    let packed: Vec<Packed> = texts.iter().filter_map(|t| pack(t.as_bytes())).collect();
    let size: usize = packed.iter().map(Packed::packed_len).sum();
    eprintln!(
        "pack: 1,000 slices, {bytes} bytes packed to {size} ({:.2}x)",
        bytes as f64 / size as f64
    );
    c.bench_function("pack/topology_slices_scale_S", |b| {
        b.iter(|| texts.iter().filter_map(|t| pack(t.as_bytes())).count())
    });
    c.bench_function("unpack/topology_slices_scale_S", |b| {
        b.iter(|| packed.iter().filter_map(Packed::unpack).count())
    });
}

/// A JSON LIST's copies of versions held only in protobuf (`Served::json`): 2,000 slices at S,
/// each message made the cache's JSON, as Go's JSON then sorted
/// (`cache::canonical::tree::sorted`), and written sorted from the message
/// (`decode_object_sorted`, what `Served::json` does).
fn protobuf_json(c: &mut Criterion) {
    let res = Resource::SlicesV1;
    let messages: Vec<Vec<u8>> = (0..SERVICES)
        .map(|i| {
            let framed = encode_json(res, slice_go_order(i, EPS).as_bytes()).bytes;
            let len_bytes = framed[1..].iter().take_while(|&&b| b & 0x80 != 0).count() + 1;
            framed[1 + len_bytes..].to_vec()
        })
        .collect();
    let tm = Some(TypeMeta {
        api_version: res.api_version(),
        kind: res.kind(),
    });
    let old = |msg: &[u8]| {
        let go = decode_object(res, msg, tm).ok()?;
        grid_wrapper::cache::canonical::tree::sorted(&go.json)
    };
    let new = |msg: &[u8]| decode_object_sorted(res, msg, tm).ok().map(|d| d.json);
    for msg in &messages {
        assert_eq!(new(msg), old(msg));
    }
    c.bench_function("protobuf_json/slices_go_json_sorted_scale_S", |b| {
        b.iter(|| {
            messages
                .iter()
                .filter_map(|m| old(m))
                .map(|j| j.len())
                .sum::<usize>()
        })
    });
    c.bench_function("protobuf_json/slices_written_sorted_scale_S", |b| {
        b.iter(|| {
            messages
                .iter()
                .filter_map(|m| new(m))
                .map(|j| j.len())
                .sum::<usize>()
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = request_parse, selectors, prune, list_and_fanout, relabel, publish, watch_writer, sync, prepare_lists, split_lists, pack_bytes, protobuf_json
}
criterion_main!(benches);
