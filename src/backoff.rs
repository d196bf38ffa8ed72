//! Pure retry arithmetic: full-jitter backoff, Retry-After parsing and the
//! retry budget. Time and randomness come in as arguments.

use std::time::Duration;

use crate::platform::{millis, Headers, UnixMillis};

/// How one chain entry retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per provider per request, the first included (default 3).
    pub max_attempts: u32,
    /// The first backoff cap (default 200 ms).
    pub base_delay: Duration,
    /// The largest backoff, and the longest Retry-After honoured before
    /// failing over instead (default 10 s).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The backoff cap after failed attempt `attempt` (1-based):
    /// `min(max_delay, base · 2^(attempt-1))`.
    pub fn cap(&self, attempt: u32) -> Duration {
        let shift = attempt.saturating_sub(1).min(62);
        let base = millis(self.base_delay);
        let exp = base.saturating_mul(1u64 << shift);
        Duration::from_millis(exp.min(millis(self.max_delay)))
    }

    /// Full jitter: uniform in `[0, cap)` for `random` in `[0, 1)`.
    pub fn jittered(&self, attempt: u32, random: f64) -> Duration {
        let cap = millis(self.cap(attempt));
        let r = if random.is_finite() {
            random.clamp(0.0, 1.0)
        } else {
            0.0
        };
        // The clamp keeps float rounding from ever reaching the cap itself.
        let ms = ((cap as f64) * r).floor() as u64;
        Duration::from_millis(ms.min(cap.saturating_sub(1)))
    }
}

/// Reads how long the server asked us to wait: `retry-after-ms`, then
/// `retry-after` as seconds, then as an HTTP-date (relative to `now`).
/// Unparseable values are ignored, never read as zero.
pub fn parse_retry_after(headers: &Headers, now: UnixMillis) -> Option<Duration> {
    if let Some(ms) = headers.get("retry-after-ms").and_then(parse_number) {
        return Some(seconds(ms / 1000.0));
    }
    let value = headers.get("retry-after")?.trim();
    if let Some(secs) = parse_number(value) {
        return Some(seconds(secs));
    }
    let at_ms = http_date(value)?.saturating_mul(1000);
    Some(Duration::from_millis(at_ms.saturating_sub(now)))
}

/// A non-negative number of seconds (or milliseconds), as std reads one;
/// bounded so that no value overflows a `Duration` or means forever.
fn parse_number(s: &str) -> Option<f64> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| (0.0..1e12).contains(v))
}

/// `secs`, checked by [`parse_number`], as a duration.
fn seconds(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or_default()
}

/// An HTTP-date (IMF-fixdate, RFC 850 or asctime) as seconds since the
/// Unix epoch; `None` for anything else.
fn http_date(s: &str) -> Option<u64> {
    let at = httpdate::parse_http_date(s).ok()?;
    at.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// A token bucket that limits retries to a fraction of first attempts, plus
/// a small floor, so that a fleet-wide outage cannot become a retry storm
/// (tower's retry budget). Pure: time is passed in. Counts in thousandths
/// of a token, so that the arithmetic is exact.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryBudget {
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
    pub fn new(policy: BudgetPolicy) -> Self {
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
    pub fn deposit(&mut self, now: UnixMillis) {
        self.refill(now);
        self.milli_tokens = self
            .milli_tokens
            .saturating_add(self.per_deposit)
            .min(self.capacity);
    }

    /// Takes one token for a retry; `false` when the budget is spent.
    pub fn try_withdraw(&mut self, now: UnixMillis) -> bool {
        self.refill(now);
        if self.milli_tokens >= TOKEN {
            self.milli_tokens -= TOKEN;
            true
        } else {
            false
        }
    }

    /// Tokens left.
    pub fn tokens(&self) -> f64 {
        self.milli_tokens as f64 / TOKEN as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn articles_full_jitter_figures() {
        // random fixed at 0.5, base 200 ms: 100 ms, then 200 ms.
        let p = RetryPolicy::default();
        assert_eq!(p.jittered(1, 0.5), Duration::from_millis(100));
        assert_eq!(p.jittered(2, 0.5), Duration::from_millis(200));
        assert_eq!(p.cap(3), Duration::from_millis(800));
        assert_eq!(p.cap(20), Duration::from_secs(10));
    }

    #[test]
    fn retry_after_sources_in_order() {
        let h: Headers = [("retry-after-ms", "1500"), ("retry-after", "7")]
            .into_iter()
            .collect();
        assert_eq!(parse_retry_after(&h, 0), Some(Duration::from_millis(1500)));
        let h: Headers = [("Retry-After", "7")].into_iter().collect();
        assert_eq!(parse_retry_after(&h, 0), Some(Duration::from_secs(7)));
        let h: Headers = [("retry-after", "Wed, 21 Oct 2015 07:28:10 GMT")]
            .into_iter()
            .collect();
        let now = 1_445_412_480_000; // 07:28:00
        assert_eq!(parse_retry_after(&h, now), Some(Duration::from_secs(10)));
        let h: Headers = [("retry-after", "soon")].into_iter().collect();
        assert_eq!(parse_retry_after(&h, 0), None);
        let h: Headers = [("retry-after", "-3")].into_iter().collect();
        assert_eq!(parse_retry_after(&h, 0), None);
        let h: Headers = [("retry-after", "1e300")].into_iter().collect();
        assert_eq!(parse_retry_after(&h, 0), None);
    }

    #[test]
    fn retry_after_in_every_form_a_server_sends() {
        let after = |name: &str, value: &str, now| {
            let h: Headers = [(name, value)].into_iter().collect();
            parse_retry_after(&h, now)
        };
        let now = 1_445_412_480_000; // Wed, 21 Oct 2015 07:28:00 GMT
        assert_eq!(
            after("retry-after", " 1.5 ", 0),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            after("retry-after-ms", "250.5", 0),
            Some(Duration::from_micros(250_500))
        );
        assert_eq!(
            after("retry-after", "Wednesday, 21-Oct-15 07:28:10 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            after("retry-after", "Wed Oct 21 07:28:10 2015", now),
            Some(Duration::from_secs(10))
        );
        // A date in the past: retry now, not never.
        assert_eq!(
            after("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO)
        );
        // A wrong weekday or an impossible date is no date.
        assert_eq!(
            after("retry-after", "Thu, 21 Oct 2015 07:28:10 GMT", now),
            None
        );
        assert_eq!(
            after("retry-after", "Fri, 31 Apr 2015 07:28:10 GMT", now),
            None
        );
        for junk in ["inf", "NaN", "", "1e12", "0x10"] {
            assert_eq!(after("retry-after", junk, 0), None, "{junk}");
        }
    }

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

    proptest! {
        #[test]
        fn backoff_stays_below_its_cap(
            attempt in 1u32..100,
            random in 0.0f64..1.0,
            base in 1u64..5_000,
            max in 1u64..120_000,
        ) {
            let p = RetryPolicy {
                max_attempts: 3,
                base_delay: Duration::from_millis(base),
                max_delay: Duration::from_millis(max),
            };
            let cap = p.cap(attempt);
            prop_assert!(cap <= p.max_delay);
            prop_assert!(p.jittered(attempt, random) < cap);
        }

        #[test]
        fn retry_after_never_panics(v in ".*") {
            let h: Headers = [("retry-after", v.as_str())].into_iter().collect();
            let _ = parse_retry_after(&h, 0);
            let h: Headers = [("retry-after-ms", v.as_str())].into_iter().collect();
            let _ = parse_retry_after(&h, 0);
        }
    }
}
