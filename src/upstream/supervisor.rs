//! The reflector supervisor: which EndpointSlice and ServiceCIDR versions to mirror, the
//! reflectors that mirror them, and the re-checks that follow the upstream afterwards
//! (docs/SEMANTICS.md §5, §5.1). It owns one thread: version discovery (an offline start
//! takes the snapshot's versions as guesses), the start of every reflector, the re-check of
//! those guesses until the upstream answers, then the slow re-check of its ServiceCIDRs (an
//! upgrade or a downgrade of the control plane).
//!
//! What it decides is told to the cache through [`Expectations`] before a reflector of the new
//! version starts; this layer never names the cache. The rules (the first choice, keep or switch
//! on a re-check, what a ServiceCIDR change is) are pure functions below; the thread is the shell.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use log::{info, warn};

use crate::handoff::Sink;
use crate::k8s::Resource;
use crate::upstream::client::Upstream;
use crate::upstream::discovery;
use crate::upstream::reflector;

/// How often an offline start re-checks the upstream's EndpointSlice version and ServiceCIDRs.
const VERSION_RECHECK: Duration = Duration::from_secs(5);
/// How often a running process asks whether the upstream gained or lost ServiceCIDRs (an
/// upgrade or a downgrade of the control plane).
const CIDR_RECHECK: Duration = Duration::from_secs(60);

/// What the supervisor tells the cache: the versions it mirrors, each before its reflector starts.
pub trait Expectations: Send + 'static {
    /// The EndpointSlice version mirrored from now on.
    fn expect_slices(&self, kind: Resource);
    /// The ServiceCIDR version mirrored from now on, or none (requests for them are proxied).
    fn expect_cidrs(&self, kind: Option<Resource>);
}

/// The versions a snapshot was written with: the guesses of an offline start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Assumed {
    /// The snapshot's EndpointSlice version.
    pub slices: Option<Resource>,
    /// The snapshot's ServiceCIDR version, if it mirrored them.
    pub cidrs: Option<Resource>,
}

/// A re-check's outcome for a version that was a guess.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recheck<T> {
    /// The upstream did not answer: the guess stands, ask again later.
    AskAgain,
    /// The upstream answered and the guess was right: no more re-checks.
    Keep,
    /// The upstream answered otherwise: mirror this from now on, no more re-checks.
    Switch(T),
}

/// Given what was assumed and what the upstream now says (`None`: no answer): keep, switch or
/// ask again. Pure.
pub fn recheck<T: PartialEq>(assumed: &T, answer: Option<T>) -> Recheck<T> {
    match answer {
        None => Recheck::AskAgain,
        Some(found) if found == *assumed => Recheck::Keep,
        Some(found) => Recheck::Switch(found),
    }
}

/// The EndpointSlice version to start with: discovery's when the upstream answered, otherwise
/// the snapshot's (the better guess), otherwise discovery's guess. Pure.
pub fn first_slices(discovered: Resource, answered: bool, snapshot: Option<Resource>) -> Resource {
    match (answered, snapshot) {
        (false, Some(kind)) => kind,
        _ => discovered,
    }
}

/// How the upstream's ServiceCIDRs changed between two slow re-checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CidrChange {
    /// It has them now (an upgrade): mirror this version.
    Gained(Resource),
    /// It no longer has them (a downgrade): the ones it last listed stay served.
    Lost(Resource),
    /// It serves another version now.
    Changed { was: Resource, now: Resource },
}

/// What changed from `was` to `now`, `None` when nothing did. Pure.
pub fn cidr_change(was: Option<Resource>, now: Option<Resource>) -> Option<CidrChange> {
    match (was, now) {
        (was, now) if was == now => None,
        (None, Some(kind)) => Some(CidrChange::Gained(kind)),
        (Some(was), None) => Some(CidrChange::Lost(was)),
        (Some(was), Some(now)) => Some(CidrChange::Changed { was, now }),
        (None, None) => None,
    }
}

/// One mirrored version and the stop flag of its reflector.
struct Mirrored<T> {
    kind: T,
    stop: Arc<AtomicBool>,
}

/// The thread's state: the upstream, where reflectors feed, whom to tell, the process's stop.
struct Supervisor {
    upstream: Upstream,
    sink: Arc<dyn Sink>,
    told: Box<dyn Expectations>,
    stop: Arc<AtomicBool>,
}

