//! Which new connection each port admits (docs/SEMANTICS.md §12.1), decided in constant or
//! logarithmic time whatever the number of open connections: the open counts per port, the relay
//! port's count per source address, its evictable connections in the order they were accepted,
//! and the per-source rate of new relay connections (a token bucket per source, in a table of
//! bounded size).
//!
//! A relay connection is *evictable* from its accept until it has completed a request or a TLS
//! handshake with a client certificate (the relay port verifies it against
//! `--relay-client-ca-file`); only evictable connections are ever closed to make room, oldest
//! first. The kube-proxy port has a budget and nothing else.
//!
//! Pure: the loop passes connection ids, source addresses and the time in, and carries out the
//! [`Verdict`] (it closes a victim, then reports it with [`Admission::closed`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::time::Instant;

use crate::api::decide::Side;
use crate::server::counters::Refusal;

/// A connection's id: the loop's mio token. Ids are never reused, so a smaller id was accepted
/// earlier.
pub type ConnId = usize;

/// The limits admission applies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budgets {
    /// Most open connections on the kube-proxy port.
    pub kube_proxy: usize,
    /// Most open connections on the relay port (`--relay-max-connections`).
    pub relay: usize,
    /// Most open relay connections from one source (`--relay-max-connections-per-source`); twice
    /// it is the burst of the per-source rate: a source may open its whole share at once, and
    /// all of it once more (a follower restarted before the relay saw its old connections close).
    pub relay_per_source: usize,
    /// New relay connections per second one source may open once its burst is spent
    /// (`--relay-connection-rate-per-source`); 0 = no limit.
    pub relay_rate: u32,
    /// Most sources whose rate is remembered ([`RateTable`]).
    pub rate_sources: usize,
}

/// What to do with a new connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Open it.
    Admit,
    /// Close this evictable connection (the oldest), then open the new one.
    Evict(ConnId),
    /// Close the new one at once, for this reason.
    Refuse(Refusal),
}

/// What admission remembers of an open connection.
#[derive(Clone, Copy, Debug)]
struct Entry {
    side: Side,
    source: IpAddr,
    evictable: bool,
}

/// The admission state of both ports.
#[derive(Debug)]
pub struct Admission {
    budgets: Budgets,
    /// Open connections: the kube-proxy port's, the relay port's.
    open: [usize; 2],
    /// Open relay connections per source (no zero entries).
    per_source: HashMap<IpAddr, usize>,
    conns: HashMap<ConnId, Entry>,
    /// The relay connections that may be closed to make room, oldest (smallest id) first.
    evictable: BTreeSet<ConnId>,
    rate: RateTable,
}

fn slot(side: Side) -> usize {
    match side {
        Side::KubeProxy => 0,
        Side::Relay => 1,
    }
}

impl Admission {
    /// Nothing open.
    pub fn new(budgets: Budgets) -> Admission {
        Admission {
            budgets,
            open: [0; 2],
            per_source: HashMap::new(),
            conns: HashMap::new(),
            evictable: BTreeSet::new(),
            rate: RateTable::new(
                budgets.relay_rate,
                budgets.relay_per_source.saturating_mul(2),
                budgets.rate_sources,
            ),
        }
    }

    /// The limits applied.
    pub fn budgets(&self) -> &Budgets {
        &self.budgets
    }

    /// Whether a new connection from `source` may open on `side` at `now`. On the relay port: a
    /// source at its count limit is refused; a full port evicts its oldest evictable connection
    /// or, with none, refuses; and only then does the source spend one of its rate's tokens (a
    /// source out of tokens is refused, and evicts nothing).
    pub fn admit(&mut self, side: Side, source: IpAddr, now: Instant) -> Verdict {
        let open = self.open[slot(side)];
        if side == Side::KubeProxy {
            return if open < self.budgets.kube_proxy {
                Verdict::Admit
            } else {
                Verdict::Refuse(Refusal::BudgetFull)
            };
        }
        if self.from_source(source) >= self.budgets.relay_per_source {
            return Verdict::Refuse(Refusal::PerSource);
        }
        let verdict = if open < self.budgets.relay {
            Verdict::Admit
        } else {
            match self.evictable.first() {
                Some(&victim) => Verdict::Evict(victim),
                None => return Verdict::Refuse(Refusal::BudgetFull),
            }
        };
        if self.budgets.relay_rate > 0 && !self.rate.take(source, now) {
            return Verdict::Refuse(Refusal::Rate);
        }
        verdict
    }

