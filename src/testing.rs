//! A deterministic platform for tests, this crate's and its users'.
//!
//! [`FakePlatform`] has a virtual clock that only moves when every task is
//! waiting: [`block_on`] then jumps it to the next timer. Random numbers are
//! scripted, HTTP replies are scripted per URL prefix (status, headers, body,
//! delays, hangs, resets, bodies cut after k chunks), requests' time limits
//! run on the virtual clock, and every request, sleep and abort is recorded.
//! [`ScriptedProvider`] is a queue of outcomes behind the [`CustomProvider`]
//! trait.
//!
//! ```
//! use resilient_llm::testing::{block_on, reply, FakePlatform};
//! use resilient_llm::{Platform, HttpRequest};
//! use std::time::Duration;
//!
//! let p = FakePlatform::new();
//! p.script("https://api.example", [reply(503).delay(Duration::from_millis(40)), reply(200).body("ok")]);
//! let first = block_on(&p, p.fetch(HttpRequest::post_json("https://api.example/v1", vec![]))).unwrap();
//! assert_eq!((first.status, p.now()), (503, 40));
//! ```

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures_core::Stream;

use crate::chat::{ChatRequest, ChatResponse, FinishReason, Usage};
use crate::engine::timeout::{timeout, Elapsed};
use crate::error::{ErrorKind, ProviderError};
use crate::platform::{
    millis, Body, Headers, HttpRequest, HttpResponse, Platform, TransportError, TransportErrorKind,
    UnixMillis,
};
use crate::provider::{CustomProvider, LocalFuture};

/// A platform with a virtual clock, scripted randomness and scripted HTTP.
/// Clones share state.
#[derive(Clone, Default)]
pub struct FakePlatform(Rc<RefCell<Inner>>);

#[derive(Default)]
struct Inner {
    now: UnixMillis,
    next_timer: u64,
    timers: BTreeMap<(UnixMillis, u64), Option<Waker>>,
    randoms: VecDeque<f64>,
    last_random: Option<f64>,
    scripts: Vec<(String, VecDeque<Reply>)>,
    requests: Vec<HttpRequest>,
    sleeps: Vec<Duration>,
    aborted: usize,
}

impl FakePlatform {
    /// Time 0, random 0.5, nothing scripted.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the clock at `now`.
    pub fn at(self, now: UnixMillis) -> Self {
        self.0.borrow_mut().now = now;
        self
    }

    /// Scripts the random numbers; the last one repeats.
    pub fn random(self, values: impl IntoIterator<Item = f64>) -> Self {
        self.0.borrow_mut().randoms.extend(values);
        self
    }

    /// Queues replies for requests whose URL starts with `prefix`. Requests
    /// are matched to the longest scripted prefix.
    pub fn script(&self, prefix: &str, replies: impl IntoIterator<Item = Reply>) {
        let mut inner = self.0.borrow_mut();
        match inner.scripts.iter_mut().find(|(p, _)| p == prefix) {
            Some((_, q)) => q.extend(replies),
            None => inner
                .scripts
                .push((prefix.to_string(), replies.into_iter().collect())),
        }
    }

    /// Every request sent, in order.
    pub fn requests(&self) -> Vec<HttpRequest> {
        self.0.borrow().requests.clone()
    }

    /// How many requests went to URLs starting with `prefix`.
    pub fn requests_to(&self, prefix: &str) -> usize {
        self.0
            .borrow()
            .requests
            .iter()
            .filter(|r| r.url.starts_with(prefix))
            .count()
    }

