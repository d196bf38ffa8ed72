//! What a provider says of its rate-limit pool in the headers of every
//! answer, read into a [`PoolReading`]: requests and tokens (input and
//! output tokens where given) remaining, the limit, and when each is full
//! again, as an instant computed from the answer's time.
//!
//! Two families of headers are read ([`PoolHeaders`]):
//!
//! - OpenAI's, which Azure OpenAI, Groq and most OpenAI-compatible hosts
//!   send too: `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`,
//!   the resets as durations in Go's notation (`6m0s`, `1.5s`, `20ms`,
//!   `1h2m3.5s`; a bare number is read as seconds);
//! - Anthropic's: `anthropic-ratelimit-{requests,tokens,input-tokens,
//!   output-tokens}-{limit,remaining,reset}`, the resets as RFC 3339
//!   times, with the answer's `retry-after`.
//!
//! Bedrock and Vertex AI send neither: their pools are learnt from 429s.
//!
//! A header that is missing or malformed (not a whole number, a negative
//! one, one past `u64`, a duration or time that does not parse) leaves its
//! field out, never fails; an answer without any of them has no reading.
//! Only the headers of the provider's family are looked at, in one pass
//! over the answer's headers, and a reading allocates nothing.
//!
//! [`Pools`] keeps the last reading of each upstream's model (by breaker
//! key), as the engine notes them from every answer it reads. They are
//! shown (`Client::health`, the gateway's `/health`, `/metrics` and
//! `/status/data`), and a request's walk puts an entry whose pool cannot
//! take it ([`PoolReading::can_take`]) behind those that can
//! (`engine/capacity.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::platform::{Headers, UnixMillis};
use crate::policy::backoff::parse_retry_after;

/// Which family of rate-limit headers a provider sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolHeaders {
    /// `x-ratelimit-*`: OpenAI, Azure OpenAI, Groq, most OpenAI-compatible hosts.
    OpenAi,
    /// `anthropic-ratelimit-*` and `retry-after`.
    Anthropic,
}

impl PoolHeaders {
    /// The start every header name of the family has.
    fn prefix(self) -> &'static str {
        match self {
            PoolHeaders::OpenAi => "x-ratelimit-",
            PoolHeaders::Anthropic => "anthropic-ratelimit-",
        }
    }
}

/// One limit of a pool (requests, tokens, …) as the provider said it; each
/// field is `None` where the provider did not say it, or not legibly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Quota {
    /// How many the pool holds when full.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// How many were left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u64>,
    /// When it is full again, in milliseconds since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reset_at: Option<UnixMillis>,
}

impl Quota {
    /// Whether the provider said nothing of it.
    pub fn is_empty(&self) -> bool {
        *self == Quota::default()
    }
}

/// What a provider last said of one pool (an upstream's model), and when.
/// It travels between isolates through the fleet's objects (in reports and
/// views, JSON): a field missing from a message reads as not said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PoolReading {
    /// When the answer that said it arrived (ms since the Unix epoch).
    pub said_at: UnixMillis,
    /// Requests.
    #[serde(skip_serializing_if = "Quota::is_empty")]
    pub requests: Quota,
    /// Tokens (Anthropic: the most restrictive of its token limits).
    #[serde(skip_serializing_if = "Quota::is_empty")]
    pub tokens: Quota,
    /// Input tokens (Anthropic).
    #[serde(skip_serializing_if = "Quota::is_empty")]
    pub input_tokens: Quota,
    /// Output tokens (Anthropic).
    #[serde(skip_serializing_if = "Quota::is_empty")]
    pub output_tokens: Quota,
    /// Until when the same answer's `retry-after` asked to wait (Anthropic).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_until: Option<UnixMillis>,
}

/// The last reading of each pool, by breaker key (`provider/model`), and
/// the calls this client has in flight to it: sent, their answers' headers
/// not read yet. A reading lags by one answer's time; the calls sent since
/// are not in it, and at a high rate they are many (twenty a second of
/// one-second answers are twenty calls, more than a small pool's reserve),
/// so what is left is taken less them. Its owner bounds its keys (the
/// engine's are the configuration's).
#[derive(Debug, Default)]
pub(crate) struct Pools(BTreeMap<String, Slot>);

