//! Configuration: one JSON shape for the Worker (`[vars]`) and the npm
//! package, validated once into typed policies. Every problem is reported
//! at once, each with its path (`routes.default[1].provider: unknown
//! provider "x"`).
//!
//! ```json
//! {
//!   "providers": { "primary": { "kind": "anthropic" }, "backup": { "kind": "openai" } },
//!   "routes": { "default": [ { "provider": "primary", "model": "claude-sonnet-4-5" },
//!                            { "provider": "backup", "model": "gpt-4.1", "timeoutMs": 20000 } ] },
//!   "retry": { "maxAttempts": 3, "baseDelayMs": 200, "maxDelayMs": 10000 },
//!   "breaker": { "failureThreshold": 5, "cooldownMs": 10000 },
//!   "timeoutMs": 30000,
//!   "deadlineMs": 60000
//! }
//! ```

mod cost;

pub use cost::{CostConfig, OverBudgetConfig, PriceConfig, RouteCostConfig, StrategyConfig};

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use serde_path_to_error::Segment;

mod hedge;
mod keys;
mod providers;
mod speed;
mod tier;

pub use hedge::{HedgeAfterConfig, HedgeConfig, HedgeFigure};
pub use keys::{KeyEnv, WeightedKeyEnv};
pub use providers::{build_provider, ModelConfig, ProviderConfig};
pub use speed::LatencyConfig;

use crate::engine::client::{Client, ClientBuilder, Entry, Policy};
use crate::engine::hedge::HedgePolicy;
use crate::issue::path_text;
pub(crate) use crate::issue::{ConfigError, ConfigIssue};
use crate::platform::Platform;
use crate::policy::backoff::RetryPolicy;
use crate::policy::breaker::BreakerPolicy;
use crate::policy::budget::BudgetPolicy;
use crate::policy::latency::DemotionPolicy;
use crate::provider::{Provider, Upstream};
use crate::quality::Quality;

mod quality;
pub(crate) use crate::secret::Secret;
pub use quality::{OnExhaustedConfig, QualityConfig, ValidatorConfig};

pub(crate) mod embeddings;

/// The whole configuration, as JSON from wrangler `[vars]` or from JS.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Providers by id.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Routes by name: ordered chains of entries. Each model listed under
    /// a provider's `models` is also a route of its own name (unless a route
    /// has that name), served by every provider that lists it; and
    /// `provider/model` always names that single entry.
    #[serde(default)]
    pub routes: BTreeMap<String, Vec<EntryConfig>>,
    /// The route for requests that name none (default `default`, else the
    /// first route).
    #[serde(default)]
    pub default_route: Option<String>,
    /// Retries, for every entry without its own.
    #[serde(default)]
    pub retry: RetryConfig,
    /// The retry budget.
    #[serde(default)]
    pub budget: BudgetConfig,
    /// Breakers, for every provider without its own.
    #[serde(default)]
    pub breaker: BreakerConfig,
    /// Per-provider breaker settings, over `breaker`.
    #[serde(default)]
    pub breakers: BTreeMap<String, BreakerConfig>,
    /// Per-attempt timeout (default 30 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// End-to-end deadline over every retry and fallback (default 60 s).
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// Streams: time-to-first-token deadline per attempt (default 10 s).
    #[serde(default)]
    pub first_token_timeout_ms: Option<u64>,
    /// Streams: the longest silence between chunks (default 10 s).
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    /// Streams at a gateway: the wait for the first item before the
    /// response goes out with keepalives, and their interval (default 15 s).
    #[serde(default)]
    pub keepalive_ms: Option<u64>,
    /// Size limits.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Whether `provider/model` may name a model no route lists (default
    /// false).
    #[serde(default)]
    pub allow_any_model: bool,
    /// Settings of the gateway host (the Worker).
    #[serde(default)]
    pub gateway: GatewayConfig,
    /// Prices for providers written in code, and routes' ordering and
    /// daily budgets.
    #[serde(default)]
    pub cost: cost::CostConfig,
    /// Latency objectives, streams' pace and demotion.
    #[serde(default)]
    pub latency: LatencyConfig,
    /// Hedged requests, by route name (none by default).
    #[serde(default)]
    pub hedge: BTreeMap<String, HedgeConfig>,
    /// Validators and escalation limits, by route name.
    #[serde(default)]
    pub quality: BTreeMap<String, QualityConfig>,
}