    /// Connection `id` from `source` opened on `side` (after [`Admission::admit`] let it); a
    /// relay connection starts evictable.
    pub fn opened(&mut self, id: ConnId, side: Side, source: IpAddr) {
        let evictable = side == Side::Relay;
        if self
            .conns
            .insert(
                id,
                Entry {
                    side,
                    source,
                    evictable,
                },
            )
            .is_some()
        {
            // Ids are never reused; a second open of one id is ignored rather than counted twice.
            return;
        }
        self.open[slot(side)] += 1;
        if evictable {
            *self.per_source.entry(source).or_insert(0) += 1;
            self.evictable.insert(id);
        }
    }

    /// Connection `id` completed a request or an authenticated TLS handshake: it is never
    /// evicted from now on, and its source gets back the rate's token it spent (the rate holds
    /// back connections that never show a certificate; a follower reconnecting its watches, as
    /// often as the relay ends them, is bounded by the count limits alone).
    pub fn settled(&mut self, id: ConnId) {
        if let Some(e) = self.conns.get_mut(&id) {
            if e.evictable {
                e.evictable = false;
                self.evictable.remove(&id);
                if self.budgets.relay_rate > 0 {
                    self.rate.give_back(e.source);
                }
            }
        }
    }

    /// Whether connection `id` may still be evicted.
    pub fn is_evictable(&self, id: ConnId) -> bool {
        self.conns.get(&id).is_some_and(|e| e.evictable)
    }

    /// Connection `id` closed (for any reason, an eviction included).
    pub fn closed(&mut self, id: ConnId) {
        let Some(e) = self.conns.remove(&id) else {
            return;
        };
        let n = &mut self.open[slot(e.side)];
        *n = n.saturating_sub(1);
        if e.side == Side::Relay {
            if let Some(n) = self.per_source.get_mut(&e.source) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.per_source.remove(&e.source);
                }
            }
        }
        if e.evictable {
            self.evictable.remove(&id);
        }
    }

    /// Open connections on `side`.
    pub fn open(&self, side: Side) -> usize {
        self.open[slot(side)]
    }

    /// Open relay connections from `source`.
    pub fn from_source(&self, source: IpAddr) -> usize {
        self.per_source.get(&source).copied().unwrap_or(0)
    }

    /// Evictable relay connections.
    pub fn evictable(&self) -> usize {
        self.evictable.len()
    }
}

/// One source's token bucket.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    /// Its key in [`RateTable::order`].
    seq: u64,
}

/// The per-source token buckets of new relay connections: `rate` tokens a second up to `burst`,
/// one spent per connection. At most `capacity` sources are remembered; a new source beyond it
/// takes the place of the one used least recently (whose bucket has most likely refilled, so
/// forgetting it loses nothing; if it had not, that source starts over with a full bucket, and
/// the count limits still bound it).
#[derive(Debug)]
pub struct RateTable {
    rate: f64,
    burst: f64,
    capacity: usize,
    buckets: HashMap<IpAddr, Bucket>,
    /// Sources by last use, least recent first.
    order: BTreeMap<u64, IpAddr>,
    next_seq: u64,
}

impl RateTable {
    /// `rate` a second up to `burst`, for at most `capacity` sources (at least one).
    pub fn new(rate: u32, burst: usize, capacity: usize) -> RateTable {
        RateTable {
            rate: f64::from(rate),
            burst: burst as f64,
            capacity: capacity.max(1),
            buckets: HashMap::new(),
            order: BTreeMap::new(),
            next_seq: 0,
        }
    }

