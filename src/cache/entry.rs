//! What the cache keeps of an answer, and how old it is.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::events::Events;
use crate::chat::{ChatResponse, Dialect, FinishReason};
use crate::platform::UnixMillis;

/// A stored answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stored {
    /// When it was stored.
    pub stored_at: UnixMillis,
    /// Until when it is fresh.
    pub fresh_until: UnixMillis,
    /// Until when it may be served stale, when every entry has failed.
    pub stale_until: UnixMillis,
    /// The provider id and model of the entry that answered.
    pub provider: String,
    /// The model the entry asked for.
    pub model: String,
    /// The dialect the provider's own body (`response.raw`) is written in.
    pub dialect: Option<Dialect>,
    /// What the answer cost when it was asked, in picodollars, if known:
    /// what a hit saves.
    pub cost_pico: Option<u64>,
    /// The answer.
    pub response: ChatResponse,
    /// The provider's own stream events, when the answer was streamed
    /// through to a client of the provider's dialect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Events>,
}

/// How a stored answer may be served at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Within its TTL: a hit.
    Fresh,
    /// Past its TTL, within its stale window: served only when every entry
    /// of the route has failed.
    Stale,
    /// Past both: not served.
    Expired,
}

impl Stored {
    /// `response`, given by `provider`'s `model` at `now`, fresh for `ttl`
    /// and kept `keep` (the TTL and the stale window); `cost_pico`: what it
    /// cost, what a hit saves.
    pub fn new(
        mut response: ChatResponse,
        (provider, model): (&str, &str),
        cost_pico: Option<u64>,
        now: UnixMillis,
        (ttl, keep): (Duration, Duration),
    ) -> Stored {
        if response.provider.is_empty() {
            response.provider = provider.to_string();
        }
        Stored {
            stored_at: now,
            fresh_until: now.saturating_add(crate::platform::millis(ttl)),
            stale_until: now.saturating_add(crate::platform::millis(keep)),
            provider: provider.to_string(),
            model: model.to_string(),
            dialect: response.dialect,
            cost_pico,
            response,
            events: None,
        }
    }

    /// How it may be served at `now`.
    pub fn freshness(&self, now: UnixMillis) -> Freshness {
        if now < self.fresh_until {
            Freshness::Fresh
        } else if now < self.stale_until {
            Freshness::Stale
        } else {
            Freshness::Expired
        }
    }

    /// Its age at `now`, in whole seconds (the `age` header).
    pub fn age_secs(&self, now: UnixMillis) -> u64 {
        now.saturating_sub(self.stored_at) / 1000
    }

    /// Its stored form.
    pub fn to_bytes(&self) -> Vec<u8> {
        // A tree of strings, numbers and a checked raw JSON text: it
        // always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// An answer from its stored form; `None` for anything else (a store
    /// shared with another version, a corrupted value).
    pub fn from_bytes(bytes: &[u8]) -> Option<Stored> {
        serde_json::from_slice(bytes).ok()
    }
}

/// Whether `response` may be stored: it ended as a model ends an answer
/// (`stop`, `length`, tool calls), not refused, filtered or cut.
pub fn storable(response: &ChatResponse) -> bool {
    matches!(
        response.finish_reason,
        Some(FinishReason::Stop | FinishReason::Length | FinishReason::ToolCalls)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored() -> Stored {
        Stored {
            stored_at: 10_000,
            fresh_until: 70_000,
            stale_until: 370_000,
            provider: "p".into(),
            model: "m".into(),
            dialect: Some(Dialect::OpenAi),
            cost_pico: Some(42),
            response: ChatResponse {
                text: "hi".into(),
                tool_calls: vec![],
                thinking: vec![],
                model: "m-2".into(),
                provider: "p".into(),
                finish_reason: Some(FinishReason::Stop),
                usage: None,
                raw: None,
                dialect: None,
            },
            events: None,
        }
    }

    #[test]
    fn freshness_by_time() {
        let s = stored();
        assert_eq!(s.freshness(10_000), Freshness::Fresh);
        assert_eq!(s.freshness(69_999), Freshness::Fresh);
        assert_eq!(s.freshness(70_000), Freshness::Stale);
        assert_eq!(s.freshness(369_999), Freshness::Stale);
        assert_eq!(s.freshness(370_000), Freshness::Expired);
        assert_eq!(s.age_secs(72_500), 62);
        assert_eq!(s.age_secs(0), 0);
    }

    #[test]
    fn round_trip_and_garbage() {
        let s = stored();
        assert_eq!(Stored::from_bytes(&s.to_bytes()), Some(s));
        assert_eq!(Stored::from_bytes(b"{\"storedAt\":1}"), None);
        assert_eq!(Stored::from_bytes(b"\xff"), None);
    }

    #[test]
    fn only_answers_that_ended_well() {
        let mut r = stored().response;
        assert!(storable(&r));
        for (reason, ok) in [
            (Some(FinishReason::Length), true),
            (Some(FinishReason::ToolCalls), true),
            (Some(FinishReason::ContentFilter), false),
            (Some(FinishReason::Other("error".into())), false),
            (None, false),
        ] {
            r.finish_reason = reason;
            assert_eq!(storable(&r), ok);
        }
    }
}
