//! What a simulation found: per policy, the figures and the time series the
//! charts are drawn from; printed side by side as a table, written as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::runner::Recorder;
use super::scenario::Protocol;
use super::world::{Calls, World};

/// Every policy's run over one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// What it rehearses.
    pub description: String,
    /// Its seed.
    pub seed: u64,
    /// How long traffic arrived, in ms.
    pub duration_ms: u64,
    /// The width of one point of the series, in ms.
    pub bucket_ms: u64,
    /// Mean arrivals per second.
    pub rate_per_sec: f64,
    /// The provider ids, in the order of the series.
    pub providers: Vec<String>,
    /// One run per policy, in the scenario's order.
    pub runs: Vec<Run>,
}

/// One policy's run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// The policy's name.
    pub policy: String,
    /// Its figures.
    pub figures: Figures,
    /// Its time series.
    pub series: Series,
}

/// A run's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    /// Requests sent.
    pub requests: u64,
    /// Requests answered.
    pub answered: u64,
    /// `answered / requests`.
    pub availability: f64,
    /// End-to-end latency of the answered requests (nearest rank), in ms.
    pub latency_ms: Percentiles,
    /// HTTP calls made to providers, retries included.
    pub calls: u64,
    /// Calls that failed: an error status, silence, a refusal, or an answer
    /// slower than the attempt's time limit.
    pub failing_calls: u64,
    /// Calls answered 429 by a provider (its pool was empty, or a fault
    /// said so).
    #[serde(rename = "provider429s")]
    pub provider_429s: u64,
    /// Retries of the same provider.
    pub retries: u64,
    /// Moves from one entry of a route to the next.
    pub failovers: u64,
    /// USD for the tokens the answers reported, at each provider's prices.
    pub cost_usd: f64,
    /// Per provider with failing windows: ms from the end of its last one
    /// to its first answer after it (`null`: it never answered again).
    pub recovery_ms: BTreeMap<String, Option<u64>>,
    /// How the fleet's objects carried the run (scenarios with a `fleet`
    /// model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetFigures>,
    /// What the response cache answered (policies whose configuration
    /// caches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheFigures>,
}

/// What the response cache did over a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheFigures {
    /// Requests answered from a fresh stored answer.
    pub hits: u64,
    /// Requests asked of the route (their answers stored when they may be).
    pub misses: u64,
    /// Requests whose route failed, answered from a stored answer past its
    /// TTL within its stale window.
    pub stale: u64,
}

/// How the fleet's Durable Objects carried a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetFigures {
    /// How isolates reached the breakers.
    pub protocol: Protocol,
    /// Isolates.
    pub isolates: u32,
    /// Data centres the isolates were spread over.
    pub data_centres: u32,
    /// Calls one object serves per second (`1000 / serviceMs`; `null`: no
    /// queue).
    pub service_rate: Option<f64>,
    /// The busiest model owner.
    pub owner: Option<ObjectLoad>,
    /// The busiest relay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relay: Option<ObjectLoad>,
    /// How many relays there were.
    pub relays: usize,
    /// Requests started while the isolate's view of some model was behind
    /// that model's owner.
    pub outdated_decisions: u64,
    /// Requests in all.
    pub decisions: u64,
    /// Views of the fleet that reached isolates within their call's time
    /// limit (refreshes, reports' answers, lease answers).
    pub views_delivered: u64,
    /// Probe leases granted while another was out: must be 0.
    pub second_probes: u64,
    /// Every breaker transition at an owner: how long it took to reach the
    /// isolates that held an older view.
    pub transitions: Vec<Reach>,
}

/// One object's load over a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectLoad {
    /// Calls it took.
    pub calls: u64,
    /// Calls in its busiest second.
    pub peak_per_sec: u32,
    /// How long a call waited for its turn, ms: p50, p99, max.
    pub wait_ms: [f64; 3],
    /// Calls that arrived in each second of the run.
    pub per_sec: Vec<u32>,
}

/// How one breaker transition reached the isolates.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reach {
    /// The model (`provider/model`).
    pub model: String,
    /// When the owner made it, ms into the run.
    pub at_ms: u64,
    /// Isolates that held an older view.
    pub isolates: usize,
    /// Of those, how many it never reached.
    pub unreached: usize,
    /// ms until it reached them: p50, p99, max (`null`: some never).
    pub reach_ms: [Option<u32>; 3],
    /// The share of them reached within 1 s.
    pub within_1s: f64,
    /// The share of them reached within 2 s.
    pub within_2s: f64,
}

impl Reach {
    pub(crate) fn of(model: String, at_ms: u64, mut lags: Vec<Option<u32>>) -> Reach {
        lags.sort_by_key(|l| l.unwrap_or(u32::MAX));
        let n = lags.len();
        let at = |p: f64| {
            let rank = ((p / 100.0) * n as f64).ceil() as usize;
            lags.get(rank.clamp(1, n.max(1)) - 1).copied().flatten()
        };
        let share = |ms: u32| {
            if n == 0 {
                return 1.0;
            }
            lags.iter().filter(|l| l.is_some_and(|l| l <= ms)).count() as f64 / n as f64
        };
        Reach {
            model,
            at_ms,
            isolates: n,
            unreached: lags.iter().filter(|l| l.is_none()).count(),
            reach_ms: [at(50.0), at(99.0), lags.last().copied().flatten()],
            within_1s: share(1000),
            within_2s: share(2000),
        }
    }
}

