//! The package's configuration: the one JSON shape of DESIGN.md §7.
//!
//! **Stopgap.** Until `config::Config` and `Client::from_config` land on
//! main, [`build_client`] translates the shape's `routes`, `retry`,
//! `budget`, `breaker`, `timeoutMs`, `deadlineMs` and `limits` itself with
//! the core's `RetryConfig`/`BreakerConfig`/`EntryConfig`; built-in
//! `providers` are reported as not available yet. Swapping it is one call:
//! `Client::from_config(platform, &config::parse_json(json)?, customs,
//! &secret)` (plus attaching the observer).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::backoff::RetryPolicy;
use crate::chain::{Client, Entry, Policy};
use crate::config::{
    parse_json, BreakerConfig, BudgetConfig, ConfigError, EntryConfig, Issues, LimitsConfig,
    RetryConfig,
};
use crate::event::Observer;
use crate::provider::Upstream;
use crate::web::WebPlatform;

/// The JSON shape, as far as this package reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    #[serde(default)]
    providers: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    routes: BTreeMap<String, Vec<EntryConfig>>,
    #[serde(default)]
    default_route: Option<String>,
    #[serde(default)]
    retry: Option<RetryConfig>,
    #[serde(default)]
    budget: Option<BudgetConfig>,
    #[serde(default)]
    breaker: Option<BreakerConfig>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    deadline_ms: Option<u64>,
    #[serde(default)]
    limits: Option<LimitsConfig>,
}

/// The client for `json`, with the JS providers `customs` (in the order
/// given: they form the `default` route when the config has no routes).
/// Every problem is reported at once, each with its path.
pub(crate) fn build_client(
    json: &str,
    customs: Vec<(String, String, Upstream)>,
    observer: Option<Observer>,
) -> Result<Client<WebPlatform>, ConfigError> {
    let cfg: Config = parse_json(json)?;
    let mut issues = Issues::default();

    for id in cfg.providers.keys() {
        let path = format!("providers.{id}");
        if customs.iter().any(|(name, _, _)| name == id) {
            issues.add(path, "also the name of a provider in options.providers");
        } else {
            issues.add(
                path,
                "built-in providers are not in this build yet; pass a JS provider in options.providers",
            );
        }
    }

    let d = Policy::default();
    let retry = cfg.retry.as_ref().map_or(d.retry, |r| {
        r.policy("retry", RetryPolicy::default(), &mut issues)
    });
    let limits = cfg.limits.unwrap_or_default();
    let policy = Policy {
        retry,
        attempt_timeout: issues.ms("timeoutMs", cfg.timeout_ms, d.attempt_timeout),
        deadline: issues.ms("deadlineMs", cfg.deadline_ms, d.deadline),
        budget: cfg
            .budget
            .as_ref()
            .map_or(d.budget, |b| b.policy("budget", &mut issues)),
        max_response_bytes: match limits.max_response_bytes {
            Some(0) => {
                issues.add("limits.maxResponseBytes", "must be greater than 0");
                d.max_response_bytes
            }
            Some(n) => n,
            None => d.max_response_bytes,
        },
    };
    let breaker = cfg
        .breaker
        .as_ref()
        .map_or_else(Default::default, |b| b.policy("breaker", &mut issues));

    let mut routes: Vec<(String, Vec<Entry>)> = Vec::new();
    for (name, entries) in &cfg.routes {
        if entries.is_empty() {
            issues.add(format!("routes.{name}"), "must list at least one entry");
        }
        let mut out = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let path = format!("routes.{name}[{i}]");
            if !customs.iter().any(|(n, _, _)| *n == e.provider) {
                issues.add(
                    format!("{path}.provider"),
                    format!("unknown provider \"{}\"", e.provider),
                );
            }
            let mut entry = Entry::new(e.provider.clone(), e.model.clone());
            entry.label = e.label.clone();
            if let Some(ms) = e.timeout_ms {
                entry.timeout = Some(issues.ms(
                    &format!("{path}.timeoutMs"),
                    Some(ms),
                    Duration::from_secs(30),
                ));
            }
            if let Some(r) = &e.retry {
                entry.retry = Some(r.policy(&format!("{path}.retry"), retry, &mut issues));
            }
            out.push(entry);
        }
        routes.push((name.clone(), out));
    }
    if routes.is_empty() {
        if customs.is_empty() {
            issues.add(
                "routes",
                "no routes and no providers: pass options.providers or config.routes",
            );
        }
        let entries = customs
            .iter()
            .map(|(name, model, _)| Entry::new(name.clone(), model.clone()))
            .collect();
        routes.push(("default".to_string(), entries));
    }
    let default_route = cfg.default_route.clone().unwrap_or_else(|| {
        if routes.iter().any(|(n, _)| n == "default") {
            "default".to_string()
        } else {
            routes.first().map(|(n, _)| n.clone()).unwrap_or_default()
        }
    });
    if !routes.iter().any(|(n, _)| *n == default_route) {
        issues.add("defaultRoute", format!("unknown route \"{default_route}\""));
    }

    if !issues.0.is_empty() {
        return Err(ConfigError { issues: issues.0 });
    }
    let mut b = Client::builder(WebPlatform::new())
        .policy(policy)
        .breaker(breaker)
        .default_route(default_route);
    for (name, _, upstream) in customs {
        b = b.upstream(name, upstream);
    }
    for (name, entries) in routes {
        b = b.route(name, entries);
    }
    if let Some(o) = observer {
        b = b.observer(o);
    }
    Ok(b.build())
}
