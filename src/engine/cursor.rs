//! One walk over a route, driven alike by whole and streamed requests.
//!
//! The cursor knows where a request is in its chain: it admits the next
//! entry whose breaker lets a call through, skipping open ones without a
//! call (each skip recorded as an attempt that was not made); when every
//! entry was skipped, it forces a call to the one whose cooldown ends first
//! rather than answer with no call at all; when every entry it called
//! failed, it forces one call to an entry skipped with no cooldown left
//! (its half-open probes were all out) rather than answer 503 while that
//! provider may be serving; it starts no entry once the
//! end-to-end deadline has passed; and it ends the walk after a forced call.
//! Before it calls an entry that spend caps count, it holds what the request
//! may cost on them ([`CostBook::hold`]): an entry refused is passed over,
//! and a walk that called nothing for it ends with the cap's refusal. An
//! entry whose configured context window cannot hold the request
//! ([`Need::overflow`]) is skipped without a call.
//! What happens inside an entry (attempts, retries, the breaker's verdict)
//! is the caller's: [`crate::engine::retry`] for whole answers, [`crate::engine::stream`]
//! for streams.

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use crate::chat::{ChatRequest, ChatResponse, Usage};
use crate::engine::core::{Core, Moved};
use crate::engine::cost::{CostBook, Hold, HOLD_MARGIN};
use crate::engine::order::{has_mate_after, order};
use crate::engine::route::{CallOptions, Entry, Keyed, Reply, ServedBy};
use crate::engine::store::BreakerStore;
use crate::error::{Attempt, AttemptOutcome, Error, ErrorKind, Exhausted, ProviderError};
use crate::platform::{millis, Platform, UnixMillis};
use crate::policy::breaker::{Permit, State};
use crate::policy::cheapest::expected_usage;
use crate::policy::window::Need;
use opentelemetry::trace::SpanId;

/// The request-wide record of one call: its deadline and every attempt.
pub(crate) struct Run {
    pub(crate) deadline_at: UnixMillis,
    /// Whether `deadline_at` is the caller's, tighter than the client's.
    pub(crate) callers_deadline: bool,
    pub(crate) attempts: Vec<Attempt>,
    /// Where the attempts' cost is booked, once, when they leave the run.
    booking: Option<Booking>,
    /// What the request holds on spend caps: settled by the booking,
    /// released when the last run sharing them (a hedge's too) is dropped.
    /// None when the client has no caps (nothing to share, no allocation).
    holds: Option<Rc<RefCell<Vec<Hold>>>>,
    /// Whether the entry admitted last has a tier mate after it: its 429
    /// then moves on at once rather than retry it.
    pub(crate) mate_after: bool,
    /// Whether an entry after the one admitted last could serve now (its
    /// breaker not open, its window not too small): a 429 there is then
    /// waited for no longer than [`crate::RetryPolicy::rate_limit_wait`].
    pub(crate) later_ready: bool,
    /// The attempt whose request is out, with its number, start and span:
    /// what a hedge that drops it records as cancelled.
    pub(crate) in_flight: Option<(u32, UnixMillis, Option<SpanId>)>,
}

/// The cost book of a run's client.
struct Booking {
    book: Rc<CostBook>,
}

impl Run {
    /// Books the attempts' cost, once, settling the holds with it.
    fn book(&mut self) {
        if let Some(b) = self.booking.take() {
            let holds = self
                .holds
                .as_ref()
                .map(|h| std::mem::take(&mut *h.borrow_mut()))
                .unwrap_or_default();
            b.book.book(&self.attempts, holds);
        }
    }

    /// Keeps the holds of the entry just admitted (none without caps).
    fn keep(&self, holds: Vec<Hold>) {
        if let Some(kept) = &self.holds {
            kept.borrow_mut().extend(holds);
        }
    }

    /// The attempts, taken out of the run and their cost booked.
    pub(crate) fn take_attempts(&mut self) -> Vec<Attempt> {
        self.book();
        std::mem::take(&mut self.attempts)
    }

    /// Moves where the attempts' cost is booked to `to`, when it has none:
    /// a hedged stream's record goes to the leg that outlives the others.
    pub(crate) fn hand_booking(&mut self, to: &mut Run) {
        if to.booking.is_none() {
            to.booking = self.booking.take();
        }
    }