#[derive(Debug, Default)]
struct Slot {
    reading: Option<PoolReading>,
    in_flight: u32,
}

impl Pools {
    /// `key`'s last reading.
    pub(crate) fn get(&self, key: &str) -> Option<PoolReading> {
        self.0.get(key).and_then(|s| s.reading)
    }

    /// The calls in flight to `key`.
    #[cfg(test)]
    fn in_flight(&self, key: &str) -> u64 {
        self.state(key).1
    }

    /// `key`'s last reading and the calls in flight to it, in one look.
    pub(crate) fn state(&self, key: &str) -> (Option<PoolReading>, u64) {
        self.0
            .get(key)
            .map_or((None, 0), |s| (s.reading, u64::from(s.in_flight)))
    }

    /// `key`'s slot: a key seen before allocates nothing.
    fn slot(&mut self, key: &str) -> &mut Slot {
        if !self.0.contains_key(key) {
            self.0.insert(key.to_owned(), Slot::default());
        }
        self.0.get_mut(key).expect("inserted")
    }

    /// Keeps `reading` as `key`'s last.
    pub(crate) fn note(&mut self, key: &str, reading: PoolReading) {
        self.slot(key).reading = Some(reading);
    }

    /// A call to `key` was sent.
    pub(crate) fn sent(&mut self, key: &str) {
        let slot = self.slot(key);
        slot.in_flight = slot.in_flight.saturating_add(1);
    }

    /// A call to `key` was answered, or given up.
    pub(crate) fn answered(&mut self, key: &str) {
        if let Some(slot) = self.0.get_mut(key) {
            slot.in_flight = slot.in_flight.saturating_sub(1);
        }
    }

    /// Marks `key`'s pool empty until `until`: a 429 at `now` asked to
    /// wait that long. What its last reading said otherwise stays. Returns
    /// the reading as it now stands.
    pub(crate) fn hold(&mut self, key: &str, now: UnixMillis, until: UnixMillis) -> PoolReading {
        let held = self.get(key).unwrap_or(PoolReading {
            said_at: now,
            ..PoolReading::default()
        });
        let held = PoolReading {
            retry_after_until: held.retry_after_until.max(Some(until)),
            ..held
        };
        self.note(key, held);
        held
    }
}

/// The later said of two readings of one pool (the first on a tie).
pub(crate) fn newest(a: Option<PoolReading>, b: Option<PoolReading>) -> Option<PoolReading> {
    match (a, b) {
        (Some(a), Some(b)) if b.said_at > a.said_at => Some(b),
        (a, b) => a.or(b),
    }
}

/// How long a quota said without its reset time is believed.
const UNTIMED_MS: u64 = 60_000;

impl Quota {
    /// What is left at `now` of a quota said at `said_at`; `None` once it
    /// is full again (its reset passed) or nothing was said. What was left
    /// stands until the reset, though OpenAI's and Anthropic's pools refill
    /// continuously: read as refilling at a steady pace, a pool came back
    /// sooner but, shared by isolates whose readings lag, met ten times the
    /// 429s in the three-resellers scenario at sixteen isolates (1,277
    /// against 129), and a pool that fills again only at its reset (a fixed
    /// window) would meet them at any scale.
    fn left(&self, said_at: UnixMillis, now: UnixMillis) -> Option<u64> {
        let full_at = self.reset_at.unwrap_or(said_at.saturating_add(UNTIMED_MS));
        self.remaining.filter(|_| now < full_at)
    }
}

