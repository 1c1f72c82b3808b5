//! The request reader fed arbitrary bytes, whole and in arbitrary splits: same outcome, no panic.
#![no_main]
use grid_wrapper::http::request::{Limits, ReadError, Request, RequestReader};
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits { max_head: 1024, max_headers: 16, max_body: 2048 };

fn run(data: &[u8], step: usize) -> Vec<Result<Request, ReadError>> {
    let mut r = RequestReader::new(LIMITS);
    let mut out = Vec::new();
    for piece in data.chunks(step) {
        if let Err(e) = r.push(piece) {
            out.push(Err(e));
            return out;
        }
        loop {
            match r.next_request() {
                Ok(Some(req)) => out.push(Ok(req)),
                Ok(None) => break,
                Err(e) => {
                    out.push(Err(e));
                    return out;
                }
            }
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else { return };
    if rest.len() > LIMITS.max_buffered() {
        return; // beyond the push bound the outcome legitimately depends on the split
    }
    let whole = run(rest, rest.len().max(1));
    let split = run(rest, usize::from(k % 17) + 1);
    assert_eq!(whole, split);
});