impl Supervisor {
    /// Starts `kind`'s reflector. Without every reflector the cache never becomes ready: a
    /// reflector that cannot start ends the process, loudly.
    fn start(&self, kind: Resource, stop: Arc<AtomicBool>) {
        if let Err(e) = reflector::spawn(self.upstream.clone(), kind, self.sink.clone(), stop) {
            log::error!("cannot start the {kind:?} reflector: {e}; exiting");
            std::process::exit(1);
        }
    }

    /// Mirrors `found` slices from now on: the reflector mirrored until now stops, the cache is
    /// told, then `found`'s reflector starts.
    fn switch_slices(&self, slices: &mut Mirrored<Resource>, found: Resource) {
        slices.stop.store(true, Ordering::Relaxed);
        self.told.expect_slices(found);
        *slices = Mirrored {
            kind: found,
            stop: Arc::new(AtomicBool::new(false)),
        };
        self.start(found, slices.stop.clone());
    }

    /// Mirrors `found` ServiceCIDRs from now on: the cache is told first, then the reflector of
    /// the version mirrored until now is stopped and `found`'s started.
    fn switch_cidrs(&self, cidrs: &mut Mirrored<Option<Resource>>, found: Option<Resource>) {
        if found == cidrs.kind {
            return;
        }
        self.told.expect_cidrs(found);
        cidrs.stop.store(true, Ordering::Relaxed);
        *cidrs = Mirrored {
            kind: found,
            stop: Arc::new(AtomicBool::new(false)),
        };
        if let Some(kind) = found {
            self.start(kind, cidrs.stop.clone());
        }
    }

    /// The thread's body: discovery, every reflector's start, then the re-checks until `stop`.
    fn run(self, assumed: Assumed) {
        let (discovered, answered) = discovery::discover_slice_kind_checked(&self.upstream);
        let first = first_slices(discovered, answered, assumed.slices);
        info!("upstream EndpointSlice version: {first:?}");
        self.told.expect_slices(first);
        // ServiceCIDRs: mirrored only when the upstream has them (told to the cache before any
        // reflector starts, so the sync waits for them only then); offline, the snapshot's say
        // until the upstream answers.
        let found_cidrs = discovery::discover_cidr_kind(&self.upstream);
        let cidrs_known = found_cidrs.is_ok();
        let first_cidrs = found_cidrs.unwrap_or_else(|e| {
            info!(
                "ServiceCIDRs: the upstream cannot be asked ({e}); {} until it answers",
                match assumed.cidrs {
                    Some(kind) => format!("serving the snapshot's {kind:?}"),
                    None => "requests for them are proxied".into(),
                }
            );
            assumed.cidrs
        });
        self.told.expect_cidrs(first_cidrs);
        for kind in [Resource::Nodes, Resource::Services, Resource::Endpoints] {
            self.start(kind, self.stop.clone());
        }
        let mut slices = Mirrored {
            kind: first,
            stop: Arc::new(AtomicBool::new(false)),
        };
        self.start(first, slices.stop.clone());
        let mut cidrs = Mirrored {
            kind: first_cidrs,
            stop: Arc::new(AtomicBool::new(false)),
        };
        if let Some(kind) = first_cidrs {
            self.start(kind, cidrs.stop.clone());
        }
        self.recheck_guesses(&mut slices, &mut cidrs, answered, cidrs_known);
        self.follow_cidrs(&mut cidrs);
    }

    /// Offline start: the versions were guesses. Re-check until the upstream answers
    /// (docs/SEMANTICS.md §5); switch reflectors if a guess was wrong.
    fn recheck_guesses(
        &self,
        slices: &mut Mirrored<Resource>,
        cidrs: &mut Mirrored<Option<Resource>>,
        mut slices_known: bool,
        mut cidrs_known: bool,
    ) {
        while !(slices_known && cidrs_known) {
            std::thread::sleep(VERSION_RECHECK);
            if !slices_known {
                let answer = discovery::discovered_slice_kind(&self.upstream);
                match recheck(&slices.kind, answer) {
                    Recheck::AskAgain => {}
                    Recheck::Keep => slices_known = true,
                    Recheck::Switch(found) => {
                        warn!(
                            "upstream serves {found:?}, not the guessed {:?}: switching",
                            slices.kind
                        );
                        self.switch_slices(slices, found);
                        slices_known = true;
                    }
                }
            }
            if !cidrs_known {
                let answer = discovery::discover_cidr_kind(&self.upstream).ok();
                match recheck(&cidrs.kind, answer) {
                    Recheck::AskAgain => {}
                    Recheck::Keep => cidrs_known = true,
                    Recheck::Switch(found) => {
                        warn!("ServiceCIDRs upstream: {found:?}, not {:?} as assumed while it did not answer: switching (ServiceCIDRs served so far stay served)", cidrs.kind);
                        self.switch_cidrs(cidrs, found);
                        cidrs_known = true;
                    }
                }
            }
        }
    }

