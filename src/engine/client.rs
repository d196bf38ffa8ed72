//! The client: routes of ordered entries, walked in order until one answers.
//!
//! Layer order is fixed: **timeout inside retry inside breaker inside
//! chain**. Each attempt has its own deadline (min of the entry's timeout and
//! what is left of the request's), retries spend one provider's budget, the
//! breaker records one verdict per provider per request after its retries,
//! and the chain walks the entries in order, skipping open breakers without a
//! call. When every breaker is open, the entry whose cooldown ends first is
//! tried rather than none.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::chat::ChatRequest;
use crate::engine::cost::{CostBook, CostPolicy, ModelCost, SpendHealth, SpendLedger};
use crate::engine::cursor::{Cursor, Run};
use crate::engine::escalate::{Escalation, Judged};
use crate::engine::hedge::HedgePolicy;
use crate::engine::key::BreakerKeys;
use crate::engine::order::RateLimited;
use crate::engine::route::Step;
pub use crate::engine::route::{CallOptions, Entry, Policy, Reply, ServedBy};
use crate::engine::store::{BreakerStore, MemoryStore};
use crate::error::{Error, ProviderError};
use crate::event::{Event, Observer};
use crate::platform::{Platform, UnixMillis};
use crate::policy::breaker::{BreakerPolicy, CircuitOpen, Permit, State};
use crate::policy::budget::RetryBudget;
use crate::policy::latency::{Book, DemotionPolicy};
use crate::policy::stats::{Health, ProviderStats};
use crate::policy::timeouts::{size_of, Timeouts};
use crate::provider::Upstream;
use crate::quality::Quality;

/// A resilient client over a [`Platform`] and a [`BreakerStore`].
///
/// Many calls may run at once on one client (one Worker isolate serves many
/// requests): its shared state sits in `RefCell`s that are never borrowed
/// across an `.await`.
pub struct Client<P: Platform, S: BreakerStore = MemoryStore> {
    pub(crate) platform: P,
    pub(crate) upstreams: BTreeMap<String, Upstream>,
    routes: BTreeMap<String, Vec<Entry>>,
    default_route: Option<String>,
    pub(crate) policy: Policy,
    pub(crate) store: S,
    pub(crate) budget: RefCell<RetryBudget>,
    pub(crate) stats: RefCell<BTreeMap<String, ProviderStats>>,
    /// The same, per breaker key (`provider/model`): bounded by the keys
    /// the configuration lists.
    pub(crate) model_stats: RefCell<BTreeMap<String, ProviderStats>>,
    pub(crate) limited: RefCell<RateLimited>,
    /// Recent verdicts by size, that tell whether a timeout counts.
    pub(crate) timeouts: RefCell<Timeouts>,
    pub(crate) keys: BreakerKeys,
    /// Each entry's recent answer times and latency standing.
    pub(crate) latency: RefCell<Book>,
    pub(crate) demotion: DemotionPolicy,
    /// Routes' hedging, by route name, and each one's budget.
    pub(crate) hedges: BTreeMap<String, HedgePolicy>,
    pub(crate) hedge_budgets: RefCell<BTreeMap<String, RetryBudget>>,
    observer: Option<Observer>,
    pub(crate) cost: std::rc::Rc<CostBook>,
    /// Validators and escalation limits, by route name.
    pub(crate) quality: BTreeMap<String, Quality>,
    /// Providers with several keys, each as the tier of its upstreams.
    key_tiers: BTreeMap<String, Vec<Entry>>,
}

/// Builds a [`Client`].
pub struct ClientBuilder<P: Platform> {
    platform: P,
    upstreams: BTreeMap<String, Upstream>,
    pub(crate) routes: BTreeMap<String, Vec<Entry>>,
    pub(crate) default_route: Option<String>,
    policy: Policy,
    breaker: BreakerPolicy,
    breakers: BTreeMap<String, BreakerPolicy>,
    demotion: DemotionPolicy,
    hedges: BTreeMap<String, HedgePolicy>,
    observer: Option<Observer>,
    cost: CostPolicy,
    ledger: Option<std::rc::Rc<dyn SpendLedger>>,
    pub(crate) quality: BTreeMap<String, Quality>,
    pub(crate) key_tiers: BTreeMap<String, Vec<Entry>>,
}

impl<P: Platform> ClientBuilder<P> {
    /// Registers an upstream under `id`.
    pub fn upstream(mut self, id: impl Into<String>, upstream: Upstream) -> Self {
        self.upstreams.insert(id.into(), upstream);
        self
    }

    /// Adds a route. The first route added is the default.
    pub fn route(mut self, name: impl Into<String>, entries: Vec<Entry>) -> Self {
        let name = name.into();
        self.default_route.get_or_insert_with(|| name.clone());
        self.routes.insert(name, entries);
        self
    }

