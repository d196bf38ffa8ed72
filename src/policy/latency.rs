//! Latency demotion (docs/design.md §8a): an entry whose recent p95 is
//! past its service-level objective is tried after the entries that meet
//! theirs. Pure: samples, time and randomness come in as arguments.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::policy::stats::percentile;

/// What an entry is expected to deliver: answer times (whole answers and a
/// stream's first token) and a stream's pace before its commit point.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Speed {
    /// p95 of whole answers above which the entry is demoted.
    pub latency_slo: Option<Duration>,
    /// p95 of a stream's time to first token above which it is demoted.
    pub ttft_slo: Option<Duration>,
    /// The pace a stream must keep over its first tokens.
    pub min_rate: Option<RateFloor>,
}

/// A stream's pace before its commit point: its first `window_tokens`
/// tokens must come at `tokens_per_sec` or better, counted from the first
/// content, or the attempt is abandoned for the next entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateFloor {
    /// The slowest acceptable rate (finite, above 0).
    pub tokens_per_sec: f64,
    /// Over how many first tokens (above 0).
    pub window_tokens: u32,
}

/// How demotion decides; see [`DemotionPolicy::default`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DemotionPolicy {
    /// Recent samples the p95 is taken over.
    pub window: u32,
    /// Samples needed before a p95 demotes or restores anything.
    pub min_samples: u32,
    /// A demoted entry comes back once its p95 is below this share of its
    /// objective, in (0, 1].
    pub restore_ratio: f64,
    /// The share of requests that keep the configured order, in [0, 1].
    pub explore: f64,
}

impl Default for DemotionPolicy {
    /// A window of 50 samples: one slow answer in twenty moves the p95, a
    /// burst of them is seen within a minute at one request a second, and
    /// recovery shows as soon. 20 samples before any decision: a p95 over
    /// fewer is one outlier. Restored below 80 % of the objective: an
    /// entry hovering at its objective does not flap. 5 % exploration: a
    /// demoted entry still answers one request in twenty, enough to refill
    /// its window in minutes, without costing most callers its latency.
    fn default() -> Self {
        DemotionPolicy {
            window: 50,
            min_samples: 20,
            restore_ratio: 0.8,
            explore: 0.05,
        }
    }
}

/// What a latency figure measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// A whole answer's time.
    Latency,
    /// A stream's time to its first token.
    Ttft,
}

/// A model demoted for its latency, as `/health` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Demotion {
    /// The model.
    pub model: String,
    /// What it is demoted for.
    pub measure: Measure,
    /// Its p95 over the recent window, in ms.
    pub p95_ms: u64,
}

/// A change of an entry's standing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Change {
    /// Demoted (true) or restored (false).
    pub(crate) demoted: bool,
    pub(crate) measure: Measure,
    pub(crate) p95_ms: u64,
    pub(crate) slo_ms: u64,
}

/// One measure's recent samples and standing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Series {
    #[serde(default)]
    samples: VecDeque<u64>,
    #[serde(default)]
    demoted: bool,
    /// The fleet's p95, while the fleet's standing is followed (the
    /// isolate's own window holds only its share of the samples).
    #[serde(skip)]
    fleet_p95: Option<u64>,
}

impl Series {
    fn p95(&self) -> Option<u64> {
        let mut v: Vec<u64> = self.samples.iter().copied().collect();
        v.sort_unstable();
        percentile(&v, 95.0)
    }

    /// Takes a sample into the bounded window.
    fn push(&mut self, ms: u64, policy: &DemotionPolicy) {
        while self.samples.len() >= policy.window.max(1) as usize {
            self.samples.pop_front();
        }
        self.samples.push_back(ms);
    }

    /// Applies the hysteresis: demoted above the objective, restored below
    /// `restore_ratio` of it, unchanged between and while the window holds
    /// fewer than `min_samples`. The new standing when it changed.
    fn decide(&mut self, slo_ms: u64, policy: &DemotionPolicy) -> Option<bool> {
        if self.samples.len() < policy.min_samples as usize {
            return None;
        }
        let p95 = self.p95()? as f64;
        let slo = slo_ms as f64;
        let demoted = match self.demoted {
            false => p95 > slo,
            true => p95 >= slo * policy.restore_ratio,
        };
        (demoted != self.demoted).then(|| {
            self.demoted = demoted;
            demoted
        })
    }