impl PoolReading {
    /// Whether the pool can take, at `now`, a request expected to use
    /// `input` and `output` tokens while `in_flight` calls sent to it are
    /// not in the reading yet: not inside a Retry-After, its requests less
    /// those in flight above a reserve (1 % of the limit, at least one:
    /// other callers share the pool), and each token count it gives, less
    /// as much for each call in flight, at least what the request needs of
    /// it. A quota past its reset is full again.
    pub(crate) fn can_take(
        &self,
        input: u64,
        output: u64,
        in_flight: u64,
        now: UnixMillis,
    ) -> bool {
        if self.retry_after_until.is_some_and(|until| until > now) {
            return false;
        }
        // Each call in flight is taken to need what this one does.
        let short = |q: &Quota, need: u64| {
            let sent = in_flight.saturating_mul(need);
            q.left(self.said_at, now)
                .is_some_and(|left| left.saturating_sub(sent) < need)
        };
        let reserve = 1 + self.requests.limit.unwrap_or(0) / 100;
        let requests = self.requests.left(self.said_at, now);
        !(requests.is_some_and(|left| left.saturating_sub(in_flight) < reserve)
            || short(&self.tokens, input.saturating_add(output))
            || short(&self.input_tokens, input)
            || short(&self.output_tokens, output))
    }

    /// The share of the pool left at `now`, from 0 to 1: the smallest of
    /// `remaining / limit` over the quotas that say both and have not reset
    /// (its requests less the `in_flight` calls not in the reading yet; 0
    /// inside a Retry-After); 1 when nothing says otherwise. A weighted
    /// tier scales its members' weights by it.
    pub(crate) fn share_left(&self, in_flight: u64, now: UnixMillis) -> f64 {
        if self.retry_after_until.is_some_and(|until| until > now) {
            return 0.0;
        }
        [
            (&self.requests, in_flight),
            (&self.tokens, 0),
            (&self.input_tokens, 0),
            (&self.output_tokens, 0),
        ]
        .into_iter()
        .filter_map(|(q, sent)| {
            let left = q.left(self.said_at, now)?.saturating_sub(sent);
            let limit = q.limit.filter(|l| *l > 0)?;
            Some((left as f64 / limit as f64).min(1.0))
        })
        .fold(1.0, f64::min)
    }
}

/// Reads the `family` rate-limit headers of an answer that arrived at
/// `now`; `None` when it has none that read.
pub fn read(family: PoolHeaders, headers: &Headers, now: UnixMillis) -> Option<PoolReading> {
    let prefix = family.prefix();
    let mut reading = PoolReading {
        said_at: now,
        ..PoolReading::default()
    };
    let mut said = false;
    for (name, value) in headers.iter() {
        // Names are kept in lower case (`Headers`).
        if let Some(rest) = name.strip_prefix(prefix) {
            said |= match family {
                PoolHeaders::OpenAi => reading.note_openai(rest, value, now),
                PoolHeaders::Anthropic => reading.note_anthropic(rest, value),
            };
        }
    }
    if !said {
        return None;
    }
    if family == PoolHeaders::Anthropic {
        reading.retry_after_until =
            parse_retry_after(headers, now).map(|d| now.saturating_add(ceil_millis(d)));
    }
    Some(reading)
}

impl PoolReading {
    /// Notes `x-ratelimit-<rest>: value`; whether it read.
    fn note_openai(&mut self, rest: &str, value: &str, now: UnixMillis) -> bool {
        let Some((field, pool)) = rest.split_once('-') else {
            return false;
        };
        let quota = match pool {
            "requests" => &mut self.requests,
            "tokens" => &mut self.tokens,
            _ => return false,
        };
        quota.set(field, value, |v| {
            go_duration(v).map(|d| now.saturating_add(ceil_millis(d)))
        })
    }

    /// Notes `anthropic-ratelimit-<rest>: value`; whether it read.
    fn note_anthropic(&mut self, rest: &str, value: &str) -> bool {
        let Some((pool, field)) = rest.rsplit_once('-') else {
            return false;
        };
        let quota = match pool {
            "requests" => &mut self.requests,
            "tokens" => &mut self.tokens,
            "input-tokens" => &mut self.input_tokens,
            "output-tokens" => &mut self.output_tokens,
            _ => return false,
        };
        quota.set(field, value, rfc3339_millis)
    }
}

