//! A named client's limits, sans-IO: requests and tokens per minute,
//! requests in flight and dollars per UTC day, and whether a request fits
//! what the client has used.
//!
//! A minute is a sliding one, estimated from two fixed minutes: this one's
//! count and the last one's, weighted by the share of the last one still
//! inside the sixty seconds before now. Counts of the same minutes add, so
//! what several isolates counted is their sum; and a client cannot send a
//! whole limit at the end of one minute and another at the start of the
//! next, as with fixed windows.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::platform::UnixMillis;
use crate::policy::price::Cost;
use crate::policy::spend::{day_end, utc_day, Tally};

/// A minute in milliseconds.
pub(crate) const MINUTE_MS: u64 = 60_000;

/// What a refused request is told to wait when no time can be known (a
/// request in flight may end at any moment).
const IN_FLIGHT_WAIT_MS: u64 = 1000;

/// A client's limits; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ClientLimits {
    /// Requests admitted per sliding minute.
    pub(crate) requests_per_minute: Option<u64>,
    /// Tokens (input and output, as reported) per sliding minute.
    pub(crate) tokens_per_minute: Option<u64>,
    /// Requests under way at once.
    pub(crate) in_flight: Option<u64>,
    /// Dollars per UTC day, as the configured prices price the usage.
    pub(crate) daily_spend: Option<Cost>,
}

/// A count over a sliding minute ([module docs](self)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Minutes {
    /// The minute `this` counts, as minutes since 1970.
    pub minute: u64,
    /// Counted in that minute.
    pub this: u64,
    /// Counted in the minute before it.
    pub last: u64,
}

impl Minutes {
    /// This count as of `now`'s minute.
    pub(crate) fn at(self, now: UnixMillis) -> Minutes {
        let minute = now / MINUTE_MS;
        match minute.saturating_sub(self.minute) {
            0 => self,
            1 => Minutes {
                minute,
                this: 0,
                last: self.this,
            },
            _ => Minutes {
                minute,
                ..Minutes::default()
            },
        }
    }

    /// Counts `n` at `now`.
    pub(crate) fn add(&mut self, now: UnixMillis, n: u64) {
        *self = self.at(now);
        self.this = self.this.saturating_add(n);
    }

    /// This count and `other` together, as of `now`'s minute.
    pub(crate) fn plus(self, other: Minutes, now: UnixMillis) -> Minutes {
        let (a, b) = (self.at(now), other.at(now));
        Minutes {
            minute: a.minute,
            this: a.this.saturating_add(b.this),
            last: a.last.saturating_add(b.last),
        }
    }

    /// Takes back `n` counted too many (an estimate above what was used),
    /// from this minute's count and then the last one's.
    pub(crate) fn take_back(&mut self, now: UnixMillis, n: u64) {
        *self = self.at(now);
        let from_this = n.min(self.this);
        self.this -= from_this;
        self.last = self.last.saturating_sub(n - from_this);
    }

    /// The count over the sixty seconds before `now`.
    pub fn estimate(&self, now: UnixMillis) -> u64 {
        let m = self.at(now);
        let left = MINUTE_MS - now % MINUTE_MS;
        weighted(m.last, left).saturating_add(m.this)
    }

    /// How long from `now` until `need` more fits under `limit`: zero when
    /// it fits now. A `need` above `limit` is waited for as `limit` (the
    /// count has to be empty).
    pub(crate) fn wait(&self, now: UnixMillis, limit: u64, need: u64) -> u64 {
        let need = need.min(limit);
        let m = self.at(now);
        let room = limit - need;
        if self.estimate(now) <= room {
            return 0;
        }
        let start = m.minute * MINUTE_MS;
        let next = start + MINUTE_MS;
        if m.this <= room {
            // Fits once enough of the last minute has slid out; `last` is
            // not zero, or it would fit now.
            let left = longest_left(m.last, room - m.this);
            return (next - left).saturating_sub(now).max(1);
        }
        // In the next minute this one's count is the weighted one.
        let left = longest_left(m.this, room);
        (next + MINUTE_MS - left).saturating_sub(now).max(1)
    }

    /// How long from `now` until the count is empty: OpenAI's reset, the
    /// time until the limit is whole again.
    pub(crate) fn until_empty(&self, now: UnixMillis) -> u64 {
        let m = self.at(now);
        let next = (m.minute + 1) * MINUTE_MS;
        match (m.this, m.last) {
            (0, 0) => 0,
            (0, _) => next - now,
            _ => next + MINUTE_MS - now,
        }
    }
}

/// `count` weighted by `left` milliseconds of a minute, rounded up: a
/// request is not let through on a fraction.
fn weighted(count: u64, left: u64) -> u64 {
    (u128::from(count) * u128::from(left)).div_ceil(u128::from(MINUTE_MS)) as u64
}