    /// Every timer that ran to its end, in order: sleeps, and request time
    /// limits ([`HttpRequest::timeout`]) that passed. Timers that lost a
    /// race, like an attempt's time limit beaten by the response, are not
    /// listed.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.0.borrow().sleeps.clone()
    }

    /// Requests and bodies dropped before they finished.
    pub fn aborted(&self) -> usize {
        self.0.borrow().aborted
    }

    /// Moves the clock forward by `d`, firing due timers.
    pub fn advance(&self, d: Duration) {
        let to = self.now().saturating_add(millis(d));
        self.advance_to(to);
    }

    fn advance_to(&self, to: UnixMillis) {
        let wakers: Vec<Waker> = {
            let mut inner = self.0.borrow_mut();
            inner.now = inner.now.max(to);
            let now = inner.now;
            let due: Vec<(UnixMillis, u64)> = inner
                .timers
                .range(..(now + 1, 0))
                .map(|(k, _)| *k)
                .collect();
            due.into_iter()
                .filter_map(|k| inner.timers.get_mut(&k).and_then(Option::take))
                .collect()
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    fn next_deadline(&self) -> Option<UnixMillis> {
        self.0.borrow().timers.keys().next().map(|(at, _)| *at)
    }

    fn delay(&self, d: Duration) -> Delay {
        let at = self.now().saturating_add(millis(d));
        Delay {
            platform: self.clone(),
            at,
            key: None,
        }
    }

    fn take_reply(&self, url: &str) -> Option<Reply> {
        let mut inner = self.0.borrow_mut();
        let (_, queue) = inner
            .scripts
            .iter_mut()
            .filter(|(p, _)| url.starts_with(p.as_str()))
            .max_by_key(|(p, _)| p.len())?;
        queue.pop_front()
    }
}

impl Platform for FakePlatform {
    fn now(&self) -> UnixMillis {
        self.0.borrow().now
    }

    fn random(&self) -> f64 {
        let mut inner = self.0.borrow_mut();
        let v = inner
            .randoms
            .pop_front()
            .or(inner.last_random)
            .unwrap_or(0.5);
        inner.last_random = Some(v);
        v
    }

    fn sleep(&self, dur: Duration) -> impl Future<Output = ()> {
        let delay = self.delay(dur);
        let platform = self.clone();
        async move {
            delay.await;
            platform.0.borrow_mut().sleeps.push(dur);
        }
    }

    fn fetch(
        &self,
        req: HttpRequest,
    ) -> impl Future<Output = Result<HttpResponse, TransportError>> {
        let platform = self.clone();
        async move {
            // Set at the call, like a host's timer: it covers the whole
            // exchange, status line and body.
            let mut limit = req.timeout.map(|d| TimeLimit {
                timer: platform.delay(d),
                after: d,
            });
            let reply = platform.take_reply(&req.url);
            platform.0.borrow_mut().requests.push(req);
            let Some(reply) = reply else {
                return Err(TransportError::new(
                    TransportErrorKind::Refused,
                    "no scripted reply for this URL",
                ));
            };
            let mut guard = AbortGuard {
                platform: platform.clone(),
                armed: true,
            };
            let answer = async {
                platform.delay(reply.delay).await;
                match &reply.kind {
                    ReplyKind::Respond => Ok(()),
                    ReplyKind::Fail(kind) => {
                        Err(TransportError::new(*kind, "scripted transport failure"))
                    }
                    ReplyKind::Hang => std::future::pending().await,
                }
            };
            let answered = match limit.as_mut() {
                Some(limit) => limit.race(&platform, answer).await?,
                None => answer.await,
            };
            // Past the time limit's `?`: a request the limit ended stays
            // counted as aborted by the still-armed guard.
            guard.armed = false;
            answered?;
            Ok(HttpResponse {
                status: reply.status,
                headers: reply.headers,
                body: Body::stream(FakeBody {
                    platform: platform.clone(),
                    chunks: reply.chunks.into(),
                    chunk_delay: reply.chunk_delay,
                    end: reply.end,
                    wait: None,
                    limit,
                    timed_out: false,
                    done: false,
                }),
            })
        }
    }
}

/// A request's time limit on the virtual clock.
struct TimeLimit {
    timer: Delay,
    after: Duration,
}

impl TimeLimit {
    /// Whether the limit has passed; once it has, the timer counts among the
    /// [`FakePlatform::sleeps`] that ran to their end.
    fn poll_passed(&mut self, platform: &FakePlatform, cx: &mut Context<'_>) -> bool {
        if Pin::new(&mut self.timer).poll(cx).is_pending() {
            return false;
        }
        platform.0.borrow_mut().sleeps.push(self.after);
        true
    }

    /// `fut`'s output, or a [`TransportErrorKind::TimedOut`] error when the
    /// limit passes first (on a tie, `fut` wins).
    async fn race<T>(
        &mut self,
        platform: &FakePlatform,
        fut: impl Future<Output = T>,
    ) -> Result<T, TransportError> {
        match timeout(&mut self.timer, fut).await {
            Ok(v) => Ok(v),
            Err(Elapsed) => {
                platform.0.borrow_mut().sleeps.push(self.after);
                Err(self.error())
            }
        }
    }

    fn error(&self) -> TransportError {
        TransportError::new(
            TransportErrorKind::TimedOut,
            format!("no complete response within {} ms", millis(self.after)),
        )
    }
}

struct AbortGuard {
    platform: FakePlatform,
    armed: bool,
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if self.armed {
            self.platform.0.borrow_mut().aborted += 1;
        }
    }
}