/// The gateway's own settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GatewayConfig {
    /// Names of the secrets holding the client keys the gateway accepts.
    #[serde(default)]
    pub client_keys_env: Vec<String>,
    /// Serve without client keys. For local demos only: the gateway logs a
    /// warning on every start.
    #[serde(default)]
    pub allow_unauthenticated: bool,
}

/// A configuration checked and turned into policies and adapters.
pub struct Validated {
    /// The policies.
    pub policies: Policies,
    /// Per-provider breaker policies that differ from the default, in id
    /// order.
    pub breakers: Vec<(String, BreakerPolicy)>,
    /// The HTTP adapters, in provider id order.
    pub providers: Vec<(String, Box<dyn Provider>)>,
    /// Prices and the routes' cost settings.
    pub cost: crate::engine::cost::CostPolicy,
    /// Validators and escalation limits, by route name.
    pub quality: BTreeMap<String, Quality>,
    /// Each provider with several keys as the tier of its upstreams (model
    /// left empty), for `provider/model` requests.
    pub key_tiers: BTreeMap<String, Vec<Entry>>,
}

impl Config {
    /// Reads a configuration from JSON text; [`Config::validate`] checks
    /// it. A syntax or type mistake is reported with its path, line and
    /// column (`routes.default[0].timeoutMs: invalid type: string "5",
    /// expected u64 at line 1 column 52`).
    pub fn parse(json: &str) -> Result<Config, ConfigError> {
        crate::json::read(json.as_bytes()).map_err(|m| ConfigError {
            issues: vec![Config::issue(json, m.path, &m.error)],
        })
    }

    /// The issue of the mistake serde_json found at `path`. One inside a
    /// provider entry is named at its field ([`ProviderConfig::mistake_in`]),
    /// with the position of the first report (the entry's end).
    fn issue(json: &str, mut path: Vec<Segment>, e: &serde_json::Error) -> ConfigIssue {
        let inner = match &path[..] {
            [Segment::Map { key: top }, Segment::Map { key: id }]
                if top == "providers" && e.is_data() =>
            {
                serde_json::from_str::<Value>(json)
                    .ok()
                    .and_then(|mut doc| {
                        ProviderConfig::mistake_in(doc.get_mut(top)?.get_mut(id)?.take())
                    })
            }
            _ => None,
        };
        match inner {
            Some(inner) => {
                path.extend(inner.path().iter().cloned());
                let at = format!(" at line {} column {}", e.line(), e.column());
                ConfigIssue::new(path_text(&path), format!("{}{at}", inner.inner()))
            }
            None => ConfigIssue::new(path_text(&path), e.to_string()),
        }
    }

