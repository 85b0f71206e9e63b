//! The stream pump: one upstream response moved to one client, translated
//! as it goes, with heartbeats, the idle timeout, the run log, history and
//! a translation panic turned into the dialect's error.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use babelgate_core::assemble::MessageAssembler;
use babelgate_core::request::Message;
use babelgate_core::sse::DEFAULT_MAX_EVENT_BYTES;
use babelgate_core::{Dialect, EncodeContext, Framing, Sink, SpanKind, Translator};
use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};

use super::observe::{End, Ended, Observers};
use crate::config::OnDisconnect;
use crate::error::UpstreamFault;
use crate::registry;
use crate::resume::Recorder;
use crate::transport::{self, Read, Transport};
use babelgate_store::RunOutcome;

/// The translator of a proxied stream (`client_side`: the client's
/// transport, and whether it takes each event as a message). Only a client
/// dialect whose history the gateway keeps (AG-Kit) gets a message
/// assembler: elsewhere it would hold the whole answer in memory for
/// nothing.
pub(super) fn stream_translator(
    upstream: Dialect,
    client: Dialect,
    ctx: EncodeContext,
    continue_message_id: Option<String>,
    (upstream_transport, client_side): (Transport, (Transport, bool)),
) -> Translator {
    let translator = transport::translator(
        upstream,
        client,
        ctx,
        DEFAULT_MAX_EVENT_BYTES,
        upstream_transport,
        client_side,
    );
    if registry::policy(client).gateway_keeps_history {
        translator.with_assembler(MessageAssembler::new(continue_message_id))
    } else {
        translator
    }
}

/// Moves one upstream response to one client, translating as it goes.
///
/// Boxed once per stream, so its size is rounded up to a jemalloc size
/// class: at 2,048 bytes or under it takes 2,048; a few bytes more take
/// 2,560 for every open stream (`the_pump_fits_its_size_class`).
pub(super) struct Pump {
    pub(super) translator: Translator,
    /// Where the chunks go (the body that runs this pump); `None` once a
    /// client of a `keep` route has gone away.
    pub(super) tx: Option<Arc<Slot>>,
    pub(super) idle: Duration,
    pub(super) heartbeat: Option<Duration>,
    /// The run's log, when the route keeps one (`resume`, the default) and
    /// the store works.
    pub(super) recorder: Option<Recorder>,
    pub(super) on_disconnect: OnDisconnect,
    /// Set when the client dialect needs the gateway to keep history.
    pub(super) store: Option<Arc<dyn babelgate_store::ConversationStore>>,
    pub(super) thread_id: String,
    pub(super) new_from_client: Vec<Message>,
    /// The gateway is shutting down and the grace period is over.
    pub(super) shutdown: crate::shutdown::Shutdown,
    /// What watches the stream go by (see `observe.rs`).
    pub(super) observers: Observers,
    /// The gateway's budget, which the stream's events in flight count in.
    pub(super) inflight: Option<Arc<crate::inflight::Inflight>>,
    /// Set before the pump lets go of `tx` when the client's dialect shows
    /// a failure only as a body that breaks off (`Encoder::aborts`).
    pub(super) abort: Arc<AtomicBool>,
    /// The client takes each event as a message of its own (a WebSocket
    /// session): the sink frames nothing (each span is one event's body),
    /// and the body gets one frame per span.
    pub(super) messages: bool,
    /// How to ask the upstream to stop its run, when its dialect has a way
    /// (`RequestTranslator::stop_request`): sent when the client leaves
    /// (and the run is not kept) or a stop ends the run.
    pub(super) stop_upstream: Option<Box<UpstreamStop>>,
    /// The client takes the run's outcome as one answer: the stream is
    /// logged but not sent, and its end is followed by the encoder's
    /// `state_answer`, the one body the client gets.
    pub(super) answer_once: bool,
}

/// What asking an upstream to stop a run takes: the dialect's request,
/// and where and how the run's own request went.
pub(super) struct UpstreamStop {
    pub(super) build: fn(&str) -> serde_json::Value,
    pub(super) client: crate::upstream::Client,
    pub(super) url: url::Url,
    pub(super) headers: http::HeaderMap,
}

/// How long a stop request to the upstream may take, head and all.
const STOP_UPSTREAM_WAIT: Duration = Duration::from_secs(5);

impl UpstreamStop {
    /// Posts the stop for `run_id` on a task of its own, within
    /// [`STOP_UPSTREAM_WAIT`]: the client's stream does not wait for it.
    fn send(self, run_id: &str) {
        let body = (self.build)(run_id).to_string();
        let run_id = run_id.to_string();
        let post = async move {
            let sent = tokio::time::timeout(
                STOP_UPSTREAM_WAIT,
                self.client.post(&self.url, self.headers, body),
            )
            .await;
            match sent {
                Ok(Ok(resp)) => {
                    tracing::info!(upstream_run = %run_id, status = %resp.status, "asked the upstream to stop its run")
                }
                Ok(Err(e)) => {
                    tracing::warn!(upstream_run = %run_id, error = %e, "could not ask the upstream to stop its run")
                }
                Err(_) => {
                    tracing::warn!(upstream_run = %run_id, "the upstream did not answer the stop request in time")
                }
            }
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            use tracing::Instrument;
            rt.spawn(post.instrument(tracing::Span::current()));
        }
    }
}

/// The one chunk between a pump and the body that runs it.
#[derive(Debug, Default)]
pub(super) struct Slot(std::sync::Mutex<SlotState>);

#[derive(Debug, Default)]
struct SlotState {
    chunk: Option<Chunk>,
    closed: bool,
}

/// What a pump hands its body at once.
#[derive(Debug)]
pub(super) enum Chunk {
    /// Bytes of the client's stream: one body frame.
    Stream(Bytes),
    /// One body frame per event, for a client that takes messages.
    Messages(std::vec::IntoIter<Bytes>),
}

