//! A streamed answer's own events: what the provider sent, byte for byte,
//! when its stream went to a client of the provider's dialect (passed
//! through). Stored beside the answer, they are what a later streaming
//! client of that dialect is given again, unknown event types and fields
//! included; a client of another format is given the answer re-encoded.

use serde::{Deserialize, Serialize};

use crate::chat::Dialect;

/// The provider's events of one streamed answer, in its dialect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Events {
    /// The dialect they are written in.
    pub dialect: Dialect,
    /// Each event as it arrived, comments before it included.
    pub events: Vec<Event>,
}

/// One provider event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Its bytes.
    pub sse: String,
    /// It reported usage and nothing else (OpenAI's last chunk): given only
    /// to a client that asked for usage.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage_only: bool,
}

/// The events of a stream on its way into the cache, kept within a byte
/// limit: a longer stream keeps none (its answer is then replayed
/// re-encoded).
#[derive(Debug)]
pub struct EventRecording {
    events: Vec<Event>,
    bytes: usize,
    limit: usize,
    /// Past the limit, or an event that was not text: none are kept.
    dropped: bool,
}

impl EventRecording {
    /// An empty recording keeping up to `limit` bytes.
    pub fn new(limit: usize) -> Self {
        EventRecording {
            events: Vec::new(),
            bytes: 0,
            limit,
            dropped: false,
        }
    }

    /// Adds an event as it went out.
    pub fn push(&mut self, bytes: &[u8], usage_only: bool) {
        if self.dropped {
            return;
        }
        self.bytes += bytes.len();
        match std::str::from_utf8(bytes) {
            Ok(sse) if self.bytes <= self.limit => self.events.push(Event {
                sse: sse.to_string(),
                usage_only,
            }),
            _ => {
                self.dropped = true;
                self.events = Vec::new();
            }
        }
    }

    /// The events recorded, written in `dialect`; `None` when none were
    /// (a stream not passed through) or they could not all be kept.
    pub fn finish(self, dialect: Dialect) -> Option<Events> {
        (!self.dropped && !self.events.is_empty()).then_some(Events {
            dialect,
            events: self.events,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_within_the_limit_and_none_past_it() {
        let mut r = EventRecording::new(40);
        r.push(b"data: {\"a\":1}\n\n", false);
        r.push(b"data: {\"usage\":{}}\n\n", true);
        let kept = r.finish(Dialect::OpenAi).expect("kept");
        assert_eq!(kept.events.len(), 2);
        assert!(kept.events[1].usage_only);

        let mut r = EventRecording::new(20);
        r.push(b"data: {\"a\":1}\n\n", false);
        r.push(b"data: {\"b\":2}\n\n", false);
        r.push(b"data: [DONE]\n\n", false);
        assert_eq!(r.finish(Dialect::OpenAi), None, "over its limit: none");

        assert_eq!(EventRecording::new(20).finish(Dialect::OpenAi), None);
        let mut r = EventRecording::new(20);
        r.push(&[0xff, b'\n', b'\n'], false);
        assert_eq!(r.finish(Dialect::Anthropic), None, "not text: none");
    }

    #[test]
    fn stored_form_round_trips() {
        let e = Events {
            dialect: Dialect::Anthropic,
            events: vec![Event {
                sse: "event: ping\ndata: {}\n\n".into(),
                usage_only: false,
            }],
        };
        let text = serde_json::to_string(&e).unwrap();
        assert!(!text.contains("usageOnly"), "{text}");
        assert_eq!(serde_json::from_str::<Events>(&text).unwrap(), e);
    }
}
