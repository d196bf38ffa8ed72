//! What tokens cost: prices per model, the cost of an attempt from the usage
//! its provider reported, and exact sums of costs.
//!
//! Prices are read from configuration as US dollars per million tokens and
//! kept as whole micro-dollars per million tokens, which is picodollars
//! (10⁻¹² USD) per token: a cost is then `tokens × price` in integers, exact
//! for every price given with up to six decimals, and sums never drift.

use std::collections::BTreeMap;

use crate::chat::Usage;
use crate::error::{Attempt, AttemptOutcome};

/// An amount of US dollars, in whole picodollars (10⁻¹² USD).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost(u64);

impl Cost {
    /// Picodollars per dollar.
    const PER_USD: u64 = 1_000_000_000_000;

    /// `pico` picodollars.
    pub fn from_picodollars(pico: u64) -> Cost {
        Cost(pico)
    }

    /// `usd` dollars, rounded to the picodollar; `None` for a negative or
    /// non-finite amount, or one too large to count.
    pub fn from_usd(usd: f64) -> Option<Cost> {
        let pico = (usd * Self::PER_USD as f64).round();
        (usd.is_finite() && usd >= 0.0 && pico < u64::MAX as f64).then_some(Cost(pico as u64))
    }

    /// The amount in picodollars.
    pub fn picodollars(self) -> u64 {
        self.0
    }

    /// The amount in dollars as a float, for JSON numbers and metrics: exact
    /// in its printed form while under a thousand dollars (15 significant
    /// digits).
    pub fn usd(self) -> f64 {
        self.0 as f64 / Self::PER_USD as f64
    }

    /// The sum, saturating at the largest amount.
    pub fn plus(self, other: Cost) -> Cost {
        Cost(self.0.saturating_add(other.0))
    }

    /// The sum of `costs`, `None` when there is none.
    pub fn sum(costs: impl IntoIterator<Item = Cost>) -> Option<Cost> {
        costs.into_iter().reduce(Cost::plus)
    }
}

/// Dollars as a decimal (`0.0045`, `12`), with no trailing zeros: the
/// integer amount printed, never a float.
impl std::fmt::Display for Cost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, frac) = (self.0 / Self::PER_USD, self.0 % Self::PER_USD);
        if frac == 0 {
            return write!(f, "{whole}");
        }
        let digits = format!("{frac:012}");
        write!(f, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

impl serde::Serialize for Cost {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.usd())
    }
}

/// A model's prices, each in micro-dollars per million tokens (= picodollars
/// per token).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Price {
    /// Input tokens not read from or written to a cache.
    pub input: u64,
    /// Output tokens, reasoning included.
    pub output: u64,
    /// Input tokens read from the prompt cache; at `input` when not given.
    pub cached_input: Option<u64>,
    /// Input tokens written to the prompt cache; at `input` when not given.
    pub cache_write: Option<u64>,
}

impl Price {
    /// A price from dollars per million tokens; `None` for a negative or
    /// non-finite one.
    pub fn per_mtok(usd: f64) -> Option<u64> {
        // A million dollars per million tokens is beyond any real price and
        // keeps `tokens × price` far from overflow.
        let ok = usd.is_finite() && (0.0..=1e6).contains(&usd);
        ok.then(|| (usd * 1e6).round() as u64)
    }

    /// What `usage` costs at these prices. Input tokens count every input
    /// token, cached ones included: those read from or written to a cache
    /// are priced at their own rates and the rest at `input`.
    pub fn cost(&self, usage: &Usage) -> Cost {
        let cached = usage.cached_input_tokens.unwrap_or(0);
        let written = usage.cache_write_input_tokens.unwrap_or(0);
        let plain = usage
            .input_tokens
            .saturating_sub(cached)
            .saturating_sub(written);
        let at = |tokens: u64, price: u64| Cost(tokens.saturating_mul(price));
        at(plain, self.input)
            .plus(at(cached, self.cached_input.unwrap_or(self.input)))
            .plus(at(written, self.cache_write.unwrap_or(self.input)))
            .plus(at(usage.output_tokens, self.output))
    }
}

/// Prices by provider id and model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    by_provider: BTreeMap<String, BTreeMap<String, Price>>,
}

impl Prices {
    /// Sets the price of `provider`'s `model`.
    pub fn insert(&mut self, provider: impl Into<String>, model: impl Into<String>, price: Price) {
        self.by_provider
            .entry(provider.into())
            .or_default()
            .insert(model.into(), price);
    }

    /// The price of `provider`'s `model`, when configured.
    pub fn get(&self, provider: &str, model: &str) -> Option<&Price> {
        self.by_provider.get(provider)?.get(model)
    }

    /// Gives `to` every price `from` has: one provider's keys share its
    /// prices.
    pub fn copy_provider(&mut self, from: &str, to: &str) {
        if let Some(models) = self.by_provider.get(from).cloned() {
            self.by_provider
                .entry(to.to_owned())
                .or_default()
                .extend(models);
        }
    }

    /// Whether no price is configured.
    pub fn is_empty(&self) -> bool {
        self.by_provider.is_empty()
    }

