//! Per-provider health: request and failure counts, error rate, and latency
//! percentiles over a bounded window of recent calls. Pure: time comes in.

use std::collections::VecDeque;

use serde::Serialize;

use crate::error::{ErrorKind, ProviderError};
use crate::platform::UnixMillis;
use crate::policy::breaker::{State, StateName};
use crate::policy::latency::Demotion;
use crate::policy::pool::PoolReading;

/// How many recent calls the latency percentiles and error rate cover.
pub(crate) const WINDOW: usize = 256;

/// Latency percentiles in milliseconds over the window (nearest rank).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: Option<u64>,
    /// 95th percentile.
    pub p95: Option<u64>,
    /// 99th percentile.
    pub p99: Option<u64>,
}

/// The most recent failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastFailure {
    /// When it happened.
    pub at: UnixMillis,
    /// Its class.
    pub kind: ErrorKind,
    /// The HTTP status, if any.
    pub status: Option<u16>,
    /// Its message.
    pub message: String,
}

/// Counters and recent samples for one provider.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProviderStats {
    requests: u64,
    failures: u64,
    /// Recent calls: (latency ms, failed).
    recent: VecDeque<(u64, bool)>,
    /// Recent streams: (time to first token ms, output tokens per second).
    streams: VecDeque<(u64, Option<f64>)>,
    last_failure: Option<LastFailure>,
}

impl ProviderStats {
    /// Records one call that reached (or tried to reach) the provider.
    pub(crate) fn record(
        &mut self,
        now: UnixMillis,
        latency_ms: u64,
        error: Option<&ProviderError>,
    ) {
        self.requests += 1;
        if let Some(e) = error {
            self.failures += 1;
            match &mut self.last_failure {
                // In place: the message's buffer is reused.
                Some(last) => {
                    (last.at, last.kind, last.status) = (now, e.kind, e.status);
                    last.message.clone_from(&e.message);
                }
                None => {
                    self.last_failure = Some(LastFailure {
                        at: now,
                        kind: e.kind,
                        status: e.status,
                        message: e.message.clone(),
                    })
                }
            }
        }
        if self.recent.len() == WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back((latency_ms, error.is_some()));
    }

    /// Records a completed stream: its time to first token, and its output
    /// rate when the provider reported usage.
    pub(crate) fn record_stream(&mut self, ttft_ms: u64, output_tokens: u64, streaming_ms: u64) {
        let rate = (output_tokens > 0 && streaming_ms > 0)
            .then(|| output_tokens as f64 * 1000.0 / streaming_ms as f64);
        if self.streams.len() == WINDOW {
            self.streams.pop_front();
        }
        self.streams.push_back((ttft_ms, rate));
    }

    /// Time-to-first-token percentiles over recent streams.
    pub(crate) fn ttft(&self) -> Latency {
        let mut v: Vec<u64> = self.streams.iter().map(|(ms, _)| *ms).collect();
        v.sort_unstable();
        Latency {
            p50: percentile(&v, 50.0),
            p95: percentile(&v, 95.0),
            p99: percentile(&v, 99.0),
        }
    }

    /// The median output rate of recent streams, in tokens per second.
    pub(crate) fn tokens_per_sec(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.streams.iter().filter_map(|(_, r)| *r).collect();
        v.sort_unstable_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    }

    /// Latency percentiles over the window.
    pub(crate) fn latency(&self) -> Latency {
        let mut v: Vec<u64> = self.recent.iter().map(|(ms, _)| *ms).collect();
        v.sort_unstable();
        Latency {
            p50: percentile(&v, 50.0),
            p95: percentile(&v, 95.0),
            p99: percentile(&v, 99.0),
        }
    }

    /// Failed calls / calls over the window (0 when empty).
    pub(crate) fn error_rate(&self) -> f64 {
        if self.recent.is_empty() {
            return 0.0;
        }
        self.recent.iter().filter(|(_, failed)| *failed).count() as f64 / self.recent.len() as f64
    }

    /// The health report for this provider, with its breaker's state.
    pub(crate) fn health(&self, provider: &str, breaker: Option<(State, u32)>) -> Health {
        let (state, consecutive_failures) = breaker.unwrap_or((State::Closed, 0));
        Health {
            provider: provider.to_string(),
            state: state.name(),
            open_until: open_until(state),
            consecutive_failures,
            requests: self.requests,
            failures: self.failures,
            error_rate: self.error_rate(),
            latency_ms: self.latency(),
            ttft_ms: self.ttft(),
            tokens_per_sec: self.tokens_per_sec(),
            demoted: Vec::new(),
            last_failure: self.last_failure.clone(),
            models: Vec::new(),
        }
    }
}

/// Nearest-rank percentile of sorted samples.
pub(crate) fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// One provider's health, as `/health` and `client.health()` report it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// The provider id.
    pub provider: String,
    /// The breaker's state.
    pub state: StateName,
    /// When an open breaker's cooldown ends.
    pub open_until: Option<UnixMillis>,
    /// Failures since the last success.
    pub consecutive_failures: u32,
    /// Calls made, ever.
    pub requests: u64,
    /// Calls failed, ever.
    pub failures: u64,
    /// Failure rate over the recent window.
    pub error_rate: f64,
    /// Latency percentiles over the recent window.
    pub latency_ms: Latency,
    /// Streams' time to first token, over recent streams.
    pub ttft_ms: Latency,
    /// Streams' median output rate, in tokens per second.
    pub tokens_per_sec: Option<f64>,
    /// The provider's models demoted for their latency, with the p95 that
    /// demoted them (none listed when none is).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub demoted: Vec<Demotion>,
    /// The most recent failure.
    pub last_failure: Option<LastFailure>,
    /// The breaker of each of its models (`state` above is the worst of
    /// them).
    pub models: Vec<ModelBreaker>,
}

