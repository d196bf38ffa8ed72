//! What a stream hands out: deltas, and the provider's own events when
//! they pass through to a client of the same dialect.

use crate::chat::Delta;
use crate::sse::SseEvent;

/// One item of a stream that passes the provider's events through.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StreamItem {
    /// A provider event, to be written as it arrived.
    Raw(RawEvent),
    /// A delta; `passed` when the event it came from went out as a
    /// [`StreamItem::Raw`] (the delta is then only for bookkeeping).
    Delta {
        /// The delta.
        delta: Delta,
        /// Its event went out raw.
        passed: bool,
    },
}

/// A provider event passed through, with what its decoded deltas say of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawEvent {
    /// The event as decoded.
    pub(crate) event: SseEvent,
    /// Its bytes as they arrived, comments before it included; `None` when
    /// they were not all kept (an event the stream's end cut short, or one
    /// past the decoder's limit), to be written from `event` instead.
    pub(crate) bytes: Option<Vec<u8>>,
    /// It reported usage and nothing else (OpenAI's last chunk when usage
    /// was asked for).
    pub(crate) usage_only: bool,
}
