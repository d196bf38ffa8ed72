//! A simulated provider's rate-limit pool, kept as providers keep theirs:
//! a bucket of requests and one of tokens, each holding a minute's limit
//! and refilling continuously (OpenAI documents its limits as replenished
//! continuously, not reset each minute; Anthropic's are a token bucket
//! too). A call is admitted when every bucket holds what it needs, and
//! takes it; otherwise it is refused with a 429 and a `retry-after` in
//! whole seconds, taking nothing. Every answer says what is left in its
//! provider's family of headers ([`Pool::openai_headers`],
//! [`Pool::anthropic_headers`]), which the real adapters read back.
//!
//! Levels are kept exactly, in 1/60000ths of a unit: a bucket of `limit`
//! per minute gains `limit` of those per millisecond.

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::scenario::PoolModel;
use crate::platform::{Headers, UnixMillis};
use crate::policy::pool::write_go_duration;

/// A minute, in ms: what a per-minute limit refills over.
const MINUTE_MS: u64 = 60_000;

/// One limit: `limit` units a minute, refilled continuously.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bucket {
    limit: u64,
    /// What it holds, in 1/60000ths of a unit.
    level: u64,
}

impl Bucket {
    fn full(limit: u64) -> Self {
        Bucket {
            limit,
            level: limit * MINUTE_MS,
        }
    }

    /// Adds what `elapsed` ms refill, up to full.
    fn refill(&mut self, elapsed: u64) {
        let capacity = self.limit * MINUTE_MS;
        self.level = capacity.min(
            self.level
                .saturating_add(elapsed.saturating_mul(self.limit)),
        );
    }

    /// Whole units left.
    fn remaining(&self) -> u64 {
        self.level / MINUTE_MS
    }

    /// Ms until `need` units are in it (0: they are).
    fn wait_for(&self, need: u64) -> u64 {
        (need * MINUTE_MS)
            .saturating_sub(self.level)
            .div_ceil(self.limit)
    }

    /// Ms until it is full again.
    fn until_full(&self) -> u64 {
        self.wait_for(self.limit)
    }

    fn take(&mut self, units: u64) {
        self.level -= units * MINUTE_MS;
    }
}

/// A provider's pool: its buckets, as of `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pool {
    requests: Option<Bucket>,
    tokens: Option<Bucket>,
    at: UnixMillis,
}

/// What the pool said to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Taken: the call goes on.
    Admitted,
    /// Refused: the buckets hold enough again in this many ms.
    Refused {
        /// The wait, in ms (the `retry-after` sent rounds it up to seconds).
        wait_ms: u64,
    },
}

impl Pool {
    /// A full pool at time 0.
    pub(crate) fn new(model: &PoolModel) -> Self {
        Pool {
            requests: model.requests_per_minute.map(Bucket::full),
            tokens: model.tokens_per_minute.map(Bucket::full),
            at: 0,
        }
    }

    fn buckets(&mut self) -> impl Iterator<Item = &mut Bucket> {
        self.requests.iter_mut().chain(self.tokens.iter_mut())
    }

    /// Brings the buckets to `now` (never back).
    fn refill(&mut self, now: UnixMillis) {
        let elapsed = now.saturating_sub(self.at);
        self.at = self.at.max(now);
        self.buckets().for_each(|b| b.refill(elapsed));
    }

    /// A call at `now` that uses `tokens` tokens: admitted (one request and
    /// its tokens taken) or refused (nothing taken).
    pub(crate) fn admit(&mut self, now: UnixMillis, tokens: u64) -> Admission {
        self.refill(now);
        let wait_ms = self
            .requests
            .map_or(0, |b| b.wait_for(1))
            .max(self.tokens.map_or(0, |b| b.wait_for(tokens)));
        if wait_ms > 0 {
            return Admission::Refused { wait_ms };
        }
        if let Some(b) = &mut self.requests {
            b.take(1);
        }
        if let Some(b) = &mut self.tokens {
            b.take(tokens);
        }
        Admission::Admitted
    }

    /// OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, as
    /// of the last admission; the resets are the time until full, in Go's
    /// duration notation.
    pub(crate) fn openai_headers(&self, headers: &mut Headers) {
        for (name, bucket) in [("requests", self.requests), ("tokens", self.tokens)] {
            let Some(b) = bucket else { continue };
            headers.insert(&format!("x-ratelimit-limit-{name}"), b.limit.to_string());
            headers.insert(
                &format!("x-ratelimit-remaining-{name}"),
                b.remaining().to_string(),
            );
            headers.insert(
                &format!("x-ratelimit-reset-{name}"),
                write_go_duration(b.until_full()),
            );
        }
    }

    /// Anthropic's `anthropic-ratelimit-{requests,tokens}-{limit,remaining,
    /// reset}`, as of the last admission; the resets are when each is full
    /// again, an RFC 3339 time in whole seconds, rounded up.
    pub(crate) fn anthropic_headers(&self, headers: &mut Headers) {
        for (name, bucket) in [("requests", self.requests), ("tokens", self.tokens)] {
            let Some(b) = bucket else { continue };
            let prefix = format!("anthropic-ratelimit-{name}");
            headers.insert(&format!("{prefix}-limit"), b.limit.to_string());
            headers.insert(&format!("{prefix}-remaining"), b.remaining().to_string());
            let full_at = (self.at + b.until_full()).div_ceil(1000);
            if let Some(at) = rfc3339(full_at) {
                headers.insert(&format!("{prefix}-reset"), at);
            }
        }
    }
}