impl FleetFigures {
    /// The transition that reached its isolates slowest (by p99, then
    /// max), if any.
    pub fn slowest(&self) -> Option<&Reach> {
        self.transitions
            .iter()
            .filter(|r| r.isolates > 0)
            .max_by_key(|r| {
                let key = |v: Option<u32>| v.unwrap_or(u32::MAX);
                (key(r.reach_ms[1]), key(r.reach_ms[2]))
            })
    }
}

/// p50, p95 and p99.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: Option<u32>,
    /// 95th percentile.
    pub p95: Option<u32>,
    /// 99th percentile.
    pub p99: Option<u32>,
}

/// Per bucket of `bucketMs`, by the request's arrival.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Series {
    /// Requests that failed.
    pub failed: Vec<u64>,
    /// Requests answered, per provider.
    pub served: Vec<Vec<u64>>,
    /// Requests answered from the response cache, fresh or stale (left out
    /// when none was).
    #[serde(skip_serializing_if = "all_zero")]
    pub cached: Vec<u64>,
    /// Per provider, the most open state its breaker was in: 0 closed,
    /// 1 half-open, 2 open.
    pub breaker: Vec<Vec<u8>>,
    /// Latency percentiles of the answered requests.
    pub latency_ms: Vec<Percentiles>,
    /// Per provider, the calls it answered 429, by the call's time (left
    /// out when none was).
    #[serde(rename = "provider429s", skip_serializing_if = "none_above_zero")]
    pub provider_429s: Vec<Vec<u64>>,
    #[serde(skip)]
    pub(crate) latencies: Vec<Vec<u32>>,
}

fn none_above_zero(series: &[Vec<u64>]) -> bool {
    series.iter().flatten().all(|n| *n == 0)
}

fn all_zero(series: &[u64]) -> bool {
    series.iter().all(|n| *n == 0)
}

impl Series {
    pub(crate) fn grow(&mut self, buckets: usize, providers: usize) {
        if self.failed.len() >= buckets {
            return;
        }
        self.failed.resize(buckets, 0);
        self.cached.resize(buckets, 0);
        self.latencies.resize_with(buckets, Vec::new);
        self.served.resize_with(providers, Vec::new);
        self.breaker.resize_with(providers, Vec::new);
        self.provider_429s.resize_with(providers, Vec::new);
        for v in &mut self.served {
            v.resize(buckets, 0);
        }
        for v in &mut self.breaker {
            v.resize(buckets, 0);
        }
        for v in &mut self.provider_429s {
            v.resize(buckets, 0);
        }
    }

    /// Requests that arrived in bucket `b`.
    pub fn requests(&self, b: usize) -> u64 {
        self.failed[b] + self.cached[b] + self.served.iter().map(|s| s[b]).sum::<u64>()
    }
}

/// Nearest-rank percentiles of `ms`, which this sorts.
pub(crate) fn percentiles(ms: &mut [u32]) -> Percentiles {
    ms.sort_unstable();
    let at = |p: f64| {
        if ms.is_empty() {
            return None;
        }
        let rank = ((p / 100.0) * ms.len() as f64).ceil() as usize;
        ms.get(rank.clamp(1, ms.len()) - 1).copied()
    };
    Percentiles {
        p50: at(50.0),
        p95: at(95.0),
        p99: at(99.0),
    }
}

impl Figures {
    pub(crate) fn from_run(r: &mut Recorder, calls: &[Calls], world: &World) -> Figures {
        r.series.latency_ms = r
            .series
            .latencies
            .iter_mut()
            .map(|l| percentiles(l))
            .collect();
        let recovery_ms = world
            .providers
            .iter()
            .zip(r.recovery())
            .filter(|(_, (end, _))| end.is_some())
            .map(|(p, (_, first))| (p.id.clone(), *first))
            .collect();
        Figures {
            requests: r.requests,
            answered: r.answered,
            availability: if r.requests == 0 {
                1.0
            } else {
                r.answered as f64 / r.requests as f64
            },
            latency_ms: percentiles(&mut r.latencies),
            calls: calls.iter().map(|c| c.total).sum(),
            failing_calls: calls.iter().map(|c| c.failed).sum(),
            provider_429s: calls.iter().map(|c| c.rate_limited).sum(),
            retries: r.retries,
            failovers: r.failovers,
            cost_usd: r.cost,
            recovery_ms,
            fleet: None,
            cache: r.cache,
        }
    }
}

fn ms(v: Option<u32>) -> String {
    v.map_or("–".into(), |v| v.to_string())
}

