//! `simulate(config, scenario)`: the outage simulator (`crate::sim`) from
//! JS. Runs on virtual time, synchronously; returns the report (figures and
//! time series per policy) without charts.

use wasm_bindgen::prelude::*;

use crate::config::{ConfigError, ConfigIssue};
use crate::js::convert::stringify;
use crate::js::errors::{config_error, to_js};
use crate::sim::{simulate as run, Scenario};

fn problem(path: &str, message: impl Into<String>) -> JsValue {
    config_error(&ConfigError {
        issues: vec![ConfigIssue::new(path, message.into())],
    })
}

#[wasm_bindgen(typescript_custom_section)]
const SIM_TYPES: &'static str = r#"
/** A fault window `[fromMs, toMs)` hitting each call with `probability` (default 1). */
export interface SimFault {
  fromMs: number; toMs: number; probability?: number;
  /** On for the first `onMs` of every `periodMs` only (a flapping provider). */
  flap?: { periodMs: number; onMs: number };
  effect:
    | { kind: "status"; status: number; retryAfterMs?: number }
    | { kind: "silent" }
    | { kind: "refused" }
    | { kind: "slow"; factor: number; ramp?: boolean; tailOnly?: boolean };
}
/** An outage scenario; `simulate` fills in its `config`. */
export interface SimScenario {
  name: string; description?: string; seed?: number; durationMs: number; bucketMs?: number;
  providers: Record<string, { medianMs: number; p95Ms: number; inputPerMtok?: number;
                               outputPerMtok?: number; faults?: SimFault[];
                               /** A rate-limit pool, per minute, refilled continuously. */
                               pool?: { requestsPerMinute?: number; tokensPerMinute?: number } }>;
  traffic: { ratePerSec: number; spacing?: "poisson" | "even"; inputTokens?: number; outputTokens?: number; isolates?: number };
  /** Each a JSON merge patch over the configuration; `fleet` says how isolates reach the
   *  fleet's breakers: each model's owner object (`direct`, the default) or a relay in their
   *  data centre. */
  policies: { name: string; patch?: object; fleet?: "direct" | "relayed" }[];
  /** The fleet's Durable Objects: given, each serves one call per `serviceMs` in turn and the
   *  report measures them. */
  fleet?: { serviceMs?: number; dataCentres?: number; roundTripMs?: number; nearbyRoundTripMs?: number };
}
export interface SimObjectLoad { calls: number; peakPerSec: number; waitMs: [number, number, number] }
export interface SimPercentiles { p50: number | null; p95: number | null; p99: number | null }
export interface SimReport {
  scenario: string; description: string; seed: number; durationMs: number; bucketMs: number;
  ratePerSec: number; providers: string[];
  runs: {
    policy: string;
    figures: { requests: number; answered: number; availability: number; latencyMs: SimPercentiles;
               calls: number; failingCalls: number; provider429s: number; retries: number;
               failovers: number; costUsd: number;
               recoveryMs: Record<string, number | null>;
               fleet?: { protocol: "direct" | "relayed"; isolates: number; dataCentres: number;
                         serviceRate: number | null; owner: SimObjectLoad | null;
                         relay?: SimObjectLoad; relays: number; outdatedDecisions: number;
                         decisions: number; viewsDelivered: number; secondProbes: number;
                         transitions: { model: string; atMs: number; isolates: number;
                                        unreached: number;
                                        reachMs: [number | null, number | null, number | null];
                                        within1s: number; within2s: number }[] } };
    series: { failed: number[]; served: number[][]; breaker: number[][]; latencyMs: SimPercentiles[];
              /** Per provider, calls answered 429 per bucket; absent when none was. */
              provider429s?: number[][] };
  }[];
}
"#;

/// Runs every policy of `scenario` over `config` (the client configuration
/// the policies patch); throws a `ConfigError` naming what is wrong.
#[allow(unreachable_pub)] // exported to JS by wasm_bindgen
#[wasm_bindgen(unchecked_return_type = "SimReport")]
pub fn simulate(
    #[wasm_bindgen(unchecked_param_type = "Config | string")] config: JsValue,
    #[wasm_bindgen(unchecked_param_type = "SimScenario | string")] scenario: JsValue,
) -> Result<JsValue, JsValue> {
    let text = |v: &JsValue| match v.as_string() {
        Some(s) => Ok(s),
        None => stringify(v),
    };
    let config: serde_json::Value = text(&config)
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|m| problem("config", m))?;
    let mut doc: serde_json::Value = text(&scenario)
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|m| problem("scenario", m))?;
    let Some(fields) = doc.as_object_mut() else {
        return Err(problem("scenario", "must be an object"));
    };
    fields.insert("config".into(), config);
    let scenario = Scenario::parse(&doc.to_string()).map_err(|m| problem("scenario", m))?;
    let report = run(&scenario).map_err(|m| problem("scenario", m))?;
    Ok(to_js(&report))
}
