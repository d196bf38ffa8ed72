//! Configuration of the gateway's named clients: `gateway.clients`, each a
//! name, the secrets holding its keys, the routes it may use, its limits
//! and its priority class.
//!
//! ```json
//! "gateway": { "clients": [
//!   { "name": "web", "keysEnv": ["WEB_KEY", "WEB_KEY_NEXT"], "routes": ["default"],
//!     "limits": { "requestsPerMinute": 600, "tokensPerMinute": 200000,
//!                 "maxInFlight": 20, "dailyBudgetUsd": 25 },
//!     "priority": "critical" }
//! ] }
//! ```
//!
//! The secrets are read by the gateway's setup: a client library reading
//! the same configuration has no client keys to check.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::Issues;
use crate::policy::price::Cost;
use crate::policy::shed::Priority;
use crate::policy::tenant::ClientLimits;

/// The longest client name: it is a metric label and a log field.
const MAX_NAME: usize = 64;

/// The largest weight of a client within its class.
const MAX_WEIGHT: u32 = 1000;

/// One entry of `gateway.clients`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ClientConfig {
    /// Named in logs, metrics and the status page; never its key.
    pub(crate) name: String,
    /// The secrets holding its keys: several while one is rotated.
    pub(crate) keys_env: Vec<String>,
    /// The routes it may name (default: every route, and any
    /// `provider/model` the gateway serves).
    #[serde(default)]
    pub(crate) routes: Option<Vec<String>>,
    /// Its limits (default: none).
    #[serde(default)]
    pub(crate) limits: LimitsShape,
    /// Its priority class: `critical`, `standard` (default) or `sheddable`.
    #[serde(default)]
    pub(crate) priority: Option<String>,
    /// Its weight among the clients of its class while a route sheds part
    /// of it (default 1).
    #[serde(default)]
    pub(crate) weight: Option<u32>,
}

/// `limits` of a client.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct LimitsShape {
    pub(crate) requests_per_minute: Option<u64>,
    pub(crate) tokens_per_minute: Option<u64>,
    pub(crate) max_in_flight: Option<u64>,
    pub(crate) daily_budget_usd: Option<f64>,
}

/// A named client, checked: its secrets are still to be read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClientSpec {
    /// Its name.
    pub(crate) name: String,
    /// The secrets holding its keys.
    pub(crate) keys_env: Vec<String>,
    /// The routes it may name; `None`: any.
    pub(crate) routes: Option<BTreeSet<String>>,
    /// Its limits.
    pub(crate) limits: ClientLimits,
    /// Its priority class.
    pub(crate) priority: Priority,
    /// Its weight within its class.
    pub(crate) weight: u32,
}

/// The name `gateway.clientKeysEnv`'s keys are counted under.
pub(crate) const DEFAULT_CLIENT: &str = "default";

/// Checks `gateway.clients` against the routes (`is_route`) and whether
/// any price is configured (`priced`): a spend limit without prices could
/// never be reached.
pub(crate) fn clients(
    cfg: &[ClientConfig],
    keys_env: &[String],
    is_route: &dyn Fn(&str) -> bool,
    priced: bool,
    issues: &mut Issues,
) -> Vec<ClientSpec> {
    let mut names = BTreeSet::new();
    let mut secrets: BTreeSet<&str> = keys_env.iter().map(String::as_str).collect();
    if !keys_env.is_empty() {
        names.insert(DEFAULT_CLIENT);
    }
    let mut out = Vec::with_capacity(cfg.len());
    for (i, c) in cfg.iter().enumerate() {
        let path = format!("gateway.clients[{i}]");
        let name = c.name.trim();
        let name_ok = !name.is_empty()
            && name.len() <= MAX_NAME
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !name_ok {
            issues.add(
                format!("{path}.name"),
                format!("must be 1 to {MAX_NAME} letters, digits, '-', '_' or '.'"),
            );
        } else if !names.insert(name) {
            let why = if name == DEFAULT_CLIENT && !keys_env.is_empty() {
                "is the name gateway.clientKeysEnv's keys are counted under".to_string()
            } else {
                format!("another client is named \"{name}\"")
            };
            issues.add(format!("{path}.name"), why);
        }
        if c.keys_env.is_empty() {
            issues.add(format!("{path}.keysEnv"), "name at least one secret");
        }
        for (j, secret) in c.keys_env.iter().enumerate() {
            if secret.trim().is_empty() {
                issues.add(
                    format!("{path}.keysEnv[{j}]"),
                    "secret names must not be empty",
                );
            } else if !secrets.insert(secret.as_str()) {
                issues.add(
                    format!("{path}.keysEnv[{j}]"),
                    format!("secret \"{secret}\" already holds another client's key"),
                );
            }
        }
        let routes = c.routes.as_ref().map(|routes| {
            if routes.is_empty() {
                issues.add(
                    format!("{path}.routes"),
                    "name at least one route, or leave it out for all",
                );
            }
            for (j, r) in routes.iter().enumerate() {
                if !is_route(r) {
                    issues.add(
                        format!("{path}.routes[{j}]"),
                        format!("unknown route \"{r}\""),
                    );
                }
            }
            routes.iter().cloned().collect()
        });
        let limits = limits(&c.limits, &format!("{path}.limits"), priced, issues);
        let priority = match c.priority.as_deref() {
            None => Priority::default(),
            Some(p) => Priority::parse(p).unwrap_or_else(|| {
                issues.add(
                    format!("{path}.priority"),
                    format!("unknown class \"{p}\": critical, standard or sheddable"),
                );
                Priority::default()
            }),
        };
        let weight = match c.weight {
            None => 1,
            Some(w) if (1..=MAX_WEIGHT).contains(&w) => w,
            Some(_) => {
                issues.add(
                    format!("{path}.weight"),
                    format!("must be a whole number from 1 to {MAX_WEIGHT}"),
                );
                1
            }
        };
        out.push(ClientSpec {
            name: name.to_string(),
            keys_env: c.keys_env.clone(),
            routes,
            limits,
            priority,
            weight,
        });
    }
    out
}

