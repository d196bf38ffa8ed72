//! Streams that fail over sooner (docs/design.md §8): the pace a stream
//! must keep before its commit point, and which failures after it are not
//! worth another try at the same entry.
//!
//! Sans-IO: the stream hands in each content delta with the time it came
//! and asks when the pace is due; the stream's own loop keeps the timer.

use std::time::Duration;

use crate::chat::Delta;
use crate::error::{ErrorKind, ProviderError};
use crate::platform::UnixMillis;
use crate::policy::latency::RateFloor;

/// Whether a failure after the commit point skips the retries at the entry
/// that failed: a stream that went silent mid-answer (`stalled`) is
/// continued on the next entry at once, as a silent attempt (`timeout`) is
/// before it. The provider that stopped talking is the likeliest to stop
/// again, and the caller is waiting with half an answer.
pub(crate) fn moves_on(committed: bool, error: &ProviderError) -> bool {
    committed && error.kind == ErrorKind::Stalled
}

/// What became of a content delta handed to [`Pace::hold`].
#[derive(Debug, PartialEq)]
pub(crate) enum Gate {
    /// Held: the window is not full yet.
    Hold,
    /// The window filled in time: every delta held, in order, for the
    /// caller (the commit point).
    Release(Vec<Delta>),
    /// The window could not fill in time: the stream is too slow.
    TooSlow,
}

/// The first `window_tokens` of an attempt's content, held back until they
/// have come at `tokens_per_sec` or better, counted from the first content.
/// Nothing is delivered meanwhile, so a slow stream is abandoned for the
/// next entry as freely as one whose first token is late.
#[derive(Debug)]
pub(crate) struct Pace {
    floor: RateFloor,
    first_at: Option<UnixMillis>,
    tokens: u64,
    held: Vec<Delta>,
}

impl Pace {
    pub(crate) fn new(floor: RateFloor) -> Self {
        Pace {
            floor,
            first_at: None,
            tokens: 0,
            held: Vec::new(),
        }
    }

    /// Holds `delta`, which came at `now`.
    pub(crate) fn hold(&mut self, now: UnixMillis, delta: Delta) -> Gate {
        let first = *self.first_at.get_or_insert(now);
        if self.due_from(first) < now {
            return Gate::TooSlow;
        }
        self.tokens += estimate_tokens(&delta);
        self.held.push(delta);
        if self.tokens >= u64::from(self.floor.window_tokens) {
            return Gate::Release(std::mem::take(&mut self.held));
        }
        Gate::Hold
    }

    /// When the window must be full, once content has begun.
    pub(crate) fn due(&self) -> Option<UnixMillis> {
        self.first_at.map(|first| self.due_from(first))
    }

    fn due_from(&self, first: UnixMillis) -> UnixMillis {
        let ms = f64::from(self.floor.window_tokens) * 1000.0 / self.floor.tokens_per_sec;
        // Validated finite and positive; the cast saturates either way.
        first.saturating_add(ms.ceil() as u64)
    }

    /// What is held, for an answer that ended inside the window: a short
    /// answer is not a slow one.
    pub(crate) fn release(self) -> Vec<Delta> {
        self.held
    }

    /// The attempt's failure when the window did not fill in time: a
    /// `timeout`, which fails over at once, like a late first token.
    pub(crate) fn too_slow(&self) -> ProviderError {
        ProviderError::new(
            ErrorKind::Timeout,
            format!(
                "too slow: {} of the first {} tokens within {} ms (below {} tokens/s)",
                self.tokens,
                self.floor.window_tokens,
                self.due()
                    .zip(self.first_at)
                    .map_or(0, |(due, first)| due - first),
                self.floor.tokens_per_sec
            ),
        )
    }
}

