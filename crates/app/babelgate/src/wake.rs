//! A wait that a stream polls at every wake-up but that is almost never
//! ready: polled only when it woke itself.
//!
//! A stream's pump waits on its run's stop request beside its upstream
//! read, and `select!` polls every branch at each wake-up of the task, so
//! the stop wait was polled once an event: the store's boxed wait and the
//! `Notify` under it, whose poll takes its lock (1.5% of the gateway's CPU
//! at 1,000 streams of 20 events/s). The wait is handed a waker of its own
//! here, which notes the wake before it passes it on to the task: the
//! other polls are a load and a comparison. Unlike `shutdown.rs`'s, this
//! needs nothing of the wait but that it wakes its waker, so it serves any
//! store's.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

pin_project_lite::pin_project! {
    /// `fut`, polled at its first poll and then only once it has woken the
    /// waker it was given, whichever task polls it. Cancel-safe as `fut` is.
    pub struct OnWake<F> {
        #[pin]
        fut: F,
        signal: Arc<Signal>,
        // The task's waker last handed to `signal`.
        task: Option<Waker>,
    }
}

/// What `fut` wakes: it notes the wake, then wakes the task.
#[derive(Default)]
struct Signal {
    woken: AtomicBool,
    /// Written only when the task polling changes (a pump handed to a task
    /// of its own), so the lock is almost never taken but by a wake.
    task: Mutex<Option<Waker>>,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Noted before the task is woken: its poll must see it.
        self.woken.store(true, Ordering::Release);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(task) = task.as_ref() {
            task.wake_by_ref();
        }
    }
}

impl<F: Future> OnWake<F> {
    pub fn new(fut: F) -> Self {
        OnWake {
            fut,
            signal: Arc::default(),
            task: None,
        }
    }
}

impl<F: Future> Future for OnWake<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let first = this.task.is_none();
        if !this.task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
            // Handed over before `woken` is read below: a wake after that
            // read reaches this task.
            *this.signal.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
            *this.task = Some(cx.waker().clone());
        }
        if !first && !this.signal.woken.load(Ordering::Acquire) {
            return Poll::Pending;
        }
        // Cleared before the poll: a wake during or after it polls again.
        this.signal.woken.store(false, Ordering::Release);
        let waker = Waker::from(this.signal.clone());
        this.fut.poll(&mut Context::from_waker(&waker))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Counts its wakes (`shutdown.rs`'s tests use it too).
    #[derive(Default)]
    pub(crate) struct Count(pub(crate) AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Counts its polls, keeps the last waker it was given, and is ready
    /// once `ready` is set.
    #[derive(Default)]
    struct Inner {
        polls: AtomicUsize,
        ready: AtomicBool,
        waker: Mutex<Option<Waker>>,
    }

    impl Inner {
        fn fire(&self) {
            self.ready.store(true, Ordering::SeqCst);
            if let Some(w) = self.waker.lock().unwrap().take() {
                w.wake();
            }
        }
        fn polls(&self) -> usize {
            self.polls.load(Ordering::SeqCst)
        }
    }

    struct Polls<'a>(&'a Inner);

    impl Future for Polls<'_> {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.0.polls.fetch_add(1, Ordering::SeqCst);
            if self.0.ready.load(Ordering::SeqCst) {
                return Poll::Ready(());
            }
            *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    fn poll<F: Future + Unpin>(f: &mut OnWake<F>, w: &Waker) -> Poll<F::Output> {
        Pin::new(f).poll(&mut Context::from_waker(w))
    }

    #[test]
    fn the_inner_future_is_polled_only_once_it_woke() {
        let inner = Inner::default();
        let mut wait = OnWake::new(Polls(&inner));
        let task = Arc::new(Count::default());
        let waker = Waker::from(task.clone());
        for _ in 0..100 {
            assert!(poll(&mut wait, &waker).is_pending());
        }
        assert_eq!(inner.polls(), 1, "one poll for a hundred wake-ups");
        inner.fire();
        assert_eq!(task.0.load(Ordering::SeqCst), 1, "the task was woken");
        assert!(poll(&mut wait, &waker).is_ready());
        assert_eq!(inner.polls(), 2);
    }

    /// A wake that does not make the inner future ready leaves it waiting,
    /// polled once more.
    #[test]
    fn a_wake_without_progress_is_polled_once_and_waits_again() {
        let inner = Inner::default();
        let mut wait = OnWake::new(Polls(&inner));
        let waker = Waker::from(Arc::new(Count::default()));
        assert!(poll(&mut wait, &waker).is_pending());
        inner.waker.lock().unwrap().take().unwrap().wake();
        assert!(poll(&mut wait, &waker).is_pending());
        assert!(poll(&mut wait, &waker).is_pending());
        assert_eq!(inner.polls(), 2);
        inner.fire();
        assert!(poll(&mut wait, &waker).is_ready());
    }

    /// Moved to another task (a pump whose client left), the wait is not
    /// polled again for it, yet the inner future's wake reaches the new
    /// task and not the old one.
    #[test]
    fn a_wake_reaches_the_task_that_polled_last() {
        let inner = Inner::default();
        let mut wait = OnWake::new(Polls(&inner));
        let (old, new) = (Arc::new(Count::default()), Arc::new(Count::default()));
        assert!(poll(&mut wait, &Waker::from(old.clone())).is_pending());
        assert!(poll(&mut wait, &Waker::from(new.clone())).is_pending());
        assert_eq!(inner.polls(), 1);
        inner.fire();
        assert_eq!(new.0.load(Ordering::SeqCst), 1);
        assert_eq!(old.0.load(Ordering::SeqCst), 0);
        assert!(poll(&mut wait, &Waker::from(new)).is_ready());
    }

    /// Through Tokio: a stop wait made once, polled beside a busy read in a
    /// task that is woken a thousand times, then moved to another task,
    /// still ends when its signal fires.
    #[tokio::test]
    async fn a_tokio_wait_ends_through_it_across_tasks() {
        let stop = Arc::new(tokio::sync::Notify::new());
        let wait = {
            let stop = stop.clone();
            Box::pin(async move { stop.notified().await })
        };
        let mut wait = OnWake::new(wait);
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(1);
        let feeder = tokio::spawn(async move {
            for i in 0..1000 {
                tx.send(i).await.unwrap();
            }
        });
        let mut read = 0;
        while read < 1000 {
            tokio::select! {
                _ = &mut wait => panic!("not stopped yet"),
                Some(_) = rx.recv() => read += 1,
            }
        }
        feeder.await.unwrap();
        let moved = tokio::spawn(wait);
        tokio::task::yield_now().await;
        stop.notify_waiters();
        tokio::time::timeout(std::time::Duration::from_secs(5), moved)
            .await
            .expect("the stop reached the task it moved to")
            .unwrap();
    }
}
