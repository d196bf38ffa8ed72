//! What a simulation is asked to run: providers with a latency distribution
//! and a fault timeline, traffic, and the policies (configurations) to
//! compare. Read from JSON, validated once.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One scenario: the same providers and traffic under every policy.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    /// A short name, used in file names and titles.
    pub name: String,
    /// What the scenario rehearses.
    #[serde(default)]
    pub description: String,
    /// Seeds every random draw: the same seed gives the same report.
    #[serde(default = "one")]
    pub seed: u64,
    /// How long traffic arrives, in virtual milliseconds. Requests still
    /// running at the end are run to completion.
    pub duration_ms: u64,
    /// The width of one point of the report's time series (default 1 s).
    #[serde(default = "second")]
    pub bucket_ms: u64,
    /// The configuration every policy starts from: the project's own JSON
    /// shape (providers, routes, retry, breaker…). Providers' `baseUrl` and
    /// keys are filled in by the simulator.
    pub config: Value,
    /// How each configured provider behaves, by provider id.
    pub providers: BTreeMap<String, ProviderModel>,
    /// The requests sent.
    pub traffic: Traffic,
    /// The policies compared; each is a JSON merge patch over `config`.
    pub policies: Vec<PolicyPatch>,
    /// How the fleet's Durable Objects serve the isolates. Given, the
    /// report measures them (`figures.fleet`); left out, every object
    /// answers after five milliseconds, without a queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetModel>,
}

/// The fleet's objects: how fast each serves, where the isolates are.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FleetModel {
    /// One object's time per call, in ms: one object is one thread, and
    /// calls wait for those before them. 0 (the default): no queue.
    #[serde(default)]
    pub service_ms: f64,
    /// Data centres the isolates are spread over, in turn (default 1).
    #[serde(default = "one_u32")]
    pub data_centres: u32,
    /// A call to a model's owner object and back, from an isolate or a
    /// relay (default 5).
    #[serde(default = "five")]
    pub round_trip_ms: u64,
    /// A call from an isolate to its data centre's relay and back
    /// (default 2).
    #[serde(default = "two")]
    pub nearby_round_trip_ms: u64,
}

impl Default for FleetModel {
    fn default() -> Self {
        FleetModel {
            service_ms: 0.0,
            data_centres: 1,
            round_trip_ms: 5,
            nearby_round_trip_ms: 2,
        }
    }
}

fn five() -> u64 {
    5
}

fn two() -> u64 {
    2
}

/// How isolates reach the fleet's breakers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Protocol {
    /// Every isolate calls each model's owner object.
    #[default]
    Direct,
    /// Isolates call their data centre's relay, which keeps a watch on the
    /// owner ([`Relay`](crate::fleet::Relay)).
    Relayed,
}

/// A named configuration to compare.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyPatch {
    /// The policy's name in the report.
    pub name: String,
    /// A JSON merge patch (RFC 7386) applied to the scenario's `config`:
    /// objects merge, `null` removes a key, anything else replaces. None
    /// (the default) runs `config` as it is.
    #[serde(default = "no_change")]
    pub patch: Value,
    /// How its isolates reach the fleet's breakers (default `direct`).
    #[serde(default, skip_serializing_if = "is_direct")]
    pub fleet: Protocol,
}

fn is_direct(p: &Protocol) -> bool {
    *p == Protocol::Direct
}

/// How one provider answers over time.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProviderModel {
    /// Latency of a healthy answer: log-normal with this median…
    pub median_ms: f64,
    /// …and this 95th percentile (≥ the median).
    pub p95_ms: f64,
    /// Price in USD per million input tokens.
    #[serde(default)]
    pub input_per_mtok: f64,
    /// Price in USD per million output tokens.
    #[serde(default)]
    pub output_per_mtok: f64,
    /// What goes wrong, and when.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// Its rate-limit pool, shared by every caller (every isolate): none
    /// (the default) takes any traffic.
    #[serde(default)]
    pub pool: Option<PoolModel>,
}

