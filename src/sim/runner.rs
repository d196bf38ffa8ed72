//! One policy's run: the real [`Client`] built from the policy's
//! configuration, on the simulated platform, fed the scenario's traffic;
//! every answer, failure and breaker transition is recorded.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::Value;

use super::exec::{Clock, Executor};
use super::fleet::SimLink;
use super::objects::Objects;
use super::report::{CacheFigures, Figures, FleetFigures, Reach, Run, Series};
use super::scenario::{merge_patch, FleetModel, PolicyPatch, Protocol, Repeat, Scenario, Spacing};
use super::world::{base_url, Dialect, SimPlatform, SimProvider, World};
use crate::cache::{CacheOutcome, ResponseCache};
use crate::chat::{ChatRequest, Message};
use crate::config::Config;
use crate::engine::client::{CallOptions, Client, ClientBuilder, Reply};
use crate::engine::store::{BreakerStore, MemoryStore};
use crate::event::Event;
use crate::fleet::{FleetPolicy, FleetStore};
use crate::platform::{Platform, UnixMillis};
use crate::policy::breaker::StateName;

/// Polls allowed per request before a run is declared runaway.
const POLLS_PER_REQUEST: u64 = 10_000;

/// What happens during a run, as it happens.
pub(crate) struct Recorder {
    bucket_ms: u64,
    providers: Vec<String>,
    pub(crate) series: Series,
    pub(crate) latencies: Vec<u32>,
    pub(crate) answered: u64,
    pub(crate) requests: u64,
    pub(crate) retries: u64,
    pub(crate) failovers: u64,
    pub(crate) cost: f64,
    /// Per provider: when its last failing window ends, and its first
    /// answer from then on.
    recovery: Vec<(Option<u64>, Option<u64>)>,
    /// Breaker transitions: (when, isolate, provider index, state).
    transitions: Vec<(UnixMillis, usize, usize, StateName)>,
    isolates: usize,
    prices: Vec<(f64, f64)>,
    /// What the response cache did, when the policy caches.
    pub(crate) cache: Option<CacheFigures>,
}

/// How a request ended.
enum Served<'a> {
    /// It failed.
    Failed,
    /// `provider` answered it, reporting this usage (input, output).
    Provider(&'a str, Option<(u64, u64)>),
    /// The response cache answered it: a stored answer, fresh or stale.
    Cache,
}

impl Recorder {
    fn bucket(&mut self, at: UnixMillis) -> usize {
        let b = usize::try_from(at / self.bucket_ms).unwrap_or(usize::MAX);
        self.series.grow(b + 1, self.providers.len());
        b
    }

    pub(crate) fn recovery(&self) -> &[(Option<u64>, Option<u64>)] {
        &self.recovery
    }

    fn provider(&self, id: &str) -> Option<usize> {
        self.providers.iter().position(|p| p == id)
    }