impl Quota {
    /// Sets `field` (`limit`, `remaining`, `reset`) from `value`, a reset
    /// read into an instant by `reset`; whether it read. A value that does
    /// not read leaves the field as it was.
    fn set(
        &mut self,
        field: &str,
        value: &str,
        reset: impl FnOnce(&str) -> Option<UnixMillis>,
    ) -> bool {
        let (slot, read) = match field {
            "limit" => (&mut self.limit, count(value)),
            "remaining" => (&mut self.remaining, count(value)),
            "reset" => (&mut self.reset_at, reset(value)),
            _ => return false,
        };
        *slot = read.or(*slot);
        read.is_some()
    }
}

/// A whole non-negative number, as std reads one.
fn count(value: &str) -> Option<u64> {
    value.trim().parse().ok()
}

/// A duration in whole milliseconds, rounded up: a pool is not said full
/// before it is.
fn ceil_millis(d: Duration) -> u64 {
    let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// `ms` as Go's `time.Duration.String()` writes it: `0s`, `20ms`, `1.5s`,
/// `6m0s`, `1h2m3.5s` (fractions of a second without trailing zeros).
pub(crate) fn write_go_duration(ms: u64) -> String {
    use std::fmt::Write as _;
    if ms == 0 {
        return "0s".into();
    }
    // A String takes every write: the results are ignored.
    let mut out = String::with_capacity(16);
    if ms < 1000 {
        let _ = write!(out, "{ms}ms");
        return out;
    }
    let (h, m) = (ms / 3_600_000, ms / 60_000 % 60);
    let (s, frac) = (ms / 1000 % 60, ms % 1000);
    match (h, m) {
        (0, 0) => {}
        (0, m) => _ = write!(out, "{m}m"),
        (h, m) => _ = write!(out, "{h}h{m}m"),
    }
    let _ = write!(out, "{s}");
    if frac > 0 {
        // Milliseconds as a fraction of a second, without trailing zeros.
        let (mut frac, mut digits) = (frac, 3);
        while frac % 10 == 0 {
            frac /= 10;
            digits -= 1;
        }
        let _ = write!(out, ".{frac:0digits$}");
    }
    out.push('s');
    out
}

/// Longest duration read, in seconds (some 30 years): past it a value is
/// taken for garbage, not a reset.
const MAX_SECS: f64 = 1e9;

/// A duration in Go's notation (`time.Duration.String()`, which OpenAI's
/// resets are): numbers, each with an optional fraction and a unit among
/// `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`, written one after the other
/// (`1h2m3.5s`); or a bare number of seconds, as some compatible hosts
/// send. Each number is read by std; a sign, an unknown unit or a number
/// without one is no duration.
fn go_duration(value: &str) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    let secs = match value.parse::<f64>() {
        Ok(secs) => secs,
        Err(_) => {
            let mut secs = 0.0;
            let mut rest = value;
            while !rest.is_empty() {
                let digits = rest
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(rest.len());
                let (number, tail) = rest.split_at(digits);
                let unit = tail
                    .find(|c: char| c.is_ascii_digit() || c == '.')
                    .unwrap_or(tail.len());
                let (unit, tail) = tail.split_at(unit);
                let scale = match unit {
                    "ns" => 1e-9,
                    "us" | "µs" | "μs" => 1e-6,
                    "ms" => 1e-3,
                    "s" => 1.0,
                    "m" => 60.0,
                    "h" => 3600.0,
                    _ => return None,
                };
                secs += number.parse::<f64>().ok()? * scale;
                rest = tail;
            }
            secs
        }
    };
    if !(0.0..MAX_SECS).contains(&secs) {
        return None;
    }
    Duration::try_from_secs_f64(secs).ok()
}

/// An RFC 3339 time as milliseconds since the Unix epoch; `None` for
/// anything else, or a time before the epoch.
fn rfc3339_millis(value: &str) -> Option<UnixMillis> {
    let at = OffsetDateTime::parse(value.trim(), &Rfc3339).ok()?;
    u64::try_from(at.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

#[cfg(test)]
mod tests;