/// A provider's rate limits, per minute and refilled continuously: a call
/// that finds either exhausted is answered 429 at once, with a
/// `retry-after`; every answer carries the provider's rate-limit headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PoolModel {
    /// Requests a minute.
    #[serde(default)]
    pub requests_per_minute: Option<u64>,
    /// Tokens (input and output) a minute; a call takes the traffic's
    /// `inputTokens + outputTokens`.
    #[serde(default)]
    pub tokens_per_minute: Option<u64>,
}

/// A window of trouble, `[fromMs, toMs)`, hitting each call with
/// `probability` (default 1).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Fault {
    /// Start, in virtual ms from the scenario's start.
    pub from_ms: u64,
    /// End (exclusive).
    pub to_ms: u64,
    /// The share of calls in the window it hits.
    #[serde(default = "certain")]
    pub probability: f64,
    /// When set, the fault is on only for the first `onMs` of every
    /// `periodMs` (a flapping provider).
    #[serde(default)]
    pub flap: Option<Flap>,
    /// What a hit call gets.
    pub effect: Effect,
}

/// On for `onMs` of every `periodMs`, counted from the window's start.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Flap {
    /// The cycle's length.
    pub period_ms: u64,
    /// How long the fault is on at the start of each cycle.
    pub on_ms: u64,
}

/// What a call hit by a fault gets.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(
    tag = "kind",
    deny_unknown_fields,
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Effect {
    /// An HTTP error status after the provider's usual latency, with a
    /// `retry-after` header when `retryAfterMs` is set (429 storms with or
    /// without Retry-After, 529 overloads, 503s).
    Status {
        /// The status code.
        status: u16,
        /// The Retry-After sent, in ms.
        #[serde(default)]
        retry_after_ms: Option<u64>,
    },
    /// No answer at all: the attempt times out (a region gone dark).
    Silent,
    /// The connection is refused at once.
    Refused,
    /// Latency multiplied by `factor`, which grows linearly from 1 at the
    /// window's start to `factor` at its end when `ramp` is set (a p95
    /// drifting up); `tailOnly` stretches only answers slower than the
    /// median.
    Slow {
        /// The multiplier (≥ 1).
        factor: f64,
        /// Grow from 1 to `factor` across the window.
        #[serde(default)]
        ramp: bool,
        /// Stretch only the slower half of the answers.
        #[serde(default)]
        tail_only: bool,
    },
}

/// The requests: arrivals at `ratePerSec`, each of the given size.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Traffic {
    /// Mean arrivals per virtual second.
    pub rate_per_sec: f64,
    /// How arrivals are spaced (default Poisson).
    #[serde(default)]
    pub spacing: Spacing,
    /// Input tokens each successful answer reports. Where a provider's pool
    /// counts tokens, the request's prompt is written out at four bytes a
    /// token, so that the client's estimate of its input is this.
    #[serde(default = "hundred")]
    pub input_tokens: u64,
    /// Output tokens each successful answer reports.
    #[serde(default = "hundred")]
    pub output_tokens: u64,
    /// Worker isolates, each its own client, taking arrivals in turn. One
    /// (the default) keeps breakers in memory, as the npm package and a
    /// Rust caller do; more share them as the Worker's isolates do, each
    /// through its fleet store and one simulated Durable Object per provider.
    #[serde(default = "one_u32")]
    pub isolates: u32,
    /// A share of the requests asking one of a few questions again, each
    /// of the others a question of its own: what a response cache (the
    /// configuration's `cache`) can answer. Left out, every request asks
    /// the same question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Repeat>,
}

/// Requests that ask again: each request, with probability `share`, asks
/// one of `distinct` questions, drawn evenly.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Repeat {
    /// The share of requests that repeat a question, in [0, 1].
    pub share: f64,
    /// How many questions they repeat (at least 1).
    pub distinct: u32,
}

/// How arrivals are spaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Spacing {
    /// Independent arrivals: exponential gaps of mean `1 / ratePerSec`.
    #[default]
    Poisson,
    /// One request every `1 / ratePerSec`, the first at time 0: figures
    /// that can be worked out by hand.
    Even,
}

fn one_u32() -> u32 {
    1
}
fn one() -> u64 {
    1
}
fn second() -> u64 {
    1000
}
fn certain() -> f64 {
    1.0
}
fn no_change() -> Value {
    Value::Object(Default::default())
}
fn hundred() -> u64 {
    100
}