fn limits(l: &LimitsShape, path: &str, priced: bool, issues: &mut Issues) -> ClientLimits {
    let mut positive = |field: &str, v: Option<u64>| {
        if v == Some(0) {
            issues.add(
                format!("{path}.{field}"),
                "must be greater than 0 (leave it out for no limit)",
            );
        }
        v.filter(|&n| n > 0)
    };
    let requests_per_minute = positive("requestsPerMinute", l.requests_per_minute);
    let tokens_per_minute = positive("tokensPerMinute", l.tokens_per_minute);
    let in_flight = positive("maxInFlight", l.max_in_flight);
    let daily_spend = l.daily_budget_usd.and_then(|usd| {
        let field = format!("{path}.dailyBudgetUsd");
        match Cost::from_usd(usd) {
            Some(c) if c > Cost::default() && priced => Some(c),
            Some(c) if c > Cost::default() => {
                issues.add(
                    field,
                    "needs prices (cost.prices): spend is priced from the usage providers report",
                );
                None
            }
            _ => {
                issues.add(field, "must be a positive number of dollars");
                None
            }
        }
    });
    ClientLimits {
        requests_per_minute,
        tokens_per_minute,
        in_flight,
        daily_spend,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(json: &str, keys_env: &[&str], priced: bool) -> (Vec<ClientSpec>, Vec<String>) {
        let cfg: Vec<ClientConfig> = serde_json::from_str(json).expect("the shape reads");
        let keys_env: Vec<String> = keys_env.iter().map(|s| s.to_string()).collect();
        let mut issues = Issues::default();
        let out = clients(
            &cfg,
            &keys_env,
            &|r| r == "default" || r == "cheap",
            priced,
            &mut issues,
        );
        (
            out,
            issues
                .0
                .iter()
                .map(|i| format!("{}: {}", i.path, i.message))
                .collect(),
        )
    }

    #[test]
    fn a_client_reads_with_its_limits() {
        let (out, issues) = check(
            r#"[{"name": "web", "keysEnv": ["WEB", "WEB_NEXT"], "routes": ["cheap"],
                 "limits": {"requestsPerMinute": 60, "tokensPerMinute": 1000,
                            "maxInFlight": 2, "dailyBudgetUsd": 1.5},
                 "priority": "critical", "weight": 3},
                {"name": "batch", "keysEnv": ["BATCH"]}]"#,
            &["OLD"],
            true,
        );
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(out[0].name, "web");
        assert_eq!(out[0].routes, Some(BTreeSet::from(["cheap".to_string()])));
        assert_eq!(
            out[0].limits,
            ClientLimits {
                requests_per_minute: Some(60),
                tokens_per_minute: Some(1000),
                in_flight: Some(2),
                daily_spend: Cost::from_usd(1.5),
            }
        );
        assert!(out[1].limits == ClientLimits::default() && out[1].routes.is_none());
        assert_eq!(
            (out[0].priority, out[1].priority),
            (Priority::Critical, Priority::Standard)
        );
        assert_eq!((out[0].weight, out[1].weight), (3, 1));
    }

    #[test]
    fn every_mistake_is_named_with_its_path_at_once() {
        let (_, issues) = check(
            r#"[{"name": "a b", "keysEnv": []},
                {"name": "default", "keysEnv": ["OLD", ""], "routes": ["nope"],
                 "limits": {"requestsPerMinute": 0, "dailyBudgetUsd": 2}},
                {"name": "x", "keysEnv": ["X"], "routes": [],
                 "limits": {"dailyBudgetUsd": -1}},
                {"name": "x", "keysEnv": ["X"], "priority": "urgent", "weight": 0}]"#,
            &["OLD"],
            false,
        );
        assert_eq!(
            issues,
            [
                "gateway.clients[0].name: must be 1 to 64 letters, digits, '-', '_' or '.'",
                "gateway.clients[0].keysEnv: name at least one secret",
                "gateway.clients[1].name: is the name gateway.clientKeysEnv's keys are counted under",
                "gateway.clients[1].keysEnv[0]: secret \"OLD\" already holds another client's key",
                "gateway.clients[1].keysEnv[1]: secret names must not be empty",
                "gateway.clients[1].routes[0]: unknown route \"nope\"",
                "gateway.clients[1].limits.requestsPerMinute: must be greater than 0 (leave it out for no limit)",
                "gateway.clients[1].limits.dailyBudgetUsd: needs prices (cost.prices): spend is priced from the usage providers report",
                "gateway.clients[2].routes: name at least one route, or leave it out for all",
                "gateway.clients[2].limits.dailyBudgetUsd: must be a positive number of dollars",
                "gateway.clients[3].name: another client is named \"x\"",
                "gateway.clients[3].keysEnv[0]: secret \"X\" already holds another client's key",
                "gateway.clients[3].priority: unknown class \"urgent\": critical, standard or sheddable",
                "gateway.clients[3].weight: must be a whole number from 1 to 1000",
            ]
        );
    }
}