    /// Names the route used when a request names none.
    pub fn default_route(mut self, name: impl Into<String>) -> Self {
        self.default_route = Some(name.into());
        self
    }

    /// Sets the client-wide policies.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the breaker policy of every provider without its own.
    pub fn breaker(mut self, policy: BreakerPolicy) -> Self {
        self.breaker = policy;
        self
    }

    /// Sets one provider's breaker policy.
    pub fn breaker_for(mut self, provider: impl Into<String>, policy: BreakerPolicy) -> Self {
        self.breakers.insert(provider.into(), policy);
        self
    }

    /// Sets how entries with latency objectives are demoted and restored.
    pub fn demotion(mut self, policy: DemotionPolicy) -> Self {
        self.demotion = policy;
        self
    }

    /// Hedges requests on route `name`.
    pub fn hedge(mut self, name: impl Into<String>, policy: HedgePolicy) -> Self {
        self.hedges.insert(name.into(), policy);
        self
    }

    /// Receives every [`Event`].
    pub fn observer(mut self, f: impl Fn(&Event<'_>) + 'static) -> Self {
        self.observer = Some(Box::new(f));
        self
    }

    /// The prices the cost policy holds (for what prices attempts beside
    /// the cost book, such as an escalation's cost cap).
    pub(crate) fn cost_prices(&self) -> &crate::policy::price::Prices {
        &self.cost.prices
    }

    /// Sets the prices and the routes' cost settings (ordering, spend caps).
    pub fn cost(mut self, policy: CostPolicy) -> Self {
        self.cost = policy;
        self
    }

    /// Keeps the routes' daily spending in `ledger` too (fleet-wide), beside
    /// this client's own count.
    pub fn spend_ledger(mut self, ledger: std::rc::Rc<dyn SpendLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// A client with breakers in memory.
    pub fn build(mut self) -> Client<P> {
        let mut store = MemoryStore::new(self.breaker);
        store.policies = std::mem::take(&mut self.breakers);
        self.build_with_store(store)
    }

    /// A client whose breakers live in `store` (whose policies then apply).
    pub fn build_with_store<S: BreakerStore>(self, store: S) -> Client<P, S> {
        let keys = BreakerKeys::new(self.upstreams.keys(), &self.routes);
        let cost = CostBook::new(self.cost, self.ledger, &self.routes);
        Client {
            budget: RefCell::new(RetryBudget::new(self.policy.budget)),
            platform: self.platform,
            upstreams: self.upstreams,
            routes: self.routes,
            default_route: self.default_route,
            policy: self.policy,
            store,
            stats: RefCell::default(),
            model_stats: RefCell::default(),
            limited: RefCell::default(),
            timeouts: RefCell::new(Timeouts::new(&self.breaker)),
            keys,
            latency: RefCell::default(),
            demotion: self.demotion,
            hedges: self.hedges,
            hedge_budgets: RefCell::default(),
            observer: self.observer,
            cost: std::rc::Rc::new(cost),
            quality: self.quality,
            key_tiers: self.key_tiers,
        }
    }
}

impl<P: Platform> Client<P> {
    /// Starts building a client on `platform`.
    pub fn builder(platform: P) -> ClientBuilder<P> {
        ClientBuilder {
            platform,
            upstreams: BTreeMap::new(),
            routes: BTreeMap::new(),
            default_route: None,
            policy: Policy::default(),
            breaker: BreakerPolicy::default(),
            breakers: BTreeMap::new(),
            demotion: DemotionPolicy::default(),
            hedges: BTreeMap::new(),
            observer: None,
            cost: CostPolicy::default(),
            ledger: None,
            quality: BTreeMap::new(),
            key_tiers: BTreeMap::new(),
        }
    }
}

impl<P: Platform, S: BreakerStore> Client<P, S> {
    /// Answers `req` on the route its `model` names (or the default route).
    pub async fn chat(&self, req: ChatRequest) -> Result<Reply, Error> {
        self.chat_with(req, CallOptions::default()).await
    }

    /// Answers `req` with per-call options.
    pub async fn chat_with(&self, req: ChatRequest, opts: CallOptions) -> Result<Reply, Error> {
        let mut walk = Cursor::start(self, &req, &opts)?;
        let mut escalation = self.escalation(&req, &opts);
        // A validated route is not hedged: the first answer to come back is
        // not yet an answer it may give.
        if escalation.is_none() {
            if let Some((route, hedge)) = self.hedge_for(&req, &opts) {
                if let Some(done) = self.hedged(&mut walk, &req, &route, &hedge).await {
                    return done;
                }
            }
        }
        while let Some(permit) = walk.admit(self).await {
            let (entry, run) = walk.entry_and_run();
            match self.step(entry, permit, &req, run).await {
                Step::Answered(r) => match escalation.as_mut() {
                    None => return Ok(walk.reply(*r)),
                    Some(e) => match e.judge(&mut walk, *r).await {
                        Judged::Accepted(r) => return Ok(walk.reply(*r)),
                        Judged::Escalated => {}
                        Judged::Stopped => break,
                    },
                },
                Step::Next(error) => walk.fail_over(self, &error),
                Step::Stop(error) => return Escalation::end(escalation, walk.stop(error)),
            }
        }
        Escalation::end(escalation, walk.exhausted())
    }

    /// Runs one entry (its retries included) and records the breaker's one
    /// verdict for it.
    pub(crate) async fn step(
        &self,
        entry: &Entry,
        permit: Permit,
        req: &ChatRequest,
        run: &mut Run,
    ) -> Step {
        let key = self.key_of(entry);
        let mut guard = PermitGuard {
            store: &self.store,
            key: &key,
            permit,
            armed: true,
        };
        let result = self.run_entry(entry, &mut guard.permit, req, run).await;
        let permit = guard.disarm();
        self.settle(entry, permit, size_of(req), result.as_ref().map(|_| ()));
        match result {
            Ok(resp) => Step::Answered(Box::new(resp)),
            Err(error) if error.fails_over() => Step::Next(error),
            Err(error) => Step::Stop(error),
        }
    }

    /// Records the breaker's one verdict for an entry of this request, of
    /// `size` ([`Timeouts`]). A failure that says nothing about the
    /// provider's health (a bad request, the deadline, a timeout no other
    /// request witnesses against) gives the permit back.
    pub(crate) fn settle(
        &self,
        entry: &Entry,
        permit: Permit,
        size: u64,
        result: Result<(), &ProviderError>,
    ) {
        let key = self.key_of(entry);
        let before = self.store.state(&key);
        let now = self.platform.now();
        let outcome = self
            .timeouts
            .borrow_mut()
            .verdict(&key, permit.kind, size, result);
        self.store.record(&key, now, permit, outcome);
        if let Err(error) = result {
            self.limited.borrow_mut().note(&key, now, error);
            self.spread_failure(entry, &key, error);
            self.emit(|| Event::ProviderFailed {
                provider: &entry.provider,
                model: &entry.model,
                label: entry.label.as_deref(),
                error,
            });
        }
        let label = entry.label.as_deref();
        self.emit_transition(&entry.provider, &entry.model, label, &key, before);
    }

    /// The chain for a request: the route its `model` (or the options)
    /// name, or `provider/model` for that one entry (a model some route
    /// lists for that provider, or any with [`Policy::any_model`]), or the
    /// default route.
    pub(crate) fn resolve(
        &self,
        req: &ChatRequest,
        opts: &CallOptions,
    ) -> Result<Cow<'_, [Entry]>, Error> {
        let chain = self.resolve_name(req.model.as_deref(), opts)?;
        if chain.iter().any(|e| e.embeddings.is_some()) {
            let name = opts.route.as_deref().or(req.model.as_deref());
            return Err(Error::InvalidRequest(format!(
                "model: route \"{}\" serves embeddings (POST /v1/embeddings), not chat",
                name.unwrap_or_default()
            )));
        }
        Ok(chain)
    }

    /// The chain for a request whose `model` is `model`; see [`Client::resolve`].
    pub(crate) fn resolve_name(
        &self,
        model: Option<&str>,
        opts: &CallOptions,
    ) -> Result<Cow<'_, [Entry]>, Error> {
        let Some(name) = self.name_of(model, opts) else {
            return Err(Error::UnknownRoute(String::new()));
        };
        if let Some(chain) = self.routes.get(name) {
            return Ok(Cow::Borrowed(chain));
        }
        match name.split_once('/') {
            Some((provider, model))
                if self.upstreams.contains_key(provider)
                    && !model.is_empty()
                    && (self.policy.any_model || self.lists(provider, model)) =>
            {
                Ok(Cow::Owned(vec![Entry::new(provider, model)]))
            }
            Some((provider, model)) if !model.is_empty() => {
                match self.key_tiers.get(provider).filter(|tier| {
                    self.policy.any_model || tier.iter().any(|e| self.lists(&e.provider, model))
                }) {
                    Some(tier) => Ok(Cow::Owned(
                        tier.iter()
                            .map(|e| Entry {
                                model: model.to_owned(),
                                ..e.clone()
                            })
                            .collect(),
                    )),
                    None => Err(Error::UnknownRoute(name.to_string())),
                }
            }
            _ => Err(Error::UnknownRoute(name.to_string())),
        }
    }

