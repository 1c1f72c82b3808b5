//! Which connections the event loop must visit in a round besides those its sockets report: the
//! ones that wait on the loop (watches, proxied and held requests), the ones a watch left with a
//! backlog, and the ones whose timer is due (a deadline, the idle timeout, a watch's bookmark).
//! Kept up to date as connections are driven, so that a round costs what it visits, not a scan of
//! every open connection (a flood of idle sockets costs nothing per round).
//!
//! Pure: the loop reports each connection's state after driving it ([`Schedule::set`]) and its
//! closing ([`Schedule::remove`]).

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

/// A connection's id: the loop's mio token.
pub type ConnId = usize;

/// What the loop reports of a connection it has driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    /// When it next has timed work.
    pub timer: Instant,
    /// Whether it waits on the loop (driven every round).
    pub active: bool,
    /// Whether a watch stopped with more to send (the loop must not sleep).
    pub backlog: bool,
}

/// The loop's schedule of connections.
#[derive(Debug, Default)]
pub struct Schedule {
    /// Each connection's timer, by instant.
    timers: BTreeSet<(Instant, ConnId)>,
    /// What each scheduled connection last reported.
    state: HashMap<ConnId, Due>,
    /// Those that wait on the loop, in id order.
    active: BTreeSet<ConnId>,
    /// How many of them have a backlog.
    backlogs: usize,
}

impl Schedule {
    /// Nothing scheduled.
    pub fn new() -> Schedule {
        Schedule::default()
    }

    /// Records `id`'s state after it was opened or driven.
    pub fn set(&mut self, id: ConnId, due: Due) {
        if self.state.get(&id) == Some(&due) {
            return;
        }
        self.remove(id);
        self.timers.insert((due.timer, id));
        if due.active {
            self.active.insert(id);
        }
        self.backlogs += usize::from(due.backlog);
        self.state.insert(id, due);
    }

    /// Forgets `id` (closed).
    pub fn remove(&mut self, id: ConnId) {
        if let Some(old) = self.state.remove(&id) {
            self.timers.remove(&(old.timer, id));
            self.active.remove(&id);
            self.backlogs -= usize::from(old.backlog);
        }
    }

    /// The earliest timer, if any connection is scheduled.
    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.first().map(|(at, _)| *at)
    }

    /// Whether a watch has a backlog.
    pub fn any_backlog(&self) -> bool {
        self.backlogs > 0
    }

    /// The connections to visit at `now`: those that wait on the loop and those whose timer
    /// is due, each once, in id order.
    pub fn to_visit(&self, now: Instant) -> Vec<ConnId> {
        let mut ids: Vec<ConnId> = self.active.iter().copied().collect();
        ids.extend(
            self.timers
                .iter()
                .take_while(|(at, _)| *at <= now)
                .map(|(_, id)| *id),
        );
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Scheduled connections.
    pub fn len(&self) -> usize {
        self.state.len()
    }

    /// Whether nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.state.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn due(timer: Instant, active: bool, backlog: bool) -> Due {
        Due {
            timer,
            active,
            backlog,
        }
    }

    #[test]
    fn visits_the_active_and_the_due_once_each_in_id_order() {
        let t = Instant::now();
        let s1 = Duration::from_secs(1);
        let mut s = Schedule::new();
        assert_eq!(s.next_timer(), None);
        s.set(5, due(t + s1, true, false));
        s.set(3, due(t, false, false));
        s.set(4, due(t + s1 * 2, false, false));
        s.set(1, due(t, true, false));
        assert_eq!(s.next_timer(), Some(t));
        assert_eq!(s.to_visit(t), vec![1, 3, 5]);
        assert_eq!(s.to_visit(t + s1 * 2), vec![1, 3, 4, 5]);
        // Driven: a new timer, no longer active.
        s.set(1, due(t + s1 * 3, false, false));
        s.set(3, due(t + s1 * 3, false, false));
        assert_eq!(s.to_visit(t), vec![5]);
        assert_eq!(s.next_timer(), Some(t + s1));
        s.remove(5);
        s.remove(5);
        assert_eq!(s.to_visit(t + s1), Vec::<ConnId>::new());
        assert_eq!(s.next_timer(), Some(t + s1 * 2));
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn backlogs_are_counted_as_they_come_and_go() {
        let t = Instant::now();
        let mut s = Schedule::new();
        s.set(1, due(t, true, true));
        s.set(2, due(t, true, true));
        s.set(2, due(t, true, true));
        assert!(s.any_backlog());
        s.set(1, due(t, true, false));
        assert!(s.any_backlog());
        s.remove(2);
        assert!(!s.any_backlog());
        s.remove(1);
        assert!(s.is_empty());
        assert_eq!(s.next_timer(), None);
    }
}
