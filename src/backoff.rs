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

fn parse_number(s: &str) -> Option<f64> {
    // Bounded so that `seconds` stays exact to the nanosecond.
    decimal(s.trim()).filter(|v| (0.0..1e12).contains(v))
}

/// `secs` (in `[0, 10¹²)`) as a duration, to the nearest nanosecond, as
/// `Duration::from_secs_f64` rounds it but without its float decoding.
fn seconds(secs: f64) -> Duration {
    let whole = secs.trunc();
    Duration::new(whole as u64, 0) + Duration::from_nanos(((secs - whole) * 1e9).round() as u64)
}

/// A decimal number as `f64::from_str` reads one
/// (`[+-]digits[.digits][(e|E)[+-]digits]`, either side of the point may be
/// empty, not both), without the standard library's tables: correctly
/// rounded for up to 19 significant digits, and `None` or `1e12` for what
/// [`parse_number`] refuses anyway (at least 10¹², `inf`, `NaN`). Values
/// below 10⁻¹⁹, which no `Duration` tells from zero, are near enough.
fn decimal(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let (negative, mut i) = match b.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    // mantissa · 10^exp, with the digits past the 19th dropped (`sticky`).
    let (mut mantissa, mut exp, mut digits, mut sticky, mut point) = (0u64, 0i64, 0, false, false);
    while let Some(&c) = b.get(i) {
        match c {
            b'0'..=b'9' => {
                digits += 1;
                if mantissa < 1_000_000_000_000_000_000 {
                    mantissa = mantissa * 10 + u64::from(c - b'0');
                    exp -= i64::from(point);
                } else {
                    sticky |= c != b'0';
                    exp += i64::from(!point);
                }
            }
            b'.' if !point => point = true,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        let minus = b.get(i) == Some(&b'-');
        i += usize::from(matches!(b.get(i), Some(b'+' | b'-')));
        let start = i;
        let mut e = 0i64;
        while let Some(c @ b'0'..=b'9') = b.get(i) {
            e = (e * 10 + i64::from(c - b'0')).min(1 << 20);
            i += 1;
        }
        if i == start {
            return None;
        }
        exp += if minus { -e } else { e };
    }
    if i != b.len() {
        return None;
    }
    let v = if mantissa == 0 {
        0.0
    } else if exp >= 0 {
        // An integer: exact below 10^12, refused from there on.
        match 10u64
            .checked_pow(exp.min(20) as u32)
            .and_then(|p| mantissa.checked_mul(p))
        {
            Some(n) if n < 1_000_000_000_000 => n as f64,
            _ => 1e12,
        }
    } else if exp < -38 {
        mantissa as f64 / 1e38 / 10f64.powi((-38 - exp).min(400) as i32)
    } else {
        // mantissa / 10^k by binary long division: 55 significant bits,
        // then round half to even with the remainder as the sticky bit.
        let d = 10u128.pow((-exp) as u32);
        // A mantissa below 10^19 divides as a u64, or is all remainder.
        let (mut q, mut r) = match u64::try_from(d) {
            Ok(d) => (u128::from(mantissa / d), u128::from(mantissa % d)),
            Err(_) => (0, u128::from(mantissa)),
        };
        if q >= 1_000_000_000_000 {
            return Some(1e12);
        }
        let mut shift = 0;
        while q < 1 << 54 {
            r <<= 1;
            q = q << 1 | u128::from(r >= d);
            if r >= d {
                r -= d;
            }
            shift += 1;
        }
        let sticky = sticky || r != 0 || q & 1 != 0;
        let mut m = (q >> 2) as u64;
        if q & 2 != 0 && (sticky || m & 1 != 0) {
            m += 1;
        }
        m as f64 * 2f64.powi(2 - shift)
    };
    Some(if negative { -v } else { v })
}

/// An HTTP-date (RFC 9110 §5.6.7: IMF-fixdate, RFC 850 or asctime), as
/// seconds since the Unix epoch; `None` for anything else, an impossible
/// date (31 April) or a wrong weekday. Reads exactly what the `httpdate`
/// crate reads.
fn http_date(s: &str) -> Option<u64> {
    const MONTHS: &[u8; 36] = b"JanFebMarAprMayJunJulAugSepOctNovDec";
    const DAYS: [&str; 7] = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ];
    if !s.is_ascii() {
        return None;
    }
    let s = s.trim().as_bytes();
    let num = |b: &[u8]| -> Option<u16> {
        b.iter().try_fold(0u16, |n, &c| {
            let d = c.wrapping_sub(b'0');
            (d < 10).then(|| n * 10 + u16::from(d))
        })
    };
    let month = |b: &[u8]| -> Option<u16> {
        (0..12)
            .find(|&i| &MONTHS[3 * i..3 * i + 3] == b)
            .map(|i| i as u16 + 1)
    };
    // (weekday 1–7, day, month, year, hour, minute, second)
    let fields = if s.len() == 29 {
        // `Sun, 06 Nov 1994 08:49:37 GMT`
        let wday = DAYS.iter().position(|d| s[..3] == d.as_bytes()[..3]);
        let ok = &s[3..5] == b", " && &s[25..] == b" GMT" && s[16] == b' ';
        let ok = ok && s[19] == b':' && s[22] == b':';
        let ok = ok && s[7] == b' ' && s[11] == b' ';
        ok.then_some(())?;
        (
            wday?,
            num(&s[5..7])?,
            month(&s[8..11])?,
            num(&s[12..16])?,
            &s[17..],
        )
    } else if s.len() == 24 {
        // `Sun Nov  6 08:49:37 1994`
        let wday = DAYS.iter().position(|d| s[..3] == d.as_bytes()[..3]);
        let ok = s[3] == b' ' && s[10] == b' ' && s[13] == b':' && s[16] == b':';
        let ok = ok && s[19] == b' ' && s[7] == b' ';
        ok.then_some(())?;
        let day = if s[8] == b' ' {
            num(&s[9..10])?
        } else {
            num(&s[8..10])?
        };
        (wday?, day, month(&s[4..7])?, num(&s[20..24])?, &s[11..])
    } else {
        // `Sunday, 06-Nov-94 08:49:37 GMT`
        let (wday, rest) = DAYS.iter().enumerate().find_map(|(i, d)| {
            let rest = s.strip_prefix(d.as_bytes())?.strip_prefix(b", ")?;
            Some((i, rest))
        })?;
        let ok = s.len() >= 23 && rest.len() == 22 && &rest[18..] == b" GMT";
        let ok = ok && rest[2] == b'-' && rest[6] == b'-' && rest[12] == b':' && rest[15] == b':';
        ok.then_some(())?;
        let yy = num(&rest[7..9])?;
        let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
        (
            wday,
            num(&rest[0..2])?,
            month(&rest[3..6])?,
            year,
            &rest[10..],
        )
    };
    let (wday, day, mon, year, time) = fields;
    let (hour, min, sec) = (num(&time[0..2])?, num(&time[3..5])?, num(&time[6..8])?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        28 + u16::from(leap),
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let valid = sec < 60
        && min < 60
        && hour < 24
        && (1970..=9999).contains(&year)
        && day >= 1
        && day <= month_days[usize::from(mon) - 1];
    valid.then_some(())?;
    // Days since 1970-01-01 (a Thursday).
    let y = u64::from(year) - 1;
    let leaps = |y: u64| y / 4 - y / 100 + y / 400;
    let before: u16 = month_days[..usize::from(mon) - 1].iter().sum();
    let days = (u64::from(year) - 1970) * 365 + leaps(y) - leaps(1969)
        + u64::from(before)
        + u64::from(day)
        - 1;
    ((days + 3) % 7 == wday as u64).then_some(())?;
    Some(days * 86400 + u64::from(hour) * 3600 + u64::from(min) * 60 + u64::from(sec))
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
    fn decimals_read_as_the_standard_library_reads_them() {
        for s in [
            "0",
            "7",
            "1500",
            "1.5",
            "0.25",
            ".5",
            "5.",
            "+5",
            "-0",
            "-3",
            "007",
            "1e3",
            "1E-2",
            "2.5e+1",
            "1e300",
            "1e-400",
            "123456789.123456789",
            "99999999999",
            "0.000001",
            "18446744073709551615",
            "184467440737095516150",
            "1e",
            "e3",
            ".",
            "",
            "-",
            "1.2.3",
            "1e+",
            "1 ",
            "a",
            "inf",
            "NaN",
            "1_0",
            "1e99999999",
        ] {
            let std = s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| (0.0..1e12).contains(v));
            match (parse_number(s), std) {
                (Some(a), Some(b)) if b > 0.0 && b < 1e-19 => {
                    assert!((a - b).abs() <= b * 1e-15, "{s}")
                }
                (ours, std) => assert_eq!(ours, std, "{s}"),
            }
        }
    }

    /// What the `httpdate` crate reads, in seconds since the epoch.
    fn httpdate_secs(s: &str) -> Option<u64> {
        let t = httpdate::parse_http_date(s).ok()?;
        Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs())
    }

    #[test]
    fn http_dates_read_as_the_httpdate_crate_reads_them() {
        let mut checked = 0;
        // Every day from 1970 to 2110, in the three formats, at two times.
        for days in (0u64..51_500).step_by(1) {
            let secs = days * 86400 + (days % 86400) * 7 % 86400;
            let t = std::time::UNIX_EPOCH + Duration::from_secs(secs);
            let imf = httpdate::fmt_http_date(t);
            for s in [
                imf.clone(),
                // asctime: `Sun Nov  6 08:49:37 1994`
                format!(
                    "{} {} {:>2} {} {}",
                    &imf[..3],
                    &imf[8..11],
                    imf[5..7].trim_start_matches('0'),
                    &imf[17..25],
                    &imf[12..16]
                ),
                format!(" {imf} "),
                // RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`
                format!(
                    "{}, {}-{}-{} {} GMT",
                    [
                        "Monday",
                        "Tuesday",
                        "Wednesday",
                        "Thursday",
                        "Friday",
                        "Saturday",
                        "Sunday"
                    ]
                    .into_iter()
                    .find(|d| d.starts_with(&imf[..3]))
                    .unwrap(),
                    &imf[5..7],
                    &imf[8..11],
                    &imf[14..16],
                    &imf[17..25]
                ),
                imf.replace("Mon,", "Tue,").replace("Sun,", "Mon,"),
            ] {
                assert_eq!(http_date(&s), httpdate_secs(&s), "{s}");
                checked += 1;
            }
        }
        assert!(checked > 250_000);
        for s in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Thursday, 01-Jan-70 00:00:00 GMT",
            "Friday, 31-Dec-69 23:59:59 GMT",
            "Monday, 29-Feb-16 00:00:00 GMT",
            "Tuesday, 29-Feb-17 00:00:00 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun Nov 06 08:49:37 1994",
            "Wed, 31 Apr 2024 00:00:00 GMT",
            "Thu, 29 Feb 2024 00:00:00 GMT",
            "Thu, 29 Feb 2023 00:00:00 GMT",
            "Sat, 01 Jan 2000 24:00:00 GMT",
            "Sat, 01 Jan 2000 23:60:00 GMT",
            "Sat, 01 Jan 2000 23:59:60 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Sat, 01 Jan 10000 00:00:00 GMT",
            "Wed, 31 Dec 1969 23:59:59 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37 gmt",
            "sun, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun,  06 Nov 1994 08:49:37 GMT",
            "Sun, 06-Nov-1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08.49.37 GMT",
            "Sun, +6 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 UTC",
            "Sunday 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 94",
            "Sun Nov 6 08:49:37 1994",
            "Sun Nov  6 8:49:37 1994",
            "Mon, 00 Jan 2024 00:00:00 GMT",
            "",
            "GMT",
            "Wednesday, 00-Jan-00 00:00:00 GMT",
            "Saturday, 01-Jan-00 00:00:00 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMTx",
            "Sunday, 06-Nov-94 08:49:37  GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT\u{e9}",
        ] {
            assert_eq!(http_date(s), httpdate_secs(s), "{s}");
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
        fn seconds_match_the_standard_library_to_the_nanosecond(
            secs in prop_oneof![0.0f64..10.0, 0.0f64..1e6, 0.0f64..1e12],
        ) {
            let ours = seconds(secs);
            let std = Duration::from_secs_f64(secs);
            let off = ours.abs_diff(std);
            prop_assert!(off <= Duration::from_nanos(1), "{secs}: {ours:?} vs {std:?}");
        }

        #[test]
        fn decimals_match_the_standard_library(
            int in "0|[1-9][0-9]{0,12}",
            frac in "[0-9]{0,18}",
            exp in proptest::option::of(-25i32..14),
        ) {
            let mut s = int.clone();
            if !frac.is_empty() {
                s = format!("{s}.{frac}");
            }
            if let Some(e) = exp {
                s = format!("{s}e{e}");
            }
            let std = s.parse::<f64>().ok().filter(|v| (0.0..1e12).contains(v));
            // 19 significant digits at most: correctly rounded, as std
            // (below 10^-19, near enough).
            if int.len() + frac.len() <= 19 && std.is_none_or(|v| v == 0.0 || v >= 1e-19) {
                prop_assert_eq!(parse_number(&s), std, "{}", s);
            }
        }

        #[test]
        fn http_dates_match_the_httpdate_crate(
            v in "[A-Za-z]{0,9}[, ]{0,2}[0-9 ]{0,2}[- ][A-Za-z]{3}[- ][0-9]{2,4} [0-9]{2}:[0-9]{2}:[0-9]{2}( GMT| [0-9]{4})?",
        ) {
            prop_assert_eq!(http_date(&v), httpdate_secs(&v), "{}", v);
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
