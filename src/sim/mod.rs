//! The outage simulator: rehearse a policy against an outage before
//! production meets one.
//!
//! A [`Scenario`] declares providers (a latency distribution, a fault
//! timeline: outage windows, 429 storms with or without Retry-After, error
//! probability, slow periods, flapping; and a rate-limit pool, whose
//! headers each answer carries as the provider's family sends them),
//! traffic and the policies to compare.
//! [`simulate`] runs each policy through the real [`Client`](crate::Client)
//! — the same breaker, retry, budget and routing code the Worker runs, and
//! the real provider adapters reading the simulated answers — on a platform
//! whose clock is virtual: an hour of traffic takes seconds, with no real
//! sleep. The same seed gives the same [`Report`], byte for byte. With the
//! `simulate` feature, `svg` draws a run's charts.
//!
//! ```
//! use resilient_llm::sim::{simulate, Scenario};
//! let scenario = Scenario::parse(r#"{
//!   "name": "blip", "durationMs": 10000,
//!   "config": { "providers": { "a": { "kind": "openai" }, "b": { "kind": "anthropic" } },
//!               "routes": { "default": [ { "provider": "a", "model": "m" }, { "provider": "b", "model": "m" } ] } },
//!   "providers": {
//!     "a": { "medianMs": 400, "p95Ms": 900,
//!            "faults": [ { "fromMs": 2000, "toMs": 6000, "effect": { "kind": "status", "status": 503 } } ] },
//!     "b": { "medianMs": 600, "p95Ms": 1200 } },
//!   "traffic": { "ratePerSec": 5 },
//!   "policies": [ { "name": "defaults" } ]
//! }"#).unwrap();
//! let report = simulate(&scenario).unwrap();
//! assert_eq!(report.runs[0].figures.answered, report.runs[0].figures.requests);
//! ```

#[cfg(feature = "simulate")]
mod chart;
mod exec;
mod fleet;
mod objects;
mod pool;
mod reply;
mod report;
mod runner;
mod scenario;
mod world;

#[cfg(feature = "simulate")]
pub use chart::svg;
pub use report::{
    CacheFigures, Figures, FleetFigures, ObjectLoad, Percentiles, Reach, Report, Run, Series,
};
pub use scenario::{
    merge_patch, Effect, Fault, Flap, FleetModel, PolicyPatch, PoolModel, Protocol, ProviderModel,
    Repeat, Scenario, Traffic,
};

/// Runs every policy of `scenario`, in order.
pub fn simulate(scenario: &Scenario) -> Result<Report, String> {
    scenario.check()?;
    let runs = scenario
        .policies
        .iter()
        .map(|p| runner::run_policy(scenario, p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Report {
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        seed: scenario.seed,
        duration_ms: scenario.duration_ms,
        bucket_ms: scenario.bucket_ms,
        rate_per_sec: scenario.traffic.rate_per_sec,
        providers: scenario.providers.keys().cloned().collect(),
        runs,
    })
}