    /// A record for one more entry asked at once (a hedge), under the same
    /// deadline.
    pub(crate) fn fork(&self) -> Run {
        Run {
            deadline_at: self.deadline_at,
            callers_deadline: self.callers_deadline,
            attempts: Vec::new(),
            // Its attempts join the parent's, which books them.
            booking: None,
            holds: self.holds.clone(),
            mate_after: false,
            later_ready: false,
            in_flight: None,
        }
    }

    /// An attempt that timed out because the caller's own deadline cut it
    /// short failed by the caller's choice, not the provider's fault: it
    /// becomes `DeadlineExceeded`, which no breaker counts and which ends
    /// the walk (no time is left for another entry).
    pub(crate) fn blame(&self, now: UnixMillis, error: ProviderError) -> ProviderError {
        let timed_out = matches!(error.kind, ErrorKind::Timeout | ErrorKind::Stalled);
        if !(self.callers_deadline && timed_out && now >= self.deadline_at) {
            return error;
        }
        ProviderError::new(
            ErrorKind::DeadlineExceeded,
            format!("the caller's deadline ended the attempt ({error})"),
        )
    }

    /// Records an entry that was not called.
    pub(crate) fn skip(&mut self, entry: &Entry, now: UnixMillis, error: ProviderError) {
        let outcome = AttemptOutcome::Failure { error };
        self.record(entry, 0, now, Duration::ZERO, false, outcome);
    }

    /// Records the attempt at `entry` (`number`, started at `started`) a
    /// hedge dropped at `now`: cancelled, its request sent (the provider
    /// may have begun).
    pub(crate) fn cancelled(
        &mut self,
        entry: &Entry,
        (number, started, span): (u32, UnixMillis, Option<SpanId>),
        now: UnixMillis,
    ) -> &mut Attempt {
        let duration = Duration::from_millis(now.saturating_sub(started));
        let record = self.record(
            entry,
            number,
            started,
            duration,
            true,
            AttemptOutcome::Cancelled,
        );
        record.span = span;
        record
    }

    /// Records attempt `number` at `entry`, no usage or omitted hints yet.
    pub(crate) fn record(
        &mut self,
        entry: &Entry,
        number: u32,
        started_at: UnixMillis,
        duration: Duration,
        reached: bool,
        outcome: AttemptOutcome,
    ) -> &mut Attempt {
        self.attempts.push(Attempt {
            provider: entry.provider.clone(),
            model: entry.model.clone(),
            number,
            started_at,
            duration,
            reached,
            outcome,
            usage: None,
            omitted: Vec::new(),
            span: None,
            breaker: None,
        });
        let last = self.attempts.len() - 1;
        &mut self.attempts[last]
    }

    /// Puts `moved`, the change `entry`'s verdict made to its breaker, on
    /// the entry's last attempt.
    pub(crate) fn breaker_moved(&mut self, entry: &Entry, moved: Option<Moved>) {
        let Some((from, to)) = moved else { return };
        let last = self
            .attempts
            .iter_mut()
            .rev()
            .find(|a| a.number > 0 && a.provider == entry.provider && a.model == entry.model);
        if let Some(breaker) = last.and_then(|a| a.breaker.as_mut()) {
            breaker.moved = Some((from.code(), to.code()));
        }
    }
}

/// Where a request is in its route.
pub(crate) struct Cursor<'c> {
    chain: Cow<'c, [Entry]>,
    /// The breaker key of each entry of the chain, resolved once.
    keys: Vec<Rc<str>>,
    /// The entry admitted last (or being looked at).
    index: usize,
    /// Entries skipped for an open breaker: index, the end of its
    /// cooldown, and whether its cooldown was already over (half-open with
    /// its probes all out, or closed with enough calls failing at once).
    skipped: Vec<(usize, UnixMillis, bool)>,
    /// Whether any entry was admitted (then a forced call is only for an
    /// entry whose cooldown is over).
    called: bool,
    /// Whether the walk made its forced call or ended (no forced call
    /// after either).
    forced: bool,
    /// The request's deadline and attempts.
    pub(crate) run: Run,
    /// Shared with the hedges of a stream ([`Reach`]).
    reach: Option<std::rc::Rc<Reach>>,
    /// What the request may use, held on a capped entry's caps before it
    /// is called (none: nothing is capped, or an endpoint call).
    estimate: Option<Usage>,
    /// The first cap that refused an entry: the walk's error if no entry
    /// was called.
    refused: Option<Error>,
    /// What the request needs of a context window, when an entry of the
    /// chain has one: an entry whose window cannot hold it is skipped.
    need: Option<Need>,
}