/// A virtual-clock timer. Dropping it cancels it.
struct Delay {
    platform: FakePlatform,
    at: UnixMillis,
    key: Option<(UnixMillis, u64)>,
}

impl Future for Delay {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut inner = this.platform.0.borrow_mut();
        if inner.now >= this.at {
            if let Some(k) = this.key.take() {
                inner.timers.remove(&k);
            }
            return Poll::Ready(());
        }
        let key = match this.key {
            Some(k) => k,
            None => {
                inner.next_timer += 1;
                let k = (this.at, inner.next_timer);
                this.key = Some(k);
                k
            }
        };
        inner.timers.insert(key, Some(cx.waker().clone()));
        Poll::Pending
    }
}

impl Drop for Delay {
    fn drop(&mut self) {
        if let Some(k) = self.key.take() {
            if let Ok(mut inner) = self.platform.0.try_borrow_mut() {
                inner.timers.remove(&k);
            }
        }
    }
}

/// How a scripted body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyEnd {
    /// Cleanly, after the last chunk.
    Complete,
    /// With a connection reset after the chunks.
    Reset,
    /// By stalling forever after the chunks.
    Stall,
}

struct FakeBody {
    platform: FakePlatform,
    chunks: VecDeque<Vec<u8>>,
    chunk_delay: Duration,
    end: BodyEnd,
    wait: Option<Pin<Box<Delay>>>,
    limit: Option<TimeLimit>,
    timed_out: bool,
    done: bool,
}

impl Stream for FakeBody {
    type Item = Result<Vec<u8>, TransportError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done || this.timed_out {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = this.poll_chunk(cx) {
            return Poll::Ready(item);
        }
        let Some(limit) = this.limit.as_mut() else {
            return Poll::Pending;
        };
        if !limit.poll_passed(&this.platform, cx) {
            return Poll::Pending;
        }
        // Not `done`: the limit aborted the transfer, as a drop would.
        this.timed_out = true;
        Poll::Ready(Some(Err(limit.error())))
    }
}

impl FakeBody {
    /// The next scripted chunk or ending, once its delay is over.
    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Vec<u8>, TransportError>>> {
        if !self.chunk_delay.is_zero() && !self.chunks.is_empty() {
            let delay = self
                .wait
                .get_or_insert_with(|| Box::pin(self.platform.delay(self.chunk_delay)));
            if delay.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.wait = None;
        }
        if let Some(chunk) = self.chunks.pop_front() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        match self.end {
            BodyEnd::Complete => {
                self.done = true;
                Poll::Ready(None)
            }
            BodyEnd::Reset => {
                self.done = true;
                Poll::Ready(Some(Err(TransportError::new(
                    TransportErrorKind::Reset,
                    "scripted reset mid-body",
                ))))
            }
            BodyEnd::Stall => Poll::Pending,
        }
    }
}