impl Slot {
    /// Resolves once nobody reads the chunks any more. That happens only
    /// as the body is dropped, which then hands the pump to a task of its
    /// own, whose first poll sees it: there is no waker to keep.
    async fn closed(&self) {
        std::future::poll_fn(|_| match self.is_closed() {
            true => Poll::Ready(()),
            false => Poll::Pending,
        })
        .await
    }

    /// Hands a chunk over; false when nobody reads any more.
    async fn send(&self, chunk: Chunk) -> bool {
        let mut chunk = Some(chunk);
        std::future::poll_fn(|_| self.offer(&mut chunk)).await
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn is_closed(&self) -> bool {
        self.state().closed
    }

    /// Takes `chunk` when the slot is empty. Pending while it is full,
    /// with no waker kept: the body takes the chunk and polls the pump
    /// again in the same call, or is dropped and closes the slot first.
    fn offer(&self, chunk: &mut Option<Chunk>) -> Poll<bool> {
        let mut s = self.state();
        if s.closed {
            return Poll::Ready(false);
        }
        if s.chunk.is_some() {
            return Poll::Pending;
        }
        s.chunk = chunk.take();
        Poll::Ready(true)
    }

    /// The next body frame: a whole chunk of the stream, or a message.
    fn take(&self) -> Option<Bytes> {
        let mut s = self.state();
        match s.chunk.take()? {
            Chunk::Stream(b) => Some(b),
            Chunk::Messages(mut m) => {
                let next = m.next();
                if m.len() > 0 {
                    s.chunk = Some(Chunk::Messages(m));
                }
                next
            }
        }
    }

    fn is_full(&self) -> bool {
        self.state().chunk.is_some()
    }

    fn close(&self) {
        let mut s = self.state();
        s.closed = true;
        s.chunk = None;
    }
}

/// A pump's future, as the body keeps it (`SyncWrapper`: a body must be
/// `Sync`, and the future is only ever polled through `&mut`).
type PumpFuture = sync_wrapper::SyncWrapper<Pin<Box<dyn Future<Output = ()> + Send>>>;

/// A streaming response body that runs its stream's pump in its own polls:
/// the connection's task reads the upstream, translates and writes, so an
/// open stream has no task, channel or wake-up between the two of its own.
/// A client that stops reading stops the pump as a full channel did (hyper
/// polls a body only while it has room to write). Dropped before the pump
/// ended (the client went away), it closes the slot and hands the pump to
/// a task of its own, which sees the client gone at once and ends the run
/// as a pump task would (or goes on with it, on a `keep` route).
pub(super) struct PumpBody {
    pump: Option<PumpFuture>,
    slot: Arc<Slot>,
    /// Set by the pump when the client's dialect shows a failure only as a
    /// body that breaks off.
    abort: Arc<AtomicBool>,
    /// The end: after the pump, `Pending` once (hyper flushes what it
    /// holds), then the abort error if any, then nothing.
    ending: u8,
}

impl PumpBody {
    pub(super) fn new(
        pump: impl Future<Output = ()> + Send + 'static,
        slot: Arc<Slot>,
        abort: Arc<AtomicBool>,
    ) -> Self {
        PumpBody {
            pump: Some(sync_wrapper::SyncWrapper::new(Box::pin(pump))),
            slot,
            abort,
            ending: 0,
        }
    }
}

impl http_body::Body for PumpBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        loop {
            if let Some(chunk) = this.slot.take() {
                return Poll::Ready(Some(Ok(http_body::Frame::data(chunk))));
            }
            let Some(pump) = this.pump.as_mut() else {
                break;
            };
            match pump.get_mut().as_mut().poll(cx) {
                // What it left in the slot goes first.
                Poll::Ready(()) => this.pump = None,
                Poll::Pending if this.slot.is_full() => {}
                Poll::Pending => return Poll::Pending,
            }
        }
        if !this.abort.load(Ordering::Acquire) {
            return Poll::Ready(None);
        }
        this.ending = this.ending.saturating_add(1);
        match this.ending {
            1 => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            2 => Poll::Ready(Some(Err(std::io::Error::other("the run failed")))),
            _ => Poll::Ready(None),
        }
    }
}

impl Drop for PumpBody {
    fn drop(&mut self) {
        if let Some(pump) = self.pump.take() {
            self.slot.close();
            // Not within a runtime (never, in the gateway): the run is
            // dropped as a pump task would be at shutdown.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(pump.into_inner());
            }
        }
    }
}