    /// Takes a sample and decides.
    fn record(&mut self, ms: u64, slo_ms: u64, policy: &DemotionPolicy) -> Option<bool> {
        self.push(ms, policy);
        self.decide(slo_ms, policy)
    }

    /// The p95 to show for its standing.
    fn shown_p95(&self) -> u64 {
        self.fleet_p95.or_else(|| self.p95()).unwrap_or(0)
    }
}

/// A latency sample as an isolate sends it to the fleet, with the batch of
/// verdicts it already sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// What was measured.
    pub measure: Measure,
    /// How long it took.
    pub ms: u64,
    /// The entry's objective for it.
    pub slo_ms: u64,
}

/// One measure of a model as the fleet sees it: its p95 over every
/// isolate's recent samples, and whether that demoted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Figure {
    /// The fleet-wide p95, in ms.
    pub p95_ms: u64,
    /// Whether the model is demoted on this measure.
    #[serde(default)]
    pub demoted: bool,
}

/// A model's latency standing as the fleet decided it, per measure (none
/// where no sample came yet). Part of the fleet's view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Latencies {
    /// Whole answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Figure>,
    /// Streams' first tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<Figure>,
}

impl Latencies {
    /// Whether the fleet has no figure of any measure.
    pub fn is_none(&self) -> bool {
        self.latency.is_none() && self.ttft.is_none()
    }

    /// Whether it is demoted on any measure.
    pub fn any_demoted(&self) -> bool {
        [self.latency, self.ttft]
            .into_iter()
            .any(|f| f.is_some_and(|f| f.demoted))
    }

    /// The figure of `measure`.
    pub fn get(&self, measure: Measure) -> Option<Figure> {
        match measure {
            Measure::Latency => self.latency,
            Measure::Ttft => self.ttft,
        }
    }
}

/// One model's figures fleet-wide, as its Durable Object keeps them: every
/// isolate's samples in one bounded window per measure, judged with the
/// same hysteresis an isolate alone applies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    #[serde(default)]
    latency: Series,
    #[serde(default)]
    ttft: Series,
}

impl Figures {
    /// Whether no sample ever came.
    pub fn is_empty(&self) -> bool {
        self.latency.samples.is_empty() && self.ttft.samples.is_empty()
    }

    /// Folds `samples` in, each against the objective it came with.
    pub fn record(&mut self, samples: &[Sample], policy: &DemotionPolicy) {
        for s in samples {
            let series = match s.measure {
                Measure::Latency => &mut self.latency,
                Measure::Ttft => &mut self.ttft,
            };
            series.record(s.ms, s.slo_ms, policy);
        }
    }

    /// The standing as it is.
    pub fn latencies(&self) -> Latencies {
        let figure = |s: &Series| {
            s.p95().map(|p95_ms| Figure {
                p95_ms,
                demoted: s.demoted,
            })
        };
        Latencies {
            latency: figure(&self.latency),
            ttft: figure(&self.ttft),
        }
    }
}

/// Every entry's recent figures, keyed by `provider/model`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Book {
    series: BTreeMap<(String, Measure), Series>,
}

impl Book {
    /// Records a sample of `measure` for `key` against its objective; the
    /// change of standing it caused, if any. With `shared`, the fleet
    /// decides the standing ([`Book::adopt`]): the sample is only kept, for
    /// when the fleet is out of reach.
    pub(crate) fn record(
        &mut self,
        key: &str,
        measure: Measure,
        ms: u64,
        slo: Duration,
        policy: &DemotionPolicy,
        shared: bool,
    ) -> Option<Change> {
        let series = self.series.entry((key.to_string(), measure)).or_default();
        let slo_ms = slo_ms(slo);
        if shared {
            series.push(ms, policy);
            return None;
        }
        series.fleet_p95 = None;
        let demoted = series.record(ms, slo_ms, policy)?;
        Some(Change {
            demoted,
            measure,
            p95_ms: series.p95().unwrap_or(ms),
            slo_ms,
        })
    }

