//! Streaming with failover (docs/design.md, "Streaming").
//!
//! Until the **commit point**, the first content handed to the caller, a
//! stream is one more request: the whole failure table applies, plus a
//! time-to-first-token deadline. After it, an idle deadline runs between
//! chunks; a stream that is cut, stalls or ends without a finish is
//! *continued* on the next attempt (the same provider again, then the next
//! entry): with the text already delivered as an assistant prefill where the
//! model accepts one, forwarding only the rest; otherwise restarted, with
//! only what extends the delivered text forwarded. When no continuation is
//! possible the stream ends with an error that names the original failure,
//! never with a clean end: a truncated answer is never presented as complete.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ops::Deref;
use std::rc::Rc;
use std::time::Duration;

use crate::chat::{ChatRequest, Delta, Dialect, FinishReason, Usage};
use crate::engine::core::Client;
use crate::engine::cursor::Cursor;
use crate::engine::idle::idle_read;
use crate::engine::pace::{is_late, wait_limit, Gate, Pace};
use crate::engine::route::{Entry, Keyed, ServedBy};
use crate::engine::spans::{AnswerFacts, CallEnd, CallSpans};
use crate::engine::store::BreakerStore;
use crate::engine::timeout::timeout;
use crate::error::{Attempt, AttemptBreaker, Error, ErrorKind, ProviderError};
use crate::event::Event;
use crate::format::structured::AnswerStream;
use crate::platform::{Body, Platform, UnixMillis};
use crate::policy::breaker::{Permit, PermitKind};
use crate::policy::latency::Measure;
use crate::policy::timeouts::size_of;
use crate::provider::{StreamDecoder, Upstream};
use crate::sse::{SseDecoder, SseEvent};
use continuation::{diverged, Mode};
use open::open;
use opentelemetry::trace::SpanId;

mod continuation;
mod events;
mod hedge;
mod item;
mod open;

pub(crate) use crate::engine::idle::{IdleTimers, OwnedSleep};
pub(crate) use item::{RawEvent, StreamItem};

/// The attempt in flight.
struct Conn {
    started: UnixMillis,
    /// The attempt's span in the request's trace.
    span: Option<SpanId>,
    first_content: Option<UnixMillis>,
    /// `None` once the body has ended (or for a custom provider's answer).
    body: Option<Body>,
    decoder: Box<dyn StreamDecoder>,
    pending: VecDeque<StreamItem>,
    /// The provider's events pass through to the caller: the stream opted
    /// in, the provider speaks the client's dialect and the request went as
    /// the client's own body, and this attempt is no continuation.
    raw: bool,
    /// Raw events read before the commit point, written at it (and dropped
    /// with an attempt that fails before it).
    held: Vec<RawEvent>,
    /// Hints the attempt's encoder left out.
    omitted: Vec<String>,
    mode: Mode,
    prefill: bool,
    finish: Option<FinishReason>,
    done: bool,
    usage: Option<Usage>,
    model: Option<String>,
    /// Malformed chunks skipped.
    malformed: usize,
    /// A structured answer's forced tool, given back as text.
    answer: AnswerStream,
    /// The idle deadline's timer, with [`ChatStream::idle_timers`]: armed
    /// once and re-armed only when it fires with data seen since, so a fast
    /// stream sets one timer, however many chunks it brings.
    idle: Option<OwnedSleep>,
    /// The pace judged before the commit point, while it is being judged.
    pace: Option<Pace>,
}

/// The entry being tried: its breaker permit and its attempts so far.
struct Held {
    /// `None` once the entry's verdict is recorded (or before admission).
    permit: Option<Permit>,
    kind: PermitKind,
    /// Attempts at this entry.
    number: u32,
    /// The model refused a prefill: continue here by restarting.
    prefill_refused: bool,
}

impl Held {
    /// No entry admitted yet.
    fn before_admission() -> Self {
        Held {
            permit: None,
            kind: PermitKind::Normal,
            number: 0,
            prefill_refused: false,
        }
    }

    fn new(permit: Permit) -> Self {
        Held {
            kind: permit.kind,
            permit: Some(permit),
            number: 0,
            prefill_refused: false,
        }
    }
}

