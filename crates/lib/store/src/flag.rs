//! A flag set once, with waiters: what a stop request is, to a run's owner.
//!
//! Why not a `watch::channel(false)`: a watch channel keeps eight wait lists
//! (about 400 bytes), and every open stream with a run log held two of them
//! (the store's, and the one its writer told the pump on) for a flag that is
//! almost never set. This is an `AtomicBool` and one wait list.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub(crate) struct Flag {
    set: AtomicBool,
    notify: Notify,
}

impl Flag {
    /// Sets the flag and wakes every waiter (again setting it: nothing).
    pub(crate) fn set(&self) {
        if !self.set.swap(true, Ordering::AcqRel) {
            self.notify.notify_waiters();
        }
    }

    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Resolves once the flag is set; cancel-safe.
    pub(crate) async fn wait(&self) {
        loop {
            // Registered before the flag is read: a `set` between the read
            // and the await still wakes this waiter.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// Waiters before and after the set are woken; until then none is.
    #[tokio::test]
    async fn waiters_wake_once_the_flag_is_set() {
        let flag = Arc::new(Flag::default());
        let early: Vec<_> = (0..3)
            .map(|_| {
                let f = flag.clone();
                tokio::spawn(async move { f.wait().await })
            })
            .collect();
        tokio::task::yield_now().await;
        let waiting = tokio::time::timeout(Duration::from_millis(20), flag.wait()).await;
        assert!(waiting.is_err() && !flag.is_set());
        flag.set();
        flag.set();
        for w in early {
            tokio::time::timeout(Duration::from_secs(5), w)
                .await
                .unwrap()
                .unwrap();
        }
        assert!(flag.is_set());
        tokio::time::timeout(Duration::from_secs(5), flag.wait())
            .await
            .unwrap();
    }
}
