//! The one way a mutex is locked in this crate.
//!
//! A lock is poisoned when a thread panics while holding it. [`lock`] takes a poisoned lock over
//! rather than panicking in turn, so that one panic does not spread to every thread that later
//! takes the same lock. That is sound for what the crate's mutexes guard: the served view is
//! updated one object at a time (each record complete under the lock), and the others hold
//! counters, slots and small maps. The cache's state itself has no lock: one thread owns it
//! (`crate::writer`).

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, taking a poisoned lock over (see the module doc).
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_taken_over() {
        let m = Mutex::new(1);
        let _ = std::panic::catch_unwind(|| {
            let mut g = lock(&m);
            *g = 2;
            panic!("poison the lock");
        });
        assert!(m.is_poisoned());
        assert_eq!(*lock(&m), 2);
    }
}