/// What the caller has been given.
#[derive(Default)]
struct Sent {
    /// Items ready for the caller.
    out: VecDeque<StreamItem>,
    /// The text delivered so far.
    text: String,
    /// A tool call was delivered (it cannot be continued from its middle).
    tool_calls: bool,
    /// Content has reached the caller: the commit point.
    committed: bool,
    /// The entry answering, from the commit point on.
    served_by: Option<ServedBy>,
    /// The first failure after the commit point, named by the error that
    /// ends an incomplete answer.
    interruption: Option<ProviderError>,
}

/// A streamed answer. Pull items with [`ChatStream::next`]: deltas (the
/// first a [`Delta::Start`] naming the answering model, the last a
/// `Finish`, a `Usage` where the provider reported one, and `Done`), then
/// `None`; or one `Err`, then `None`.
///
/// An `Err` before any content ([`ChatStream::committed`] is false) is an
/// ordinary failure a gateway can answer with an HTTP status; an `Err`
/// after it means the answer is incomplete and must reach the client as an
/// error event. Dropping the stream aborts the upstream request and gives
/// back its breaker permit.
///
/// `C` is how the stream holds its client: `&Client` from
/// [`Client::stream`], or a shared handle such as `Rc<Client>` from
/// [`ChatStream::open`] when the stream must outlive a borrow (the npm
/// package's async iterator).
pub struct ChatStream<C, P, S>
where
    C: Deref<Target = Client<P, S>> + Clone,
    P: Platform,
    S: BreakerStore,
{
    client: C,
    /// The request as asked (with `stream` set).
    req: ChatRequest,
    /// Where the request is in its route, and its attempts.
    walk: Cursor<'static>,
    /// The entry being tried.
    held: Held,
    /// The attempt in flight.
    conn: Option<Conn>,
    /// What the caller has been given.
    sent: Sent,
    /// The answering attempt's usage, once complete.
    usage: Option<Usage>,
    /// Malformed chunks skipped by finished attempts.
    malformed: usize,
    /// The stream has ended (complete, or after its error).
    done: bool,
    /// The client's dialect, when the caller takes provider events raw.
    pass: Option<Dialect>,
    /// Timers that outlive a read, for the idle deadline; without them
    /// each wait for a chunk has a timer of its own.
    timers: Option<IdleTimers>,
    /// The route's hedging, until the race it runs before the commit point.
    hedge: Option<(String, crate::engine::hedge::HedgePolicy)>,
    /// Its spans, until its end, when its client takes them.
    pub(crate) spans: Option<CallSpans>,
    /// Where its route's shedding counts its end, until it ends.
    pub(crate) shed_slot: Option<usize>,
    _types: PhantomData<fn() -> (P, S)>,
}

/// What the attempt in flight came to.
enum Read {
    /// Deltas are ready, or the attempt goes on.
    More,
    /// The answer is complete.
    Complete,
    /// The attempt failed.
    Failed(ProviderError),
}

impl<C, P, S> ChatStream<C, P, S>
where
    C: Deref<Target = Client<P, S>> + Clone,
    P: Platform,
    S: BreakerStore,
{
    /// A stream of `req` over `walk`, nothing sent yet.
    pub(crate) fn fresh(
        client: C,
        req: ChatRequest,
        walk: Cursor<'static>,
        pass: Option<Dialect>,
        timers: Option<IdleTimers>,
        hedge: Option<(String, crate::engine::hedge::HedgePolicy)>,
    ) -> Self {
        ChatStream {
            client,
            req,
            walk,
            held: Held::before_admission(),
            conn: None,
            sent: Sent::default(),
            usage: None,
            malformed: 0,
            done: false,
            pass,
            timers,
            hedge,
            spans: None,
            shed_slot: None,
            _types: PhantomData,
        }
    }
}