impl Pump {
    /// Boxed: an async fn keeps its arguments apart from its locals, so a
    /// pump passed by value would be held twice for the stream's whole life
    /// (1.6 KiB of a 4.3 KiB future; 1.1 KiB with the box).
    pub(super) async fn run<S>(mut self: Box<Self>, mut upstream: S)
    where
        S: futures_util::Stream<Item = Result<Read, UpstreamFault>> + Unpin,
    {
        // The upstream event being read and translated, held against the
        // gateway's budget for what it may cost parsed (see crate::inflight).
        let mut held = self.inflight.as_ref().map(|i| i.hold(0));
        let mut out = self.sink();
        let idle = tokio::time::sleep(self.idle);
        tokio::pin!(idle);
        // Far in the future when heartbeats are off: one code path either way.
        let beat_every = self
            .heartbeat
            .unwrap_or(Duration::from_secs(365 * 24 * 3600));
        let beat = tokio::time::sleep(beat_every);
        tokio::pin!(beat);
        // Made once: each made anew per read registered a waiter and
        // dropped it again, every event; and polled at every wake-up as a
        // load, not the token's locks (see `shutdown.rs`).
        let shutdown = self.shutdown.clone().cancelled();
        tokio::pin!(shutdown);
        let stop = self.stop_requested();
        tokio::pin!(stop);
        // An upstream item read ahead, not yet handled.
        let mut ready = None;
        let end = loop {
            // Nothing to read yet: the stream waits, perhaps long, so the
            // room kept for translating goes (the next read takes it
            // again; a stream read as fast as it comes keeps it). Polled
            // with the task's own waker, so the wait below misses nothing;
            // what is ready is kept until the read branch takes it.
            if ready.is_none() {
                let mut read = upstream.next();
                match std::future::poll_fn(|cx| Poll::Ready(read.poll_unpin(cx))).await {
                    Poll::Ready(next) => ready = Some(next),
                    Poll::Pending => {
                        self.translator.release_idle();
                        out.release();
                    }
                }
            }
            let client_gone = async {
                match &self.tx {
                    Some(tx) => tx.closed().await,
                    None => std::future::pending().await,
                }
            };
            let read = async {
                match ready.take() {
                    Some(next) => next,
                    None => upstream.next().await,
                }
            };
            let next = tokio::select! {
                next = read => next,
                () = &mut idle => {
                    let msg = format!("the upstream sent nothing for {:?}", self.idle);
                    let (code, end) = ("upstream_idle", End::Upstream("upstream_idle"));
                    break Box::pin(self.end_with(&msg, code, end, &mut out)).await;
                }
                () = &mut beat => {
                    beat.as_mut().reset(tokio::time::Instant::now() + beat_every);
                    if self.tx.is_some() {
                        out.comment("ping");
                        if !Box::pin(self.deliver(&mut out)).await {
                            break End::ClientGone;
                        }
                    }
                    continue;
                }
                () = &mut shutdown => {
                    let msg = "the gateway is shutting down";
                    break Box::pin(self.end_with(msg, "shutdown", End::Shutdown, &mut out)).await;
                }
                () = &mut stop => {
                    let msg = "the run was stopped";
                    break Box::pin(self.end_with(msg, "stopped", End::Stopped, &mut out)).await;
                }
                // The client went away: dropping `upstream` cancels the
                // request, unless the route keeps the run going.
                () = client_gone => {
                    if self.detach() {
                        continue;
                    }
                    break End::ClientGone;
                }
            };
            let end = match next {
                None => self.upstream_ended(None, &mut out),
                Some(Err(fault)) => self.upstream_ended(Some(fault), &mut out),
                Some(Ok(read)) => {
                    idle.as_mut().reset(tokio::time::Instant::now() + self.idle);
                    match self.relay(read, &mut out, &mut held).await {
                        Ok(sent) => {
                            if let Some(now) = sent {
                                beat.as_mut().reset(now + beat_every);
                            }
                            continue;
                        }
                        Err(End::ClientGone) => break End::ClientGone,
                        Err(end) => end,
                    }
                }
            };
            if end == End::Internal {
                break Box::pin(self.end_internal(&mut out)).await;
            }
            Box::pin(self.close(&mut out)).await;
            break end;
        };
        Box::pin(self.finish(end)).await;
    }

    /// The upstream's stream ended: whole (`None`; the translator says
    /// whether the run did) or broken by `fault`.
    fn upstream_ended(&mut self, fault: Option<UpstreamFault>, out: &mut Sink) -> End {
        let Some(fault) = fault else {
            self.came_in(|rec, ms| rec.finish(ms));
            return match self.guarded(out, |t, out| t.finish_live_to(out)) {
                Some(Ok(true)) => End::Complete,
                Some(Ok(false)) => End::Upstream("upstream_disconnected"),
                // A binary stream that ended inside a message.
                Some(Err(_)) => End::Upstream("upstream_malformed"),
                None => End::Internal,
            };
        };
        let code = fault.code();
        tracing::warn!(?fault, "the upstream's stream failed");
        self.fail(&fault.client_message(), code, out);
        End::Upstream(code)
    }

    /// Where the encoder writes. Small to start: most streams are mostly
    /// idle, and it grows to fit. Where each event starts and ends is kept
    /// only for the run log, an observer that reads it (the inspector) and
    /// messages.
    fn sink(&self) -> Sink {
        let framing = match self.messages {
            true => Framing::Message,
            false => Framing::stream(self.translator.encoder().writes_binary()),
        };
        if self.recorder.is_some() || self.observers.reads_spans() || self.messages {
            Sink::new(framing)
        } else {
            Sink::untracked(framing, Vec::with_capacity(512))
        }
    }