    /// Checks everything and builds the adapters. `secret` looks up a
    /// secret or environment variable by name; `extra` names providers
    /// supplied in code (custom providers), which routes may use too. Every
    /// problem is reported, each with its path.
    pub fn validate(
        &self,
        secret: &dyn Fn(&str) -> Option<String>,
        extra: &[&str],
    ) -> Result<Validated, ConfigError> {
        let mut issues = Issues::default();
        let mut providers = Vec::new();
        let mut tiers = keys::KeyTiers::default();
        let taken = |id: &str| self.providers.contains_key(id) || extra.contains(&id);
        for (id, cfg) in &self.providers {
            let path = format!("providers.{id}");
            if extra.contains(&id.as_str()) {
                issues.add(&path, "a custom provider has the same name");
            }
            let built = keys::build(id, cfg, &path, secret, &taken, &mut tiers, &mut issues);
            providers.extend(built);
        }
        let known = |id: &str| self.providers.contains_key(id) || extra.contains(&id);

        let retry = self
            .retry
            .policy("retry", RetryPolicy::default(), &mut issues);
        let d = Policy::default();
        let client = Policy {
            retry,
            attempt_timeout: issues.ms_at("", "timeoutMs", self.timeout_ms, d.attempt_timeout),
            deadline: issues.ms_at("", "deadlineMs", self.deadline_ms, d.deadline),
            budget: self.budget.policy("budget", &mut issues),
            max_response_bytes: match self.limits.max_response_bytes {
                Some(0) => {
                    issues.add("limits.maxResponseBytes", "must be greater than 0");
                    d.max_response_bytes
                }
                v => v.unwrap_or(d.max_response_bytes),
            },
            max_request_bytes: match self.limits.max_request_bytes {
                Some(0) => {
                    issues.add("limits.maxRequestBytes", "must be greater than 0");
                    d.max_request_bytes
                }
                v => v.unwrap_or(d.max_request_bytes),
            },
            first_token_timeout: issues.ms_at(
                "",
                "firstTokenTimeoutMs",
                self.first_token_timeout_ms,
                d.first_token_timeout,
            ),
            idle_timeout: issues.ms_at("", "idleTimeoutMs", self.idle_timeout_ms, d.idle_timeout),
            keepalive: issues.ms_at("", "keepaliveMs", self.keepalive_ms, d.keepalive),
            any_model: self.allow_any_model,
        };
        let breaker = self.breaker.policy("breaker", &mut issues);
        let demotion = self.latency.policy(&mut issues);
        let mut breakers = Vec::new();
        for (id, b) in &self.breakers {
            let path = format!("breakers.{id}");
            if !known(id) {
                issues.add(&path, format!("unknown provider \"{id}\""));
            }
            let merged = BreakerConfig {
                failure_threshold: b.failure_threshold.or(self.breaker.failure_threshold),
                failure_rate: b.failure_rate.or(self.breaker.failure_rate),
                window: b.window.or(self.breaker.window),
                minimum_calls: b.minimum_calls.or(self.breaker.minimum_calls),
                cooldown_ms: b.cooldown_ms.or(self.breaker.cooldown_ms),
                max_cooldown_ms: b.max_cooldown_ms.or(self.breaker.max_cooldown_ms),
                half_open_permits: b.half_open_permits.or(self.breaker.half_open_permits),
                success_threshold: b.success_threshold.or(self.breaker.success_threshold),
            };
            let policy = merged.policy(&path, &mut issues);
            match tiers.0.get(id) {
                Some(keys) => breakers.extend(keys.iter().map(|(k, _)| (k.clone(), policy))),
                None => breakers.push((id.clone(), policy)),
            }
        }

        let mut routes = BTreeMap::new();
        for (name, entries) in &self.routes {
            let path = format!("routes.{name}");
            if name.is_empty() {
                issues.add("routes", "a route name must not be empty");
            }
            if entries.is_empty() {
                issues.add(&path, "a route needs at least one entry");
            }
            tier::check(&path, entries, &mut issues);
            let mut chain = Vec::new();
            for (i, e) in entries.iter().enumerate() {
                let path = &format!("{path}[{i}]");
                if !known(&e.provider) {
                    issues.add_at(
                        path,
                        "provider",
                        &format!("unknown provider \"{}\"", e.provider),
                    );
                }
                if e.model.trim().is_empty() {
                    issues.add_at(path, "model", "must not be empty");
                }
                chain.push(Entry {
                    provider: e.provider.clone(),
                    model: e.model.clone(),
                    label: e.label.clone(),
                    timeout: e.timeout_ms.map(|ms| {
                        issues.ms_at(path, "timeoutMs", Some(ms), client.attempt_timeout)
                    }),
                    retry: e
                        .retry
                        .as_ref()
                        .map(|r| r.policy(&format!("{path}.retry"), client.retry, &mut issues)),
                    first_token_timeout: e.first_token_timeout_ms.map(|ms| {
                        issues.ms_at(
                            path,
                            "firstTokenTimeoutMs",
                            Some(ms),
                            client.first_token_timeout,
                        )
                    }),
                    embeddings: e.embeddings.as_ref().map(|m| m.model()),
                    priority: e.priority,
                    weight: e.weight.unwrap_or(1),
                    speed: self.latency.speed(path, e, &mut issues),
                });
            }
            routes.insert(name.clone(), tiers.expand(chain));
        }
        // Each configured model is a route of its own name.
        for (id, cfg) in &self.providers {
            for model in cfg.models().keys() {
                if !self.routes.contains_key(model) {
                    routes.entry(model.clone()).or_insert_with(Vec::new).push(
                        Entry::new(id.clone(), model.clone()).speed(self.latency.speed(
                            &format!("providers.{id}.models.{model}"),
                            &EntryConfig::default(),
                            &mut issues,
                        )),
                    );
                }
            }
        }
        for (name, chain) in &mut routes {
            if !self.routes.contains_key(name) {
                *chain = tiers.expand(std::mem::take(chain));
            }
        }
        // Nothing could be called: every call would fail with an unknown
        // route, long after the configuration was accepted.
        if let Some(id) = self.providers.keys().next().filter(|_| routes.is_empty()) {
            if !self.allow_any_model {
                issues.add(
                    "routes",
                    format!(
                        "no route: add one (\"routes\": {{\"default\": [{{\"provider\": \"{id}\", \"model\": \"…\"}}]}}), list models under a provider, or set allowAnyModel"
                    ),
                );
            }
        }
        embeddings::check(&self.routes, &providers, extra, &mut issues);
        let default_route = match &self.default_route {
            Some(name) if !routes.contains_key(name) => {
                issues.add("defaultRoute", format!("unknown route \"{name}\""));
                None
            }
            Some(name) => Some(name.clone()),
            None if self.routes.contains_key("default") => Some("default".to_string()),
            None => self.routes.keys().next().cloned(),
        };
        let hedges = hedge::hedges(&self.hedge, &|r| routes.contains_key(r), &mut issues);
        if self
            .gateway
            .client_keys_env
            .iter()
            .any(|k| k.trim().is_empty())
        {
            issues.add("gateway.clientKeysEnv", "secret names must not be empty");
        }
        let cost = self.cost.policy(
            &self.providers,
            &known,
            &|name| routes.contains_key(name),
            &mut issues,
        );
        let mut cost = cost;
        for (base, keys) in &tiers.0 {
            for (id, _) in keys {
                cost.prices.copy_provider(base, id);
            }
        }
        let quality = quality::build(&self.quality, &routes, &mut issues.0);
        if !issues.0.is_empty() {
            return Err(ConfigError { issues: issues.0 });
        }
        Ok(Validated {
            policies: Policies {
                client,
                breaker,
                demotion,
                hedges,
                routes,
                default_route,
            },
            breakers,
            providers,
            cost,
            quality,
            key_tiers: tiers.templates(),
        })
    }
}

