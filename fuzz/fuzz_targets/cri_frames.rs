//! Arbitrary bytes as what a container runtime sends on its HTTP/2 connection: the frame
//! reader never panics, takes only whole frames (a frame's bytes minus one octet need more),
//! and the connection state machine, after starting a call, takes the same bytes cut in two
//! where the input's first octet chooses without panicking or growing past its bounds.
#![no_main]
use grid_wrapper::cri::frame::{self, Limits, Read};
use grid_wrapper::cri::session::{Session, MAX_HEADER_LIST};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
        max_header_block: MAX_HEADER_LIST,
    };
    let mut rest = data;
    while let Ok(Read::Frame(_, used)) = frame::read(rest, &limits) {
        assert!(used >= frame::HEADER_LEN && used <= rest.len());
        assert_eq!(frame::read(&rest[..used - 1], &limits), Ok(Read::NeedMore));
        rest = &rest[used..];
    }

    let mut session = Session::new();
    let Ok(stream) = session.start_call(
        "/runtime.v1.RuntimeService/ListPodSandbox",
        "localhost",
        1000,
        &[],
    ) else {
        return;
    };
    assert_eq!(stream, 1);
    let cut = data
        .first()
        .map_or(0, |&c| data.len() * usize::from(c) / 255);
    if let Ok(None) = session.receive(&data[..cut]) {
        let _ = session.receive(&data[cut..]);
    }
    let _ = session.take_output();
});
