//! Short reads for the watch streams that follow the selection ([`super::FollowSelection`]): the
//! ureq agents' connections carry a thin [`Transport`] wrapper that caps one read's wait at the
//! slice the reading thread asked for ([`sliced`]), and only while it asked. A watch stream's
//! body reads are sliced, so a quiet stream looks at the selection every slice; everything else
//! (connecting, TLS handshakes, the wait for a response head, lists, proxied requests) keeps
//! the request's own limits, so a slow answer is never taken for a server down.

use std::cell::Cell;
use std::time::Duration;
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, DefaultConnector, NextTimeout, Transport,
};

thread_local! {
    /// The longest one read may wait on this thread, while a sliced read runs.
    static SLICE: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// Runs `read` with each of its network reads on this thread waiting at most `slice` (`None`:
/// the request's own limits). A read cut short fails as any read timeout does, and can be
/// tried again: nothing was consumed.
pub(crate) fn sliced<T>(slice: Option<Duration>, read: impl FnOnce() -> T) -> T {
    let before = SLICE.with(|s| s.replace(slice));
    let out = read();
    SLICE.with(|s| s.set(before));
    out
}

/// An agent for `config` whose connections honour [`sliced`] (ureq's own connectors and
/// resolver otherwise).
pub(crate) fn agent(config: ureq::config::Config) -> ureq::Agent {
    ureq::Agent::with_parts(
        config,
        DefaultConnector::default().chain(SliceConnector),
        DefaultResolver::default(),
    )
}

/// Wraps each connection's transport in [`Sliced`].
#[derive(Debug)]
struct SliceConnector;

impl Connector<Box<dyn Transport>> for SliceConnector {
    type Out = Sliced;

    fn connect(
        &self,
        _: &ConnectionDetails<'_>,
        chained: Option<Box<dyn Transport>>,
    ) -> Result<Option<Sliced>, ureq::Error> {
        Ok(chained.map(Sliced))
    }
}

/// A connection's transport, its reads capped at the thread's slice, if any.
#[derive(Debug)]
struct Sliced(Box<dyn Transport>);

impl Transport for Sliced {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.0.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.0.transmit_output(amount, timeout)
    }

    fn await_input(&mut self, mut timeout: NextTimeout) -> Result<bool, ureq::Error> {
        if let Some(slice) = SLICE.with(Cell::get) {
            let slice = slice.into();
            timeout.per_read = Some(timeout.per_read.map_or(slice, |p| p.min(slice)));
        }
        self.0.await_input(timeout)
    }

    fn is_open(&mut self) -> bool {
        self.0.is_open()
    }

    fn is_tls(&self) -> bool {
        self.0.is_tls()
    }
}
