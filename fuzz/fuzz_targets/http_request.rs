//! The request reader fed arbitrary bytes, whole and in arbitrary splits: same outcome, no panic.
//! Every request read is then decided (`api::decide`) on both ports, for every combination of the
//! view's facts, when it arrives, held, and when its hold is over: no panic, and the decision
//! keeps its invariants (a view holding only the local Node never serves a get of another).
#![no_main]
use std::time::{Duration, Instant};

use grid_wrapper::api::decide::{decide, Fate, Label, Side, Turn};
use grid_wrapper::api::route::Route;
use grid_wrapper::api::serving::Serving;
use grid_wrapper::http::request::{read_all, Limits, Request};
use grid_wrapper::k8s::Resource;
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits { max_head: 1024, max_headers: 16, max_body: 2048 };

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else { return };
    if rest.len() > LIMITS.max_buffered() {
        return; // beyond the push bound the outcome legitimately depends on the split
    }
    let whole = read_all(LIMITS, [rest]);
    let split = read_all(LIMITS, rest.chunks(usize::from(k % 17) + 1));
    assert_eq!(whole, split);
    for req in whole.iter().flatten() {
        decide_every_way(req);
    }
});

fn decide_every_way(req: &Request) {
    let now = Instant::now();
    let hold = Duration::from_secs(5);
    let until = now + hold;
    for side in Side::ALL {
        for bits in 0u8..16 {
            let serving = Serving {
                ready: bits & 1 != 0,
                serves_v1beta1: bits & 2 != 0,
                serves_cidrs: bits & 4 != 0,
                only_node: (bits & 8 != 0).then(|| "edge-a1".into()),
            };
            let turns = [
                Turn::Arrived { now, not_ready_hold: hold },
                Turn::Held { now, until },
                Turn::Held { now: until, until },
            ];
            for (i, turn) in turns.into_iter().enumerate() {
                let d = decide(req, side, &serving, turn);
                match &d.fate {
                    Fate::Serve { route, .. } => {
                        assert!(serving.ready, "served before the first sync");
                        // A view holding one Node serves no get of another.
                        if let (Some(node), Route::Object { res: Resource::Nodes, name, .. }) =
                            (&serving.only_node, route)
                        {
                            assert_eq!(name.as_str(), &**node, "another Node served");
                        }
                    }
                    Fate::Hold { until: u, .. } => {
                        assert!(i < 2, "held after its hold ended");
                        assert!(*u >= until, "held for less than the hold");
                    }
                    Fate::Probe(..) => assert_eq!(side, Side::Relay, "a probe off the relay port"),
                    Fate::Reply(r) => assert!(r.code >= 200, "a reply without a status"),
                    Fate::Proxy(_) => {}
                    Fate::RuntimeReport => {
                        assert_eq!(side, Side::Relay, "a runtime report off the relay port");
                        assert!(serving.ready, "a runtime report taken before the first sync");
                    }
                }
                if d.ask_v1beta1 {
                    assert_eq!(side, Side::KubeProxy, "the relay view asked to build v1beta1");
                }
                if d.label == Label::Relay {
                    assert_eq!(side, Side::Relay, "counted as the relay's own answer");
                }
            }
        }
    }
}
