//! Spend caps: a route's budget per UTC day, and what the route serves once
//! it is spent.

use serde::{Deserialize, Serialize};

use crate::platform::UnixMillis;
use crate::policy::price::{Cost, Price};

/// Milliseconds in a day: UTC days have no leap seconds in Unix time.
const DAY_MS: UnixMillis = 86_400_000;

/// The UTC day `now` falls in, as days since 1970-01-01.
pub(crate) fn utc_day(now: UnixMillis) -> u64 {
    now / DAY_MS
}

/// When the UTC day `day` ends.
pub(crate) fn day_end(day: u64) -> UnixMillis {
    day.saturating_add(1).saturating_mul(DAY_MS)
}

/// A route's daily budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpendCap {
    /// What the route may spend per UTC day.
    pub daily: Cost,
    /// What it does once that is spent.
    pub over: OverBudget,
}

/// What a route whose budget is spent does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverBudget {
    /// Answers 429 until the day ends.
    #[default]
    Reject,
    /// Serves only from entries whose input and output prices are both at
    /// most this (micro-dollars per million tokens); entries without a price
    /// are left out, since their cost is not known.
    MaxPrice(u64),
}

impl OverBudget {
    /// Whether an entry priced `price` may serve once the budget is spent.
    pub fn admits(&self, price: Option<&Price>) -> bool {
        match (self, price) {
            (OverBudget::Reject, _) | (OverBudget::MaxPrice(_), None) => false,
            (OverBudget::MaxPrice(max), Some(p)) => p.input <= *max && p.output <= *max,
        }
    }
}

/// What was spent on one UTC day. A tally of an earlier day reads as
/// nothing spent today.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// The UTC day (days since 1970-01-01).
    pub day: u64,
    /// Picodollars spent on it.
    pub spent: u64,
}

impl Tally {
    /// What was spent on the day of `now`.
    pub fn today(&self, now: UnixMillis) -> Cost {
        if self.day == utc_day(now) {
            Cost::from_picodollars(self.spent)
        } else {
            Cost::default()
        }
    }

    /// Adds `cost` spent at `now`; a new day starts from nothing.
    pub fn add(&mut self, now: UnixMillis, cost: Cost) {
        let day = utc_day(now);
        if day != self.day {
            *self = Tally { day, spent: 0 };
        }
        self.spent = self.spent.saturating_add(cost.picodollars());
    }

    /// This tally and `other`, both of the later day's: the later one if
    /// their days differ, else the larger amount (two counts of the same
    /// spending, one newer).
    pub fn newest(self, other: Tally) -> Tally {
        match self.day.cmp(&other.day) {
            std::cmp::Ordering::Less => other,
            std::cmp::Ordering::Greater => self,
            std::cmp::Ordering::Equal => Tally {
                day: self.day,
                spent: self.spent.max(other.spent),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_counts_one_utc_day() {
        let noon = 20_000 * DAY_MS + DAY_MS / 2;
        let mut t = Tally::default();
        t.add(noon, Cost::from_picodollars(5));
        t.add(noon + 1000, Cost::from_picodollars(7));
        assert_eq!(t.today(noon), Cost::from_picodollars(12));
        assert_eq!(t.today(day_end(20_000)), Cost::default(), "a new day");
        assert_eq!(t.today(day_end(20_000) - 1), Cost::from_picodollars(12));
        t.add(day_end(20_000), Cost::from_picodollars(1));
        assert_eq!(
            t,
            Tally {
                day: 20_001,
                spent: 1
            }
        );
        let older = Tally {
            day: 20_000,
            spent: 99,
        };
        assert_eq!(older.newest(t), t);
        assert_eq!(
            t.newest(Tally {
                day: 20_001,
                spent: 4
            })
            .spent,
            4
        );
    }

    #[test]
    fn over_budget_admits_only_priced_entries_under_the_limit() {
        let p = |input, output| Price {
            input,
            output,
            ..Price::default()
        };
        let cheap = OverBudget::MaxPrice(1_000_000);
        assert!(cheap.admits(Some(&p(150_000, 600_000))));
        assert!(cheap.admits(Some(&p(1_000_000, 1_000_000))));
        assert!(!cheap.admits(Some(&p(150_000, 1_000_001))));
        assert!(!cheap.admits(None));
        assert!(!OverBudget::Reject.admits(Some(&p(0, 0))));
    }
}