/// `retry-after` for a wait of `ms`: whole seconds, rounded up.
pub(crate) fn retry_after(ms: u64) -> String {
    ms.div_ceil(1000).to_string()
}

/// `secs` since the Unix epoch as an RFC 3339 time.
fn rfc3339(secs: u64) -> Option<String> {
    let secs = i64::try_from(secs).ok()?;
    OffsetDateTime::from_unix_timestamp(secs)
        .ok()?
        .format(&Rfc3339)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::pool::{read, PoolHeaders};

    fn pool(rpm: Option<u64>, tpm: Option<u64>) -> Pool {
        Pool::new(&PoolModel {
            requests_per_minute: rpm,
            tokens_per_minute: tpm,
        })
    }

    #[test]
    fn a_bucket_refills_continuously_up_to_its_limit() {
        let mut p = pool(Some(600), None); // one request per 100 ms
        for _ in 0..600 {
            assert_eq!(p.admit(0, 0), Admission::Admitted);
        }
        assert_eq!(p.admit(0, 0), Admission::Refused { wait_ms: 100 });
        assert_eq!(p.admit(99, 0), Admission::Refused { wait_ms: 1 });
        assert_eq!(p.admit(100, 0), Admission::Admitted);
        assert_eq!(p.admit(150, 0), Admission::Refused { wait_ms: 50 });
        // A minute of quiet fills it, and no more.
        p.refill(10 * MINUTE_MS);
        assert_eq!(p.requests.map(|b| b.remaining()), Some(600));
    }

    #[test]
    fn tokens_are_taken_with_the_request_and_a_refusal_takes_nothing() {
        let mut p = pool(Some(100), Some(1000));
        assert_eq!(p.admit(0, 600), Admission::Admitted);
        // 400 tokens left, 600 wanted: 200 more refill in 12 s at 1000 a minute.
        assert_eq!(p.admit(0, 600), Admission::Refused { wait_ms: 12_000 });
        assert_eq!(p.requests.map(|b| b.remaining()), Some(99));
        assert_eq!(p.tokens.map(|b| b.remaining()), Some(400));
        assert_eq!(p.admit(12_000, 600), Admission::Admitted);
        assert_eq!(retry_after(12_000), "12");
        assert_eq!(retry_after(12_001), "13");
        assert_eq!(retry_after(1), "1");
    }

    #[test]
    fn openai_headers_read_back_as_what_the_pool_holds() {
        let mut p = pool(Some(500), Some(30_000));
        let now = 20_000;
        p.refill(now);
        for _ in 0..3 {
            assert_eq!(p.admit(now, 1_100), Admission::Admitted);
        }
        let mut h = Headers::new();
        p.openai_headers(&mut h);
        assert_eq!(h.get("x-ratelimit-remaining-requests"), Some("497"));
        // 3 requests refill in 360 ms at 500 a minute; 3,300 tokens in 6.6 s.
        assert_eq!(h.get("x-ratelimit-reset-requests"), Some("360ms"));
        assert_eq!(h.get("x-ratelimit-reset-tokens"), Some("6.6s"));
        let r = read(PoolHeaders::OpenAi, &h, now).expect("a reading");
        assert_eq!(
            (r.requests.limit, r.requests.remaining, r.requests.reset_at),
            (Some(500), Some(497), Some(now + 360))
        );
        assert_eq!(
            (r.tokens.limit, r.tokens.remaining, r.tokens.reset_at),
            (Some(30_000), Some(26_700), Some(now + 6_600))
        );
    }

    #[test]
    fn anthropic_headers_read_back_with_resets_in_whole_seconds() {
        let mut p = pool(Some(50), Some(30_000));
        let now = 1_715_680_800_000; // 2024-05-14T10:00:00Z
        p.refill(now);
        for _ in 0..50 {
            assert_eq!(p.admit(now, 200), Admission::Admitted);
        }
        let Admission::Refused { wait_ms } = p.admit(now + 500, 200) else {
            panic!("the requests bucket is empty");
        };
        assert_eq!(wait_ms, 700); // one request refills in 1.2 s
        let mut h = Headers::new();
        p.anthropic_headers(&mut h);
        h.insert("retry-after", retry_after(wait_ms));
        // Full again 59.5 s on (50 requests at 50 a minute, less 0.5 s), said as 10:01:00.
        assert_eq!(
            h.get("anthropic-ratelimit-requests-reset"),
            Some("2024-05-14T10:01:00Z")
        );
        let r = read(PoolHeaders::Anthropic, &h, now + 500).expect("a reading");
        assert_eq!(
            (r.requests.limit, r.requests.remaining, r.requests.reset_at),
            (Some(50), Some(0), Some(now + 60_000))
        );
        assert_eq!(r.tokens.remaining, Some(20_250)); // 10,000 taken, 250 back
        assert_eq!(r.retry_after_until, Some(now + 1_500));
        let now2 = now + 500;
        assert!(!r.can_take(100, 100, 0, now2));
    }
}
