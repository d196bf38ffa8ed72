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
use std::ops::Deref;
use std::rc::Rc;

use crate::chat::ChatRequest;
pub use crate::engine::core::Client;
use crate::engine::core::Core;
use crate::engine::cost::{CostBook, CostPolicy, ModelCost, SpendHealth, SpendLedger};
use crate::engine::cursor::Cursor;
use crate::engine::endpoint::{EndpointCall, EndpointReply};
use crate::engine::escalate::{Escalation, Judged};
use crate::engine::hedge::HedgePolicy;
use crate::engine::key::BreakerKeys;
use crate::engine::route::Step;
pub use crate::engine::route::{CallOptions, Entry, Policy, Reply, ServedBy};
use crate::engine::shedding::{RouteShed, Shedding};
use crate::engine::span_hook::{LiveSpans, SpanHook};
use crate::engine::spans::CallEnd;
use crate::engine::store::{BreakerStore, MemoryStore};
use crate::engine::stream::ChatStream;
use crate::error::Error;
use crate::event::Event;
use crate::platform::Platform;
use crate::policy::breaker::{BreakerPolicy, StateName};
use crate::policy::budget::RetryBudget;
use crate::policy::latency::DemotionPolicy;
use crate::policy::stats::{Health, ProviderStats};
use crate::policy::timeouts::Timeouts;
use crate::provider::Upstream;
use crate::quality::Quality;
use crate::trace::Span;

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
    observer: Option<crate::event::Observer>,
    cost: CostPolicy,
    ledger: Option<Rc<dyn SpendLedger>>,
    pub(crate) quality: BTreeMap<String, Quality>,
    pub(crate) key_tiers: BTreeMap<String, Vec<Entry>>,
    span_hook: Option<SpanHook>,
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

    /// Receives the spans of each call whose [`ChatRequest::trace`] is
    /// sampled, once it is over (a stream's at its end): the call's own
    /// span first (under the caller's), then one per attempt, in the
    /// OpenTelemetry GenAI conventions (docs/tracing.md).
    pub fn on_spans(mut self, hook: impl Fn(Vec<Span>) + 'static) -> Self {
        self.span_hook = Some(SpanHook::Finished(Rc::new(hook)));
        self
    }

    /// Has `tracer` open and close traced calls' spans live
    /// ([`LiveSpans`]), for a tracer that picks span ids itself (the npm
    /// package's OpenTelemetry bridge, `src/js/spans.rs`): the sampled
    /// trace a call is given names the call's own span, already open;
    /// each attempt's span is opened by `tracer` as it starts.
    pub fn live_spans(mut self, tracer: Rc<dyn LiveSpans>) -> Self {
        self.span_hook = Some(SpanHook::Live(tracer));
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
    pub fn spend_ledger(mut self, ledger: Rc<dyn SpendLedger>) -> Self {
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
        let shed = self.policy.shed_by_priority;
        let shedding = Shedding::new(self.routes.keys().filter(|_| shed).map(String::as_str));
        Client {
            core: Core {
                budget: RefCell::new(RetryBudget::new(self.policy.budget)),
                platform: self.platform,
                upstreams: self.upstreams,
                policy: self.policy,
                store,
                stats: RefCell::default(),
                model_stats: RefCell::default(),
                limited: RefCell::default(),
                timeouts: RefCell::new(Timeouts::new(&self.breaker)),
                keys,
                latency: RefCell::default(),
                demotion: self.demotion,
                hedge_budgets: RefCell::default(),
                observer: self.observer,
                cost: Rc::new(cost),
                pools: RefCell::default(),
                span_hook: self.span_hook,
                shedding,
            },
            routes: self.routes,
            default_route: self.default_route,
            hedges: self.hedges,
            quality: self.quality,
            key_tiers: self.key_tiers,
        }
    }

    /// Gives the route `route` validators and escalation limits.
    pub fn quality(mut self, route: impl Into<String>, quality: Quality) -> Self {
        self.quality.insert(route.into(), quality);
        self
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
            span_hook: None,
        }
    }
}

impl<P: Platform, S: BreakerStore> Client<P, S> {
    /// Answers `req` on the route its `model` names (or the default route).
    pub async fn chat(&self, req: ChatRequest) -> Result<Reply, Error> {
        self.chat_with(req, CallOptions::default()).await
    }