/// How far a hedged stream's walk may go, readable and settable while it
/// runs: the entry it admitted last, and the end a hedge set (the hedge
/// asks the entries from there on).
#[derive(Debug)]
pub(crate) struct Reach {
    pub(crate) at: std::cell::Cell<usize>,
    pub(crate) end: std::cell::Cell<usize>,
}

/// A run dropped before its end (a stream the client left, a cut stream)
/// still books what its attempts cost.
impl Drop for Run {
    fn drop(&mut self) {
        self.book();
    }
}

impl<'c> Cursor<'c> {
    /// The walk for `req` over `chain`, the route `route` resolves to: the
    /// chain ordered (tiers, latency) and planned (spend caps, strategy),
    /// its deadline set (the client's, or the caller's if tighter), the
    /// retry budget credited with one first attempt.
    pub(crate) fn start<P: Platform, S: BreakerStore>(
        core: &'c Core<P, S>,
        chain: Cow<'c, [Entry]>,
        route: Option<&str>,
        req: &ChatRequest,
        opts: &CallOptions,
    ) -> Result<Self, Error> {
        let chain = core.by_capacity(core.by_latency(order(core, chain)), req);
        if req.messages.is_empty() {
            return Err(Error::InvalidRequest(
                "messages: at least one message is required".into(),
            ));
        }
        let chain = core.cost.plan(route, chain, req, core.platform.now())?;
        let mut walk = Self::over(core, chain, opts);
        if walk.chain.iter().any(|e| window(core, e).is_some()) {
            walk.need = Some(Need::of(req));
        }
        if core.cost.has_caps() {
            walk.estimate = Some(expected_usage(req));
            walk.run.holds = Some(Rc::default());
        }
        Ok(walk)
    }

    /// The walk over `chain`, resolved (and planned) by the caller.
    pub(crate) fn over<P: Platform, S: BreakerStore>(
        core: &'c Core<P, S>,
        chain: Cow<'c, [Entry]>,
        opts: &CallOptions,
    ) -> Self {
        let policy = &core.policy;
        let start = core.platform.now();
        let booking = (!core.cost.is_empty()).then(|| Booking {
            book: Rc::clone(&core.cost),
        });
        let deadline = opts
            .deadline
            .map_or(policy.deadline, |d| d.min(policy.deadline));
        let callers_deadline = deadline < policy.deadline;
        core.budget.borrow_mut().deposit(start);
        let keys: Vec<Rc<str>> = chain.iter().map(|e| core.key_of(e)).collect();
        core.store.warm(keys.iter().map(|k| &**k), start);
        Cursor {
            chain,
            keys,
            index: 0,
            skipped: Vec::new(),
            called: false,
            forced: false,
            run: Run {
                deadline_at: start.saturating_add(millis(deadline)),
                callers_deadline,
                attempts: Vec::new(),
                booking,
                holds: None,
                mate_after: false,
                later_ready: false,
                in_flight: None,
            },
            reach: None,
            estimate: None,
            refused: None,
            need: None,
        }
    }

