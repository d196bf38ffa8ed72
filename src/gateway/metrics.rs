//! `GET /metrics`: this isolate's counters in the Prometheus / OpenMetrics
//! text format, written by the prometheus-client crate. Requests are
//! counted when their log line is written (a stream at its commit point,
//! with the attempts that led to it); breaker state and health are read from
//! the client when the page is asked for, and the fleet's totals (every
//! isolate's calls, probes and transitions) from the breaker objects.

use crate::trace::export::ExportCounts;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use std::sync::atomic::AtomicU64;

use super::client_status::ClientFamilies;
use super::labels::{path_label, Known, Label};
use super::log::{LogLine, Outcome};
use crate::engine::cost::ModelCost;
use crate::fleet::Journal;
use crate::policy::breaker::StateName;
use crate::policy::pool::PoolReading;
use crate::policy::stats::Health;

/// Upper bounds of the latency buckets, in seconds: from a fast cached
/// answer to the default end-to-end deadline.
const SECONDS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 45.0, 60.0,
];

/// The media type of what [`Metrics::render`] writes.
pub(super) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    path: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct ModelLabels {
    provider: Label,
    model: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    provider: Label,
    model: Label,
    outcome: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabels {
    provider: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    provider: Label,
    model: Label,
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpanLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    provider: Label,
    state: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(SECONDS)
}

/// One isolate's counters.
pub(super) struct Metrics {
    registry: Registry,
    /// What provider and model labels may name.
    known: Known,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Histograms<ProviderLabels>,
    attempts: Family<AttemptLabels, Counter>,
    attempt_seconds: Histograms<ModelLabels>,
    retries: Family<ModelLabels, Counter>,
    failovers: Family<ProviderLabels, Counter>,
    breaker: Family<StateLabels, Gauge>,
    consecutive_failures: Family<ProviderLabels, Gauge>,
    fleet_calls: Family<VerdictLabels, Counter>,
    fleet_probes: Family<ModelLabels, Counter>,
    fleet_transitions: Family<ModelLabels, Counter>,
    cost: Family<ModelLabels, Counter<f64, AtomicU64>>,
    cache: Family<CacheLabels, Counter>,
    cache_stored_bytes: Counter,
    cache_saved: Counter<f64, AtomicU64>,
    trace_spans: Family<SpanLabels, Counter>,
    trace_export_failures: Counter,
    /// What each provider's model last said of its rate-limit pools.
    pool: PoolGauges,
    /// The named clients' series.
    pub(super) clients: ClientFamilies,
    /// The wasm instance's linear memory.
    #[cfg(target_arch = "wasm32")]
    memory: Gauge,
}

impl Metrics {
    /// Counters whose provider and model labels name what `known` holds.
    pub(super) fn new(known: Known) -> Self {
        let mut m = Metrics {
            registry: Registry::with_prefix("llm_gateway"),
            known,
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(histogram),
            attempts: Family::default(),
            attempt_seconds: Family::new_with_constructor(histogram),
            retries: Family::default(),
            failovers: Family::default(),
            breaker: Family::default(),
            consecutive_failures: Family::default(),
            fleet_calls: Family::default(),
            fleet_probes: Family::default(),
            fleet_transitions: Family::default(),
            cost: Family::default(),
            cache: Family::default(),
            cache_stored_bytes: Counter::default(),
            cache_saved: Counter::default(),
            trace_spans: Family::default(),
            trace_export_failures: Counter::default(),
            pool: PoolGauges::default(),
            clients: ClientFamilies::default(),
            #[cfg(target_arch = "wasm32")]
            memory: Gauge::default(),
        };
        let r = &mut m.registry;
        r.register(
            "requests",
            "Requests answered, by path (a known path, /v1/models/:id, or other) and status",
            m.requests.clone(),
        );
        r.register(
            "request_seconds",
            "End-to-end latency of chat requests, by the provider that answered (\"none\": no answer)",
            m.request_seconds.clone(),
        );
        r.register(
            "attempts",
            "Calls to providers, by provider, model and outcome (ok or the failure's kind)",
            m.attempts.clone(),
        );
        r.register(
            "attempt_seconds",
            "Duration of calls to providers",
            m.attempt_seconds.clone(),
        );
        r.register("retries", "Retries of the same entry", m.retries.clone());
        r.register(
            "failovers",
            "Moves from an entry of this provider to the next entry of a route",
            m.failovers.clone(),
        );
        r.register(
            "breaker_state",
            "1 for the state this isolate's breaker (or the fleet's, when stricter) is in",
            m.breaker.clone(),
        );
        r.register(
            "breaker_consecutive_failures",
            "Failures since the provider's last success",
            m.consecutive_failures.clone(),
        );
        r.register(
            "fleet_calls",
            "Calls to a provider's model by every isolate, by verdict, as its breaker object counted them",
            m.fleet_calls.clone(),
        );
        r.register(
            "fleet_probes",
            "Half-open probe leases a model's breaker object granted",
            m.fleet_probes.clone(),
        );
        r.register(
            "fleet_transitions",
            "Transitions of a model's fleet-wide breaker",
            m.fleet_transitions.clone(),
        );
        r.register(
            "cost_usd",
            "US dollars spent, from the usage providers reported and the configured prices",
            m.cost.clone(),
        );
        r.register(
            "cache_requests",
            "Chat requests on routes that cache, by what the cache did: hit, miss, stale (served when every entry failed) or bypass",
            m.cache.clone(),
        );
        r.register(
            "cache_stored_bytes",
            "Bytes of answers written to the response cache",
            m.cache_stored_bytes.clone(),
        );
        r.register(
            "cache_saved_usd",
            "US dollars the answers served from the cache cost when they were asked",
            m.cache_saved.clone(),
        );
        r.register(
            "trace_spans",
            "Spans of sampled requests, by what became of them: exported (a collector took them) or dropped (the queue was full, or their export failed)",
            m.trace_spans.clone(),
        );
        r.register(
            "trace_export_failures",
            "Exports of spans that failed: no answer in time, or not a 2xx",
            m.trace_export_failures.clone(),
        );
        m.pool.register(r);
        m.clients.register(r);
        #[cfg(target_arch = "wasm32")]
        r.register(
            "wasm_memory_bytes",
            "Linear memory of this isolate's wasm instance: its high-water mark, since it never shrinks",
            m.memory.clone(),
        );
        m
    }
}

/// `ok`, the failure's kind (`rate_limited`, …), or `rejected` (a label
/// takes no reason: its values must stay few).
pub(super) fn outcome_name(o: &Outcome) -> Cow<'static, str> {
    match o {
        Outcome::Ok => "ok".into(),
        Outcome::Cancelled => "cancelled".into(),
        Outcome::Rejected(_) => "rejected".into(),
        Outcome::Failed(kind) => serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.as_str().map(|s| s.to_owned().into()))
            .unwrap_or_else(|| "other".into()),
    }
}