/// How long to wait for the next chunk: the idle deadline, or less when the
/// pace falls due first.
pub(crate) fn wait_limit(pace: Option<&Pace>, idle: Duration, now: UnixMillis) -> Duration {
    match pace.and_then(Pace::due) {
        Some(due) => idle.min(Duration::from_millis(due.saturating_sub(now))),
        None => idle,
    }
}

/// Whether the pace being judged fell due at `now` without its window.
pub(crate) fn is_late(pace: Option<&Pace>, now: UnixMillis) -> bool {
    pace.and_then(Pace::due).is_some_and(|due| now >= due)
}

/// Tokens in a content delta, estimated at four bytes of text a token (the
/// usual figure for English with the common tokenizers): providers report
/// counts only at the end of a stream, and the pace is judged before it.
pub(crate) fn estimate_tokens(delta: &Delta) -> u64 {
    let bytes = match delta {
        Delta::Text { text } => text.len(),
        Delta::ToolCall {
            name, arguments, ..
        } => name.as_deref().map_or(0, str::len) + arguments.len(),
        Delta::Thinking(t) => t.text.len(),
        Delta::Start { .. } | Delta::Finish { .. } | Delta::Usage { .. } | Delta::Done => 0,
    };
    (bytes as u64).div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Delta {
        Delta::Text { text: t.into() }
    }

    fn floor(tokens_per_sec: f64, window_tokens: u32) -> Pace {
        Pace::new(RateFloor {
            tokens_per_sec,
            window_tokens,
        })
    }

    #[test]
    fn the_window_filled_in_time_releases_everything_held_in_order() {
        // 8 tokens at 4 tokens/s or better: due 2 s after the first content.
        let mut p = floor(4.0, 8);
        assert_eq!(p.hold(1_000, text("abcdefgh")), Gate::Hold); // 2 tokens
        assert_eq!(p.due(), Some(3_000));
        assert_eq!(p.hold(2_000, text("abcdefghijkl")), Gate::Hold); // 5
        assert_eq!(
            p.hold(3_000, text("abcdefghijkl")),
            Gate::Release(vec![
                text("abcdefgh"),
                text("abcdefghijkl"),
                text("abcdefghijkl")
            ])
        );
    }

    #[test]
    fn content_after_the_due_time_is_too_slow() {
        let mut p = floor(4.0, 8);
        assert_eq!(p.hold(1_000, text("abcd")), Gate::Hold);
        assert_eq!(
            p.hold(3_001, text("abcd".repeat(10).as_str())),
            Gate::TooSlow
        );
        let e = p.too_slow();
        assert_eq!(e.kind, ErrorKind::Timeout);
        assert!(
            e.message.contains("1 of the first 8 tokens within 2000 ms"),
            "{e}"
        );
        assert!(e.fails_over() && !e.is_retryable());
    }

    #[test]
    fn a_short_answer_is_released_whole() {
        let mut p = floor(1.0, 100);
        assert_eq!(p.hold(0, text("hi")), Gate::Hold);
        assert_eq!(p.release(), vec![text("hi")]);
    }

    #[test]
    fn tokens_are_estimated_from_every_kind_of_content() {
        assert_eq!(estimate_tokens(&text("")), 0);
        assert_eq!(estimate_tokens(&text("a")), 1);
        assert_eq!(estimate_tokens(&text("abcde")), 2);
        let call = Delta::ToolCall {
            index: 0,
            id: None,
            name: Some("get".into()),
            arguments: "{\"a\":1}".into(),
        };
        assert_eq!(estimate_tokens(&call), 3);
        assert_eq!(estimate_tokens(&Delta::Done), 0);
    }

    #[test]
    fn only_a_stall_after_the_commit_point_moves_on_at_once() {
        let stalled = ProviderError::new(ErrorKind::Stalled, "no data");
        let cut = ProviderError::new(ErrorKind::Transport, "reset");
        assert!(moves_on(true, &stalled));
        assert!(!moves_on(false, &stalled));
        assert!(!moves_on(true, &cut));
    }
}