impl Scenario {
    /// Reads a scenario from JSON; a mistake is reported with its path.
    pub fn parse(json: &str) -> Result<Scenario, String> {
        let s: Scenario = crate::json::read(json.as_bytes()).map_err(|m| {
            let path = crate::issue::path_text(&m.path);
            if path.is_empty() {
                m.error.to_string()
            } else {
                format!("{path}: {}", m.error)
            }
        })?;
        s.check()?;
        Ok(s)
    }

    /// Every problem serde cannot see, at once.
    pub fn check(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.duration_ms == 0 {
            problems.push("durationMs: must be above 0".to_string());
        }
        if self.bucket_ms == 0 || self.duration_ms / self.bucket_ms.max(1) > 100_000 {
            problems.push("bucketMs: must be above 0 and give at most 100000 points".into());
        }
        if !(self.traffic.rate_per_sec.is_finite() && self.traffic.rate_per_sec > 0.0) {
            problems.push("traffic.ratePerSec: must be a positive number".into());
        }
        if self.traffic.input_tokens > 1_000_000 {
            // The prompt is written out at four bytes a token (runner.rs).
            problems.push("traffic.inputTokens: at most 1000000".into());
        }
        if !(1..=10_000).contains(&self.traffic.isolates) {
            problems.push("traffic.isolates: must be 1 to 10000".into());
        }
        if let Some(r) = self.traffic.repeat {
            if !(0.0..=1.0).contains(&r.share) {
                problems.push("traffic.repeat.share: must be in [0, 1]".into());
            }
            if !(1..=1_000_000).contains(&r.distinct) {
                problems.push("traffic.repeat.distinct: must be 1 to 1000000".into());
            }
        }
        if let Some(f) = &self.fleet {
            if !(f.service_ms.is_finite() && (0.0..=1000.0).contains(&f.service_ms)) {
                problems.push("fleet.serviceMs: must be 0 to 1000".into());
            }
            if !(1..=10_000).contains(&f.data_centres) {
                problems.push("fleet.dataCentres: must be 1 to 10000".into());
            }
            if f.round_trip_ms > 10_000 || f.nearby_round_trip_ms > 10_000 {
                problems.push("fleet round trips: at most 10000 ms".into());
            }
        }
        if self.policies.is_empty() {
            problems.push("policies: name at least one".into());
        }
        for (id, p) in &self.providers {
            let ok = p.median_ms.is_finite() && p.median_ms > 0.0 && p.p95_ms >= p.median_ms;
            if !ok || !p.p95_ms.is_finite() {
                problems.push(format!(
                    "providers.{id}: medianMs must be positive and p95Ms at least the median"
                ));
            }
            if let Some(pool) = &p.pool {
                self.check_pool(&format!("providers.{id}.pool"), pool, &mut problems);
            }
            for (i, f) in p.faults.iter().enumerate() {
                let at = format!("providers.{id}.faults[{i}]");
                if f.to_ms <= f.from_ms {
                    problems.push(format!("{at}: toMs must be after fromMs"));
                }
                if !(0.0..=1.0).contains(&f.probability) {
                    problems.push(format!("{at}.probability: must be in [0, 1]"));
                }
                if let Some(fl) = f.flap {
                    if fl.period_ms == 0 || fl.on_ms > fl.period_ms {
                        problems.push(format!(
                            "{at}.flap: onMs must be within a positive periodMs"
                        ));
                    }
                }
                if let Effect::Slow { factor, .. } = f.effect {
                    if !(factor.is_finite() && factor >= 1.0) {
                        problems.push(format!("{at}.factor: must be at least 1"));
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }
}

impl Scenario {
    /// A pool's limits: each given above 0, at least one given, and a
    /// call's tokens within a minute's.
    fn check_pool(&self, at: &str, pool: &PoolModel, problems: &mut Vec<String>) {
        let limits = [
            ("requestsPerMinute", pool.requests_per_minute),
            ("tokensPerMinute", pool.tokens_per_minute),
        ];
        if limits.iter().all(|(_, l)| l.is_none()) {
            problems.push(format!(
                "{at}: give requestsPerMinute, tokensPerMinute or both"
            ));
        }
        for (name, limit) in limits {
            if limit.is_some_and(|l| !(1..=MAX_PER_MINUTE).contains(&l)) {
                problems.push(format!("{at}.{name}: must be 1 to {MAX_PER_MINUTE}"));
            }
        }
        let call = self
            .traffic
            .input_tokens
            .saturating_add(self.traffic.output_tokens);
        if pool.tokens_per_minute.is_some_and(|t| t < call) {
            problems.push(format!(
                "{at}.tokensPerMinute: below one call's {call} tokens (traffic.inputTokens + outputTokens)"
            ));
        }
    }
}

/// The largest per-minute limit a pool takes: kept exactly in 1/60000ths
/// of a unit, its level stays far inside a `u64`.
const MAX_PER_MINUTE: u64 = 1_000_000_000;

/// RFC 7386 JSON merge patch: `patch` laid over `target`.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    if let Value::Object(t) = target {
        for (k, v) in fields {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_merge_patch_merges_objects_removes_nulls_and_replaces_the_rest() {
        let mut doc = json!({"a": {"b": 1, "c": 2}, "d": [1], "e": 5});
        merge_patch(
            &mut doc,
            &json!({"a": {"b": 9, "c": null}, "d": [2, 3], "f": true}),
        );
        assert_eq!(doc, json!({"a": {"b": 9}, "d": [2, 3], "e": 5, "f": true}));
    }

    #[test]
    fn a_mistake_is_named_by_its_path() {
        let e = Scenario::parse(
            r#"{"name":"x","durationMs":1000,"config":{},"providers":{"a":{"medianMs":"slow","p95Ms":2}},
               "traffic":{"ratePerSec":1},"policies":[{"name":"d"}]}"#,
        )
        .unwrap_err();
        assert!(e.starts_with("providers.a.medianMs: invalid type"), "{e}");
        let e = Scenario::parse(
            r#"{"name":"x","durationMs":1000,"config":{},"providers":{"a":{"medianMs":5,"p95Ms":2,
               "faults":[{"fromMs":5,"toMs":1,"effect":{"kind":"silent"}}]}},"traffic":{"ratePerSec":0},"policies":[]}"#,
        )
        .unwrap_err();
        assert_eq!(
            e.lines().collect::<Vec<_>>(),
            [
                "traffic.ratePerSec: must be a positive number",
                "policies: name at least one",
                "providers.a: medianMs must be positive and p95Ms at least the median",
                "providers.a.faults[0]: toMs must be after fromMs",
            ]
        );
    }

