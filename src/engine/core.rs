//! What every walk shares: a client's request-independent state
//! ([`Core`]: the platform, upstreams, policies, breaker store, retry
//! budget, statistics, breaker keys, latency and cost books, observer) and
//! the helpers every walker uses on it: admission and the breaker's one
//! verdict per entry ([`Core::acquire`], [`Core::run_admitted`],
//! [`Core::settle`]), events, attempt records and statistics. Whole
//! answers, streams, hedges and endpoint calls take it by reference;
//! [`Client`] holds it beside the routes, which only the facade
//! (`client.rs`) reads.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use crate::engine::cost::CostBook;
use crate::engine::cursor::Run;
use crate::engine::hedge::HedgePolicy;
use crate::engine::key::BreakerKeys;
use crate::engine::order::RateLimited;
use crate::engine::route::{Entry, Keyed, Policy};
use crate::engine::shedding::Shedding;
use crate::engine::span_hook::SpanHook;
use crate::engine::store::{BreakerStore, MemoryStore};
use crate::error::{Attempt, AttemptOutcome, ProviderError};
use crate::event::{Event, Observer};
use crate::platform::{millis, Headers, HttpRequest, Platform, UnixMillis};
use crate::policy::breaker::{CircuitOpen, Permit, State, StateName};
use crate::policy::budget::RetryBudget;
use crate::policy::latency::{Book, DemotionPolicy};
use crate::policy::pool::Pools;
use crate::policy::stats::ProviderStats;
use crate::policy::timeouts::Timeouts;
use crate::provider::{Provider, Upstream};
use crate::quality::Quality;
use crate::trace::{AttemptTrace, TraceParent};

/// A resilient client over a [`Platform`] and a [`BreakerStore`]: its
/// [`Core`] and its routes. Built by a [`ClientBuilder`](crate::ClientBuilder);
/// its verbs are in `client.rs`.
///
/// Many calls may run at once on one client (one Worker isolate serves many
/// requests): its shared state sits in `RefCell`s that are never borrowed
/// across an `.await`.
pub struct Client<P: Platform, S: BreakerStore = MemoryStore> {
    /// What the walks share.
    pub(super) core: Core<P, S>,
    pub(super) routes: BTreeMap<String, Vec<Entry>>,
    pub(super) default_route: Option<String>,
    /// Routes' hedging, by route name.
    pub(super) hedges: BTreeMap<String, HedgePolicy>,
    /// Validators and escalation limits, by route name.
    pub(super) quality: BTreeMap<String, Quality>,
    /// Providers with several keys, each as the tier of its upstreams.
    pub(super) key_tiers: BTreeMap<String, Vec<Entry>>,
}

/// A client's request-independent state, which every walk reads.
pub(crate) struct Core<P: Platform, S: BreakerStore> {
    pub(super) platform: P,
    pub(super) upstreams: BTreeMap<String, Upstream>,
    pub(super) policy: Policy,
    pub(super) store: S,
    pub(super) budget: RefCell<RetryBudget>,
    pub(super) stats: RefCell<BTreeMap<String, ProviderStats>>,
    /// The same, per breaker key (`provider/model`): bounded by the keys
    /// the configuration lists.
    pub(super) model_stats: RefCell<BTreeMap<String, ProviderStats>>,
    pub(super) limited: RefCell<RateLimited>,
    /// Recent verdicts by size, that tell whether a timeout counts.
    pub(super) timeouts: RefCell<Timeouts>,
    pub(super) keys: BreakerKeys,
    /// Each entry's recent answer times and latency standing.
    pub(super) latency: RefCell<Book>,
    pub(super) demotion: DemotionPolicy,
    /// Each hedged route's budget.
    pub(super) hedge_budgets: RefCell<BTreeMap<String, RetryBudget>>,
    pub(super) observer: Option<Observer>,
    pub(super) cost: Rc<CostBook>,
    /// What each breaker key's provider last said of its rate-limit pools
    /// (bounded like the breakers: keys of the configuration only).
    pub(super) pools: RefCell<Pools>,
    /// Receives traced calls' spans ([`crate::engine::spans`]).
    pub(super) span_hook: Option<SpanHook>,
    /// Each route's load shedding by priority.
    pub(crate) shedding: Shedding,
}