    /// Takes the fleet's standing of `key` on `measure` (`None`: the fleet
    /// has no sample of it, so nothing demotes it); the change, if the
    /// standing this isolate followed differed.
    pub(crate) fn adopt(
        &mut self,
        key: &str,
        measure: Measure,
        fleet: Option<Figure>,
        slo: Duration,
    ) -> Option<Change> {
        let demoted = fleet.is_some_and(|f| f.demoted);
        if !demoted && !self.series.contains_key(&(key.to_string(), measure)) {
            return None; // never judged here, and the fleet agrees
        }
        let series = self.series.entry((key.to_string(), measure)).or_default();
        series.fleet_p95 = fleet.map(|f| f.p95_ms);
        if demoted == series.demoted {
            return None;
        }
        series.demoted = demoted;
        Some(Change {
            demoted,
            measure,
            p95_ms: series.shown_p95(),
            slo_ms: slo_ms(slo),
        })
    }

    /// The measures `key` is demoted on, with their p95.
    pub(crate) fn demoted(&self, key: &str) -> Vec<(Measure, u64)> {
        [Measure::Latency, Measure::Ttft]
            .into_iter()
            .filter_map(|m| {
                let s = self.series.get(&(key.to_string(), m))?;
                s.demoted.then(|| (m, s.shown_p95()))
            })
            .collect()
    }

    /// Whether `key` is demoted on any measure.
    pub(crate) fn is_demoted(&self, key: &str) -> bool {
        !self.demoted(key).is_empty()
    }
}

fn slo_ms(slo: Duration) -> u64 {
    u64::try_from(slo.as_millis()).unwrap_or(u64::MAX)
}