impl Drop for FakeBody {
    fn drop(&mut self) {
        if !self.done {
            if let Ok(mut inner) = self.platform.0.try_borrow_mut() {
                inner.aborted += 1;
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ReplyKind {
    Respond,
    Fail(TransportErrorKind),
    Hang,
}

/// A scripted HTTP reply; build with [`reply`], [`hang`] or [`fail`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    kind: ReplyKind,
    status: u16,
    headers: Headers,
    chunks: Vec<Vec<u8>>,
    delay: Duration,
    chunk_delay: Duration,
    end: BodyEnd,
}

/// A response with `status` and an empty body.
pub fn reply(status: u16) -> Reply {
    Reply {
        kind: ReplyKind::Respond,
        status,
        headers: Headers::new(),
        chunks: Vec::new(),
        delay: Duration::ZERO,
        chunk_delay: Duration::ZERO,
        end: BodyEnd::Complete,
    }
}

/// A request that never gets an answer.
pub fn hang() -> Reply {
    Reply {
        kind: ReplyKind::Hang,
        ..reply(0)
    }
}

/// A transport failure (reset, refused, DNS, …).
pub fn fail(kind: TransportErrorKind) -> Reply {
    Reply {
        kind: ReplyKind::Fail(kind),
        ..reply(0)
    }
}

impl Reply {
    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.append(name, value);
        self
    }

    /// Sets the whole body as one chunk.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.chunks = vec![body.into()];
        self
    }

    /// Sets the body as chunks.
    pub fn chunks<C: Into<Vec<u8>>>(mut self, chunks: impl IntoIterator<Item = C>) -> Self {
        self.chunks = chunks.into_iter().map(Into::into).collect();
        self
    }

    /// Waits `d` before the status line (or the failure).
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }

    /// Waits `d` before each chunk.
    pub fn chunk_delay(mut self, d: Duration) -> Self {
        self.chunk_delay = d;
        self
    }

    /// Keeps only the first `k` chunks, then ends as `end` says.
    pub fn cut_after(mut self, k: usize, end: BodyEnd) -> Self {
        self.chunks.truncate(k);
        self.end = end;
        self
    }
}

/// Runs `fut` to completion on the virtual clock: whenever nothing can make
/// progress, the clock jumps to the next timer. Panics if the future waits
/// with no timer pending (a hang no timeout guards), or after a million
/// polls.
pub fn block_on<F: Future>(p: &FakePlatform, fut: F) -> F::Output {
    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    for _ in 0..1_000_000 {
        flag.0.store(false, Ordering::SeqCst);
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        if flag.0.load(Ordering::SeqCst) {
            continue;
        }
        match p.next_deadline() {
            Some(at) => p.advance_to(at),
            None => panic!(
                "deadlock: the future waits on nothing that can wake it (a hang with no timeout?)"
            ),
        }
    }
    panic!("block_on: a million polls without completing");
}

/// Waits for one virtual-clock timer; a helper for scripted providers.
pub async fn sleep(p: &FakePlatform, d: Duration) {
    p.delay(d).await
}

/// One scripted outcome of a [`ScriptedProvider`] call.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Answer with this text.
    Ok(String),
    /// Fail with this error.
    Fail(ProviderError),
    /// Never answer.
    Hang,
    /// Wait, then take the inner step.
    After(Duration, Box<Step>),
    /// Take `before` while the clock reads less than `at`, `after` from
    /// then on: an outage that ends at a moment rather than after a count.
    Until {
        /// When the switch happens.
        at: UnixMillis,
        /// The step before it.
        before: Box<Step>,
        /// The step from then on.
        after: Box<Step>,
    },
}

/// Answer with `text`.
pub fn ok(text: &str) -> Step {
    Step::Ok(text.to_string())
}

/// Fail with `kind` and `status`.
pub fn err(kind: ErrorKind, status: u16) -> Step {
    Step::Fail(ProviderError::new(kind, "scripted failure").with_status(status))
}

/// A provider that plays a script: each call takes the next step; the last
/// step repeats once the script runs out.
pub struct ScriptedProvider {
    platform: FakePlatform,
    name: String,
    steps: RefCell<VecDeque<Step>>,
    last: RefCell<Option<Step>>,
    calls: Rc<Cell<usize>>,
}

impl ScriptedProvider {
    /// A provider named `name` that plays `steps`.
    pub fn new(platform: &FakePlatform, name: &str, steps: impl IntoIterator<Item = Step>) -> Self {
        ScriptedProvider {
            platform: platform.clone(),
            name: name.to_string(),
            steps: RefCell::new(steps.into_iter().collect()),
            last: RefCell::new(None),
            calls: Rc::default(),
        }
    }

    /// A counter of calls made, readable after the provider moves into a
    /// client.
    pub fn calls(&self) -> Rc<Cell<usize>> {
        self.calls.clone()
    }