impl Config {
    /// A client from this configuration; see [`Config::client_builder`].
    pub fn client<P: Platform>(
        &self,
        platform: P,
        extra: Vec<(String, Upstream)>,
        secret: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Client<P>, ConfigError> {
        Ok(self.client_builder(platform, extra, secret)?.build())
    }

    /// A builder set up from this configuration, for hosts that bring their
    /// own breaker store. `extra` adds providers written in code (custom
    /// providers), which the configuration's routes may name; `secret`
    /// looks up provider keys by secret or environment variable name.
    pub fn client_builder<P: Platform>(
        &self,
        platform: P,
        extra: Vec<(String, Upstream)>,
        secret: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ClientBuilder<P>, ConfigError> {
        let names: Vec<&str> = extra.iter().map(|(n, _)| n.as_str()).collect();
        let v = self.validate(secret, &names)?;
        Ok(v.into_builder(platform, extra))
    }
}

impl Validated {
    /// A builder set up from this configuration (for a host that needs the
    /// policies first, such as the Worker's fleet store), with `extra`
    /// providers written in code.
    pub fn into_builder<P: Platform>(
        self,
        platform: P,
        extra: Vec<(String, Upstream)>,
    ) -> ClientBuilder<P> {
        let mut b = Client::builder(platform)
            .policy(self.policies.client)
            .breaker(self.policies.breaker)
            .cost(self.cost)
            .demotion(self.policies.demotion);
        for (route, h) in self.policies.hedges {
            b = b.hedge(route, h);
        }
        for (id, p) in self.providers {
            b = b.upstream(id, Upstream::Http(p));
        }
        for (id, u) in extra {
            b = b.upstream(id, u);
        }
        for (id, p) in self.breakers {
            b = b.breaker_for(id, p);
        }
        // As validated: a route per configured model besides the named
        // ones, and no default where there is none to choose.
        b.routes = self.policies.routes;
        b.default_route = self.policies.default_route;
        b.quality = self.quality;
        b.key_tiers = self.key_tiers;
        // An escalation's cost cap prices attempts as the cost book does.
        let prices = std::rc::Rc::new(b.cost_prices().clone());
        for q in b.quality.values_mut() {
            let prices = std::rc::Rc::clone(&prices);
            q.attempt_cost = Some(std::rc::Rc::new(move |a| {
                prices.attempt_cost(a).map(|c| c.usd())
            }));
        }
        b
    }
}

/// Retry settings; every field optional, defaults from [`RetryPolicy`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetryConfig {
    /// Attempts per provider per request, the first included (1–10).
    pub max_attempts: Option<u32>,
    /// The first backoff cap.
    pub base_delay_ms: Option<u64>,
    /// The largest backoff and the longest Retry-After honoured.
    pub max_delay_ms: Option<u64>,
}

/// Retry budget settings; defaults from [`BudgetPolicy`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BudgetConfig {
    /// Retry tokens earned per first attempt (0–1).
    pub ratio: Option<f64>,
    /// Retry tokens earned per second regardless of traffic.
    pub floor_per_sec: Option<f64>,
    /// The most tokens saved up.
    pub capacity: Option<f64>,
}