    /// Answers `req` with per-call options.
    /// Its route's shedding admits it first, and counts how it ended.
    pub async fn chat_with(&self, mut req: ChatRequest, opts: CallOptions) -> Result<Reply, Error> {
        let spans = self.begin_spans(&mut req, &opts);
        let result = match self.admit_class(self.route_name(&req, &opts), &opts) {
            Ok(slot) => {
                let result = self.answer(req, opts).await;
                self.end_class(slot, result.as_ref().err());
                result
            }
            Err(shed) => Err(shed),
        };
        if let Some(spans) = spans {
            self.end_spans(spans, CallEnd::of(&result));
        }
        result
    }

    /// Admits a call of `opts.priority` to `route`: its shedding slot, or
    /// [`Error::Shed`].
    pub(crate) fn admit_class(
        &self,
        route: Option<&str>,
        opts: &CallOptions,
    ) -> Result<Option<usize>, Error> {
        let p = &self.core.platform;
        self.core
            .shedding
            .admit(route, opts.priority, opts.share, p.now(), || p.random())
    }

    /// Counts the end of a call admitted at `slot`, failed with `error`:
    /// demand its route could not carry when every entry failed it.
    pub(crate) fn end_class(&self, slot: Option<usize>, error: Option<&Error>) {
        let failed = matches!(error, Some(Error::AllProvidersFailed(_)));
        let now = self.core.platform.now();
        self.core.shedding.end(slot, now, failed);
    }

    /// Each route's load shedding as of now, for a status page.
    pub fn shedding(&self) -> Vec<RouteShed> {
        self.core.shedding.rows(self.core.platform.now())
    }

    /// [`Client::chat_with`], its spans aside.
    async fn answer(&self, req: ChatRequest, opts: CallOptions) -> Result<Reply, Error> {
        let mut walk = self.walk(&req, &opts)?;
        let mut escalation = self.quality_for(&req, &opts).map(Escalation::new);
        let core = &self.core;
        // A validated route is not hedged: the first answer to come back is
        // not yet an answer it may give.
        if escalation.is_none() {
            if let Some((route, hedge)) = self.hedge_for(&req, &opts) {
                if let Some(done) = core.hedged(&mut walk, &req, &route, &hedge).await {
                    return done;
                }
            }
        }
        while let Some(permit) = walk.admit(core).await {
            let (entry, run) = walk.entry_and_run();
            match core.step(entry, permit, &req, run).await {
                Step::Answered(r) => match escalation.as_mut() {
                    None => return Ok(walk.reply(*r)),
                    Some(e) => match e.judge(&mut walk, *r).await {
                        Judged::Accepted(r) => return Ok(walk.reply(*r)),
                        Judged::Escalated => {}
                        Judged::Stopped => break,
                    },
                },
                Step::Next(error) => walk.fail_over(core, &error),
                Step::Stop(error) => return Escalation::end(escalation, walk.stop(error)),
            }
        }
        Escalation::end(escalation, walk.exhausted())
    }

    /// Streams the answer to `req`; see [`ChatStream`]. Nothing is sent
    /// until the first [`ChatStream::next`].
    pub fn stream(
        &self,
        req: ChatRequest,
        opts: CallOptions,
    ) -> Result<ChatStream<&Self, P, S>, Error> {
        ChatStream::open(self, req, opts)
    }

    /// Answers `call` on its route, failing over among the entries whose
    /// provider serves the endpoint.
    pub async fn call(
        &self,
        call: &EndpointCall,
        opts: CallOptions,
    ) -> Result<EndpointReply, Error> {
        let chain = self.resolve_name(call.model.as_deref(), &opts)?;
        let name = self
            .name_of(call.model.as_deref(), &opts)
            .unwrap_or_default();
        let named = self.routes.contains_key(name);
        let slot = self.admit_class(Some(name), &opts)?;
        let result = self.core.call(call, chain, name, named, &opts).await;
        self.end_class(slot, result.as_ref().err());
        result
    }