    /// Spends one of `source`'s tokens at `now` if it has one.
    pub fn take(&mut self, source: IpAddr, now: Instant) -> bool {
        let seq = self.next_seq;
        self.next_seq += 1;
        let bucket = match self.buckets.get_mut(&source) {
            Some(b) => {
                self.order.remove(&b.seq);
                let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
                b.tokens = (b.tokens + elapsed * self.rate).min(self.burst);
                b.at = now.max(b.at);
                b.seq = seq;
                b
            }
            None => {
                if self.buckets.len() >= self.capacity {
                    if let Some((_, oldest)) = self.order.pop_first() {
                        self.buckets.remove(&oldest);
                    }
                }
                self.buckets.entry(source).or_insert(Bucket {
                    tokens: self.burst,
                    at: now,
                    seq,
                })
            }
        };
        self.order.insert(seq, source);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Returns one token to `source` (up to the burst), if it is still remembered.
    pub fn give_back(&mut self, source: IpAddr) {
        if let Some(b) = self.buckets.get_mut(&source) {
            b.tokens = (b.tokens + 1.0).min(self.burst);
        }
    }

    /// Sources remembered.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether no source is remembered.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    fn ip(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0x7f00_0000 + n))
    }

    fn budgets(relay: usize, per_source: usize) -> Budgets {
        Budgets {
            kube_proxy: 2,
            relay,
            relay_per_source: per_source,
            relay_rate: 1,
            rate_sources: 16,
        }
    }

    #[test]
    fn counts_follow_opens_and_closes_per_port_and_source() {
        let t = Instant::now();
        let mut a = Admission::new(budgets(4, 2));
        assert_eq!(a.admit(Side::KubeProxy, ip(1), t), Verdict::Admit);
        a.opened(1, Side::KubeProxy, ip(1));
        a.opened(2, Side::KubeProxy, ip(1));
        assert_eq!(
            a.admit(Side::KubeProxy, ip(1), t),
            Verdict::Refuse(Refusal::BudgetFull)
        );
        // The kube-proxy port's connections are not the relay port's, nor its sources'.
        assert_eq!((a.open(Side::Relay), a.from_source(ip(1))), (0, 0));
        assert_eq!(a.admit(Side::Relay, ip(1), t), Verdict::Admit);
        a.opened(3, Side::Relay, ip(1));
        a.opened(4, Side::Relay, ip(1));
        assert_eq!(a.from_source(ip(1)), 2);
        assert_eq!(
            a.admit(Side::Relay, ip(1), t),
            Verdict::Refuse(Refusal::PerSource)
        );
        assert_eq!(a.admit(Side::Relay, ip(2), t), Verdict::Admit);
        a.closed(3);
        a.closed(3);
        a.closed(1);
        assert_eq!(
            (
                a.open(Side::KubeProxy),
                a.open(Side::Relay),
                a.from_source(ip(1))
            ),
            (1, 1, 1)
        );
        assert_eq!(a.admit(Side::KubeProxy, ip(1), t), Verdict::Admit);
        a.closed(4);
        assert_eq!((a.open(Side::Relay), a.from_source(ip(1))), (0, 0));
        assert!(a.per_source.is_empty(), "no zero entries are kept");
    }

    #[test]
    fn a_full_relay_port_evicts_its_oldest_unsettled_connection_and_never_a_settled_one() {
        let t = Instant::now();
        let mut a = Admission::new(budgets(3, 10));
        for id in [10, 11, 12] {
            a.opened(id, Side::Relay, ip(u32::try_from(id).unwrap_or(0)));
        }
        a.settled(10);
        assert!(!a.is_evictable(10) && a.is_evictable(11));
        assert_eq!(a.admit(Side::Relay, ip(99), t), Verdict::Evict(11));
        a.closed(11);
        a.opened(13, Side::Relay, ip(99));
        assert_eq!(a.admit(Side::Relay, ip(99), t), Verdict::Evict(12));
        a.closed(12);
        a.opened(14, Side::Relay, ip(99));
        a.settled(13);
        a.settled(14);
        // Every open connection is settled: the newcomer is refused, nothing is evicted.
        assert_eq!(a.evictable(), 0);
        assert_eq!(
            a.admit(Side::Relay, ip(98), t),
            Verdict::Refuse(Refusal::BudgetFull)
        );
        assert_eq!(a.open(Side::Relay), 3);
    }