/// A breaker's change of state: from, to.
pub(super) type Moved = (StateName, StateName);

impl<P: Platform, S: BreakerStore> Core<P, S> {
    /// Runs `run` on an entry admitted with `permit` and records the
    /// breaker's one verdict for it (of a request of `size`). Dropped
    /// half-way, the permit goes back without a verdict.
    pub(super) async fn run_admitted<T>(
        &self,
        entry: Keyed<'_>,
        permit: Permit,
        size: u64,
        run: impl AsyncFnOnce(&mut Permit) -> Result<T, ProviderError>,
    ) -> (Result<T, ProviderError>, Option<Moved>) {
        let mut guard = PermitGuard {
            store: &self.store,
            key: entry.key,
            permit,
            armed: true,
        };
        let result = run(&mut guard.permit).await;
        let permit = guard.disarm();
        let moved = self.settle(entry, permit, size, result.as_ref().map(|_| ()));
        (result, moved)
    }

    /// Records the breaker's one verdict for an entry of this request, of
    /// `size` ([`Timeouts`]). A failure that says nothing about the
    /// provider's health (a bad request, the deadline, a timeout no other
    /// request witnesses against) gives the permit back. Tells how the
    /// breaker moved, if it did.
    pub(super) fn settle(
        &self,
        entry: Keyed<'_>,
        permit: Permit,
        size: u64,
        result: Result<(), &ProviderError>,
    ) -> Option<Moved> {
        let key = entry.key;
        let before = self.store.state(key);
        let now = self.platform.now();
        let outcome = self
            .timeouts
            .borrow_mut()
            .verdict(key, permit.kind, size, result);
        self.store.record(key, now, permit, outcome);
        if let Err(error) = result {
            self.limited.borrow_mut().note(key, now, error);
            self.hold_pool(key, now, error);
            self.spread_failure(&entry, key, error);
            self.emit(|| Event::ProviderFailed {
                provider: &entry.provider,
                model: &entry.model,
                label: entry.label.as_deref(),
                error,
            });
        }
        let label = entry.label.as_deref();
        self.emit_transition(&entry.provider, &entry.model, label, key, before)
    }

    pub(super) async fn acquire(
        &self,
        entry: Keyed<'_>,
        now: UnixMillis,
    ) -> Result<Permit, CircuitOpen> {
        let key = entry.key;
        let before = self.store.state(key);
        let result = self.store.try_acquire(key, now).await;
        let label = entry.label.as_deref();
        self.emit_transition(&entry.provider, &entry.model, label, key, before);
        result
    }

    /// Notes what the headers of `provider`'s answer at `key` (a success,
    /// an error such as a 429, or a stream's opening) say of its pool, if
    /// anything: the answer just arrived.
    pub(super) fn note_pool(&self, provider: &dyn Provider, key: &str, headers: &Headers) {
        let now = self.platform.now();
        if let Some(reading) = provider.pool(headers, now) {
            self.pools.borrow_mut().note(key, reading);
            self.store.share_pool(key, now, reading);
        }
    }