    fn event(&mut self, now: UnixMillis, isolate: usize, ev: &Event<'_>) {
        match ev {
            Event::Retry { .. } => self.retries += 1,
            Event::Failover { .. } => self.failovers += 1,
            Event::Breaker { provider, to, .. } => {
                if let Some(i) = self.provider(provider) {
                    self.transitions.push((now, isolate, i, *to));
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, started: UnixMillis, ended: UnixMillis, served: Served<'_>) {
        self.requests += 1;
        let b = self.bucket(started);
        if let Served::Failed = served {
            self.series.failed[b] += 1;
            return;
        }
        self.answered += 1;
        let ms = u32::try_from(ended - started).unwrap_or(u32::MAX);
        self.latencies.push(ms);
        self.series.latencies[b].push(ms);
        // A stored answer costs nothing, and says nothing of a provider's recovery.
        let Served::Provider(provider, usage) = served else {
            self.series.cached[b] += 1;
            return;
        };
        let Some(i) = self.provider(provider) else {
            return;
        };
        self.series.served[i][b] += 1;
        if let Some((input, output)) = usage {
            let (pi, po) = self.prices[i];
            self.cost += (input as f64 * pi + output as f64 * po) / 1e6;
        }
        if let (Some(end), first) = &mut self.recovery[i] {
            if ended >= *end && first.is_none() {
                *first = Some(ended - *end);
            }
        }
    }

    /// Takes the world's 429s per provider and bucket into the series;
    /// those to calls after the last arrival's bucket lengthen every series.
    fn provider_429s(&mut self, limited: Vec<Vec<u64>>) {
        let buckets = limited.iter().map(Vec::len).max().unwrap_or(0);
        self.series.grow(buckets, self.providers.len());
        for (to, from) in self.series.provider_429s.iter_mut().zip(limited) {
            to[..from.len()].copy_from_slice(&from);
        }
    }

    /// The breaker series: per provider and bucket, the most open state
    /// its breaker was in during that bucket, in any isolate (0 closed,
    /// 1 half-open, 2 open).
    fn breaker_series(&mut self) {
        let n = self.series.failed.len();
        let mut current = vec![vec![0u8; self.providers.len()]; self.isolates];
        let mut k = 0;
        for b in 0..n {
            let end = (b as u64 + 1) * self.bucket_ms;
            let mut worst: Vec<u8> = (0..self.providers.len())
                .map(|p| current.iter().map(|c| c[p]).max().unwrap_or(0))
                .collect();
            while let Some(&(at, iso, i, to)) = self.transitions.get(k) {
                if at >= end {
                    break;
                }
                current[iso][i] = level(to);
                worst[i] = worst[i].max(current[iso][i]);
                k += 1;
            }
            for (i, w) in worst.into_iter().enumerate() {
                self.series.breaker[i][b] = w;
            }
        }
    }
}

fn level(s: StateName) -> u8 {
    match s {
        StateName::Closed => 0,
        StateName::HalfOpen => 1,
        StateName::Open => 2,
    }
}

/// The policy's configuration: the scenario's, the patch laid over it, every
/// provider pointed at its simulated address.
fn config_of(scenario: &Scenario, policy: &PolicyPatch) -> Result<(Config, Vec<Dialect>), String> {
    let mut doc = scenario.config.clone();
    merge_patch(&mut doc, &policy.patch);
    let Some(Value::Object(providers)) = doc.get_mut("providers") else {
        return Err(format!(
            "policy {:?}: config.providers: missing",
            policy.name
        ));
    };
    let mut dialects = Vec::new();
    for (id, p) in providers.iter_mut() {
        if !scenario.providers.contains_key(id) {
            return Err(format!(
                "providers.{id}: configured but given no model in the scenario"
            ));
        }
        let kind = p.get("kind").and_then(Value::as_str).unwrap_or_default();
        dialects.push(if kind == "anthropic" {
            Dialect::Anthropic
        } else {
            Dialect::OpenAi
        });
        if let Value::Object(fields) = p {
            fields.insert("baseUrl".into(), Value::String(base_url(id)));
        }
    }
    if let Some(missing) = scenario
        .providers
        .keys()
        .find(|id| !providers.contains_key(*id))
    {
        return Err(format!(
            "providers.{missing}: modelled but not in config.providers"
        ));
    }
    let text = doc.to_string();
    let cfg = Config::parse(&text).map_err(|e| format!("policy {:?}: {e}", policy.name))?;
    Ok((cfg, dialects))
}

/// Runs `policy` over `scenario`.
pub(crate) fn run_policy(scenario: &Scenario, policy: &PolicyPatch) -> Result<Run, String> {
    let (cfg, dialects) = config_of(scenario, policy)?;
    let tokens = (
        scenario.traffic.input_tokens,
        scenario.traffic.output_tokens,
    );
    let providers: Vec<SimProvider> = scenario
        .providers
        .iter()
        .zip(dialects)
        .enumerate()
        .map(|(i, ((id, model), dialect))| {
            let seed = scenario
                .seed
                .wrapping_add(1 + i as u64)
                .wrapping_mul(0x9E37_79B9);
            SimProvider::new(id, model.clone(), dialect, tokens, seed)
        })
        .collect();
    let clock = Clock::default();
    let world = Rc::new(World::new(providers, scenario.seed, scenario.bucket_ms));
    let platform = SimPlatform::new(clock.clone(), world.clone());
    let ids: Vec<String> = world.providers.iter().map(|p| p.id.clone()).collect();
    let recorder = Rc::new(RefCell::new(Recorder {
        bucket_ms: scenario.bucket_ms,
        series: Series::default(),
        latencies: Vec::new(),
        answered: 0,
        requests: 0,
        retries: 0,
        failovers: 0,
        cost: 0.0,
        recovery: world
            .providers
            .iter()
            .map(|p| (p.last_fault_end(), None))
            .collect(),
        transitions: Vec::new(),
        isolates: scenario.traffic.isolates as usize,
        prices: scenario
            .providers
            .values()
            .map(|m| (m.input_per_mtok, m.output_per_mtok))
            .collect(),
        providers: ids,
        cache: None,
    }));
    recorder
        .borrow_mut()
        .bucket(scenario.duration_ms.saturating_sub(1));

    let ex = Executor::new(clock.clone());
    let v = cfg
        .validate(&|_| Some("sim-key".into()), &[])
        .map_err(|e| format!("policy {:?}: {e}", policy.name))?;
    // One cache for every isolate: the data centre's, as `caches.default` is.
    let cache = (!v.cache.is_empty()).then(|| {
        recorder.borrow_mut().cache = Some(CacheFigures {
            hits: 0,
            misses: 0,
            stale: 0,
        });
        Rc::new(ResponseCache::new(v.cache.clone(), v.cache_bounds))
    });
    let isolates = scenario.traffic.isolates as usize;
    let mut fleet = None;
    if isolates == 1 {
        let client = observed(
            v.into_builder(platform.clone(), vec![]),
            &platform,
            &recorder,
            0,
        )
        .build();
        drive(scenario, &ex, &[Rc::new(client)], cache, &recorder)?;
    } else {
        let model = scenario.fleet.unwrap_or_default();
        let relayed = policy.fleet == Protocol::Relayed;
        let objects = Rc::new(Objects::new(
            model,
            relayed,
            (clock.clone(), ex.clone()),
            isolates,
            v.policies.breaker,
            &v.breakers,
        ));
        let fleet_policy = if relayed {
            FleetPolicy::relayed()
        } else {
            FleetPolicy::default()
        };
        let mut clients = Vec::new();
        for i in 0..isolates {
            // Each isolate validates the same configuration, as each Worker isolate does.
            let v = cfg
                .validate(&|_| Some("sim-key".into()), &[])
                .map_err(|e| format!("policy {:?}: {e}", policy.name))?;
            let link = SimLink::new(objects.clone(), ex.clone(), i);
            let mut store = FleetStore::new(link, format!("isolate-{i}"), v.policies.breaker)
                .fleet_policy(fleet_policy);
            for (id, p) in &v.breakers {
                store = store.with_policy(id.clone(), *p);
            }
            let builder = observed(
                v.into_builder(platform.clone(), vec![]),
                &platform,
                &recorder,
                i,
            );
            clients.push(Rc::new(builder.build_with_store(store)));
        }
        drive(scenario, &ex, &clients, cache, &recorder)?;
        fleet = scenario
            .fleet
            .map(|m| fleet_figures(&objects, m, policy.fleet, scenario.traffic.isolates));
    }

    let mut r = recorder.borrow_mut();
    r.provider_429s(world.rate_limited());
    r.breaker_series();
    let mut figures = Figures::from_run(&mut r, &world.calls(), platform.world());
    figures.fleet = fleet;
    Ok(Run {
        policy: policy.name.clone(),
        figures,
        series: std::mem::take(&mut r.series),
    })
}

/// What the objects measured of a run.
fn fleet_figures(
    objects: &Objects,
    model: FleetModel,
    protocol: Protocol,
    isolates: u32,
) -> FleetFigures {
    let (relay, relays) = objects.relay_load();
    FleetFigures {
        protocol,
        isolates,
        data_centres: model.data_centres,
        service_rate: (model.service_ms > 0.0).then(|| 1000.0 / model.service_ms),
        owner: objects.owner_load(),
        relay,
        relays,
        outdated_decisions: objects.outdated.get(),
        decisions: objects.decisions.get(),
        views_delivered: objects.views_delivered.get(),
        second_probes: objects.second_probes(),
        transitions: objects
            .transition_lags()
            .into_iter()
            .map(|(model, at, lags)| Reach::of(model, at, lags))
            .collect(),
    }
}

/// `builder`, with isolate `i`'s events going to `recorder`.
fn observed(
    builder: ClientBuilder<SimPlatform>,
    platform: &SimPlatform,
    recorder: &Rc<RefCell<Recorder>>,
    i: usize,
) -> ClientBuilder<SimPlatform> {
    let (rec, seen) = (recorder.clone(), platform.clone());
    builder.observer(move |ev| rec.borrow_mut().event(seen.now(), i, ev))
}

/// What a host does once a request is done: the Worker sends the fleet the
/// verdicts that are due.
trait AfterRequest {
    /// A request is about to start.
    fn before_request(&self);
    fn after_request(&self, now: UnixMillis);
}

impl AfterRequest for MemoryStore {
    fn before_request(&self) {}
    fn after_request(&self, _: UnixMillis) {}
}

impl AfterRequest for FleetStore<SimLink> {
    fn before_request(&self) {
        self.link().decide(|key| self.view(key));
    }
    fn after_request(&self, now: UnixMillis) {
        self.flush_due(now);
    }
}

/// A prompt of `input_tokens` tokens as a client estimates text (four bytes
/// a token), so that what a request is expected to use (its input and its
/// `max_tokens`) is what its answer reports, as a pool charges it.
fn prompt(input_tokens: u64) -> String {
    const LINE: &str = "Are you there? ";
    let bytes = usize::try_from(input_tokens.saturating_mul(4)).unwrap_or(usize::MAX);
    LINE.chars().cycle().take(bytes).collect()
}

/// Which question each request asks: with the traffic's `repeat`, one of
/// its few with probability `share`, else a question of its own; without,
/// every request the same. Drawn from a generator of its own, so that the
/// arrivals are those of a scenario without `repeat`.
struct Questions {
    repeat: Option<(Repeat, fastrand::Rng)>,
}

impl Questions {
    fn new(scenario: &Scenario) -> Self {
        let rng = || fastrand::Rng::with_seed(scenario.seed ^ 0xA5C_0FF1CE);
        Questions {
            repeat: scenario.traffic.repeat.map(|r| (r, rng())),
        }
    }

    /// Request `k`'s question, `base` marked as one of the few or its own.
    fn ask(&mut self, k: u64, base: &str) -> Option<String> {
        let (r, rng) = self.repeat.as_mut()?;
        Some(if rng.f64() < r.share {
            format!("{base} (question {})", rng.u32(0..r.distinct))
        } else {
            format!("{base} (request {k})")
        })
    }
}

/// The answer to `req`, through `cache` when the policy caches, with what
/// the cache did.
async fn ask<S: BreakerStore>(
    client: &Client<SimPlatform, S>,
    cache: Option<&ResponseCache>,
    req: ChatRequest,
) -> (Result<Reply, crate::Error>, Option<CacheOutcome>) {
    let Some(cache) = cache else {
        return (client.chat(req).await, None);
    };
    match cache.chat(client, req, CallOptions::default(), None).await {
        Ok(c) => (Ok(c.reply), Some(c.outcome)),
        // Failed, so asked of the route: a miss.
        Err(e) => (Err(e), Some(CacheOutcome::Miss)),
    }
}

/// Arrivals for the scenario's duration, spread over the isolates in turn,
/// then every request still running is run to its end.
fn drive<S: BreakerStore + AfterRequest + 'static>(
    scenario: &Scenario,
    ex: &Executor,
    clients: &[Rc<Client<SimPlatform, S>>],
    cache: Option<Rc<ResponseCache>>,
    recorder: &Rc<RefCell<Recorder>>,
) -> Result<(), String> {
    let clock = clients[0].platform().clock();
    let mut arrivals = fastrand::Rng::with_seed(scenario.seed ^ 0x5EED_A771_4A15);
    let mean_gap_ms = 1000.0 / scenario.traffic.rate_per_sec;
    let expected = (scenario.duration_ms as f64 / mean_gap_ms).ceil() as u64 + 1;
    let mut budget = expected.saturating_mul(POLLS_PER_REQUEST).max(1_000_000);
    let runaway = || "the run did not settle within its poll budget".to_string();
    // A pool that counts tokens is where a client's estimate of a request's
    // use meets what a provider charges: the prompt is then as long as the
    // traffic's input. Elsewhere no simulated provider reads it, and a short
    // one keeps the simulator fast (an 800-token prompt costs it some 30 %).
    let counts_tokens = scenario
        .providers
        .values()
        .any(|p| p.pool.is_some_and(|pool| pool.tokens_per_minute.is_some()));
    let text = if counts_tokens {
        prompt(scenario.traffic.input_tokens)
    } else {
        "Are you there?".to_string()
    };
    let mut questions = Questions::new(scenario);
    let mut req = ChatRequest::new(vec![Message::user(text.clone())]);
    req.max_tokens = u32::try_from(scenario.traffic.output_tokens).ok();
    let mut at = 0.0f64;
    for k in 0u64.. {
        at = match scenario.traffic.spacing {
            Spacing::Poisson => at - (1.0 - arrivals.f64()).ln() * mean_gap_ms,
            Spacing::Even => k as f64 * mean_gap_ms,
        };
        let when = at as u64;
        if when >= scenario.duration_ms {
            break;
        }
        ex.run_until(when, &mut budget).ok_or_else(runaway)?;
        let c = clients[(k % clients.len() as u64) as usize].clone();
        let (rec, clock, mut req) = (recorder.clone(), clock.clone(), req.clone());
        if let Some(question) = questions.ask(k, &text) {
            req.messages = vec![Message::user(question)];
        }
        let cache = cache.clone();
        ex.spawn(async move {
            let started = clock.now();
            c.store().before_request();
            let (result, outcome) = ask(&c, cache.as_deref(), req).await;
            let ended = clock.now();
            c.store().after_request(ended);
            let mut rec = rec.borrow_mut();
            if let (Some(seen), Some(outcome)) = (rec.cache.as_mut(), &outcome) {
                match outcome {
                    CacheOutcome::Hit { .. } => seen.hits += 1,
                    CacheOutcome::Stale { .. } => seen.stale += 1,
                    CacheOutcome::Miss => seen.misses += 1,
                    CacheOutcome::Bypass | CacheOutcome::Uncached => {}
                }
            }
            let from_store = matches!(
                outcome,
                Some(CacheOutcome::Hit { .. } | CacheOutcome::Stale { .. })
            );
            let served = match &result {
                Err(_) => Served::Failed,
                Ok(_) if from_store => Served::Cache,
                Ok(r) => Served::Provider(
                    r.served_by.provider.as_str(),
                    r.response
                        .usage
                        .as_ref()
                        .map(|u| (u.input_tokens, u.output_tokens)),
                ),
            };
            rec.finish(started, ended, served);
        });
    }
    let mut now = clock.now();
    loop {
        ex.run_until(now, &mut budget).ok_or_else(runaway)?;
        if ex.live() == 0 {
            return Ok(());
        }
        now = ex
            .next_timer()
            .ok_or("requests wait on nothing that can wake them")?;
    }
}
