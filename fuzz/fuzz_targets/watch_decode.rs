//! Arbitrary bytes as an upstream watch stream: line splitting with a cap, event decoding, and
//! the decoded events applied to the cache as updates. No panic; RVs only grow.
#![no_main]
use std::io::BufReader;

use grid_wrapper::cache::store::{Settings, State};
use grid_wrapper::cache::collection::Retention;
use grid_wrapper::k8s::Resource;
use grid_wrapper::upstream::decode::{self, Line, WatchEvent};
use grid_wrapper::handoff::Change;
use libfuzzer_sys::fuzz_target;

const KINDS: [Resource; 4] = [
    Resource::Nodes,
    Resource::Services,
    Resource::Endpoints,
    Resource::SlicesV1,
];

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else { return };
    let kind = KINDS[usize::from(k) % KINDS.len()];
    let mut st = State::new(
        Settings { hostname: "h".into(), wrapper_in_cluster: true, retention: Retention::for_queue(8) },
        1,
    );
    for kind in KINDS {
        st.apply_list(kind, std::iter::empty::<&str>(), 0);
    }
    let _ = decode::decode_list(rest);
    let mut reader = BufReader::with_capacity(64, rest);
    let mut line = Vec::new();
    let mut last = st.current_rv();
    loop {
        line.clear();
        match decode::read_line(&mut reader, &mut line, 4096) {
            Ok(Line::Complete) | Ok(Line::Truncated) => {}
            Ok(Line::TooLong) => continue,
            Ok(Line::Eof) | Err(_) => break,
        }
        let change = match decode::decode_event(&line) {
            Ok(WatchEvent::Added(o)) | Ok(WatchEvent::Modified(o)) => Change::Upsert(o),
            Ok(WatchEvent::Deleted(o)) => Change::Delete(o),
            _ => continue,
        };
        st.apply(kind, change, 1);
        assert!(st.current_rv() >= last);
        last = st.current_rv();
    }
});