/// Breaker settings; defaults from [`BreakerPolicy`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BreakerConfig {
    /// Consecutive failures that open it.
    pub failure_threshold: Option<u32>,
    /// Failure rate over the window that opens it, in (0, 1].
    pub failure_rate: Option<f64>,
    /// Verdicts in the sliding window.
    pub window: Option<u32>,
    /// Verdicts needed before the rate counts.
    pub minimum_calls: Option<u32>,
    /// The first opening's length.
    pub cooldown_ms: Option<u64>,
    /// The longest opening.
    pub max_cooldown_ms: Option<u64>,
    /// Probes at once in half-open.
    pub half_open_permits: Option<u32>,
    /// Probe successes that close it.
    pub success_threshold: Option<u32>,
}

/// One entry of a route.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EntryConfig {
    /// A provider id from `providers`.
    pub provider: String,
    /// The model to ask it for.
    pub model: String,
    /// A name for logs.
    pub label: Option<String>,
    /// This entry's per-attempt timeout.
    pub timeout_ms: Option<u64>,
    /// This entry's retry settings, over the client's.
    pub retry: Option<RetryConfig>,
    /// This entry's time-to-first-token deadline for streams.
    pub first_token_timeout_ms: Option<u64>,
    /// The embedding model it serves, which makes its route an
    /// embeddings route ([`embeddings`]).
    #[serde(default)]
    pub embeddings: Option<embeddings::EmbeddingsConfig>,
    /// Its tier: entries sharing a priority split load by `weight`
    /// (`tier.rs`). Defaulted, so an entry written as a shorter sequence
    /// still reads.
    #[serde(default)]
    pub priority: Option<u32>,
    /// Its share of its tier's load (default 1).
    #[serde(default)]
    pub weight: Option<u32>,
    /// This entry's objective for whole answers (see [`LatencyConfig`]).
    #[serde(default)]
    pub latency_slo_ms: Option<u64>,
    /// This entry's objective for a stream's first token.
    #[serde(default)]
    pub ttft_slo_ms: Option<u64>,
    /// The slowest pace this entry's streams may start at.
    #[serde(default)]
    pub min_tokens_per_second: Option<f64>,
    /// Over how many first tokens the pace is judged.
    #[serde(default)]
    pub rate_window_tokens: Option<u32>,
}

/// Size limits.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LimitsConfig {
    /// The largest request body a gateway accepts (default 1 MiB).
    pub max_request_bytes: Option<usize>,
    /// The largest provider response read (default 8 MiB).
    pub max_response_bytes: Option<usize>,
}