impl<C, P, S> ChatStream<C, P, S>
where
    C: Deref<Target = Client<P, S>> + Clone,
    P: Platform,
    S: BreakerStore,
{
    /// The next delta; `None` once the answer is complete, or after the
    /// error that ended it.
    pub async fn next(&mut self) -> Option<Result<Delta, Error>> {
        loop {
            match self.next_item().await? {
                Ok(StreamItem::Delta { delta, .. }) => return Some(Ok(delta)),
                Ok(StreamItem::Raw(_)) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Has the provider's events passed through, as [`StreamItem::Raw`],
    /// when the answering provider speaks `dialect` and was sent the
    /// client's own body: each raw event comes before the deltas read from
    /// it. From a continuation on there are deltas only.
    pub(crate) fn pass_through(&mut self, dialect: Dialect) {
        self.pass = Some(dialect);
    }

    /// Has the idle deadline kept by one timer from `timers` per attempt
    /// (re-armed only when it fires early), instead of a timer per read.
    pub(crate) fn idle_timers(&mut self, timers: IdleTimers) {
        self.timers = Some(timers);
    }

    /// The next item: a raw event (only after [`Self::pass_through`]) or a
    /// delta; as [`Self::next`] otherwise.
    pub(crate) async fn next_item(&mut self) -> Option<Result<StreamItem, Error>> {
        let item = match self.hedge.take() {
            Some(hedge) => hedge::race(self, hedge).await,
            None => self.advance().await,
        };
        if self.spans.is_some() {
            self.note_spans(item.as_ref());
        }
        if self.shed_slot.is_some() {
            let error = item.as_ref().and_then(|i| i.as_ref().err());
            if self.done || error.is_some() {
                self.client.end_class(self.shed_slot.take(), error);
            }
        }
        item
    }

    /// Notes the commit point in the stream's spans, and hands them over
    /// at its end (its last item out, or its error).
    fn note_spans(&mut self, item: Option<&Result<StreamItem, Error>>) {
        let Some(spans) = self.spans.as_mut() else {
            return;
        };
        if spans.committed.is_none() && self.sent.committed {
            let at = self.client.platform().now();
            spans.committed = Some((at, self.walk.run.attempts.len()));
        }
        let error = item.and_then(|i| i.as_ref().err());
        if !(self.done && self.sent.out.is_empty()) && error.is_none() {
            return;
        }
        self.hand_over_spans(error);
    }

    /// Hands the stream's spans over, if it still holds them: at its end
    /// (with its `error`, if it ended in one), or when dropped before it.
    fn hand_over_spans(&mut self, error: Option<&Error>) {
        let Some(spans) = self.spans.take() else {
            return;
        };
        let answer = AnswerFacts {
            model: self.sent.served_by.as_ref().map(|s| s.model.clone()),
            ..AnswerFacts::default()
        };
        let end = CallEnd {
            attempts: error.map_or(&self.walk.run.attempts, Error::attempts),
            answer,
            error,
        };
        self.client.end_spans(spans, end);
    }

    async fn advance(&mut self) -> Option<Result<StreamItem, Error>> {
        loop {
            if let Some(item) = self.sent.out.pop_front() {
                return Some(Ok(item));
            }
            if self.done {
                return None;
            }
            let step = match self.conn.is_some() {
                false => self.connect().await,
                true => match self.read().await {
                    Read::More => Ok(()),
                    Read::Complete => {
                        self.complete();
                        Ok(())
                    }
                    Read::Failed(error) => self.failed(error).await,
                },
            };
            if let Err(e) = step {
                self.done = true;
                return Some(Err(e));
            }
        }
    }

    /// The next item when one is ready without waiting: what the last read
    /// brought and [`Self::next_item`] has not handed out yet.
    pub(crate) fn ready_item(&mut self) -> Option<StreamItem> {
        self.sent.out.pop_front()
    }

    /// The client the stream runs on.
    pub fn client(&self) -> &Client<P, S> {
        &self.client
    }

    /// Whether content has reached the caller (the commit point).
    pub fn committed(&self) -> bool {
        self.sent.committed
    }

    /// The entry answering, from the commit point on.
    pub fn served_by(&self) -> Option<&ServedBy> {
        self.sent.served_by.as_ref()
    }

    /// The text delivered so far.
    pub fn text(&self) -> &str {
        &self.sent.text
    }

    /// Every attempt so far, in order.
    pub fn attempts(&self) -> &[Attempt] {
        &self.walk.run.attempts
    }

    /// Malformed chunks skipped so far (each also reported to the observer).
    pub fn malformed_chunks(&self) -> usize {
        self.malformed + self.conn.as_ref().map_or(0, |c| c.malformed)
    }

    /// The answering attempt's token counts, once complete, when the
    /// provider reported them.
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Whether an attempt is open (made a call, not yet recorded).
    pub fn in_flight(&self) -> bool {
        self.conn.is_some()
    }

    /// The hints the open attempt's encoder left out.
    pub fn omitted(&self) -> &[String] {
        self.conn.as_ref().map_or(&[], |c| &c.omitted)
    }

    /// Opens an attempt at the current entry, or the next one that admits
    /// a call. `Err` ends the stream.
    async fn connect(&mut self) -> Result<(), Error> {
        let client = self.client.clone();
        let client = &client.core;
        loop {
            if self.held.permit.is_none() {
                let Some(permit) = self.walk.admit(client).await else {
                    return Err(self.exhausted());
                };
                self.held = Held::new(permit);
            }
            let now = client.platform.now();
            let (entry, key) = (self.walk.entry().clone(), Rc::clone(self.walk.key()));
            let keyed = Keyed::new(&entry, &key);
            if now >= self.walk.run.deadline_at {
                self.release_permit(); // no verdict
                self.walk.run.skip(
                    &entry,
                    now,
                    ProviderError::new(ErrorKind::DeadlineExceeded, "no time left for this entry"),
                );
                return Err(self.exhausted());
            }
            if self.sent.committed && self.sent.tool_calls {
                return Err(self.interrupted()); // a tool call cannot be continued from its middle
            }
            let Some(upstream) = client.upstreams.get(&entry.provider) else {
                let e = ProviderError::new(
                    ErrorKind::Unsupported,
                    format!("no provider \"{}\" is configured", entry.provider),
                );
                self.next_entry(keyed, &e)?;
                continue;
            };
            self.held.number += 1;
            let prefill = self.sent.committed
                && upstream.capabilities(&entry.model).prefill
                && !self.held.prefill_refused;
            let req = self.attempt_request(prefill);
            let mode = match (self.sent.committed, prefill) {
                (true, false) => Mode::Match {
                    skip: self.sent.text.clone(),
                    seen: String::new(),
                },
                _ => Mode::Forward,
            };
            let dialect = match upstream {
                Upstream::Http(p) => p.dialect_of(&req, &entry.model),
                Upstream::Custom(_) => None,
            };
            let native = req.sends_native(dialect);
            // Its events pass through when it was sent the client's own
            // body in the dialect the gateway passes through.
            let raw = native && !self.sent.committed && self.pass.is_some() && self.pass == dialect;
            // A provider sent the client's own body was given no answer tool.
            let answer = if native {
                AnswerStream::default()
            } else {
                AnswerStream::new(&req)
            };
            let limit = self.first_token_limit(&entry, now);
            let at = client.attempt_trace(req.trace.as_ref());
            let span = at.map(|a| a.span);
            self.walk.run.in_flight = Some((self.held.number, now, span)); // until recorded, for a hedge
            match open(client, upstream, &req, keyed, limit, at).await {
                Ok((body, pending, omitted)) => {
                    self.conn = Some(Conn {
                        started: now,
                        span,
                        first_content: None,
                        body,
                        decoder: match upstream {
                            Upstream::Http(p) => p.stream_decoder(),
                            Upstream::Custom(_) => Box::new(SseDecoder::default()),
                        },
                        pending,
                        raw,
                        held: Vec::new(),
                        omitted,
                        mode,
                        prefill,
                        finish: None,
                        done: false,
                        usage: None,
                        model: None,
                        malformed: 0,
                        answer,
                        idle: None,
                        pace: entry
                            .speed
                            .min_rate
                            .filter(|_| !self.sent.committed)
                            .map(Pace::new),
                    });
                    return Ok(());
                }
                Err((error, reached)) => {
                    self.walk.run.in_flight = None;
                    let error = self.walk.run.blame(client.platform.now(), error);
                    let record = client.record_attempt(
                        &mut self.walk.run,
                        keyed,
                        self.held.number,
                        now,
                        reached,
                        Err(&error),
                    );
                    record.span = span;
                    record.breaker = Some(AttemptBreaker::admitted(self.held.kind.state().code()));
                    self.after_failure(keyed, error, prefill).await?;
                }
            }
        }
    }

    fn first_token_limit(&self, entry: &Entry, now: UnixMillis) -> Duration {
        let policy = &self.client.core.policy;
        entry
            .first_token_timeout
            .unwrap_or(policy.first_token_timeout)
            .min(Duration::from_millis(
                self.walk.run.deadline_at.saturating_sub(now),
            ))
    }

    /// Reads the attempt in flight until it has something for the caller,
    /// completes or fails.
    async fn read(&mut self) -> Read {
        let Some(mut conn) = self.conn.take() else {
            return Read::More;
        };
        let result = self.read_conn(&mut conn).await;
        self.conn = Some(conn);
        result
    }

    async fn read_conn(&mut self, conn: &mut Conn) -> Read {
        let client = self.client.clone();
        let client = &client.core;
        loop {
            while let Some(item) = conn.pending.pop_front() {
                let delta = match item {
                    StreamItem::Raw(ev) => {
                        if self.sent.committed {
                            self.sent.out.push_back(StreamItem::Raw(ev));
                        } else {
                            conn.held.push(ev);
                        }
                        continue;
                    }
                    StreamItem::Delta { delta, .. } => delta,
                };
                match self.take(conn, delta) {
                    Read::More => {}
                    other => return other,
                }
            }
            if !self.sent.out.is_empty() {
                return Read::More;
            }
            let Some(body) = conn.body.as_mut() else {
                return match &conn.finish {
                    Some(_) => Read::Complete,
                    None => Read::Failed(unfinished()),
                };
            };
            let now = client.platform.now();
            let left = Duration::from_millis(self.walk.run.deadline_at.saturating_sub(now));
            let (limit, waiting_for_first) = match conn.first_content {
                None => {
                    // The first-token deadline runs from the attempt's start.
                    let ttft = self.first_token_limit(self.walk.entry(), conn.started);
                    let spent = Duration::from_millis(now.saturating_sub(conn.started));
                    (ttft.saturating_sub(spent), true)
                }
                Some(_) => (
                    wait_limit(conn.pace.as_ref(), client.policy.idle_timeout, now),
                    false,
                ),
            };
            // The pace's due time is fixed: the idle timer, kept across
            // reads, would not be re-armed for it.
            let paced = conn.pace.as_ref().and_then(Pace::due).is_some();
            let read = match (&self.timers, waiting_for_first || paced) {
                (Some(timers), false) => {
                    let due = now
                        .saturating_add(crate::platform::millis(limit))
                        .min(self.walk.run.deadline_at);
                    idle_read(client, timers, body, &mut conn.idle, due).await
                }
                _ => timeout(client.platform.sleep(limit.min(left)), body.chunk()).await,
            };
            match read {
                Err(_) if conn.finish.is_some() => return Read::Complete,
                Err(_) if is_late(conn.pace.as_ref(), client.platform.now()) => {
                    return Read::Failed(conn.pace.as_ref().map_or_else(
                        || ProviderError::new(ErrorKind::Timeout, "too slow"),
                        Pace::too_slow,
                    ))
                }
                Err(_) if waiting_for_first => {
                    return Read::Failed(ProviderError::new(
                        ErrorKind::Timeout,
                        format!(
                            "no first token within {} ms",
                            crate::platform::millis(limit.min(left))
                        ),
                    ))
                }
                Err(_) => {
                    return Read::Failed(ProviderError::new(
                        ErrorKind::Stalled,
                        format!(
                            "the stream stalled: no data for {} ms",
                            crate::platform::millis(limit.min(left))
                        ),
                    ))
                }
                Ok(Some(Err(e))) => return Read::Failed(e.into()),
                Ok(Some(Ok(bytes))) => {
                    let mut events = Vec::new();
                    // Events before a failure in the same chunk still count.
                    let mut raw = Vec::new();
                    let fed = match conn.raw {
                        true => conn.decoder.feed_raw(&bytes, &mut events, &mut raw),
                        false => conn.decoder.feed(&bytes, &mut events),
                    };
                    if let Err(e) = self.decode(conn, events, raw) {
                        return Read::Failed(e);
                    }
                    if let Err(e) = fed {
                        return Read::Failed(e);
                    }
                }
                Ok(None) => {
                    conn.body = None; // ended: drop it now, pending deltas decide
                    let mut last = Vec::new();
                    let finished = conn.decoder.finish(&mut last);
                    if let Err(e) = self.decode(conn, last, Vec::new()) {
                        return Read::Failed(e);
                    }
                    if let Err(e) = finished {
                        return Read::Failed(e);
                    }
                }
            }
        }
    }

    /// The attempt in flight completed the answer.
    fn complete(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        self.malformed += conn.malformed;
        let client = self.client.clone();
        let client = &client.core;
        let (entry, key) = (self.walk.entry().clone(), Rc::clone(self.walk.key()));
        let entry = Keyed::new(&entry, &key);
        let record = client.record_attempt(
            &mut self.walk.run,
            entry,
            self.held.number,
            conn.started,
            true,
            Ok(()),
        );
        record.usage = conn.usage;
        record.omitted = std::mem::take(&mut conn.omitted);
        record.span = conn.span;
        record.breaker = Some(AttemptBreaker::admitted(self.held.kind.state().code()));
        let now = client.platform.now();
        if let Some(first) = conn.first_content {
            let ttft = first.saturating_sub(conn.started);
            let streaming_ms = now.saturating_sub(first);
            client.record_latency(entry, Measure::Ttft, ttft);
            client.record_stream(
                entry,
                ttft,
                conn.usage.map_or(0, |u| u.output_tokens),
                streaming_ms,
            );
        }
        if let Some(permit) = self.held.permit.take() {
            let moved = client.settle(entry, permit, size_of(&self.req), Ok(()));
            self.walk.run.breaker_moved(&entry, moved);
        }
        if let Some(pace) = conn.pace.take() {
            self.hand_over(&mut conn, pace.release());
        }
        self.commit(&mut conn);
        // A complete attempt gave its finish reason (`Read::Complete`);
        // none is ever made up.
        if let Some(reason) = conn.finish.clone() {
            self.deliver(&conn, Delta::Finish { reason });
        }
        // Usage counts only the attempt that answered, and is reported only
        // where the provider reported it: never a made-up zero.
        if let Some(usage) = conn.usage {
            self.deliver(&conn, Delta::Usage { usage });
        }
        self.deliver(&conn, Delta::Done);
        self.usage = conn.usage;
        self.done = true;
    }
}

impl<C, P, S> ChatStream<C, P, S>
where
    C: Deref<Target = Client<P, S>> + Clone,
    P: Platform,
    S: BreakerStore,
{
    /// Gives back the permit of an entry left without a verdict.
    fn release_permit(&mut self) {
        if let Some(permit) = self.held.permit.take() {
            self.client.core.store.release(self.walk.key(), permit);
        }
    }
}

impl<C, P, S> Drop for ChatStream<C, P, S>
where
    C: Deref<Target = Client<P, S>> + Clone,
    P: Platform,
    S: BreakerStore,
{
    /// A stream dropped mid-attempt (the caller went away) aborts its
    /// request by dropping the body, and gives its permit back; its spans
    /// end, with the attempts recorded by then.
    fn drop(&mut self) {
        self.release_permit();
        self.hand_over_spans(None);
    }
}

/// An attempt whose stream ended, by its end event or its body's end,
/// with no finish reason: cut, to be continued or to end in an error.
fn unfinished() -> ProviderError {
    ProviderError::new(
        ErrorKind::Transport,
        "the stream ended before the answer was complete: no finish reason",
    )
}