/// The most milliseconds of a minute left at which `count` weighs at most
/// `room`.
fn longest_left(count: u64, room: u64) -> u64 {
    if count == 0 {
        return MINUTE_MS;
    }
    // The largest `left` with count * left <= room * MINUTE.
    let most = u128::from(room) * u128::from(MINUTE_MS) / u128::from(count);
    most.min(u128::from(MINUTE_MS)) as u64
}

/// What a client has used: the counts a limit is judged by. Counts of
/// the same client add ([`Used::plus`]): what several isolates used is
/// their sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Used {
    /// Requests admitted.
    pub requests: Minutes,
    /// Tokens: estimates held for requests under way, corrected by the
    /// usage reported when they end.
    pub tokens: Minutes,
    /// Requests under way.
    pub in_flight: u64,
    /// Dollars spent today.
    pub spend: Tally,
}

impl Used {
    /// These counts and `other`'s together, as of `now`: minutes aligned,
    /// requests in flight added, today's spending added (another day's is
    /// nothing today).
    pub fn plus(&self, other: &Used, now: UnixMillis) -> Used {
        let mut spend = Tally::default();
        spend.add(now, self.spend.today(now));
        spend.add(now, other.spend.today(now));
        Used {
            requests: self.requests.plus(other.requests, now),
            tokens: self.tokens.plus(other.tokens, now),
            in_flight: self.in_flight.saturating_add(other.in_flight),
            spend,
        }
    }
}

/// Which limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Refusal {
    /// Requests per minute.
    Requests,
    /// Tokens per minute.
    Tokens,
    /// Requests in flight.
    InFlight,
    /// Daily spend.
    Spend,
}

impl Refusal {
    /// Every reason, in the order limits are judged.
    pub(crate) const ALL: [Refusal; 4] = [
        Refusal::InFlight,
        Refusal::Spend,
        Refusal::Requests,
        Refusal::Tokens,
    ];

    /// The name logs and metrics give it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Refusal::Requests => "requests",
            Refusal::Tokens => "tokens",
            Refusal::InFlight => "in_flight",
            Refusal::Spend => "spend",
        }
    }
}

/// A request refused, and when it may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The limit it would exceed.
    pub(crate) reason: Refusal,
    /// How long until it would fit, as far as can be known.
    pub(crate) retry_after: Duration,
}