    /// The place in `trace` of an attempt about to start: a new span of
    /// its own under the request's, if the request has a trace (opened by
    /// the caller's tracer when it takes spans live).
    pub(super) fn attempt_trace<'t>(
        &self,
        trace: Option<&'t TraceParent>,
    ) -> Option<AttemptTrace<'t>> {
        let trace = trace?;
        let live = match &self.span_hook {
            Some(SpanHook::Live(live)) if trace.flags.is_sampled() => {
                live.open(trace, self.platform.now())
            }
            _ => None,
        };
        let random = || self.platform.random();
        Some(AttemptTrace {
            trace,
            span: live.unwrap_or_else(|| crate::trace::new_span_id(&random)),
        })
    }

    /// Stamps an attempt's request with its place in the trace: a
    /// `traceparent` naming its span (and the caller's `tracestate`),
    /// unless the policy keeps trace context in. Before the request is
    /// signed, so a signature covers it.
    pub(super) fn stamp_trace(&self, http: &mut HttpRequest, at: Option<AttemptTrace<'_>>) {
        let Some(at) = at.filter(|_| self.policy.propagate_trace) else {
            return;
        };
        http.headers
            .insert("traceparent", at.trace.header_for(at.span));
        if let Some(state) = at.trace.state_header() {
            http.headers.insert("tracestate", state);
        }
    }

    pub(super) fn emit<'e>(&self, event: impl FnOnce() -> Event<'e>) {
        if let Some(observer) = &self.observer {
            observer(&event());
        }
    }

    pub(super) fn emit_transition(
        &self,
        provider: &str,
        model: &str,
        label: Option<&str>,
        key: &str,
        before: Option<State>,
    ) -> Option<Moved> {
        let from = before.unwrap_or(State::Closed).name();
        let to = self.store.state(key).unwrap_or(State::Closed).name();
        if from == to {
            return None;
        }
        self.emit(|| Event::Breaker {
            provider,
            model,
            label,
            from,
            to,
        });
        Some((from, to))
    }

    pub(super) fn emit_failover(&self, chain: &[Entry], index: usize, error: &ProviderError) {
        if let (Some(from), Some(to)) = (chain.get(index), chain.get(index + 1)) {
            self.emit(|| Event::Failover {
                from: &from.provider,
                from_model: &from.model,
                from_label: from.label.as_deref(),
                to: &to.provider,
                to_model: &to.model,
                to_label: to.label.as_deref(),
                error,
            });
        }
    }

    /// Records a completed stream in its provider's and model's statistics.
    pub(super) fn record_stream(
        &self,
        entry: Keyed<'_>,
        ttft_ms: u64,
        output_tokens: u64,
        streaming_ms: u64,
    ) {
        self.with_stats(entry, |s| {
            s.record_stream(ttft_ms, output_tokens, streaming_ms)
        });
    }

    /// Runs `f` on the statistics of `entry`'s provider and of its model
    /// (its breaker key), creating them on first use.
    pub(super) fn with_stats(&self, entry: Keyed<'_>, f: impl Fn(&mut ProviderStats)) {
        let key = entry.key;
        for (map, name) in [
            (&self.stats, entry.provider.as_str()),
            (&self.model_stats, key),
        ] {
            let mut stats = map.borrow_mut();
            match stats.get_mut(name) {
                Some(s) => f(s),
                None => f(stats.entry(name.to_owned()).or_default()),
            }
        }
    }

    /// Records an attempt that ended now: in the request's attempts and the
    /// provider's statistics.
    pub(super) fn record_attempt<'r>(
        &self,
        run: &'r mut Run,
        entry: Keyed<'_>,
        number: u32,
        started: UnixMillis,
        reached: bool,
        result: Result<(), &ProviderError>,
    ) -> &'r mut Attempt {
        let ended = self.platform.now();
        let duration = Duration::from_millis(ended.saturating_sub(started));
        // A failure no breaker counts (the caller's deadline, a bad request, a
        // model it does not have) says nothing of the provider's health either.
        if result.err().is_none_or(ProviderError::trips_breaker) {
            self.with_stats(entry, |s| s.record(ended, millis(duration), result.err()));
        }
        let outcome = match result {
            Ok(()) => AttemptOutcome::Success,
            Err(error) => AttemptOutcome::Failure {
                error: error.clone(),
            },
        };
        run.record(&entry, number, started, duration, reached, outcome)
    }
}

/// Gives a permit back if the call is abandoned (the request future dropped
/// mid-attempt), so a half-open breaker is not left waiting on a dead probe
/// and a failing request stops counting as one.
struct PermitGuard<'a, S: BreakerStore> {
    store: &'a S,
    key: &'a str,
    permit: Permit,
    armed: bool,
}

impl<S: BreakerStore> PermitGuard<'_, S> {
    fn disarm(mut self) -> Permit {
        self.armed = false;
        self.permit
    }
}

impl<S: BreakerStore> Drop for PermitGuard<'_, S> {
    fn drop(&mut self) {
        if self.armed {
            self.store.release(self.key, self.permit);
        }
    }
}
