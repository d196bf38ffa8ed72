//! The retry budget: a token bucket that keeps retries to a fraction of
//! first attempts, so that a fleet-wide outage cannot become a retry storm.

use crate::platform::UnixMillis;

/// A token bucket that limits retries to a fraction of first attempts, plus
/// a small floor, so that a fleet-wide outage cannot become a retry storm
/// (tower's retry budget). Pure: time is passed in. Counts in thousandths
/// of a token, so that the arithmetic is exact.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RetryBudget {
    per_deposit: u64,
    floor_per_sec: u64,
    capacity: u64,
    milli_tokens: u64,
    last: Option<UnixMillis>,
}

/// The retry budget's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetPolicy {
    /// Tokens earned per first attempt: retries may add this fraction to
    /// the load (default 0.2).
    pub ratio: f64,
    /// Tokens earned per second regardless of traffic, so that a quiet
    /// client can still retry (default 1).
    pub floor_per_sec: f64,
    /// The most tokens the bucket holds (default 10).
    pub capacity: f64,
}

impl Default for BudgetPolicy {
    fn default() -> Self {
        BudgetPolicy {
            ratio: 0.2,
            floor_per_sec: 1.0,
            capacity: 10.0,
        }
    }
}

const TOKEN: u64 = 1000;

fn milli(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        (v * TOKEN as f64).round().min(u64::MAX as f64 / 2.0) as u64
    } else {
        0
    }
}

impl RetryBudget {
    /// A full bucket.
    pub(crate) fn new(policy: BudgetPolicy) -> Self {
        let capacity = milli(policy.capacity);
        RetryBudget {
            per_deposit: milli(policy.ratio),
            floor_per_sec: milli(policy.floor_per_sec),
            capacity,
            milli_tokens: capacity,
            last: None,
        }
    }

    fn refill(&mut self, now: UnixMillis) {
        if let Some(last) = self.last {
            let earned = now.saturating_sub(last).saturating_mul(self.floor_per_sec) / 1000;
            self.milli_tokens = self.milli_tokens.saturating_add(earned).min(self.capacity);
        }
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
    }

    /// Records a first attempt, which earns `ratio` tokens.
    pub(crate) fn deposit(&mut self, now: UnixMillis) {
        self.refill(now);
        self.milli_tokens = self
            .milli_tokens
            .saturating_add(self.per_deposit)
            .min(self.capacity);
    }

    /// Takes one token for a retry; `false` when the budget is spent.
    pub(crate) fn try_withdraw(&mut self, now: UnixMillis) -> bool {
        self.refill(now);
        if self.milli_tokens >= TOKEN {
            self.milli_tokens -= TOKEN;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_limits_retries_to_a_fraction_of_traffic() {
        let mut b = RetryBudget::new(BudgetPolicy {
            ratio: 0.2,
            floor_per_sec: 0.0,
            capacity: 2.0,
        });
        assert!(b.try_withdraw(0));
        assert!(b.try_withdraw(0));
        assert!(!b.try_withdraw(0), "spent");
        for _ in 0..5 {
            b.deposit(0);
        }
        assert!(b.try_withdraw(0), "five first attempts earn one retry");
        assert!(!b.try_withdraw(0));
    }

    #[test]
    fn budget_floor_refills_with_time() {
        let mut b = RetryBudget::new(BudgetPolicy {
            ratio: 0.0,
            floor_per_sec: 1.0,
            capacity: 1.0,
        });
        assert!(b.try_withdraw(0));
        assert!(!b.try_withdraw(500));
        assert!(b.try_withdraw(1000));
    }
}