    /// Connections `ids` from `ip(1)`, one at a time: each admitted at `t`, opened, settled
    /// (twice: the second does nothing) if `settle`, and closed.
    fn admit_and_close(a: &mut Admission, ids: std::ops::Range<ConnId>, t: Instant, settle: bool) {
        for id in ids {
            assert_eq!(a.admit(Side::Relay, ip(1), t), Verdict::Admit, "{id}");
            a.opened(id, Side::Relay, ip(1));
            if settle {
                a.settled(id);
                a.settled(id);
            }
            a.closed(id);
        }
    }

    #[test]
    fn a_source_out_of_tokens_is_refused_and_evicts_nothing() {
        let t = Instant::now();
        let mut a = Admission::new(Budgets {
            relay_rate: 2,
            ..budgets(2, 3)
        });
        // The burst is twice the per-source limit: six at once.
        admit_and_close(&mut a, 0..6, t, false);
        assert_eq!(
            a.admit(Side::Relay, ip(1), t),
            Verdict::Refuse(Refusal::Rate)
        );
        a.opened(10, Side::Relay, ip(2));
        a.opened(11, Side::Relay, ip(2));
        // Full, with an evictable connection: a source without tokens still evicts nothing.
        assert_eq!(
            a.admit(Side::Relay, ip(1), t + Duration::from_millis(100)),
            Verdict::Refuse(Refusal::Rate)
        );
        assert!(a.is_evictable(10));
        // Two a second: one token after half a second.
        assert_eq!(
            a.admit(Side::Relay, ip(1), t + Duration::from_millis(500)),
            Verdict::Evict(10)
        );
    }

    #[test]
    fn a_settled_connection_gives_its_token_back_and_an_unsettled_one_does_not() {
        let t = Instant::now();
        let mut a = Admission::new(Budgets {
            relay_rate: 1,
            ..budgets(100, 2)
        });
        // A follower with a certificate reconnects far more often than the burst (4) and the
        // rate allow: every connection settles before it closes.
        admit_and_close(&mut a, 0..20, t, true);
        // Connections that never settle spend the burst, then are refused.
        admit_and_close(&mut a, 20..24, t, false);
        assert_eq!(
            a.admit(Side::Relay, ip(1), t),
            Verdict::Refuse(Refusal::Rate)
        );
        // A token given back never lifts a bucket above its burst.
        let mut r = RateTable::new(1, 2, 8);
        r.give_back(ip(3));
        assert!(r.is_empty(), "a source not remembered gets nothing");
        assert!(r.take(ip(3), t));
        r.give_back(ip(3));
        r.give_back(ip(3));
        assert_eq!((0..4).filter(|_| r.take(ip(3), t)).count(), 2);
    }

    #[test]
    fn a_bucket_refills_at_its_rate_up_to_its_burst() {
        let t = Instant::now();
        let mut r = RateTable::new(10, 5, 8);
        assert_eq!((0..8).filter(|_| r.take(ip(1), t)).count(), 5);
        // 10 a second: three tokens in 300 ms.
        let later = t + Duration::from_millis(300);
        assert_eq!((0..8).filter(|_| r.take(ip(1), later)).count(), 3);
        // Never more than the burst, however long the source was quiet.
        let much_later = later + Duration::from_secs(3600);
        assert_eq!((0..8).filter(|_| r.take(ip(1), much_later)).count(), 5);
        // A clock reading older than the bucket's adds nothing.
        assert!(!r.take(ip(1), t));
    }

    #[test]
    fn the_table_keeps_at_most_its_capacity_forgetting_the_least_recent_source() {
        let t = Instant::now();
        let mut r = RateTable::new(1, 2, 3);
        for n in 1..=3 {
            assert!(r.take(ip(n), t));
            assert!(r.take(ip(n), t));
            assert!(!r.take(ip(n), t), "source {n} spent its burst");
        }
        // Source 1 used last: source 2 is the least recent and gives way to source 4.
        assert!(!r.take(ip(1), t));
        assert!(r.take(ip(4), t));
        assert_eq!(r.len(), 3);
        assert!(!r.take(ip(3), t), "source 3 is remembered");
        assert!(!r.take(ip(1), t), "source 1 is remembered");
        assert!(r.take(ip(2), t), "source 2 was forgotten: a full bucket");
        assert_eq!(r.len(), 3);
        for n in 100..1100 {
            r.take(ip(n), t);
        }
        assert_eq!(r.len(), 3);
        assert_eq!(r.order.len(), 3);
    }
}