impl Metrics {
    /// Counts one request from its log line.
    /// The count of bytes written to the response cache, for a stream
    /// that stores its answer after its request's line.
    pub(super) fn cache_stored_bytes(&self) -> Counter {
        self.cache_stored_bytes.clone()
    }

    /// What a stream whose response went out before its first item counts
    /// once it knows whether it was served stale ([`StaleAnswer`]).
    pub(super) fn stale_tally(&self) -> StaleTally {
        let count = |result| self.cache.get_or_create(&CacheLabels { result }).clone();
        StaleTally {
            stale: count("stale"),
            miss: count("miss"),
            saved: self.cache_saved.clone(),
            served: None,
        }
    }

    /// Chat requests on caching routes by what the cache did (`hit`,
    /// `miss`, `stale`, `bypass`), the bytes stored and the dollars saved,
    /// since this gateway started.
    pub(super) fn cache_counts(&self) -> ([(&'static str, u64); 4], u64, f64) {
        let results = ["hit", "miss", "stale", "bypass"].map(|result| {
            let n = self.cache.get_or_create(&CacheLabels { result }).get();
            (result, n)
        });
        (
            results,
            self.cache_stored_bytes.get(),
            self.cache_saved.get(),
        )
    }

    pub(super) fn record(&self, log: &LogLine<'_>) {
        self.requests
            .get_or_create(&RequestLabels {
                path: path_label(log.path),
                status: log.status,
            })
            .inc();
        if let Some(result) = log.cache.filter(|_| !log.cache_deferred) {
            self.cache.get_or_create(&CacheLabels { result }).inc();
        }
        if log.cache_stored > 0 {
            self.cache_stored_bytes.inc_by(log.cache_stored as u64);
        }
        if let Some(saved) = log.cost_saved {
            self.cache_saved.inc_by(saved.usd());
        }
        if log.route.is_none() && log.trail.is_empty() {
            return; // not a chat request
        }
        let answered = log.served_by.as_deref().and_then(|s| s.split('/').next());
        self.request_seconds
            .get_or_create(&ProviderLabels {
                provider: answered.map_or(Label::Fixed("none"), |p| self.known.provider(p)),
            })
            .observe(log.latency_ms as f64 / 1000.0);
        for (i, a) in log.trail.iter().enumerate() {
            if let Some(next) = log.trail.get(i + 1) {
                if next.number <= 1 && (next.provider != a.provider || next.model != a.model) {
                    self.failovers
                        .get_or_create(&ProviderLabels {
                            provider: self.known.provider(&a.provider),
                        })
                        .inc();
                }
            }
            if a.number == 0 {
                continue; // skipped without a call (an open breaker)
            }
            let (provider, model) = self.known.model(&a.provider, &a.model);
            let model = ModelLabels { provider, model };
            if a.number > 1 {
                self.retries.get_or_create(&model).inc();
            }
            self.attempt_seconds
                .get_or_create(&model)
                .observe(a.duration_ms as f64 / 1000.0);
            self.attempts
                .get_or_create(&AttemptLabels {
                    provider: model.provider,
                    model: model.model,
                    outcome: outcome_name(&a.outcome).into(),
                })
                .inc();
        }
    }

    /// The text of `GET /metrics`, with the breakers as `health` has them,
    /// the fleet's totals as each provider's object has them, and the
    /// client's cost totals.
    pub(super) fn render(
        &self,
        health: &[Health],
        fleet: &[(String, Journal)],
        costs: &[ModelCost],
        exports: Option<ExportCounts>,
    ) -> String {
        if let Some(e) = exports {
            for (result, total) in [("exported", e.exported), ("dropped", e.dropped)] {
                follow(
                    &self.trace_spans.get_or_create(&SpanLabels { result }),
                    total,
                );
            }
            follow(&self.trace_export_failures, e.failed);
        }
        for (key, journal) in fleet {
            let c = journal.counts;
            let (provider, model) = key.split_once('/').unwrap_or((key, ""));
            let (provider, model) = self.known.model(provider, model);
            let p = || ModelLabels {
                provider: provider.clone(),
                model: model.clone(),
            };
            for (verdict, total) in [
                ("success", c.successes),
                ("failure", c.failures),
                ("abandoned", c.abandoned),
            ] {
                let labels = VerdictLabels {
                    provider: provider.clone(),
                    model: model.clone(),
                    verdict,
                };
                follow(&self.fleet_calls.get_or_create(&labels), total);
            }
            follow(&self.fleet_probes.get_or_create(&p()), c.probes);
            follow(&self.fleet_transitions.get_or_create(&p()), c.transitions);
        }
        // The client keeps the exact totals; the counter catches up to them
        // (a stream's cost is known at its end, after its log line). The
        // models no route lists add up under one `other`.
        let mut totals: BTreeMap<ModelLabels, f64> = BTreeMap::new();
        for c in costs {
            let (provider, model) = self.known.model(&c.provider, &c.model);
            *totals.entry(ModelLabels { provider, model }).or_default() += c.usd.usd();
        }
        for (labels, usd) in totals {
            let counter = self.cost.get_or_create(&labels);
            let behind = usd - counter.get();
            if behind > 0.0 {
                counter.inc_by(behind);
            }
        }
        for h in health {
            for (state, name) in [
                (StateName::Closed, "closed"),
                (StateName::HalfOpen, "half_open"),
                (StateName::Open, "open"),
            ] {
                self.breaker
                    .get_or_create(&StateLabels {
                        provider: self.known.provider(&h.provider),
                        state: name,
                    })
                    .set(i64::from(h.state == state));
            }
            self.consecutive_failures
                .get_or_create(&ProviderLabels {
                    provider: self.known.provider(&h.provider),
                })
                .set(i64::from(h.consecutive_failures));
            for m in &h.models {
                if let Some(reading) = &m.pool {
                    let (provider, model) = self.known.model(&h.provider, &m.model);
                    self.pool.set(&ModelLabels { provider, model }, reading);
                }
            }
        }
        #[cfg(target_arch = "wasm32")]
        self.memory
            .set(i64::try_from(core::arch::wasm32::memory_size(0) * 65_536).unwrap_or(i64::MAX));
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
            let _ = writeln!(out, "# EOF");
        }
        out
    }
}

/// The gauges of the rate-limit pools, by provider and model: what the
/// provider said in its last answer's headers (`/health` has the rest:
/// Anthropic's input and output tokens, when it was said).
#[derive(Default)]
struct PoolGauges {
    remaining_requests: Family<ModelLabels, Gauge>,
    remaining_tokens: Family<ModelLabels, Gauge>,
    limit_requests: Family<ModelLabels, Gauge>,
    limit_tokens: Family<ModelLabels, Gauge>,
    requests_reset: Family<ModelLabels, Gauge<f64, AtomicU64>>,
    tokens_reset: Family<ModelLabels, Gauge<f64, AtomicU64>>,
}

impl PoolGauges {
    fn register(&self, r: &mut Registry) {
        let families = [
            ("pool_remaining_requests", "Requests left in the provider's rate-limit pool for this model, as its last answer said", &self.remaining_requests),
            ("pool_remaining_tokens", "Tokens left in the provider's rate-limit pool for this model, as its last answer said", &self.remaining_tokens),
            ("pool_limit_requests", "Requests the provider's rate-limit pool for this model holds when full", &self.limit_requests),
            ("pool_limit_tokens", "Tokens the provider's rate-limit pool for this model holds when full", &self.limit_tokens),
        ];
        for (name, help, family) in families {
            r.register(name, help, family.clone());
        }
        r.register(
            "pool_requests_reset_timestamp_seconds",
            "When the requests pool is full again, in seconds since the Unix epoch, as the provider said",
            self.requests_reset.clone(),
        );
        r.register(
            "pool_tokens_reset_timestamp_seconds",
            "When the tokens pool is full again, in seconds since the Unix epoch, as the provider said",
            self.tokens_reset.clone(),
        );
    }