    /// Resolves when someone asks to stop the run (a logged run only).
    /// Polled only once it woke (see `wake.rs`): a stop is rare, and the
    /// store's wait took a lock at every poll.
    fn stop_requested(&self) -> impl Future<Output = ()> + Send + 'static {
        let stop = (self.recorder.as_ref()).map(|r| crate::wake::OnWake::new(r.stop_signal()));
        async move {
            match stop {
                Some(stop) => stop.await,
                None => std::future::pending().await,
            }
        }
    }

    /// One upstream chunk translated, logged and handed to the client:
    /// `Ok(Some(when))` once handed over, `Ok(None)` when it made nothing to
    /// send, `Err` with how the stream ends.
    async fn relay(
        &mut self,
        read: Read,
        out: &mut Sink,
        held: &mut Option<crate::inflight::Held>,
    ) -> Result<Option<tokio::time::Instant>, End> {
        // The gateway's own time on this chunk starts here (one clock read
        // per chunk, none per event) ...
        let read_at = std::time::Instant::now();
        let events_before = self.translator.events_translated;
        self.came_in(|rec, ms| rec.read(&read, ms));
        (self.observers).upstream(&read, self.translator.reads_binary());
        // What the chunk may cost parsed, and then what stays buffered.
        let cost = |bytes: usize| bytes.saturating_mul(babelgate_core::cost::FACTOR);
        if let Some(h) = held {
            h.set(cost(read.len() + self.translator.buffered_bytes()));
        }
        let Some(r) = self.guarded(out, |t, out| read.push_to(t, out)) else {
            return Err(End::Internal);
        };
        if let Some(h) = held {
            h.set(cost(self.translator.buffered_bytes()));
        }
        if let Some(rec) = &mut self.recorder {
            // A read that gave the encoder nothing joins the next's entry.
            rec.made(self.translator.events_translated != events_before || r.is_err());
        }
        if r.is_err() {
            return Err(End::Upstream("upstream_malformed"));
        }
        let chunk = self.prepare(out).await;
        // ... and ends as its translation (logged, when the run is) is
        // handed over.
        let t = &self.translator;
        let events = t.events_translated - events_before;
        (self.observers).translated(t.frames_read, events, read_at.elapsed());
        let Some(chunk) = chunk else {
            return Ok(None);
        };
        let now = tokio::time::Instant::now();
        self.observers.delivered(now);
        if !self.send(chunk).await {
            return Err(End::ClientGone);
        }
        Ok(Some(now))
    }

    /// After the stream's last words: the client's dialect told how it
    /// ended, the upstream told to stop when it should, the run log ended,
    /// and the observers told.
    async fn finish(&mut self, end: End) {
        if self.translator.encoder().aborts() {
            self.abort.store(true, Ordering::Release);
        }
        if self.answer_once && end != End::ClientGone {
            if let Some(answer) = self.translator.encoder().state_answer() {
                self.answer_once = false;
                let chunk = Chunk::Stream(Bytes::from(answer.to_string()));
                self.send(chunk).await;
            }
        }
        // The upstream's run goes on unless told: the client left (the run
        // not kept) or a stop ended it before the upstream did.
        if matches!(end, End::ClientGone | End::Stopped) && !self.translator.run_ended() {
            if let (Some(stop), Some(id)) =
                (self.stop_upstream.take(), self.translator.upstream_run_id())
            {
                stop.send(id);
            }
        }
        if let Some(mut rec) = self.recorder.take() {
            Box::pin(rec.end(match end {
                End::Complete => RunOutcome::Completed,
                End::ClientGone | End::Stopped => RunOutcome::Cancelled,
                End::Upstream(_) | End::Shutdown | End::Internal => RunOutcome::Failed,
            }))
            .await;
        }
        let encoder = self.translator.encoder();
        self.observers.ended(&Ended {
            end,
            events: self.translator.events_translated,
            dropped: encoder.dropped(),
            unframed: encoder.unframed(),
        });
    }

    /// One translator step, a panic caught (see [`transport::guarded`]).
    fn guarded<T>(
        &mut self,
        out: &mut Sink,
        step: impl FnOnce(&mut Translator, &mut Sink) -> T,
    ) -> Option<T> {
        transport::guarded(&mut self.translator, out, step)
    }

    /// Ends a stream whose translation panicked (see [`guarded`](Self::guarded)).
    async fn end_internal(&mut self, out: &mut Sink) -> End {
        self.came_in(|rec, ms| rec.internal(ms));
        (self.observers).failed(transport::INTERNAL.0, transport::INTERNAL.1);
        self.deliver(out).await;
        End::Internal
    }

    /// Ends the client's stream with its dialect's error, noted in the
    /// capture (where a replay ends the same way).
    fn fail(&mut self, message: &str, code: &'static str, out: &mut Sink) {
        self.observers.failed(message, code);
        self.came_in(|rec, ms| rec.fail(message, code, ms));
        self.translator.fail_to(message, Some(code), out);
    }

    /// Ends the stream with the client dialect's error (`code`) and its
    /// last words.
    async fn end_with(
        &mut self,
        message: &str,
        code: &'static str,
        end: End,
        out: &mut Sink,
    ) -> End {
        self.fail(message, code, out);
        self.close(out).await;
        end
    }

    /// The client went away: true when the run goes on without it.
    fn detach(&mut self) -> bool {
        self.tx = None;
        let keep = self.on_disconnect == OnDisconnect::Keep && self.recorder.is_some();
        if keep {
            tracing::info!("client went away; the run goes on (on_disconnect = keep)");
        }
        keep
    }

    /// The stream's last words: history first (the client may post its
    /// next turn the moment it reads the end of this one), then what is
    /// buffered. Called boxed, as are the other once-per-stream and rare
    /// steps: the stream's future keeps room for every step it awaits
    /// inline for as long as the stream is open.
    async fn close(&mut self, out: &mut Sink) {
        self.remember().await;
        self.deliver(out).await;
    }

    /// Logs what is buffered and sends it to the client, if one is there;
    /// false when the client is gone and the run should stop.
    async fn deliver(&mut self, out: &mut Sink) -> bool {
        match self.prepare(out).await {
            Some(chunk) => self.send(chunk).await,
            None => true,
        }
    }

    /// Gives the translator's encoder the time to stamp what follows with
    /// (one clock read per upstream read, not per event), and notes it with
    /// what the translator is about to be given in the run's record (when
    /// it is kept) and for the observers (the inspector's capture): a
    /// replay gives the encoder the same time again.
    fn came_in(&mut self, note: impl FnOnce(&mut Recorder, i64)) {
        let ms = babelgate_core::Clock::System.now_ms();
        self.translator.set_now(ms);
        self.observers.now(ms);
        if let Some(rec) = &mut self.recorder {
            note(rec, ms);
        }
    }

    /// What is buffered, with ids when the run is logged: the chunk to send,
    /// if any. What came in is logged first, whether it made anything or
    /// not: a client never gets what the record could not make again.
    async fn prepare(&mut self, out: &mut Sink) -> Option<Chunk> {
        if let Some(rec) = &mut self.recorder {
            rec.flush().await;
        }
        if out.is_empty() {
            return None;
        }
        if self.answer_once {
            // Logged (a GetTask, a resume read it) but not sent: the client
            // gets the answer at the end.
            if let Some(rec) = &mut self.recorder {
                rec.count(out);
            }
            out.clear();
            return None;
        }
        (self.observers).output(out, self.translator.encoder().writes_binary());
        if self.messages {
            return self.prepare_messages(out);
        }
        Some(Chunk::Stream(match &mut self.recorder {
            Some(rec) => {
                // Sized by the recorder (room for an `id:` line per event).
                let mut with_ids = Vec::new();
                rec.write(out, &mut with_ids);
                out.clear();
                Bytes::from(with_ids)
            }
            // No log (a route with `resume = false`, or the store failed):
            // the same bytes without `id:` lines. An id is only something to
            // come back with (`Last-Event-ID`), and nothing here could
            // answer it; the clients read the events the same either way
            // (`@ag-ui/client` and `ai` parse SSE ids and ignore them).
            None => Bytes::from(out.take().0),
        }))
    }

    /// [`prepare`](Self::prepare) for a client that takes messages: each
    /// event's span (its body: the sink frames none) a slice of the one
    /// buffer, no copy; sent without ids (a message has no place for one).
    fn prepare_messages(&mut self, out: &mut Sink) -> Option<Chunk> {
        if let Some(rec) = &mut self.recorder {
            rec.count(out);
        }
        let (bytes, spans) = out.take();
        let bytes = Bytes::from(bytes);
        let messages: Vec<Bytes> = spans
            .iter()
            .filter(|s| s.kind == SpanKind::Event && s.range.end <= bytes.len())
            .map(|s| bytes.slice(s.range.clone()))
            .collect();
        (!messages.is_empty()).then(|| Chunk::Messages(messages.into_iter()))
    }

    /// Sends a chunk to the client, if one is there; false when the client
    /// is gone and the run should stop.
    async fn send(&mut self, chunk: Chunk) -> bool {
        match &self.tx {
            None => true,
            Some(tx) => {
                if tx.send(chunk).await {
                    true
                } else {
                    self.detach()
                }
            }
        }
    }

    async fn remember(&mut self) {
        if let Some(store) = &self.store {
            let mut turn = std::mem::take(&mut self.new_from_client);
            turn.extend(self.translator.take_messages());
            if let Err(e) = store.append(&self.thread_id, turn).await {
                tracing::warn!(thread = %self.thread_id, error = %e, "could not keep the conversation history");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// The SSE events in a body (each ends with a blank line; encoders
    /// never write one inside an event).
    fn sse_events(mut rest: &[u8]) -> impl Iterator<Item = &[u8]> {
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let end = rest
                .windows(2)
                .position(|w| w == b"\n\n")
                .map_or(rest.len(), |i| i + 2);
            let (event, tail) = rest.split_at(end);
            rest = tail;
            Some(event)
        })
    }

    use super::*;
    use tokio::sync::mpsc;

    const STARTED: &str = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";

    /// A pump whose chunks go to the body that runs it, as the gateway
    /// builds it; the test's side of it is [`Client`].
    fn pump(idle: Duration, heartbeat: Option<Duration>) -> (Pump, Arc<Slot>) {
        let slot = Arc::new(Slot::default());
        let translator = registry::translator(
            Dialect::AgUi,
            Dialect::AgUi,
            EncodeContext::deterministic(),
            DEFAULT_MAX_EVENT_BYTES,
        );
        let p = Pump {
            translator,
            tx: Some(slot.clone()),
            idle,
            heartbeat,
            recorder: None,
            on_disconnect: OnDisconnect::Cancel,
            store: None,
            thread_id: "t".into(),
            new_from_client: Vec::new(),
            shutdown: crate::shutdown::Shutdown::default(),
            observers: Observers::default(),
            inflight: None,
            abort: Arc::default(),
            messages: false,
            stop_upstream: None,
            answer_once: false,
        };
        (p, slot)
    }

    /// What the client reads: the response body running the pump.
    struct Client(PumpBody);

    impl Client {
        async fn recv(&mut self) -> Option<Bytes> {
            use http_body_util::BodyExt;
            let frame = self.0.frame().await?.expect("no abort here");
            Some(frame.into_data().expect("data frames only"))
        }
    }

    /// Starts the stream: the client, and what resolves once the pump has
    /// ended (in the body's polls, or in the task a dropped body hands it
    /// to).
    fn start(
        p: Pump,
        slot: Arc<Slot>,
        s: Upstream,
    ) -> (Client, tokio::sync::oneshot::Receiver<()>) {
        let (done, ended) = tokio::sync::oneshot::channel();
        let run = async move {
            Box::new(p).run(s).await;
            let _ = done.send(());
        };
        let body = PumpBody::new(run, slot, Arc::default());
        (Client(body), ended)
    }

    type Upstream =
        std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Read, UpstreamFault>> + Send>>;

    /// An upstream byte stream, fed by the test (an error is a broken
    /// connection).
    fn upstream() -> (mpsc::Sender<Result<Bytes, String>>, Upstream) {
        let (tx, rx) = mpsc::channel::<Result<Bytes, String>>(4);
        let s = futures_util::stream::unfold(rx, |mut rx| async move {
            let next = rx.recv().await?;
            Some((next.map(Read::Bytes).map_err(UpstreamFault::Connection), rx))
        });
        (tx, Box::pin(s))
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_keep_an_idle_stream_alive_until_the_idle_timeout() {
        let (p, slot) = pump(Duration::from_secs(50), Some(Duration::from_secs(15)));
        let (up, s) = upstream();
        let (mut rx, _) = start(p, slot, s);
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        let started = tokio::time::Instant::now();
        let mut chunks = Vec::new();
        while let Some(c) = rx.recv().await {
            chunks.push((
                started.elapsed().as_secs(),
                String::from_utf8(c.to_vec()).unwrap(),
            ));
        }
        assert!(chunks[0].1.contains("RUN_STARTED"));
        let pings: Vec<u64> = chunks
            .iter()
            .filter(|(_, c)| c == ": ping\n\n")
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(pings, [15, 30, 45], "{chunks:?}");
        let (t, last) = chunks.last().unwrap();
        assert_eq!(*t, 50);
        assert!(
            last.contains("RUN_ERROR") && last.contains("upstream_idle"),
            "{last}"
        );
        drop(up);
    }

    #[tokio::test(start_paused = true)]
    async fn output_postpones_the_heartbeat() {
        let (p, slot) = pump(Duration::from_secs(100), Some(Duration::from_secs(15)));
        let (up, s) = upstream();
        let (mut rx, _) = start(p, slot, s);
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        rx.recv().await.unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        up.send(Ok(Bytes::from(
            "data: {\"type\":\"STEP_STARTED\",\"stepName\":\"s\"}\n\n",
        )))
        .await
        .unwrap();
        let t0 = tokio::time::Instant::now();
        assert!(String::from_utf8(rx.recv().await.unwrap().to_vec())
            .unwrap()
            .contains("STEP_STARTED"));
        assert_eq!(rx.recv().await.unwrap(), Bytes::from(": ping\n\n"));
        assert_eq!(
            t0.elapsed().as_secs(),
            15,
            "15 s after the last output, not after the first"
        );
    }

    /// A client that takes messages (a WebSocket session) gets each event
    /// as a body frame of its own: the event without its SSE framing (an
    /// event of several lines stays one), and no heartbeat comments.
    #[tokio::test(start_paused = true)]
    async fn a_client_that_takes_messages_gets_one_frame_per_event() {
        let (mut p, slot) = pump(Duration::from_secs(100), Some(Duration::from_secs(15)));
        p.messages = true;
        let (up, s) = upstream();
        let (mut rx, _) = start(p, slot, s);
        let custom = "data: {\"type\":\"CUSTOM\",\ndata: \"name\":\"n\",\"value\":1}\n\n";
        up.send(Ok(Bytes::from(format!("{STARTED}{custom}"))))
            .await
            .unwrap();
        let mut got = vec![rx.recv().await.unwrap(), rx.recv().await.unwrap()];
        tokio::time::sleep(Duration::from_secs(40)).await;
        let end = "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";
        up.send(Ok(Bytes::from(end))).await.unwrap();
        drop(up);
        while let Some(m) = rx.recv().await {
            got.push(m);
        }
        assert_eq!(
            got,
            [
                "{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}",
                "{\"type\":\"CUSTOM\",\n\"name\":\"n\",\"value\":1}",
                "{\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}",
            ]
        );
    }

    #[tokio::test]
    async fn a_client_that_goes_away_cancels_the_upstream() {
        let (p, slot) = pump(Duration::from_secs(100), None);
        let (up, s) = upstream();
        let (mut rx, task) = start(p, slot, s);
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        assert!(rx.recv().await.is_some());
        drop(rx);
        // The pump drops the upstream stream, which closes our sender's side.
        tokio::time::timeout(Duration::from_secs(20), up.closed())
            .await
            .expect("upstream released");
        task.await.unwrap();
    }

    /// Without a run log (a route with `resume = false`: this pump has no
    /// recorder) a client that reads nothing still holds the upstream back:
    /// the body runs the pump only as it is read.
    #[tokio::test]
    async fn a_client_that_reads_nothing_holds_the_upstream_back_without_a_run_log() {
        use std::sync::atomic::AtomicUsize;
        let (p, slot) = pump(Duration::from_secs(100), None);
        assert!(p.recorder.is_none());
        let (up, s) = upstream();
        let (mut rx, _) = start(p, slot, s);
        let sent = Arc::new(AtomicUsize::new(0));
        const EVENTS: usize = 200;
        let feeder = {
            let sent = sent.clone();
            tokio::spawn(async move {
                up.send(Ok(Bytes::from(STARTED))).await.unwrap();
                for i in 0..EVENTS {
                    let e =
                        format!("data: {{\"type\":\"CUSTOM\",\"name\":\"n\",\"value\":{i}}}\n\n");
                    up.send(Ok(Bytes::from(e))).await.unwrap();
                    sent.fetch_add(1, Ordering::SeqCst);
                }
                let end =
                    "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";
                up.send(Ok(Bytes::from(end))).await.unwrap();
            })
        };
        // Until the feeder stalls (unchanged over three polls).
        let (mut last, mut still) = (usize::MAX, 0);
        while still < 3 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = sent.load(Ordering::SeqCst);
            still = if now == last { still + 1 } else { 0 };
            last = now;
        }
        // Nothing read ahead for the client: what was sent is what the
        // upstream channel (4) takes, and one send under way. (With a
        // channel of 16 chunks between pump and client the bound was 22.)
        assert!(
            last <= 6,
            "{last} events read ahead for a client that reads nothing"
        );
        let mut body = Vec::new();
        while let Some(c) = rx.recv().await {
            body.extend_from_slice(&c);
        }
        feeder.await.unwrap();
        let body = String::from_utf8(body).unwrap();
        assert_eq!(body.matches("\"CUSTOM\"").count(), EVENTS);
        assert!(body.ends_with("\"runId\":\"r\"}\n\n") && !body.contains("id:"));
    }

    /// A decoder with a bug: AG-UI's, but it panics on a frame `boom`.
    struct Buggy(Box<dyn babelgate_core::Decoder>);

    impl babelgate_core::Decoder for Buggy {
        fn dialect(&self) -> Dialect {
            Dialect::AgUi
        }
        fn decode(
            &mut self,
            frame: &babelgate_core::Frame,
            out: &mut Vec<babelgate_core::Event>,
        ) -> Result<(), babelgate_core::DecodeError> {
            assert!(frame.data != "boom", "injected decoder bug");
            self.0.decode(frame, out)
        }
    }

    /// What an observer saw, hook by hook.
    #[derive(Clone, Default)]
    struct Seen(Arc<std::sync::Mutex<Vec<String>>>);

    impl super::super::observe::Observer for Seen {
        fn reads_spans(&self) -> bool {
            true
        }
        fn upstream(&mut self, read: &Read, _binary: bool) {
            self.0
                .lock()
                .unwrap()
                .push(format!("upstream {}", read.len()));
        }
        fn translated(&mut self, frames_read: u64, events: u64, _took: Duration) {
            (self.0.lock().unwrap()).push(format!("translated {frames_read} {events}"));
        }
        fn output(&mut self, out: &Sink, _binary: bool) {
            self.0
                .lock()
                .unwrap()
                .push(format!("output {}", out.spans().len()));
        }
        fn delivered(&mut self, _now: tokio::time::Instant) {
            self.0.lock().unwrap().push("delivered".into());
        }
        fn failed(&mut self, _message: &str, code: &'static str) {
            self.0.lock().unwrap().push(format!("failed {code}"));
        }
        fn ended(&mut self, e: &super::super::observe::Ended) {
            let line = format!("ended {:?} {} {}", e.end, e.events, e.dropped);
            self.0.lock().unwrap().push(line);
        }
    }

    /// Every observer is called at each point of the stream, in order,
    /// with what the stream did; one that reads spans gets them.
    #[tokio::test]
    async fn observers_see_each_chunk_and_the_end() {
        let (mut p, slot) = pump(Duration::from_secs(100), None);
        let (first, second) = (Seen::default(), Seen::default());
        p.observers = Observers::default()
            .with(first.clone())
            .with(second.clone());
        let (up, s) = upstream();
        let (mut rx, task) = start(p, slot, s);
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        rx.recv().await.unwrap();
        up.send(Err("reset".into())).await.unwrap();
        while rx.recv().await.is_some() {}
        task.await.unwrap();
        let seen = first.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                format!("upstream {}", STARTED.len()),
                "output 1".into(),
                "translated 1 1".into(),
                "delivered".into(),
                // The connection broke: the dialect's error, written and
                // sent as the stream's last words.
                "failed upstream_disconnected".into(),
                "output 1".into(),
                "ended Upstream(\"upstream_disconnected\") 1 0".into(),
            ]
        );
        assert_eq!(*second.0.lock().unwrap(), seen, "each observer is called");
    }

    #[tokio::test]
    async fn a_panic_in_translation_ends_the_stream_with_internal_and_fails_the_run() {
        use babelgate_store::{MemoryRunLog, RunLog, RunStatus};
        let (mut p, slot) = pump(Duration::from_secs(100), None);
        p.translator = Translator::new(
            babelgate_core::SseFramer::new(DEFAULT_MAX_EVENT_BYTES),
            Box::new(Buggy(registry::decoder(Dialect::AgUi))),
            registry::encoder(Dialect::AgUi, EncodeContext::deterministic()),
        );
        let log: Arc<dyn RunLog> = Arc::new(MemoryRunLog::default());
        p.recorder = Some(recorder(&log, Dialect::AgUi, Dialect::AgUi).await);
        let metrics = Arc::new(crate::metrics::Metrics::default());
        p.observers = Observers::default().with(super::super::observe::StreamMetrics::new(
            metrics.clone(),
            "/r",
            (Dialect::AgUi, Dialect::AgUi),
            tokio::time::Instant::now(),
        ));
        p.inflight = Some(crate::inflight::Inflight::new(usize::MAX));
        let (up, s) = upstream();
        let (mut rx, task) = start(p, slot, s);
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        up.send(Ok(Bytes::from("data: boom\n\n"))).await.unwrap();
        let mut body = String::new();
        while let Some(c) = rx.recv().await {
            body.push_str(std::str::from_utf8(&c).unwrap());
        }
        task.await.expect("the pump survives the panic");
        assert!(body.contains("RUN_STARTED"), "{body}");
        let last = body.trim_end().rsplit("\n\n").next().unwrap();
        assert!(
            last.contains("RUN_ERROR") && last.contains("\"code\":\"internal\""),
            "{body}"
        );
        let info = log.info("r1").await.unwrap().unwrap();
        assert_eq!(info.status, RunStatus::Ended(RunOutcome::Failed));
        assert_eq!(metrics.stream_panics.get(), 1);
    }

    #[test]
    fn only_streams_whose_history_is_kept_assemble_messages() {
        let text = "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n\
                    data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hi\"}\n\n\
                    data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n";
        for client in [Dialect::AgUi, Dialect::Hai, Dialect::Vercel, Dialect::AgKit] {
            let mut t = stream_translator(
                Dialect::AgUi,
                client,
                EncodeContext::deterministic(),
                None,
                (Transport::Sse, (Transport::Sse, false)),
            );
            let mut out = Vec::new();
            t.push(STARTED.as_bytes(), &mut out).unwrap();
            t.push(text.as_bytes(), &mut out).unwrap();
            let kept = t.take_messages();
            assert_eq!(
                !kept.is_empty(),
                client == Dialect::AgKit,
                "{client:?}: {kept:?}"
            );
        }
    }

    /// A recorder of run `r1` on `log`, for a translator of `from` to `to`
    /// with the deterministic context.
    async fn recorder(
        log: &Arc<dyn babelgate_store::RunLog>,
        from: Dialect,
        to: Dialect,
    ) -> Recorder {
        let writer = crate::resume::test_writer(log).await;
        let setup = babelgate_core::journal::Setup::of(&EncodeContext::deterministic());
        let begin = crate::resume::Begin::new(from, to, false, setup);
        Recorder::new(writer, Duration::from_secs(60), &begin)
    }

    /// Every pair, the upstream cut in small reads: the run log holds what
    /// came in, and a client that comes back gets the
    /// live stream again byte for byte, ids and all, from the start or
    /// after any of its events.
    #[tokio::test]
    async fn a_replay_of_the_record_gives_the_live_stream_again_for_each_pair() {
        use crate::resume::{ClientId, Mode};
        use babelgate_store::{LogItem, MemoryRunLog, RunLog};
        let dir = |d: Dialect| match d {
            Dialect::AgUi => "ag-ui",
            Dialect::Vercel => "vercel",
            Dialect::Hai => "hai",
            Dialect::AgKit => "agkit",
            Dialect::A2a => "a2a",
        };
        let all = [Dialect::AgUi, Dialect::Vercel, Dialect::Hai, Dialect::AgKit];
        for from in all {
            let path = format!(
                "{}/../../../tests/fixtures/{}/server_tool.sse",
                env!("CARGO_MANIFEST_DIR"),
                dir(from)
            );
            let input = std::fs::read(&path).unwrap();
            for to in all {
                let (mut p, slot) = pump(Duration::from_secs(100), None);
                p.translator = stream_translator(
                    from,
                    to,
                    EncodeContext::deterministic(),
                    None,
                    (Transport::Sse, (Transport::Sse, false)),
                );
                let log: Arc<dyn RunLog> = Arc::new(MemoryRunLog::default());
                p.recorder = Some(recorder(&log, from, to).await);
                let (up, s) = upstream();
                let (mut rx, task) = start(p, slot, s);
                let feed = {
                    let input = input.clone();
                    tokio::spawn(async move {
                        for piece in input.chunks(7) {
                            up.send(Ok(Bytes::copy_from_slice(piece))).await.unwrap();
                        }
                    })
                };
                let mut body = Vec::new();
                while let Some(c) = rx.recv().await {
                    body.extend_from_slice(&c);
                }
                feed.await.unwrap();
                task.await.unwrap();
                let mut reads = Vec::new();
                let mut read = log.read("r1", None);
                while let Some(item) = read.next().await {
                    match item.unwrap() {
                        LogItem::Event { data, .. } => reads.push(data),
                        LogItem::End(_) => break,
                        other => panic!("{other:?}"),
                    }
                }
                // The setup, the reads as they came (one that made nothing
                // joined with the next), the upstream's end.
                let pieces = input.chunks(7).count();
                let logged = reads.len() - 2;
                assert!(logged < pieces, "{from:?} -> {to:?}: {logged} entries");
                assert_eq!(reads[1..=logged].concat(), input, "{from:?} -> {to:?}");
                let client: Vec<&[u8]> = sse_events(&body).collect();
                assert!(client.len() > 2, "{from:?} -> {to:?}");
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                let again = crate::resume::followed(&log, to, Mode::After(None), None).await;
                assert_eq!(text(&again), text(&body), "{from:?} -> {to:?}");
                // After the k-th event: the ones after it, as they were.
                for k in [1, client.len() / 2, client.len() - 1] {
                    let id_line = text(client[k - 1]).lines().next().unwrap().to_string();
                    let id: ClientId = id_line.strip_prefix("id: ").unwrap().parse().unwrap();
                    assert_eq!(id.n, k as u64, "{id_line}");
                    let rest = crate::resume::followed(&log, to, Mode::After(Some(id)), None).await;
                    assert_eq!(
                        text(&rest),
                        text(&client[k..].concat()),
                        "{from:?} -> {to:?} after {k}"
                    );
                }
            }
        }
    }

    /// The store's wait for a stop request is polled when it wakes, not at
    /// each event of the stream (each poll of the memory store's took its
    /// lock: 1.4% of the gateway's CPU at 20 events/s a stream), and a stop
    /// still ends the stream with the dialect's error.
    #[tokio::test]
    async fn the_stop_wait_is_polled_when_it_wakes_not_at_each_event() {
        use babelgate_store::RunLog;
        let counting = Arc::new(babelgate_store::testing::Counting::new(Arc::new(
            babelgate_store::MemoryRunLog::default(),
        )));
        let log: Arc<dyn RunLog> = counting.clone();
        let (mut p, slot) = pump(Duration::from_secs(100), None);
        p.recorder = Some(recorder(&log, Dialect::AgUi, Dialect::AgUi).await);
        let (up, s) = upstream();
        let (mut rx, task) = start(p, slot, s);
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        rx.recv().await.unwrap();
        // (a text start goes out with its first content)
        let start = "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n";
        up.send(Ok(Bytes::from(start))).await.unwrap();
        for i in 0..100 {
            let delta = format!(
                "data: {{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"{i} \"}}\n\n"
            );
            up.send(Ok(Bytes::from(delta))).await.unwrap();
            let chunk = rx.recv().await.unwrap();
            assert!(String::from_utf8_lossy(&chunk).contains(&format!("{i} ")));
        }
        let polled = counting.stop_polls.load(Ordering::SeqCst);
        assert!(
            polled <= 2,
            "the stop wait was polled {polled} times for 102 events"
        );
        assert!(log.request_stop("r1").await.unwrap());
        let mut rest = String::new();
        while let Some(c) = rx.recv().await {
            rest.push_str(&String::from_utf8_lossy(&c));
        }
        task.await.unwrap();
        assert!(
            rest.contains("RUN_ERROR") && rest.contains("\"stopped\""),
            "{rest}"
        );
        drop(up);
    }

    /// Two vectors more in the recorder once took the pump past 2,048
    /// bytes: every open stream then held 512 bytes more (0.7 KiB a stream
    /// in the bench's open-streams row, with its future).
    #[test]
    fn the_pump_fits_its_size_class() {
        let size = std::mem::size_of::<Pump>();
        assert!(size <= 2048, "Pump is {size} bytes");
    }

    #[test]
    fn the_upstream_s_reads_are_small_whatever_the_transport() {
        // The pump's future holds them for the stream's life: a WebSocket
        // stream inline made it 4,592 bytes for every stream, not 1,952.
        let size = std::mem::size_of::<super::super::send::Reads>();
        assert!(size <= 512, "Reads is {size} bytes");
    }
}
