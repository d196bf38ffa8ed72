//! Configuration of the latency features: objectives that demote a slow
//! entry (top level `latency`, over which each entry may set its own),
//! the pace a stream must keep before its commit point, and how demotion
//! decides.

use serde::Deserialize;

use super::{EntryConfig, Issues};
use crate::policy::latency::{DemotionPolicy, RateFloor, Speed};

/// `latency`: defaults for every entry, and how demotion decides; every
/// field optional. No objective and no pace are set by default: demotion
/// and the pace check are opt-in, since only the operator knows what is
/// slow for a model.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct LatencyConfig {
    /// p95 of whole answers above which an entry is demoted.
    pub(crate) latency_slo_ms: Option<u64>,
    /// p95 of a stream's time to first token above which it is demoted.
    pub(crate) ttft_slo_ms: Option<u64>,
    /// The slowest pace a stream's first tokens may come at.
    pub(crate) min_tokens_per_second: Option<f64>,
    /// Over how many first tokens the pace is judged (default 20).
    pub(crate) rate_window_tokens: Option<u32>,
    /// Recent samples the p95 is taken over (default 50).
    pub(crate) window: Option<u32>,
    /// Samples before a p95 decides (default 20).
    pub(crate) min_samples: Option<u32>,
    /// Restored below this share of the objective (default 0.8).
    pub(crate) restore_ratio: Option<f64>,
    /// Share of requests in configured order (default 0.05).
    pub(crate) explore: Option<f64>,
}

/// The pace's window when only a rate is given: about a sentence, enough
/// to see a rate, short enough that holding it back costs little.
const DEFAULT_WINDOW_TOKENS: u32 = 20;

impl LatencyConfig {
    /// How demotion decides.
    pub(crate) fn policy(&self, issues: &mut Issues) -> DemotionPolicy {
        let d = DemotionPolicy::default();
        let p = DemotionPolicy {
            window: issues.count("latency", "window", self.window, d.window, 10_000),
            min_samples: issues.count(
                "latency",
                "minSamples",
                self.min_samples,
                d.min_samples,
                10_000,
            ),
            restore_ratio: issues.fraction(
                "latency",
                "restoreRatio",
                self.restore_ratio,
                d.restore_ratio,
                false,
            ),
            explore: issues.fraction("latency", "explore", self.explore, d.explore, true),
        };
        if p.min_samples > p.window {
            issues.add_at("latency", "minSamples", "must not exceed window");
        }
        p
    }

    /// `e`'s speed: its own settings over these.
    pub(crate) fn speed(&self, path: &str, e: &EntryConfig, issues: &mut Issues) -> Speed {
        let slo = |issues: &mut Issues, field: &str, own: Option<u64>, top: Option<u64>| {
            let (at, v) = match own {
                Some(v) => (path, Some(v)),
                None => ("latency", top),
            };
            v.map(|ms| issues.ms_at(at, field, Some(ms), std::time::Duration::ZERO))
                .filter(|d| !d.is_zero())
        };
        let rate = e.min_tokens_per_second.or(self.min_tokens_per_second);
        let window = e.rate_window_tokens.or(self.rate_window_tokens);
        let min_rate = match (rate, window) {
            (None, None) => None,
            (None, Some(_)) => {
                issues.add_at(path, "rateWindowTokens", "needs minTokensPerSecond");
                None
            }
            (Some(r), _) if !(r.is_finite() && r > 0.0) => {
                issues.add_at(path, "minTokensPerSecond", "must be greater than 0");
                None
            }
            (Some(r), w) => Some(RateFloor {
                tokens_per_sec: r,
                window_tokens: issues.count(
                    path,
                    "rateWindowTokens",
                    w,
                    DEFAULT_WINDOW_TOKENS,
                    100_000,
                ),
            }),
        };
        Speed {
            latency_slo: slo(
                issues,
                "latencySloMs",
                e.latency_slo_ms,
                self.latency_slo_ms,
            ),
            ttft_slo: slo(issues, "ttftSloMs", e.ttft_slo_ms, self.ttft_slo_ms),
            min_rate,
        }
    }
}