    /// What `usage` of `provider`'s `model` cost; `None` without a price.
    pub fn cost(&self, provider: &str, model: &str, usage: &Usage) -> Option<Cost> {
        Some(self.get(provider, model)?.cost(usage))
    }

    /// What an attempt cost: `None` when its provider reported no usage
    /// (never a cost invented from nothing) or its model has no price.
    pub fn attempt_cost(&self, attempt: &Attempt) -> Option<Cost> {
        self.cost(&attempt.provider, &attempt.model, attempt.usage.as_ref()?)
    }

    /// What a request's attempts cost: in all, and the answer's share.
    pub fn bill(&self, attempts: &[Attempt]) -> Bill {
        let answer = attempts
            .iter()
            .rev()
            // Only a success is the answer: other outcomes that carry usage
            // (a rejected answer, a hedge's loser) may come after it.
            .find(|a| a.number > 0 && matches!(a.outcome, AttemptOutcome::Success))
            .and_then(|a| self.attempt_cost(a));
        Bill {
            total: Cost::sum(attempts.iter().filter_map(|a| self.attempt_cost(a))),
            answer,
        }
    }
}

/// What a request cost, from the usage its attempts reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bill {
    /// The answering attempt's share.
    #[serde(rename = "answerUsd", skip_serializing_if = "Option::is_none")]
    pub answer: Option<Cost>,
    /// Every attempt that reported usage and has a price: the answer,
    /// rejected answers, cut streams, losers. `None` when none had both.
    #[serde(rename = "totalUsd", skip_serializing_if = "Option::is_none")]
    pub total: Option<Cost>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_print_as_exact_decimals() {
        assert_eq!(Cost(0).to_string(), "0");
        assert_eq!(Cost(4_500_000_000).to_string(), "0.0045");
        assert_eq!(Cost(1).to_string(), "0.000000000001");
        assert_eq!(Cost(12 * Cost::PER_USD).to_string(), "12");
        assert_eq!(Cost(1_250_000_000_000).to_string(), "1.25");
        assert_eq!(
            serde_json::to_string(&Cost(4_500_000_000)).unwrap(),
            "0.0045"
        );
        assert_eq!(
            Cost::from_usd(0.1).map(Cost::picodollars),
            Some(100_000_000_000)
        );
        assert_eq!(Cost::from_usd(-1.0), None);
        assert_eq!(Cost::from_usd(f64::NAN), None);
    }

    #[test]
    fn prices_are_whole_micro_dollars_per_million() {
        assert_eq!(Price::per_mtok(3.0), Some(3_000_000));
        assert_eq!(Price::per_mtok(0.075), Some(75_000));
        assert_eq!(Price::per_mtok(0.0375), Some(37_500));
        assert_eq!(Price::per_mtok(-0.5), None);
        assert_eq!(Price::per_mtok(f64::INFINITY), None);
    }

    #[test]
    fn cached_and_written_input_tokens_have_their_own_rates() {
        let price = Price {
            input: 3_000_000,
            output: 15_000_000,
            cached_input: Some(300_000),
            cache_write: Some(3_750_000),
        };
        let usage = Usage {
            input_tokens: 1000,
            output_tokens: 200,
            cached_input_tokens: Some(600),
            cache_write_input_tokens: Some(100),
            reasoning_tokens: Some(50),
        };
        // 300 × 3 + 600 × 0.3 + 100 × 3.75 + 200 × 15 µ$ = 4455 µ$.
        assert_eq!(price.cost(&usage).to_string(), "0.004455");
        let plain = Price {
            cached_input: None,
            cache_write: None,
            ..price
        };
        assert_eq!(plain.cost(&usage).to_string(), "0.006");
    }

    #[test]
    fn a_bill_sums_every_attempt_with_usage_and_names_the_answer_s_share() {
        let mut prices = Prices::default();
        prices.insert(
            "p",
            "m",
            Price {
                input: 1_000_000,
                output: 2_000_000,
                ..Price::default()
            },
        );
        let attempt = |ok: bool, usage: Option<(u64, u64)>, model: &str| Attempt {
            provider: "p".into(),
            model: model.into(),
            number: 1,
            started_at: 0,
            duration: std::time::Duration::ZERO,
            reached: true,
            outcome: if ok {
                AttemptOutcome::Success
            } else {
                AttemptOutcome::Failure {
                    error: crate::error::ProviderError::new(crate::ErrorKind::Transport, "cut"),
                }
            },
            usage: usage.map(|(i, o)| Usage {
                input_tokens: i,
                output_tokens: o,
                ..Usage::default()
            }),
            omitted: Vec::new(),
            span: None,
            breaker: None,
        };
        let bill = prices.bill(&[
            attempt(false, Some((100, 5)), "m"),
            attempt(false, None, "m"),
            attempt(false, Some((100, 5)), "unpriced"),
            attempt(true, Some((10, 20)), "m"),
        ]);
        assert_eq!(
            bill.total.map(|c| c.to_string()).as_deref(),
            Some("0.00016")
        );
        assert_eq!(
            bill.answer.map(|c| c.to_string()).as_deref(),
            Some("0.00005")
        );
        let none = prices.bill(&[attempt(true, None, "m"), attempt(false, None, "m")]);
        assert_eq!(none, Bill::default(), "no usage: no cost, not zero");
    }
}