    #[test]
    fn a_pool_names_its_mistakes_by_their_path() {
        let scenario = |pool: &str| {
            Scenario::parse(&format!(
                r#"{{"name":"x","durationMs":1000,"config":{{}},"traffic":{{"ratePerSec":1,"inputTokens":800,"outputTokens":300}},
                   "providers":{{"a":{{"medianMs":5,"p95Ms":9,"pool":{pool}}}}},"policies":[{{"name":"d"}}]}}"#
            ))
        };
        let e = scenario(r#"{"requestsPerMinute":0,"tokensPerMinute":1000}"#).unwrap_err();
        assert_eq!(
            e.lines().collect::<Vec<_>>(),
            [
                "providers.a.pool.requestsPerMinute: must be 1 to 1000000000",
                "providers.a.pool.tokensPerMinute: below one call's 1100 tokens (traffic.inputTokens + outputTokens)",
            ]
        );
        let e = scenario("{}").unwrap_err();
        assert_eq!(
            e,
            "providers.a.pool: give requestsPerMinute, tokensPerMinute or both"
        );
        let e = scenario(r#"{"requestsPerMinute":5,"perDay":9}"#).unwrap_err();
        assert!(
            e.starts_with("providers.a.pool.perDay: unknown field `perDay`"),
            "{e}"
        );
        let s = scenario(r#"{"requestsPerMinute":500,"tokensPerMinute":30000}"#).unwrap();
        assert_eq!(
            s.providers["a"].pool,
            Some(PoolModel {
                requests_per_minute: Some(500),
                tokens_per_minute: Some(30_000)
            })
        );
    }
}
