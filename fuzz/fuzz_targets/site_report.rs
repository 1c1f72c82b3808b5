//! Arbitrary bytes as a follower's runtime report (on the relay port) and as a relay's answer
//! (on a follower): no panic, a taken report is within its bounds, and what is taken encodes
//! and decodes back to itself.
#![no_main]
use grid_wrapper::handoff::site_pods::{self, MAX_PODS, MAX_VALID_FOR, MIN_VALID_FOR};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = site_pods::decode_report(data) {
        assert!((MIN_VALID_FOR..=MAX_VALID_FOR).contains(&r.valid_for));
        assert!(r.pods.ready.len() + r.pods.not_ready.len() <= MAX_PODS);
        let again = site_pods::decode_report(&site_pods::encode_report(&r.node, &r.pods, r.valid_for));
        assert_eq!(again.as_ref(), Ok(&r));
    }
    if let Ok(list) = site_pods::decode_list(data) {
        let items = list.iter().map(|r| (r.node.as_str(), &r.pods, r.valid_for));
        let again = site_pods::decode_list(&site_pods::encode_list(items));
        assert_eq!(again.as_ref(), Ok(&list));
    }
});
