//! A configuration checked whole into policies and adapters
//! ([`Config::validate`]), and those made a client.

use std::collections::BTreeMap;

use super::breaker::BreakerConfig;
use super::issues::Issues;
use super::shape::{Config, EntryConfig};
use super::{cache, embeddings, hedge, keys, quality, tier};
use crate::engine::client::{Client, ClientBuilder, Entry, Policy};
use crate::engine::hedge::HedgePolicy;
use crate::issue::ConfigError;
use crate::platform::Platform;
use crate::policy::backoff::RetryPolicy;
use crate::policy::breaker::BreakerPolicy;
use crate::policy::latency::DemotionPolicy;
use crate::provider::{Provider, Upstream};
use crate::quality::Quality;

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
    /// The response cache's settings, by route name.
    pub cache: BTreeMap<String, crate::cache::CachePolicy>,
    /// The in-memory response cache's bounds.
    pub cache_bounds: crate::cache::CacheBounds,
    /// Where spans are exported (`tracing.export`), if anywhere.
    pub trace_export: Option<crate::trace::export::ExportPolicy>,
    /// The gateway's named clients (`gateway.clients`).
    pub(crate) clients: Vec<super::clients::ClientSpec>,
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

impl Config {
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
            steer_by_capacity: self.steer_by_capacity.unwrap_or(true),
            shed_by_priority: self.shed_by_priority.unwrap_or(true),
            propagate_trace: self.tracing.propagate.unwrap_or(true),
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
        let caches = cache::policies(&self.cache, &|r| routes.contains_key(r), &mut issues);
        let cache_bounds = cache::bounds(&self.limits, &mut issues);
        let clients = super::clients::clients(
            &self.gateway.clients,
            &self.gateway.client_keys_env,
            &|r| routes.contains_key(r),
            !cost.prices.is_empty(),
            &mut issues,
        );
        let trace_export = self
            .tracing
            .export
            .as_ref()
            .and_then(|e| super::tracing::export_policy(e, secret, &mut issues));
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
            cache: caches,
            cache_bounds,
            trace_export,
            clients,
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