impl Report {
    /// The figures of every policy side by side, as plain text.
    pub fn table(&self) -> String {
        let mut rows: Vec<(String, Vec<String>)> = vec![
            ("requests".into(), self.col(|f| f.requests.to_string())),
            (
                "availability".into(),
                self.col(|f| format!("{:.2} %", f.availability * 100.0)),
            ),
            (
                "latency p50 / p95 / p99 ms".into(),
                self.col(|f| {
                    let l = f.latency_ms;
                    format!("{} / {} / {}", ms(l.p50), ms(l.p95), ms(l.p99))
                }),
            ),
            ("provider calls".into(), self.col(|f| f.calls.to_string())),
            (
                "calls to failing providers".into(),
                self.col(|f| f.failing_calls.to_string()),
            ),
            (
                "provider 429s".into(),
                self.col(|f| f.provider_429s.to_string()),
            ),
            ("retries".into(), self.col(|f| f.retries.to_string())),
            ("failovers".into(), self.col(|f| f.failovers.to_string())),
            (
                "cost USD".into(),
                self.col(|f| format!("{:.4}", f.cost_usd)),
            ),
        ];
        let recovered: Vec<&String> = self
            .runs
            .first()
            .map(|r| r.figures.recovery_ms.keys().collect())
            .unwrap_or_default();
        for id in recovered {
            rows.push((
                format!("{id} serves again after"),
                self.col(|f| match f.recovery_ms.get(id) {
                    Some(Some(ms)) => format!("{:.1} s", *ms as f64 / 1000.0),
                    _ => "never".into(),
                }),
            ));
        }
        if self.runs.iter().any(|r| r.figures.cache.is_some()) {
            rows.push((
                "answered from the cache: fresh / stale".into(),
                self.col(|f| {
                    f.cache
                        .map_or("–".into(), |c| format!("{} / {}", c.hits, c.stale))
                }),
            ));
        }
        if self.runs.iter().any(|r| r.figures.fleet.is_some()) {
            rows.extend(self.fleet_rows());
        }
        let head: Vec<String> = self.runs.iter().map(|r| r.policy.clone()).collect();
        let label_w = rows
            .iter()
            .map(|(l, _)| l.chars().count())
            .max()
            .unwrap_or(0);
        let widths: Vec<usize> = (0..head.len())
            .map(|i| {
                rows.iter()
                    .map(|(_, c)| c[i].chars().count())
                    .chain([head[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = format!(
            "{} (seed {}, {} s of traffic at {} requests/s)\n",
            self.scenario,
            self.seed,
            self.duration_ms / 1000,
            self.rate_per_sec
        );
        let line = |out: &mut String, label: &str, cells: &[String]| {
            let _ = write!(out, "{label:<label_w$}");
            for (c, w) in cells.iter().zip(&widths) {
                let _ = write!(out, "  {c:>w$}");
            }
            out.push('\n');
        };
        line(&mut out, "", &head);
        for (label, cells) in &rows {
            line(&mut out, label, cells);
        }
        out
    }

    fn fleet_rows(&self) -> Vec<(String, Vec<String>)> {
        let fleet = |f: &dyn Fn(&FleetFigures) -> String| {
            self.col(|fig| fig.fleet.as_ref().map_or("–".into(), f))
        };
        let load = |l: &Option<ObjectLoad>| {
            l.as_ref().map_or("–".into(), |l| {
                format!(
                    "{} / {:.1} / {:.1}",
                    l.peak_per_sec, l.wait_ms[1], l.wait_ms[2]
                )
            })
        };
        let ms = |v: Option<u32>| v.map_or("never".into(), |v| v.to_string());
        vec![
            (
                "fleet views delivered to isolates".into(),
                fleet(&|f| f.views_delivered.to_string()),
            ),
            (
                "busiest owner calls/s, wait p99/max ms".into(),
                fleet(&|f| load(&f.owner)),
            ),
            (
                "busiest relay calls/s, wait p99/max ms".into(),
                fleet(&|f| load(&f.relay)),
            ),
            (
                "slowest transition reach p50/p99/max ms".into(),
                fleet(&|f| {
                    f.slowest().map_or("–".into(), |r| {
                        format!(
                            "{} / {} / {}",
                            ms(r.reach_ms[0]),
                            ms(r.reach_ms[1]),
                            ms(r.reach_ms[2])
                        )
                    })
                }),
            ),
            (
                "isolates reached within 1 s (worst)".into(),
                fleet(&|f| {
                    let reached = f.transitions.iter().filter(|r| r.isolates > 0);
                    match reached.map(|r| r.within_1s).reduce(f64::min) {
                        Some(worst) => format!("{:.2} %", worst * 100.0),
                        None => "–".into(),
                    }
                }),
            ),
            (
                "requests on an outdated view".into(),
                fleet(&|f| {
                    let share = f.outdated_decisions as f64 / f.decisions.max(1) as f64;
                    format!("{:.2} %", share * 100.0)
                }),
            ),
            (
                "second probes granted".into(),
                fleet(&|f| f.second_probes.to_string()),
            ),
        ]
    }

    fn col(&self, f: impl Fn(&Figures) -> String) -> Vec<String> {
        self.runs.iter().map(|r| f(&r.figures)).collect()
    }
}