    /// Sets `labels`' gauges to `reading`; a figure it does not say leaves
    /// its series out.
    fn set(&self, labels: &ModelLabels, reading: &PoolReading) {
        let count = |family: &Family<ModelLabels, Gauge>, v: Option<u64>| match v {
            Some(v) => {
                family
                    .get_or_create(labels)
                    .set(i64::try_from(v).unwrap_or(i64::MAX));
            }
            None => {
                family.remove(labels);
            }
        };
        let instant =
            |family: &Family<ModelLabels, Gauge<f64, AtomicU64>>, at: Option<u64>| match at {
                Some(ms) => {
                    family.get_or_create(labels).set(ms as f64 / 1000.0);
                }
                None => {
                    family.remove(labels);
                }
            };
        let (r, t) = (&reading.requests, &reading.tokens);
        count(&self.remaining_requests, r.remaining);
        count(&self.remaining_tokens, t.remaining);
        count(&self.limit_requests, r.limit);
        count(&self.limit_tokens, t.limit);
        instant(&self.requests_reset, r.reset_at);
        instant(&self.tokens_reset, t.reset_at);
    }
}

/// Brings `counter` up to the object's `total`. A counter only grows: an
/// object whose stored state was lost starts again from zero, and the
/// counter waits until the object's total passes it.
pub(super) fn follow(counter: &Counter, total: u64) {
    let seen = counter.get();
    if total > seen {
        counter.inc_by(total - seen);
    }
}

/// The cache's count for a request whose stream went out before it knew
/// whether every entry would fail: `stale` (and what the answer saved) if
/// it was served the stored answer, else `miss`; counted once, when the
/// stream's body is dropped, whichever way it ended.
pub(super) struct StaleTally {
    stale: Counter,
    miss: Counter,
    saved: Counter<f64, AtomicU64>,
    /// What the stale answer saved, once it was served.
    served: Option<f64>,
}

impl StaleTally {
    /// The stale answer was served, saving `usd`.
    pub(super) fn served(&mut self, usd: f64) {
        self.served = Some(usd);
    }
}

impl Drop for StaleTally {
    fn drop(&mut self) {
        match self.served {
            Some(usd) => {
                self.stale.inc();
                self.saved.inc_by(usd);
            }
            None => {
                self.miss.inc();
            }
        }
    }
}
