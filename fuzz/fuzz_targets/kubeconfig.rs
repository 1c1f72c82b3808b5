//! Arbitrary text as a kubeconfig: a clear error or a config, never a panic.
#![no_main]
use std::path::Path;

use grid_wrapper::upstream::kubeconfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(kc) = kubeconfig::parse(s, Path::new("/nonexistent-grid-wrapper-fuzz")) {
        let _ = kubeconfig::resolve(kc, Some("http://127.0.0.1:1"));
    }
});