    fn next_step(&self) -> Step {
        let next = self.steps.borrow_mut().pop_front();
        match next {
            Some(s) => {
                *self.last.borrow_mut() = Some(s.clone());
                s
            }
            None => self
                .last
                .borrow()
                .clone()
                .unwrap_or_else(|| err(ErrorKind::Server, 500)),
        }
    }
}

impl CustomProvider for ScriptedProvider {
    fn chat<'a>(
        &'a self,
        _req: &'a ChatRequest,
        model: &'a str,
    ) -> LocalFuture<'a, Result<ChatResponse, ProviderError>> {
        self.calls.set(self.calls.get() + 1);
        let mut step = self.next_step();
        Box::pin(async move {
            loop {
                match step {
                    Step::Ok(text) => {
                        return Ok(ChatResponse {
                            text,
                            tool_calls: Vec::new(),
                            thinking: Vec::new(),
                            model: model.to_string(),
                            provider: self.name.clone(),
                            finish_reason: Some(FinishReason::Stop),
                            usage: Some(Usage {
                                input_tokens: 1,
                                output_tokens: 1,
                                ..Usage::default()
                            }),
                            raw: None,
                            dialect: None,
                        })
                    }
                    Step::Fail(e) => return Err(e),
                    Step::Hang => return poll_fn(|_| Poll::Pending).await,
                    Step::After(d, inner) => {
                        sleep(&self.platform, d).await;
                        step = *inner;
                    }
                    Step::Until { at, before, after } => {
                        step = if self.platform.now() < at {
                            *before
                        } else {
                            *after
                        };
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within(url: &str, limit: u64) -> HttpRequest {
        let mut req = HttpRequest::post_json(url, Vec::new());
        req.timeout = Some(Duration::from_millis(limit));
        req
    }

    #[test]
    fn a_time_limit_before_the_status_line_fails_the_fetch_and_aborts_it() {
        let p = FakePlatform::new();
        p.script("https://a.test", [hang()]);
        let err = block_on(&p, p.fetch(within("https://a.test/", 300))).unwrap_err();
        assert_eq!(err.kind, TransportErrorKind::TimedOut);
        assert_eq!(err.message, "no complete response within 300 ms");
        assert_eq!(p.now(), 300);
        assert_eq!(p.aborted(), 1);
        assert_eq!(p.sleeps(), [Duration::from_millis(300)]);
    }

    #[test]
    fn a_time_limit_covers_the_body_from_the_call() {
        let p = FakePlatform::new();
        p.script(
            "https://a.test",
            [reply(200)
                .delay(Duration::from_millis(100))
                .chunks(["one", "two"])
                .cut_after(1, BodyEnd::Stall)],
        );
        let (status, first, rest) = block_on(&p, async {
            let mut resp = p.fetch(within("https://a.test/", 300)).await.unwrap();
            let first = resp.body.chunk().await;
            (resp.status, first, resp.body.chunk().await)
        });
        assert_eq!(status, 200);
        assert_eq!(first, Some(Ok(b"one".to_vec())));
        assert_eq!(
            rest.map(|r| r.map_err(|e| e.kind)),
            Some(Err(TransportErrorKind::TimedOut))
        );
        assert_eq!(
            p.now(),
            300,
            "300 ms from the call, not from the status line"
        );
        assert_eq!(p.aborted(), 1);
    }

    #[test]
    fn an_answer_in_time_cancels_the_time_limit() {
        let p = FakePlatform::new();
        p.script(
            "https://a.test",
            [reply(200)
                .chunks(["a", "b"])
                .chunk_delay(Duration::from_millis(100))],
        );
        let body = block_on(&p, async {
            let resp = p.fetch(within("https://a.test/", 200)).await.unwrap();
            resp.body.read_to_end(1024).await
        });
        assert_eq!(
            body.unwrap(),
            b"ab",
            "the last chunk, due with the limit, wins"
        );
        assert_eq!(p.now(), 200);
        assert!(p.sleeps().is_empty());
        assert_eq!(p.next_deadline(), None, "no timer left behind");
        assert_eq!(p.aborted(), 0);
    }
}