/// The order to try `chain` in, as indices: the entries that meet their
/// objectives in configured order, then the demoted ones, in configured
/// order too. `random` (drawn only when an entry is demoted) below
/// `explore` keeps the configured order, so a demoted entry still answers
/// a share of requests and its figures, and its standing, keep up with it.
/// `None` when the order is the configured one.
pub(crate) fn demote<T>(
    chain: &[T],
    demoted: impl Fn(&T) -> bool,
    policy: &DemotionPolicy,
    random: impl FnOnce() -> f64,
) -> Option<Vec<usize>> {
    let flags: Vec<bool> = chain.iter().map(demoted).collect();
    if !flags.iter().any(|d| *d) || random() < policy.explore {
        return None;
    }
    let first = (0..chain.len()).filter(|i| !flags[*i]);
    let last = (0..chain.len()).filter(|i| flags[*i]);
    Some(first.chain(last).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> DemotionPolicy {
        DemotionPolicy {
            window: 10,
            min_samples: 5,
            restore_ratio: 0.8,
            explore: 0.1,
        }
    }

    const SLO: Duration = Duration::from_millis(1000);

    #[test]
    fn an_entry_is_demoted_above_its_objective_and_restored_only_below_the_lower_mark() {
        let (mut b, p) = (Book::default(), policy());
        // Fewer than min_samples: no decision however slow.
        for _ in 0..4 {
            assert_eq!(
                b.record("a/m", Measure::Latency, 5000, SLO, &p, false),
                None
            );
        }
        let c = b
            .record("a/m", Measure::Latency, 5000, SLO, &p, false)
            .unwrap();
        assert!(c.demoted);
        assert_eq!(
            (c.p95_ms, c.slo_ms, c.measure),
            (5000, 1000, Measure::Latency)
        );
        assert!(b.is_demoted("a/m") && !b.is_demoted("b/m"));
        // 900 ms: under the objective but above 80 % of it: still demoted.
        for _ in 0..10 {
            assert_eq!(b.record("a/m", Measure::Latency, 900, SLO, &p, false), None);
        }
        assert!(b.is_demoted("a/m"));
        // 700 ms pushes the p95 below 800: restored, once.
        let changes: Vec<Change> = (0..10)
            .filter_map(|_| b.record("a/m", Measure::Latency, 700, SLO, &p, false))
            .collect();
        assert_eq!(changes.len(), 1);
        assert!(!changes[0].demoted && changes[0].p95_ms < 800);
        assert!(!b.is_demoted("a/m"));
        // 900 ms again: between the marks, an entry in good standing stays.
        for _ in 0..10 {
            assert_eq!(b.record("a/m", Measure::Latency, 900, SLO, &p, false), None);
        }
    }

    #[test]
    fn the_p95_counts_only_the_recent_window() {
        let (mut b, p) = (Book::default(), policy());
        for _ in 0..10 {
            b.record("a/m", Measure::Ttft, 100, SLO, &p, false);
        }
        // One slow sample in ten is the p95 (nearest rank): demoted.
        assert!(
            b.record("a/m", Measure::Ttft, 3000, SLO, &p, false)
                .unwrap()
                .demoted
        );
        assert_eq!(b.demoted("a/m"), vec![(Measure::Ttft, 3000)]);
        // Ten fast samples later the slow one has left the window.
        let restored = (0..10).find_map(|_| b.record("a/m", Measure::Ttft, 100, SLO, &p, false));
        assert!(!restored.unwrap().demoted);
    }

    #[test]
    fn the_fleets_figures_judge_every_isolates_samples_with_the_same_hysteresis() {
        let p = policy();
        let mut f = Figures::default();
        let sample = |ms| Sample {
            measure: Measure::Ttft,
            ms,
            slo_ms: 1000,
        };
        f.record(&[sample(5000); 4], &p);
        assert!(!f.latencies().any_demoted(), "fewer than min_samples");
        f.record(&[sample(5000)], &p);
        let ttft = f.latencies().ttft.unwrap();
        assert_eq!((ttft.p95_ms, ttft.demoted), (5000, true));
        assert_eq!(f.latencies().latency, None, "no sample: no figure");
        f.record(&[sample(900); 10], &p);
        assert!(f.latencies().any_demoted(), "between the marks");
        f.record(&[sample(700); 10], &p);
        assert!(!f.latencies().any_demoted());
        let back: Figures = serde_json::from_value(serde_json::to_value(&f).unwrap()).unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn an_isolate_follows_the_fleets_standing_and_keeps_its_samples_for_later() {
        let (mut b, p) = (Book::default(), policy());
        // Shared: its own samples decide nothing, however slow.
        for _ in 0..10 {
            assert_eq!(b.record("a/m", Measure::Latency, 5000, SLO, &p, true), None);
        }
        assert!(!b.is_demoted("a/m"));
        let slow = Some(Figure {
            p95_ms: 3000,
            demoted: true,
        });
        let c = b.adopt("a/m", Measure::Latency, slow, SLO).unwrap();
        assert!(c.demoted && c.p95_ms == 3000);
        assert_eq!(b.adopt("a/m", Measure::Latency, slow, SLO), None, "once");
        assert_eq!(b.demoted("a/m"), vec![(Measure::Latency, 3000)]);
        let fast = Some(Figure {
            p95_ms: 100,
            demoted: false,
        });
        let c = b.adopt("a/m", Measure::Latency, fast, SLO).unwrap();
        assert!(!c.demoted && c.p95_ms == 100);
        // Never judged and not demoted: nothing to follow.
        assert_eq!(b.adopt("b/m", Measure::Ttft, None, SLO), None);
        // The fleet out of reach: its own window decides again.
        let c = b.record("a/m", Measure::Latency, 5000, SLO, &p, false);
        assert!(c.unwrap().demoted);
    }

    #[test]
    fn demoted_entries_go_last_in_configured_order_except_when_exploring() {
        let p = policy();
        let chain = ["a", "b", "c", "d"];
        let slow = |e: &&str| *e == "a" || *e == "c";
        assert_eq!(demote(&chain, slow, &p, || 0.5), Some(vec![1, 3, 0, 2]));
        assert_eq!(demote(&chain, slow, &p, || 0.05), None, "exploring");
        assert_eq!(demote(&chain, |_| false, &p, || 0.5), None);
        let all = demote(&chain, |_| true, &p, || 0.5);
        assert_eq!(all, Some(vec![0, 1, 2, 3]));
    }

    #[test]
    fn exploration_takes_its_share_of_requests() {
        let p = policy();
        let chain = ["slow", "fast"];
        let explored = (0..1000)
            .filter(|i| demote(&chain, |e| *e == "slow", &p, || f64::from(*i) / 1000.0).is_none())
            .count();
        assert_eq!(explored, 100);
    }
}