    /// From then on, a slow re-check follows an upstream that gains or loses ServiceCIDRs.
    fn follow_cidrs(&self, cidrs: &mut Mirrored<Option<Resource>>) {
        while !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(CIDR_RECHECK);
            let Ok(found) = discovery::recheck_cidr_kind(&self.upstream) else {
                continue;
            };
            let Some(change) = cidr_change(cidrs.kind, found) else {
                continue;
            };
            match change {
                CidrChange::Gained(kind) => {
                    info!("the upstream has ServiceCIDRs now: mirroring {kind:?}")
                }
                CidrChange::Lost(was) => warn!("the upstream no longer has ServiceCIDRs ({was:?}): serving the ones it last listed"),
                CidrChange::Changed { was, now } => info!(
                    "the upstream's ServiceCIDRs are now {:?}, not {:?}: switching",
                    Some(now),
                    Some(was)
                ),
            }
            self.switch_cidrs(cidrs, found);
        }
    }
}

/// Starts the supervisor's thread. Version discovery talks to the upstream and may wait for its
/// timeouts: on its own thread, the loop answers (holds, then 503) from the first moment. The
/// reflectors feed `sink`; `told` hears every version before its reflector starts; `stop` ends
/// the re-checks and the reflectors of resources whose version never changes.
pub fn spawn(
    upstream: Upstream,
    sink: Arc<dyn Sink>,
    told: Box<dyn Expectations>,
    assumed: Assumed,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let supervisor = Supervisor {
        upstream,
        sink,
        told,
        stop,
    };
    std::thread::Builder::new()
        .name("start-reflectors".into())
        .spawn(move || supervisor.run(assumed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Resource::{CidrsV1, CidrsV1beta1, SlicesV1, SlicesV1beta1};

    #[test]
    fn recheck_asks_again_until_the_upstream_answers() {
        assert_eq!(recheck(&SlicesV1, None), Recheck::AskAgain);
        assert_eq!(recheck(&Some(CidrsV1), None), Recheck::AskAgain);
    }

    #[test]
    fn recheck_keeps_a_right_guess() {
        assert_eq!(recheck(&SlicesV1beta1, Some(SlicesV1beta1)), Recheck::Keep);
        assert_eq!(recheck(&None::<Resource>, Some(None)), Recheck::Keep);
    }

    #[test]
    fn recheck_switches_from_a_wrong_guess() {
        assert_eq!(
            recheck(&SlicesV1, Some(SlicesV1beta1)),
            Recheck::Switch(SlicesV1beta1)
        );
        // The snapshot had ServiceCIDRs, the upstream has none: stop mirroring them.
        assert_eq!(recheck(&Some(CidrsV1), Some(None)), Recheck::Switch(None));
        assert_eq!(
            recheck(&None, Some(Some(CidrsV1beta1))),
            Recheck::Switch(Some(CidrsV1beta1))
        );
    }

    #[test]
    fn first_slices_takes_the_snapshot_only_while_the_upstream_is_silent() {
        // Offline with a snapshot: its version is the better guess.
        assert_eq!(
            first_slices(SlicesV1, false, Some(SlicesV1beta1)),
            SlicesV1beta1
        );
        // The upstream answered: its word wins over the snapshot's.
        assert_eq!(first_slices(SlicesV1, true, Some(SlicesV1beta1)), SlicesV1);
        // Offline without a snapshot: discovery's guess.
        assert_eq!(first_slices(SlicesV1, false, None), SlicesV1);
    }

    #[test]
    fn cidr_change_names_gain_loss_and_version_change() {
        assert_eq!(cidr_change(None, None), None);
        assert_eq!(cidr_change(Some(CidrsV1), Some(CidrsV1)), None);
        assert_eq!(
            cidr_change(None, Some(CidrsV1)),
            Some(CidrChange::Gained(CidrsV1))
        );
        assert_eq!(
            cidr_change(Some(CidrsV1beta1), None),
            Some(CidrChange::Lost(CidrsV1beta1))
        );
        assert_eq!(
            cidr_change(Some(CidrsV1beta1), Some(CidrsV1)),
            Some(CidrChange::Changed {
                was: CidrsV1beta1,
                now: CidrsV1
            })
        );
    }
}