/// The policies a configuration validates into.
#[derive(Debug, Clone, PartialEq)]
pub struct Policies {
    /// Client-wide retry, timeout, deadline and budget.
    pub client: Policy,
    /// Every breaker's policy.
    pub breaker: BreakerPolicy,
    /// How latency demotion decides.
    pub demotion: DemotionPolicy,
    /// Routes' hedging, by route name.
    pub hedges: BTreeMap<String, HedgePolicy>,
    /// Routes by name, each an ordered chain.
    pub routes: BTreeMap<String, Vec<Entry>>,
    /// The route for requests that name none.
    pub default_route: Option<String>,
}

const MAX_ATTEMPTS: u32 = 10;
const MAX_MS: u64 = 24 * 3600 * 1000;

/// Collects issues while walking a configuration.
#[derive(Debug, Default)]
pub struct Issues(pub Vec<ConfigIssue>);

impl Issues {
    /// Records a problem at `path`.
    pub fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigIssue::new(path, message));
    }

    /// Records a problem at `path.field` (`field` alone at the top, `path`
    /// alone without a field): the path is written only for a problem.
    fn add_at(&mut self, path: &str, field: &str, message: &str) {
        let at = match (path.is_empty(), field.is_empty()) {
            (true, _) => field.to_string(),
            (_, true) => path.to_string(),
            _ => format!("{path}.{field}"),
        };
        self.0.push(ConfigIssue::new(at, message));
    }

    /// A duration in ms, checked to be positive and below a day.
    pub fn ms(&mut self, path: &str, v: Option<u64>, default: Duration) -> Duration {
        self.ms_at(path, "", v, default)
    }

    /// [`Issues::ms`] at `path.field`.
    fn ms_at(&mut self, path: &str, field: &str, v: Option<u64>, default: Duration) -> Duration {
        match v {
            None => default,
            Some(0) => {
                self.add_at(path, field, "must be greater than 0");
                default
            }
            Some(ms) if ms > MAX_MS => {
                self.add_at(path, field, &format!("must be at most {MAX_MS} (one day)"));
                default
            }
            Some(ms) => Duration::from_millis(ms),
        }
    }

    /// A fraction, checked to lie in `(0, 1]` (or `[0, 1]` when `zero_ok`).
    fn fraction(
        &mut self,
        path: &str,
        field: &str,
        v: Option<f64>,
        default: f64,
        zero_ok: bool,
    ) -> f64 {
        match v {
            None => default,
            Some(x) if x.is_finite() && x <= 1.0 && (x > 0.0 || (zero_ok && x == 0.0)) => x,
            Some(_) => {
                self.add_at(
                    path,
                    field,
                    if zero_ok {
                        "must be between 0 and 1"
                    } else {
                        "must be greater than 0 and at most 1"
                    },
                );
                default
            }
        }
    }

    /// A count, checked to lie in `[1, max]`.
    fn count(&mut self, path: &str, field: &str, v: Option<u32>, default: u32, max: u32) -> u32 {
        match v {
            None => default,
            Some(n) if (1..=max).contains(&n) => n,
            Some(_) => {
                self.add_at(path, field, &format!("must be between 1 and {max}"));
                default
            }
        }
    }
}

impl RetryConfig {
    /// The policy, over `base`.
    pub fn policy(&self, path: &str, base: RetryPolicy, issues: &mut Issues) -> RetryPolicy {
        let p = RetryPolicy {
            max_attempts: issues.count(
                path,
                "maxAttempts",
                self.max_attempts,
                base.max_attempts,
                MAX_ATTEMPTS,
            ),
            base_delay: issues.ms_at(path, "baseDelayMs", self.base_delay_ms, base.base_delay),
            max_delay: issues.ms_at(path, "maxDelayMs", self.max_delay_ms, base.max_delay),
        };
        if p.base_delay > p.max_delay {
            issues.add_at(path, "baseDelayMs", "must not exceed maxDelayMs");
        }
        p
    }
}