    /// The name a request's route is looked up by: the options', the
    /// request's `model`, or the default route.
    pub(crate) fn route_name<'a>(
        &'a self,
        req: &'a ChatRequest,
        opts: &'a CallOptions,
    ) -> Option<&'a str> {
        self.name_of(req.model.as_deref(), opts)
    }

    /// The name a route is looked up by: the options', `model`, or the default route.
    pub(crate) fn name_of<'a>(
        &'a self,
        model: Option<&'a str>,
        opts: &'a CallOptions,
    ) -> Option<&'a str> {
        opts.route
            .as_deref()
            .or(model)
            .or(self.default_route.as_deref())
    }

    /// Whether some route sends `model` to `provider`.
    pub(crate) fn lists(&self, provider: &str, model: &str) -> bool {
        self.keys.listed(provider, model).is_some()
    }

    pub(crate) async fn acquire(
        &self,
        entry: &Entry,
        now: UnixMillis,
    ) -> Result<Permit, CircuitOpen> {
        let key = self.key_of(entry);
        let before = self.store.state(&key);
        let result = self.store.try_acquire(&key, now).await;
        let label = entry.label.as_deref();
        self.emit_transition(&entry.provider, &entry.model, label, &key, before);
        result
    }

    pub(crate) fn emit<'e>(&self, event: impl FnOnce() -> Event<'e>) {
        if let Some(observer) = &self.observer {
            observer(&event());
        }
    }

    pub(crate) fn emit_transition(
        &self,
        provider: &str,
        model: &str,
        label: Option<&str>,
        key: &str,
        before: Option<State>,
    ) {
        let from = before.unwrap_or(State::Closed).name();
        let to = self.store.state(key).unwrap_or(State::Closed).name();
        if from != to {
            self.emit(|| Event::Breaker {
                provider,
                model,
                label,
                from,
                to,
            });
        }
    }

    pub(crate) fn emit_failover(&self, chain: &[Entry], index: usize, error: &ProviderError) {
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
    pub(crate) fn record_stream(
        &self,
        entry: &Entry,
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
    pub(crate) fn with_stats(&self, entry: &Entry, f: impl Fn(&mut ProviderStats)) {
        let key = self.key_of(entry);
        for (map, name) in [
            (&self.stats, entry.provider.as_str()),
            (&self.model_stats, &key),
        ] {
            let mut stats = map.borrow_mut();
            match stats.get_mut(name) {
                Some(s) => f(s),
                None => f(stats.entry(name.to_owned()).or_default()),
            }
        }
    }

    /// Every configured provider's health, in id order.
    pub fn health(&self) -> Vec<Health> {
        // What it reports on, the store learns: a fleet-wide store starts
        // fetching the views it does not have, for the next look.
        let now = self.platform.now();
        let keys: Vec<&str> = self
            .upstreams
            .keys()
            .flat_map(|id| self.provider_keys(id))
            .map(|(key, _, _)| key)
            .collect();
        self.store.warm(keys, now);
        let stats = self.stats.borrow();
        self.upstreams
            .keys()
            .map(|id| {
                let breaker = self.provider_breaker(id);
                let mut health = match stats.get(id) {
                    Some(s) => s.health(id, breaker),
                    None => ProviderStats::default().health(id, breaker),
                };
                health.models = self.model_breakers(id);
                health.demoted = self.demotions(id);
                health.seen_at(now)
            })
            .collect()
    }

    /// The prices and the routes' cost settings.
    pub fn cost_policy(&self) -> &CostPolicy {
        &self.cost.policy
    }

    /// What each provider's model cost so far, from the usage reported.
    pub fn cost_totals(&self) -> Vec<ModelCost> {
        self.cost.totals()
    }

    /// Every route with a daily budget: what it spent today.
    pub fn spend(&self) -> Vec<SpendHealth> {
        self.cost.spend_health(self.platform.now())
    }

    /// The client-wide policies.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The route for requests that name none.
    pub fn default_route(&self) -> Option<&str> {
        self.default_route.as_deref()
    }

    /// The routes, by name.
    pub fn routes(&self) -> &BTreeMap<String, Vec<Entry>> {
        &self.routes
    }

    /// The breaker store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The platform.
    pub fn platform(&self) -> &P {
        &self.platform
    }
}

/// Gives a permit back if the call is abandoned (the request future dropped
/// mid-attempt), so a half-open breaker is not left waiting on a dead probe
/// and a failing request stops counting as one.
pub(crate) struct PermitGuard<'a, S: BreakerStore> {
    pub(crate) store: &'a S,
    pub(crate) key: &'a str,
    pub(crate) permit: Permit,
    pub(crate) armed: bool,
}

impl<S: BreakerStore> PermitGuard<'_, S> {
    pub(crate) fn disarm(mut self) -> Permit {
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