impl Health {
    /// The report as of `now`: a breaker whose open period has passed reads
    /// half-open (the breaker lets its next call through as the probe, and
    /// moves when that call asks), without an `openUntil`; the provider's
    /// state stays its worst model's.
    pub(crate) fn seen_at(mut self, now: UnixMillis) -> Self {
        let passed = |state: StateName, until: Option<UnixMillis>| {
            state == StateName::Open && until.is_some_and(|t| t <= now)
        };
        for m in &mut self.models {
            if passed(m.state, m.open_until) {
                (m.state, m.open_until) = (StateName::HalfOpen, None);
            }
        }
        if passed(self.state, self.open_until) {
            let severity = |s: StateName| match s {
                StateName::Closed => 0,
                StateName::HalfOpen => 1,
                StateName::Open => 2,
            };
            let worst = self
                .models
                .iter()
                .max_by_key(|m| (severity(m.state), m.consecutive_failures));
            (self.state, self.open_until) = match worst {
                Some(m) => (m.state, m.open_until),
                None => (StateName::HalfOpen, None),
            };
        }
        self
    }

    /// Whether this provider makes the gateway `degraded`: a breaker of it
    /// turns calls away until a time still to come. A half-open one lets
    /// its probe through, so a model that had no traffic since its
    /// failures is not degraded forever.
    pub fn is_degraded(&self) -> bool {
        self.state == StateName::Open
    }
}

/// The breaker of one model at a provider, as health reports show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelBreaker {
    /// The model (`*` for the breaker shared by models no route lists).
    pub model: String,
    /// The first label a route gives the entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The breaker's state.
    pub state: StateName,
    /// When an open breaker's cooldown ends.
    pub open_until: Option<UnixMillis>,
    /// Failures since the last success.
    pub consecutive_failures: u32,
    /// Calls made to this model, ever.
    pub requests: u64,
    /// Calls failed, ever.
    pub failures: u64,
    /// Its failure rate over the recent window.
    pub error_rate: f64,
    /// Its latency percentiles over the recent window.
    pub latency_ms: Latency,
    /// Its streams' time to first token.
    pub ttft_ms: Latency,
    /// What its provider last said of its rate-limit pools, when it said
    /// anything (resets in ms since the Unix epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolReading>,
}

impl ModelBreaker {
    pub(crate) fn new(
        model: String,
        label: Option<String>,
        state: State,
        consecutive_failures: u32,
        stats: Option<&ProviderStats>,
    ) -> Self {
        let none = ProviderStats::default();
        let stats = stats.unwrap_or(&none);
        ModelBreaker {
            model,
            label,
            state: state.name(),
            open_until: open_until(state),
            consecutive_failures,
            requests: stats.requests,
            failures: stats.failures,
            error_rate: stats.error_rate(),
            latency_ms: stats.latency(),
            ttft_ms: stats.ttft(),
            pool: None,
        }
    }

    /// With what its provider last said of its pools.
    pub(crate) fn with_pool(mut self, pool: Option<PoolReading>) -> Self {
        self.pool = pool;
        self
    }
}

fn open_until(state: State) -> Option<UnixMillis> {
    match state {
        State::Open { until } => Some(until),
        State::Closed | State::HalfOpen { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_not_a_mean() {
        let mut s = ProviderStats::default();
        for ms in 1..=100 {
            s.record(0, ms, None);
        }
        assert_eq!(
            s.latency(),
            Latency {
                p50: Some(50),
                p95: Some(95),
                p99: Some(99)
            }
        );
        let mut s = ProviderStats::default();
        for _ in 0..99 {
            s.record(0, 10, None);
        }
        s.record(0, 10_000, None);
        assert_eq!(
            s.latency().p50,
            Some(10),
            "one outlier does not move the median"
        );
        assert_eq!(s.latency().p99, Some(10));
        s.record(0, 10_000, None);
        assert_eq!(s.latency().p99, Some(10_000));
    }

    #[test]
    fn the_window_is_bounded() {
        let mut s = ProviderStats::default();
        for _ in 0..WINDOW {
            s.record(0, 1, Some(&ProviderError::new(ErrorKind::Server, "x")));
        }
        for _ in 0..WINDOW {
            s.record(0, 5, None);
        }
        assert_eq!(s.error_rate(), 0.0);
        assert_eq!(s.latency().p99, Some(5));
        let h = s.health("p", None);
        assert_eq!((h.requests, h.failures), (2 * WINDOW as u64, WINDOW as u64));
        assert_eq!(h.last_failure.map(|f| f.kind), Some(ErrorKind::Server));
    }

    #[test]
    fn streams_report_time_to_first_token_and_rate() {
        let mut s = ProviderStats::default();
        s.record_stream(300, 100, 2000);
        s.record_stream(500, 0, 1000);
        s.record_stream(100, 300, 1000);
        assert_eq!(
            s.ttft(),
            Latency {
                p50: Some(300),
                p95: Some(500),
                p99: Some(500)
            }
        );
        assert_eq!(
            s.tokens_per_sec(),
            Some(300.0),
            "median of 50 and 300 tok/s, unknown rates left out"
        );
    }

    #[test]
    fn empty_stats_have_no_percentiles() {
        assert_eq!(ProviderStats::default().latency(), Latency::default());
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7], 99.0), Some(7));
    }
}