/// Whether a request that may use `tokens` fits `limits` given `used`, at
/// `now`. The first limit that refuses it names the refusal; its wait is
/// the longest of every limit it exceeds, so a retry at that time is not
/// refused by another.
pub(crate) fn admit(
    limits: &ClientLimits,
    used: &Used,
    now: UnixMillis,
    tokens: u64,
) -> Result<(), Refused> {
    let mut refused: Option<Refused> = None;
    for reason in Refusal::ALL {
        let wait = match reason {
            Refusal::InFlight => limits
                .in_flight
                .filter(|&max| used.in_flight >= max)
                .map(|_| IN_FLIGHT_WAIT_MS),
            Refusal::Spend => limits
                .daily_spend
                .filter(|&budget| used.spend.today(now) >= budget)
                .map(|_| day_end(utc_day(now)) - now),
            Refusal::Requests => limits
                .requests_per_minute
                .map(|max| used.requests.wait(now, max, 1))
                .filter(|&w| w > 0),
            Refusal::Tokens => limits
                .tokens_per_minute
                .map(|max| used.tokens.wait(now, max, tokens))
                .filter(|&w| w > 0),
        };
        if let Some(ms) = wait {
            let retry_after = Duration::from_millis(ms);
            match &mut refused {
                None => {
                    refused = Some(Refused {
                        reason,
                        retry_after,
                    })
                }
                Some(r) => r.retry_after = r.retry_after.max(retry_after),
            }
        }
    }
    refused.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minute's start, 2024-05-14T10:00:00Z.
    const T0: UnixMillis = 1_715_680_800_000;

    #[test]
    fn a_sliding_minute_weighs_the_last_one_by_what_is_left_of_it() {
        let mut m = Minutes::default();
        m.add(T0 + 30_000, 60);
        assert_eq!(m.estimate(T0 + 59_999), 60);
        // A quarter into the next minute, three quarters of the last count.
        assert_eq!(m.estimate(T0 + 75_000), 45);
        m.add(T0 + 75_000, 10);
        assert_eq!(m.estimate(T0 + 75_000), 55);
        assert_eq!(m.estimate(T0 + 120_000), 10);
        assert_eq!(m.estimate(T0 + 180_000), 0);
        m.take_back(T0 + 130_000, 4);
        assert_eq!((m.this, m.last), (0, 6));
    }

    #[test]
    fn a_wait_ends_when_the_request_fits_and_not_before() {
        let cases = [
            (
                Minutes {
                    minute: T0 / MINUTE_MS,
                    this: 100,
                    last: 0,
                },
                T0 + 10_000,
                100,
                1,
            ),
            (
                Minutes {
                    minute: T0 / MINUTE_MS,
                    this: 40,
                    last: 100,
                },
                T0 + 10_000,
                100,
                1,
            ),
            (
                Minutes {
                    minute: T0 / MINUTE_MS,
                    this: 0,
                    last: 100,
                },
                T0 + 1,
                100,
                30,
            ),
            (
                Minutes {
                    minute: T0 / MINUTE_MS,
                    this: 7,
                    last: 3,
                },
                T0 + 59_000,
                8,
                8,
            ),
            (
                Minutes {
                    minute: T0 / MINUTE_MS,
                    this: 3,
                    last: 9,
                },
                T0 + 2_000,
                10,
                500,
            ),
        ];
        for (m, now, limit, need) in cases {
            let wait = m.wait(now, limit, need);
            assert!(wait > 0, "{m:?} is full at {now}");
            let fits = |t| m.estimate(t) + need.min(limit) <= limit;
            assert!(fits(now + wait), "{m:?}: fits after {wait} ms");
            assert!(!fits(now + wait - 1), "{m:?}: not before {wait} ms");
        }
        let empty = Minutes::default();
        assert_eq!(empty.wait(T0, 10, 10), 0);
        assert_eq!(
            empty.wait(T0, 10, 11),
            0,
            "more than the limit fits an empty minute"
        );
    }

    #[test]
    fn a_count_is_empty_once_both_of_its_minutes_slid_out() {
        let mut m = Minutes::default();
        assert_eq!(m.until_empty(T0), 0);
        m.add(T0 + 45_000, 1);
        assert_eq!(m.until_empty(T0 + 45_000), 75_000);
        assert_eq!(m.until_empty(T0 + 70_000), 50_000);
        assert_eq!(m.estimate(T0 + 120_000), 0);
    }

    #[test]
    fn counts_add_across_their_minutes_and_days() {
        let mut a = Used::default();
        a.requests.add(T0 + 10_000, 3);
        a.tokens.add(T0 + 10_000, 300);
        a.in_flight = 2;
        a.spend.add(T0, Cost::from_picodollars(7));
        let mut b = Used::default();
        b.requests.add(T0 + 70_000, 4);
        b.in_flight = 1;
        // A tally of the day before is nothing today.
        b.spend.add(T0 - 86_400_000, Cost::from_picodollars(1000));
        let now = T0 + 75_000;
        let sum = a.plus(&b, now);
        assert_eq!((sum.requests.this, sum.requests.last), (4, 3));
        assert_eq!(
            sum.requests.estimate(now),
            a.requests.estimate(now) + b.requests.estimate(now)
        );
        assert_eq!(sum.tokens.estimate(now), 225);
        assert_eq!(sum.in_flight, 3);
        assert_eq!(sum.spend.today(now), Cost::from_picodollars(7));
        // Two and a quarter of the last minute's three, rounded up.
        assert_eq!(a.plus(&Used::default(), now).requests.estimate(now), 3);
    }

    #[test]
    fn each_limit_refuses_with_its_own_wait_and_the_longest_wins() {
        let limits = ClientLimits {
            requests_per_minute: Some(2),
            tokens_per_minute: Some(1000),
            in_flight: Some(1),
            daily_spend: Some(Cost::from_picodollars(500)),
        };
        let mut used = Used::default();
        assert_eq!(admit(&limits, &used, T0, 400), Ok(()));
        used.in_flight = 1;
        let r = admit(&limits, &used, T0, 400).unwrap_err();
        assert_eq!(
            (r.reason, r.retry_after),
            (Refusal::InFlight, Duration::from_secs(1))
        );
        used.in_flight = 0;
        used.requests.add(T0, 2);
        assert_eq!(
            admit(&limits, &used, T0, 1).unwrap_err().reason,
            Refusal::Requests
        );
        used.requests = Minutes::default();
        used.tokens.add(T0, 700);
        let r = admit(&limits, &used, T0 + 30_000, 400).unwrap_err();
        assert_eq!(r.reason, Refusal::Tokens);
        assert_eq!(r.retry_after, Duration::from_millis(38_572));
        used.spend.add(T0, Cost::from_picodollars(500));
        let r = admit(&limits, &used, T0 + 30_000, 400).unwrap_err();
        assert_eq!(r.reason, Refusal::Spend, "named first of the two");
        assert_eq!(
            r.retry_after.as_millis() as u64,
            day_end(utc_day(T0)) - T0 - 30_000
        );
        assert_eq!(admit(&ClientLimits::default(), &used, T0, u64::MAX), Ok(()));
    }
}
