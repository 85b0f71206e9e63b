//! The gateway's shutdown, as every open stream waits on it.
//!
//! A stream waits on the shutdown beside its upstream read, so the wait was
//! polled at every wake-up of every stream: a waiting `CancellationToken`
//! future takes the token's lock and its wait list's on each poll, and the
//! gateway has one token for all its streams, so every event of every
//! stream took two locks whose lines all cores share. Here the wait is
//! polled only when the shutdown may have begun (a flag set before the
//! token is cancelled, read without a lock) or when the task polling it is
//! not the one it last registered with (a pump handed to a task of its own
//! when its client went away).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio_util::sync::CancellationToken;

/// Cancelled when the shutdown grace period is over: open streams end with
/// their dialect's error.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    token: CancellationToken,
    /// Set before `token` is cancelled.
    begun: Arc<AtomicBool>,
}

impl Shutdown {
    pub fn cancel(&self) {
        self.begun.store(true, Ordering::Release);
        self.token.cancel();
    }

    pub fn is_cancelled(&self) -> bool {
        self.begun.load(Ordering::Acquire)
    }

    /// A token cancelled with this, for waits that are not polled at every
    /// event. A child: cancelling it does not begin the shutdown, which only
    /// [`Shutdown::cancel`] does (the streams' waits look at the flag).
    pub fn token(&self) -> CancellationToken {
        self.token.child_token()
    }

    /// Resolves once cancelled. Cancel-safe; make it once per stream (of
    /// a clone) and poll it as often as the stream wakes: most polls are a
    /// load.
    pub async fn cancelled(self) {
        let wait = self.token.cancelled();
        tokio::pin!(wait);
        Rare::new(wait, &self.begun).await
    }
}

/// `fut`, polled only when `fired` is set or the waker is not the one
/// `fut` last registered: a future woken through that waker alone, whose
/// firing sets `fired` before it wakes anyone.
struct Rare<'a, F> {
    fut: Pin<&'a mut F>,
    fired: &'a AtomicBool,
    /// The waker of `fut`'s last poll that returned `Pending`.
    waker: Option<Waker>,
}

impl<'a, F: Future> Rare<'a, F> {
    fn new(fut: Pin<&'a mut F>, fired: &'a AtomicBool) -> Self {
        Rare {
            fut,
            fired,
            waker: None,
        }
    }
}

impl<F: Future> Future for Rare<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let registered = this.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
        if registered && !this.fired.load(Ordering::Acquire) {
            return Poll::Pending;
        }
        let polled = this.fut.as_mut().poll(cx);
        if polled.is_pending() && !registered {
            this.waker = Some(cx.waker().clone());
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::wake::tests::Count;

    /// A future that counts its polls and is ready once `ready` is set.
    struct Polls<'a> {
        polls: &'a AtomicUsize,
        ready: &'a AtomicBool,
    }

    impl Future for Polls<'_> {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            match self.ready.load(Ordering::SeqCst) {
                true => Poll::Ready(()),
                false => Poll::Pending,
            }
        }
    }

    #[test]
    fn the_inner_future_is_polled_once_per_waker_until_fired() {
        let (polls, ready, fired) = (
            AtomicUsize::new(0),
            AtomicBool::new(false),
            AtomicBool::new(false),
        );
        let inner = Polls {
            polls: &polls,
            ready: &ready,
        };
        tokio::pin!(inner);
        let mut rare = Rare::new(inner, &fired);
        let one = Waker::from(Arc::new(Count::default()));
        let two = Waker::from(Arc::new(Count::default()));
        let mut poll = |w: &Waker| Pin::new(&mut rare).poll(&mut Context::from_waker(w));
        for _ in 0..100 {
            assert!(poll(&one).is_pending());
        }
        assert_eq!(
            polls.load(Ordering::SeqCst),
            1,
            "one poll for a hundred wake-ups"
        );
        // Another task: polled once, to register it.
        assert!(poll(&two).is_pending());
        assert!(poll(&two).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 2);
        // Fired: polled, and ready.
        ready.store(true, Ordering::SeqCst);
        fired.store(true, Ordering::SeqCst);
        assert!(poll(&two).is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 3);
    }

    /// Through the token: a stream waiting on the shutdown is woken by it
    /// and sees it, also after moving to another task.
    #[tokio::test]
    async fn a_wait_made_once_sees_the_shutdown_after_many_polls_and_a_move() {
        let shutdown = Shutdown::default();
        let s = shutdown.clone();
        let wait = tokio::spawn(async move {
            let wait = Box::pin(s.cancelled());
            let mut wait = Some(wait);
            for _ in 0..50 {
                let w = wait.take().unwrap();
                // Polled a few times on this task, then handed on.
                let w = tokio::spawn(async move {
                    let mut w = w;
                    for _ in 0..3 {
                        assert!(futures_util::poll!(w.as_mut()).is_pending());
                    }
                    // Handed back (not a future to await, for clippy).
                    Some(w)
                })
                .await
                .unwrap();
                wait = w;
            }
            wait.unwrap().await
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!shutdown.is_cancelled());
        shutdown.cancel();
        assert!(shutdown.is_cancelled() && shutdown.token().is_cancelled());
        // A token handed out cannot begin it.
        let other = Shutdown::default();
        other.token().cancel();
        assert!(!other.is_cancelled() && !other.token().is_cancelled());
        tokio::time::timeout(std::time::Duration::from_secs(5), wait)
            .await
            .expect("the wait never saw the shutdown")
            .unwrap();
    }
}