    /// The walk of `req`: its route resolved, ordered and planned.
    fn walk(&self, req: &ChatRequest, opts: &CallOptions) -> Result<Cursor<'_>, Error> {
        let chain = self.resolve(req, opts)?;
        Cursor::start(&self.core, chain, self.route_name(req, opts), req, opts)
    }

    /// The hedging of the route `req` names, unless the caller opted out.
    fn hedge_for(&self, req: &ChatRequest, opts: &CallOptions) -> Option<(String, HedgePolicy)> {
        if opts.no_hedge {
            return None;
        }
        let name = self.route_name(req, opts)?;
        if !self.routes.contains_key(name) {
            return None;
        }
        self.hedges.get(name).map(|h| (name.to_string(), *h))
    }

    /// The route's validators, for a request on a route that has any. The
    /// route is named as [`Client::resolve`] names it; the `provider/model`
    /// form names no route, so has none.
    pub(crate) fn quality_for(&self, req: &ChatRequest, opts: &CallOptions) -> Option<&Quality> {
        let name = self.route_name(req, opts)?;
        self.quality.get(name).filter(|q| q.is_active())
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
                if self.core.upstreams.contains_key(provider)
                    && !model.is_empty()
                    && (self.core.policy.any_model || self.lists(provider, model)) =>
            {
                Ok(Cow::Owned(vec![Entry::new(provider, model)]))
            }
            Some((provider, model)) if !model.is_empty() => {
                match self.key_tiers.get(provider).filter(|tier| {
                    self.core.policy.any_model
                        || tier.iter().any(|e| self.lists(&e.provider, model))
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
        self.core.keys.listed(provider, model).is_some()
    }

    /// Every configured provider's health, in id order.
    pub fn health(&self) -> Vec<Health> {
        let core = &self.core;
        // What it reports on, the store learns: a fleet-wide store starts
        // fetching the views it does not have or has from too long ago,
        // for the next look.
        let now = core.platform.now();
        let keys: Vec<&str> = core
            .upstreams
            .keys()
            .flat_map(|id| core.provider_keys(id))
            .map(|(key, _, _)| key)
            .collect();
        core.store.look(keys, now);
        let stats = core.stats.borrow();
        core.upstreams
            .keys()
            .map(|id| {
                let breaker = core.provider_breaker(id);
                let mut health = match stats.get(id) {
                    Some(s) => s.health(id, breaker),
                    None => ProviderStats::default().health(id, breaker),
                };
                health.models = core.model_breakers(id);
                health.demoted = core.demotions(&self.routes, id);
                health.seen_at(now)
            })
            .collect()
    }

    /// Who provider `id` is in a trace, if it is configured.
    pub(crate) fn peer(&self, id: &str) -> Option<crate::trace::genai::Peer> {
        use crate::trace::genai::Peer;
        Some(match self.core.upstreams.get(id)? {
            Upstream::Http(p) => Peer::new(p.genai_name(), p.base_url()),
            Upstream::Custom(_) => Peer::new(id, None),
        })
    }

    /// The ids of the configured providers, in order.
    pub(crate) fn provider_ids(&self) -> impl Iterator<Item = &str> {
        self.core.upstreams.keys().map(String::as_str)
    }

    /// Every breaker key of `provider` the client knows of, with its model
    /// and label.
    pub(crate) fn provider_keys(&self, provider: &str) -> Vec<(&str, &str, Option<&str>)> {
        self.core.provider_keys(provider)
    }

    /// `provider`'s breaker state as one (its worst model's).
    pub(crate) fn provider_state(&self, provider: &str) -> StateName {
        self.core.provider_state(provider)
    }

    /// The prices and the routes' cost settings.
    pub fn cost_policy(&self) -> &CostPolicy {
        &self.core.cost.policy
    }

    /// What each provider's model cost so far, from the usage reported.
    pub fn cost_totals(&self) -> Vec<ModelCost> {
        self.core.cost.totals()
    }

    /// Every route with a daily budget: what it spent today.
    pub fn spend(&self) -> Vec<SpendHealth> {
        self.core.cost.spend_health(self.core.platform.now())
    }

    /// The client-wide policies.
    pub fn policy(&self) -> &Policy {
        &self.core.policy
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
        &self.core.store
    }

    /// The platform.
    pub fn platform(&self) -> &P {
        &self.core.platform
    }
}

impl<C, P, S> ChatStream<C, P, S>
where
    C: Deref<Target = Client<P, S>> + Clone,
    P: Platform,
    S: BreakerStore,
{
    /// A stream of the answer to `req` from `client`. Nothing is sent until
    /// the first [`ChatStream::next`].
    pub fn open(client: C, mut req: ChatRequest, opts: CallOptions) -> Result<Self, Error> {
        let shed_slot = client.admit_class(client.route_name(&req, &opts), &opts)?;
        let spans = client.begin_spans(&mut req, &opts);
        let walk = match client.walk(&req, &opts) {
            Ok(walk) => walk.into_owned(),
            Err(e) => {
                if let Some(spans) = spans {
                    client.end_spans(spans, CallEnd::failed(&e));
                }
                return Err(e);
            }
        };
        let hedge = client.hedge_for(&req, &opts);
        let req = ChatRequest {
            stream: true,
            ..req
        };
        let mut stream = ChatStream::fresh(client, req, walk, None, None, hedge);
        stream.spans = spans;
        stream.shed_slot = shed_slot;
        Ok(stream)
    }
}
