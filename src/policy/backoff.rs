//! Pure retry arithmetic: full-jitter backoff, the retry decision
//! ([`RetryPolicy::next_delay`]) and Retry-After parsing.
//! Time and randomness come in as arguments.

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
    /// The longest a rate-limited entry is waited for while a later entry
    /// of the route can serve now: past it the request moves on at once
    /// (default 1 s; [`RetryPolicy::max_delay`] or more waits as long as a
    /// Retry-After allows).
    pub rate_limit_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(10),
            rate_limit_wait: Duration::from_secs(1),
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

    /// The wait before retrying after failed attempt `attempt` (1-based) of
    /// at most `max_attempts`, or `None` to stop here: the attempts are
    /// spent, the server's `retry_after` exceeds `max_delay` or the time
    /// `left` (another provider is the faster answer), or the wait could not
    /// finish inside `left`. Without a Retry-After the wait is full jitter
    /// of `random()`, drawn only then.
    pub(crate) fn next_delay(
        &self,
        attempt: u32,
        max_attempts: u32,
        retry_after: Option<Duration>,
        left: Duration,
        random: impl FnOnce() -> f64,
    ) -> Option<Duration> {
        if attempt >= max_attempts {
            return None;
        }
        let delay = match retry_after {
            // The server said how long: listen, if it fits.
            Some(after) if after <= self.max_delay && after < left => after,
            Some(_) => return None,
            None => self.jittered(attempt, random()),
        };
        // No wait is started that cannot finish in time.
        (delay < left).then_some(delay)
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn full_jitter_at_one_half_gives_half_of_each_cap() {
        // random fixed at 0.5, base 200 ms: 100 ms, then 200 ms.
        let p = RetryPolicy::default();
        assert_eq!(p.jittered(1, 0.5), Duration::from_millis(100));
        assert_eq!(p.jittered(2, 0.5), Duration::from_millis(200));
        assert_eq!(p.cap(3), Duration::from_millis(800));
        assert_eq!(p.cap(20), Duration::from_secs(10));
    }

    #[test]
    fn next_delay_is_jitter_until_the_attempts_are_spent() {
        let p = RetryPolicy::default();
        let left = Duration::from_secs(60);
        assert_eq!(
            p.next_delay(1, 3, None, left, || 0.5),
            Some(Duration::from_millis(100))
        );
        assert_eq!(
            p.next_delay(2, 3, None, left, || 0.5),
            Some(Duration::from_millis(200))
        );
        assert_eq!(p.next_delay(3, 3, None, left, || 0.5), None);
        // A probe or a forced call has one attempt in all.
        assert_eq!(p.next_delay(1, 1, None, left, || 0.5), None);
    }

    #[test]
    fn next_delay_listens_to_retry_after_when_it_fits() {
        let p = RetryPolicy::default();
        let left = Duration::from_secs(5);
        let never = || -> f64 { panic!("no random draw beside a Retry-After") };
        let after = |s| Some(Duration::from_secs(s));
        assert_eq!(p.next_delay(1, 3, after(2), left, never), after(2));
        // Over the cap, or not before the deadline: the next provider.
        assert_eq!(p.next_delay(1, 3, after(11), Duration::MAX, never), None);
        assert_eq!(p.next_delay(1, 3, after(5), left, never), None);
        // The attempts spent come first: no draw, no wait.
        assert_eq!(p.next_delay(3, 3, after(1), left, never), None);
    }

    #[test]
    fn next_delay_starts_no_wait_that_cannot_finish_in_time() {
        let p = RetryPolicy::default();
        // Jitter of 100 ms against 100 ms left: stop.
        assert_eq!(
            p.next_delay(1, 3, None, Duration::from_millis(100), || 0.5),
            None
        );
        assert_eq!(
            p.next_delay(1, 3, None, Duration::from_millis(101), || 0.5),
            Some(Duration::from_millis(100))
        );
        assert_eq!(p.next_delay(1, 3, None, Duration::ZERO, || 0.0), None);
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
                ..Default::default()
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