    /// The same walk, owning its route (for a stream that outlives the
    /// borrow of its client).
    pub(crate) fn into_owned(self) -> Cursor<'static> {
        Cursor {
            chain: Cow::Owned(self.chain.into_owned()),
            keys: self.keys,
            index: self.index,
            skipped: self.skipped,
            called: self.called,
            forced: self.forced,
            run: self.run,
            reach: self.reach,
            estimate: self.estimate,
            refused: self.refused,
            need: self.need,
        }
    }

    /// The walk's [`Reach`], shared from now on.
    pub(crate) fn reach(&mut self) -> std::rc::Rc<Reach> {
        let (at, end) = (self.index, self.chain.len());
        std::rc::Rc::clone(self.reach.get_or_insert_with(|| {
            std::rc::Rc::new(Reach {
                at: at.into(),
                end: end.into(),
            })
        }))
    }

    /// A hedge's walk: the same route from entry `from` on, under the same
    /// deadline, with a record of its own (which joins this one's).
    pub(crate) fn hedge(&self, from: usize) -> Cursor<'c> {
        Cursor {
            chain: self.chain.clone(),
            keys: self.keys.clone(),
            index: from,
            skipped: Vec::new(),
            called: false,
            forced: false,
            run: self.run.fork(),
            reach: None,
            estimate: self.estimate,
            refused: None,
            need: self.need,
        }
    }

    /// Entry `i` of the route, if it has one.
    pub(crate) fn entry_at(&self, i: usize) -> Option<&Entry> {
        self.chain.get(i)
    }

    /// The entry admitted last, unless the walk is past its end.
    pub(crate) fn current(&self) -> Option<&Entry> {
        self.chain.get(self.index)
    }

    /// Admits the next entry: the current one if its breaker lets a call
    /// through, else the first after it that does; when the entries are
    /// spent, by force, the skipped one whose cooldown ends first (see
    /// [`Cursor::last_resort`]). `None` when the walk is over: the entries are spent, or the
    /// deadline has passed (recorded as a skip of the entry it left no
    /// time for).
    pub(crate) async fn admit<P: Platform, S: BreakerStore>(
        &mut self,
        core: &Core<P, S>,
    ) -> Option<Permit> {
        loop {
            let now = core.platform.now();
            let end = self.reach.as_ref().map_or(usize::MAX, |r| r.end.get());
            let index = match self.chain.get(self.index) {
                Some(_) if self.index < end => self.index,
                _ => self.last_resort(now).filter(|i| *i < end)?,
            };
            if let Some(r) = &self.reach {
                r.at.set(index);
            }
            let entry = &self.chain[index];
            if now >= self.run.deadline_at {
                let error =
                    ProviderError::new(ErrorKind::DeadlineExceeded, "no time left for this entry");
                self.run.skip(entry, now, error);
                self.end();
                return None;
            }
            if let Some(why) = self.need.and_then(|n| n.overflow(window(core, entry)?)) {
                let error = ProviderError::new(ErrorKind::ContextLength, why);
                core.emit_failover(&self.chain, index, &error);
                self.run.skip(entry, now, error);
                if index != self.index {
                    self.end();
                    return None;
                }
                self.index += 1;
                continue;
            }
            let holds = match &self.estimate {
                Some(usage) => {
                    let left = self.run.deadline_at.saturating_sub(now);
                    let ttl = Duration::from_millis(left) + HOLD_MARGIN;
                    match core.cost.hold(entry, usage, now, ttl).await {
                        Ok(holds) => holds,
                        Err(refused) => {
                            self.refused.get_or_insert(refused);
                            if index != self.index {
                                self.end();
                                return None;
                            }
                            self.index += 1;
                            continue;
                        }
                    }
                }
                None => Vec::new(),
            };
            if index != self.index {
                self.index = index;
                self.forced = true;
                self.called = true;
                self.run.keep(holds);
                return Some(core.store.force(&self.keys[index], now));
            }
            let keyed = Keyed::new(entry, &self.keys[index]);
            match core.acquire(keyed, now).await {
                Ok(permit) => {
                    self.called = true;
                    self.run.mate_after = has_mate_after(&self.chain, self.index);
                    self.run.later_ready = self.later_ready(core, now);
                    self.run.keep(holds);
                    return Some(permit);
                }
                Err(open) => {
                    let error = ProviderError::new(
                        ErrorKind::CircuitOpen,
                        format!(
                            "skipped, open for another {} ms",
                            open.until.saturating_sub(now)
                        ),
                    );
                    let healing = open.until <= now
                        || matches!(
                            core.store.state(&self.keys[self.index]),
                            Some(State::HalfOpen { .. })
                        );
                    core.emit_failover(&self.chain, self.index, &error);
                    self.run.skip(entry, now, error);
                    self.skipped.push((self.index, open.until, healing));
                    self.index += 1;
                }
            }
        }
    }

    /// Whether an entry after the current one could be called now: its
    /// breaker not open, and its context window (if any) large enough.
    fn later_ready<P: Platform, S: BreakerStore>(
        &self,
        core: &Core<P, S>,
        now: UnixMillis,
    ) -> bool {
        (self.index + 1..self.chain.len()).any(|i| {
            let open = matches!(
                core.store.state(&self.keys[i]),
                Some(State::Open { until }) if until > now
            );
            let fits = self.need.is_none_or(|n| {
                window(core, &self.chain[i]).is_none_or(|w| n.overflow(w).is_none())
            });
            !open && fits
        })
    }

    /// The entry to force once the entries are spent: when none was called,
    /// the skipped one whose cooldown ends first; when those called all
    /// failed, only a skipped one with no cooldown left (its breaker turned
    /// the call away because its probes were all out — here or, fleet-wide,
    /// at another isolate — or because enough calls were failing at that
    /// moment) — a healthy provider in the middle
    /// of its probe must not leave a request with no answer. One forced call
    /// per request at most.
    fn last_resort(&self, now: UnixMillis) -> Option<usize> {
        if self.forced {
            return None;
        }
        let (index, ..) = self
            .skipped
            .iter()
            .filter(|(_, until, healing)| !self.called || *healing || *until <= now)
            .min_by_key(|(_, until, _)| *until)?;
        Some(*index)
    }

    /// Ends the walk: no entry is admitted after this.
    fn end(&mut self) {
        self.index = self.chain.len();
        self.called = true;
        // An ended walk gets no last-resort call either.
        self.forced = true;
    }

    /// Moves past the entry admitted last while it is still being asked:
    /// a hedge goes to the next.
    pub(crate) fn pass(&mut self) {
        self.index += 1;
    }

    /// The entry admitted last.
    pub(crate) fn entry(&self) -> &Entry {
        &self.chain[self.index]
    }

    /// The entry admitted last, and the request's record, at once.
    pub(crate) fn entry_and_run(&mut self) -> (Keyed<'_>, &mut Run) {
        let entry = Keyed::new(&self.chain[self.index], &self.keys[self.index]);
        (entry, &mut self.run)
    }

    /// The breaker key of the entry admitted last.
    pub(crate) fn key(&self) -> &Rc<str> {
        &self.keys[self.index]
    }

    /// Moves past the entry admitted last, which failed with `error` in a
    /// way that fails over; after a forced call the walk is over.
    pub(crate) fn fail_over<P: Platform, S: BreakerStore>(
        &mut self,
        core: &Core<P, S>,
        error: &ProviderError,
    ) {
        if self.forced {
            self.end();
            return;
        }
        core.emit_failover(&self.chain, self.index, error);
        self.index += 1;
    }

    /// Moves past the entry admitted last, whose answer the route's
    /// validators rejected; after a forced call the walk is over.
    pub(crate) fn escalate(&mut self) {
        if self.forced {
            self.end();
            return;
        }
        self.index += 1;
    }

    /// Who answered: the entry admitted last.
    pub(crate) fn served_by(&self) -> ServedBy {
        ServedBy::of(self.entry())
    }

    /// The call's success: `response` from the entry admitted last.
    pub(crate) fn reply(mut self, response: ChatResponse) -> Reply {
        let attempts = self.run.take_attempts();
        Reply::new(&self.chain[self.index], response, attempts)
    }

    /// The call's end on an error that does not fail over: the provider
    /// rejected the request (or the deadline passed inside it).
    pub(crate) fn stop(&mut self, error: ProviderError) -> Error {
        let attempts = self.run.take_attempts();
        match error.kind {
            ErrorKind::DeadlineExceeded => Error::AllProvidersFailed(Exhausted { attempts }),
            _ => Error::Rejected {
                provider: self.entry().provider.clone(),
                error,
                attempts,
            },
        }
    }

    /// The call's end with every entry spent: a spend cap's refusal when
    /// one kept an entry out and no entry was called.
    pub(crate) fn exhausted(&mut self) -> Error {
        let attempts = self.run.take_attempts();
        match self.refused.take() {
            Some(refused) if attempts.iter().all(|a| a.number == 0) => refused,
            _ => Error::AllProvidersFailed(Exhausted { attempts }),
        }
    }
}

/// The context window configured for `entry`'s model, if any.
fn window<P: Platform, S: BreakerStore>(core: &Core<P, S>, entry: &Entry) -> Option<u32> {
    core.upstreams
        .get(&entry.provider)?
        .capabilities(&entry.model)
        .context_window
}