impl BudgetConfig {
    /// The policy.
    pub fn policy(&self, path: &str, issues: &mut Issues) -> BudgetPolicy {
        let d = BudgetPolicy::default();
        let capacity = match self.capacity {
            None => d.capacity,
            Some(c) if c.is_finite() && (0.0..=1e6).contains(&c) => c,
            Some(_) => {
                issues.add_at(path, "capacity", "must be between 0 and 1000000");
                d.capacity
            }
        };
        let floor_per_sec = match self.floor_per_sec {
            None => d.floor_per_sec,
            Some(c) if c.is_finite() && (0.0..=1e6).contains(&c) => c,
            Some(_) => {
                issues.add_at(path, "floorPerSec", "must be between 0 and 1000000");
                d.floor_per_sec
            }
        };
        BudgetPolicy {
            ratio: issues.fraction(path, "ratio", self.ratio, d.ratio, true),
            floor_per_sec,
            capacity,
        }
    }
}

impl BreakerConfig {
    /// The policy.
    pub fn policy(&self, path: &str, issues: &mut Issues) -> BreakerPolicy {
        let d = BreakerPolicy::default();
        let p = BreakerPolicy {
            failure_threshold: issues.count(
                path,
                "failureThreshold",
                self.failure_threshold,
                d.failure_threshold,
                10_000,
            ),
            failure_rate: issues.fraction(
                path,
                "failureRate",
                self.failure_rate,
                d.failure_rate,
                false,
            ),
            window: issues.count(path, "window", self.window, d.window, 10_000),
            minimum_calls: issues.count(
                path,
                "minimumCalls",
                self.minimum_calls,
                d.minimum_calls,
                10_000,
            ),
            cooldown: issues.ms_at(path, "cooldownMs", self.cooldown_ms, d.cooldown),
            max_cooldown: issues.ms_at(
                path,
                "maxCooldownMs",
                self.max_cooldown_ms,
                d.max_cooldown.max(
                    self.cooldown_ms
                        .map_or(d.max_cooldown, Duration::from_millis),
                ),
            ),
            half_open_permits: issues.count(
                path,
                "halfOpenPermits",
                self.half_open_permits,
                d.half_open_permits,
                1000,
            ),
            success_threshold: issues.count(
                path,
                "successThreshold",
                self.success_threshold,
                d.success_threshold,
                1000,
            ),
        };
        if p.minimum_calls > p.window {
            issues.add_at(path, "minimumCalls", "must not exceed window");
        }
        if p.cooldown > p.max_cooldown {
            issues.add_at(path, "cooldownMs", "must not exceed maxCooldownMs");
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::Config;

    /// The one issue of a configuration that does not parse.
    fn err(json: &str) -> (String, String) {
        let e = Config::parse(json).unwrap_err();
        assert_eq!(e.issues.len(), 1, "{e}");
        let issue = e.issues.into_iter().next().unwrap();
        (issue.path, issue.message)
    }

    #[test]
    fn every_form_serde_accepts_is_read() {
        for json in [
            "{}",
            r#"{"providers":{},"routes":{}}"#,
            "[]",
            r#"{"gateway":[[]]}"#,
            r#"{"providers":{"p":["openai",null,null,null,{},{},null,null,null,null]}}"#,
            r#"{"providers":{"p":["openai-compatible","groq",null,null,null,{},{}]}}"#,
            r#"{"timeoutMs":null,"defaultRoute":null,"limits":[1,2],"retry":[null,null,3]}"#,
            r#"{"routes":{"r":[["p","m",null,null,null,null]]}}"#,
            r#"{"providers":{"c":{"preset":"azure","kind":"openai-compatible","deployment":"d",
                "maxTokensField":{"max_completion_tokens":null}}}}"#,
        ] {
            assert!(Config::parse(json).is_ok(), "{json}");
        }
    }

    #[test]
    fn type_errors_name_their_path_line_and_column() {
        let (path, message) =
            err(r#"{"routes":{"default":[{"provider":"a","model":"m","timeoutMs":"5"}]}}"#);
        assert_eq!(path, "routes.default[0].timeoutMs");
        assert_eq!(
            message,
            r#"invalid type: string "5", expected u64 at line 1 column 65"#
        );
        let (path, message) = err(r#"{"retry":{"maxAttempts":1.5}}"#);
        assert_eq!(path, "retry.maxAttempts");
        assert!(message.starts_with("invalid type: floating point `1.5`, expected u32"));
        let (path, message) = err(r#"{"deadlineMs":-1}"#);
        assert_eq!(path, "deadlineMs");
        assert!(message.starts_with("invalid value: integer `-1`, expected u64"));
        let (path, message) = err(r#"{"timeoutMs":null,"limits":[]}"#);
        assert_eq!(path, "limits");
        assert!(
            message.starts_with("invalid length 0, expected"),
            "{message}"
        );
    }

    #[test]
    fn unknown_missing_and_duplicate_fields() {
        let (path, message) = err(r#"{"retry":{"maxAttempt":3}}"#);
        assert_eq!(path, "retry.maxAttempt");
        assert!(message.starts_with("unknown field `maxAttempt`, expected one of"));
        let (path, message) = err(r#"{"routes":{"r":[{"provider":"a"}]}}"#);
        assert_eq!(path, "routes.r[0]");
        assert!(message.starts_with("missing field `model`"), "{message}");
        let (path, message) = err(r#"{"retry":{"maxAttempts":1,"maxAttempts":2}}"#);
        assert_eq!(path, "retry");
        assert!(message.starts_with("duplicate field `maxAttempts`"));
        let (path, _) = err(r#"{"timeoutMs":1,"timeoutMs":2}"#);
        assert_eq!(path, "(root)");
    }

    #[test]
    fn a_mistake_inside_a_provider_entry_names_its_field() {
        for (json, at, start) in [
            (
                r#"{"providers":{"p":{"kind":"openai-compatible","preset":"nope"}}}"#,
                "providers.p.preset",
                "unknown variant `nope`",
            ),
            (
                r#"{"providers":{"p":{"kind":"openai","maxTokensField":"x"}}}"#,
                "providers.p.maxTokensField",
                "unknown variant `x`",
            ),
            (
                r#"{"providers":{"p":{"kind":"openai","models":{"m":{"contextWindow":-1}}}}}"#,
                "providers.p.models.m.contextWindow",
                "invalid value: integer `-1`, expected u32",
            ),
            (
                r#"{"providers":{"p":{"kind":"anthropic","organization":"o"}}}"#,
                "providers.p.organization",
                "unknown field `organization`",
            ),
            (
                r#"{"providers":{"p":{"kind":"openai-compatible","preset":"groq","streamUsage":"y"}}}"#,
                "providers.p.streamUsage",
                "invalid type: string \"y\", expected a boolean",
            ),
            (
                r#"{"providers":{"p":{"kind":"openai-compatible"}}}"#,
                "providers.p",
                "missing field `preset`",
            ),
            (
                r#"{"providers":{"p":{"kind":"nope"}}}"#,
                "providers.p.kind",
                "unknown variant `nope`",
            ),
            (
                r#"{"providers":{"p":{}}}"#,
                "providers.p",
                "missing field `kind`",
            ),
            (
                r#"{"providers":{"p":{"kind":"openai","baseUrl":"a","baseUrl":"b"}}}"#,
                "providers.p",
                "duplicate field `baseUrl`",
            ),
            (
                r#"{"providers":{"p":["openai",1]}}"#,
                "providers.p",
                "invalid type",
            ),
        ] {
            let (path, message) = err(json);
            assert_eq!(path, at, "{json}");
            assert!(message.starts_with(start), "{json}: {message}");
            assert!(message.contains(" at line 1 column "), "{json}: {message}");
        }
    }

    #[test]
    fn syntax_errors_keep_their_position() {
        let (path, message) = err(r#"{"retry":{"maxAttempts":3,}}"#);
        assert_eq!(path, "retry");
        assert_eq!(message, "trailing comma at line 1 column 27");
        let (path, message) = err("{");
        assert_eq!(path, "(root)");
        assert!(message.starts_with("EOF"), "{message}");
        let (path, message) = err("{} x");
        assert_eq!(path, "(root)");
        assert!(message.starts_with("trailing characters"), "{message}");
        let (path, _) = err("");
        assert_eq!(path, "(root)");
    }
}
