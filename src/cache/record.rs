//! A streamed answer put together from the deltas its client was sent, to
//! be stored once the stream completed: the same answer a whole request
//! would have had (text, tool calls, reasoning blocks, finish reason,
//! usage), replayed to a later client in that client's format.

use crate::chat::{ChatResponse, Delta, Thinking, ToolCall};
use crate::format::merge_usage;

/// The answer so far. It keeps at most `limit` bytes of content: a longer
/// answer is not stored (the store could not keep it anyway).
#[derive(Debug)]
pub struct Recording {
    response: ChatResponse,
    /// The stream's tool-call indices, in order of first appearance.
    calls: Vec<u32>,
    /// The current reasoning block is open (its signature not yet seen).
    thinking_open: bool,
    done: bool,
    bytes: usize,
    limit: usize,
}

impl Recording {
    /// An empty recording keeping up to `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Recording {
            response: ChatResponse {
                text: String::new(),
                tool_calls: Vec::new(),
                thinking: Vec::new(),
                model: String::new(),
                provider: String::new(),
                finish_reason: None,
                usage: None,
                raw: None,
                dialect: None,
            },
            calls: Vec::new(),
            thinking_open: false,
            done: false,
            bytes: 0,
            limit,
        }
    }

    /// Adds what `delta` says of the answer.
    pub fn push(&mut self, delta: &Delta) {
        if self.bytes > self.limit || self.done {
            return;
        }
        match delta {
            Delta::Start { model: Some(m) } if self.response.model.is_empty() => {
                self.response.model = m.clone();
            }
            Delta::Start { .. } => {}
            Delta::Text { text } => {
                self.bytes += text.len();
                self.response.text.push_str(text);
            }
            Delta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                self.bytes += arguments.len();
                let at = match self.calls.iter().position(|i| i == index) {
                    Some(at) => at,
                    None => {
                        self.calls.push(*index);
                        self.response.tool_calls.push(ToolCall {
                            id: String::new(),
                            name: String::new(),
                            arguments: String::new(),
                        });
                        self.response.tool_calls.len() - 1
                    }
                };
                let call = &mut self.response.tool_calls[at];
                if let Some(id) = id {
                    call.id.clone_from(id);
                }
                if let Some(name) = name {
                    call.name.clone_from(name);
                }
                call.arguments.push_str(arguments);
            }
            Delta::Thinking(t) => self.think(t),
            Delta::Finish { reason } => self.response.finish_reason = Some(reason.clone()),
            Delta::Usage { usage } => merge_usage(&mut self.response.usage, *usage),
            Delta::Done => self.done = true,
        }
    }

    /// A reasoning delta: a redacted block stands alone; text extends the
    /// open block (or opens one); a signature ends it.
    fn think(&mut self, t: &Thinking) {
        if t.redacted.is_some() {
            self.bytes += t.redacted.as_ref().map_or(0, String::len);
            self.response.thinking.push(t.clone());
            self.thinking_open = false;
            return;
        }
        self.bytes += t.text.len() + t.signature.as_ref().map_or(0, String::len);
        if !self.thinking_open {
            self.response.thinking.push(Thinking::default());
            self.thinking_open = true;
        }
        if let Some(block) = self.response.thinking.last_mut() {
            block.text.push_str(&t.text);
            if t.signature.is_some() {
                block.signature.clone_from(&t.signature);
                self.thinking_open = false;
            }
        }
    }

    /// The answer, if the stream ended as a complete answer that may be
    /// stored ([`super::entry::storable`]) within the limit.
    pub fn finish(self) -> Option<ChatResponse> {
        let whole = self.done && self.bytes <= self.limit;
        Some(self.response).filter(|r| whole && super::entry::storable(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{FinishReason, Usage};

    fn text(t: &str) -> Delta {
        Delta::Text { text: t.into() }
    }

    fn ended(reason: FinishReason) -> [Delta; 2] {
        [Delta::Finish { reason }, Delta::Done]
    }

    #[test]
    fn text_usage_and_model_make_the_whole_answer() {
        let mut r = Recording::new(1 << 20);
        r.push(&Delta::Start {
            model: Some("gpt-4o-2024".into()),
        });
        r.push(&text("Hel"));
        r.push(&text("lo"));
        let usage = Usage {
            input_tokens: 7,
            output_tokens: 2,
            ..Usage::default()
        };
        r.push(&Delta::Usage { usage });
        ended(FinishReason::Stop).iter().for_each(|d| r.push(d));
        let got = r.finish().expect("complete");
        assert_eq!(got.text, "Hello");
        assert_eq!(got.model, "gpt-4o-2024");
        assert_eq!(got.usage.map(|u| u.output_tokens), Some(2));
        assert_eq!(got.finish_reason, Some(FinishReason::Stop));
    }

    #[test]
    fn tool_calls_are_joined_by_index_in_order_of_first_appearance() {
        let mut r = Recording::new(1 << 20);
        let part = |index, id: Option<&str>, args: &str| Delta::ToolCall {
            index,
            id: id.map(Into::into),
            name: id.map(|_| format!("tool{index}")),
            arguments: args.into(),
        };
        r.push(&part(3, Some("b"), "{\"x\""));
        r.push(&part(1, Some("a"), "{}"));
        r.push(&part(3, None, ":1}"));
        ended(FinishReason::ToolCalls)
            .iter()
            .for_each(|d| r.push(d));
        let calls = r.finish().expect("complete").tool_calls;
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("b", "tool3")
        );
        assert_eq!(calls[0].arguments, "{\"x\":1}");
        assert_eq!(calls[1].arguments, "{}");
    }

    #[test]
    fn reasoning_blocks_end_at_their_signature_and_redacted_ones_stand_alone() {
        let mut r = Recording::new(1 << 20);
        let think = |text: &str, signature: Option<&str>| {
            Delta::Thinking(Thinking {
                text: text.into(),
                signature: signature.map(Into::into),
                redacted: None,
            })
        };
        r.push(&think("a", None));
        r.push(&think("b", None));
        r.push(&think("", Some("sig1")));
        r.push(&Delta::Thinking(Thinking {
            redacted: Some("opaque".into()),
            ..Thinking::default()
        }));
        r.push(&think("c", Some("sig2")));
        r.push(&text("ok"));
        ended(FinishReason::Stop).iter().for_each(|d| r.push(d));
        let blocks = r.finish().expect("complete").thinking;
        assert_eq!(blocks.len(), 3);
        assert_eq!(
            (blocks[0].text.as_str(), blocks[0].signature.as_deref()),
            ("ab", Some("sig1"))
        );
        assert_eq!(blocks[1].redacted.as_deref(), Some("opaque"));
        assert_eq!(blocks[2].signature.as_deref(), Some("sig2"));
    }

    #[test]
    fn a_cut_refused_or_oversized_stream_is_not_an_answer_to_keep() {
        let mut cut = Recording::new(1 << 20);
        cut.push(&text("half"));
        assert!(cut.finish().is_none(), "no end");

        let mut no_reason = Recording::new(1 << 20);
        no_reason.push(&text("x"));
        no_reason.push(&Delta::Done);
        assert!(no_reason.finish().is_none(), "an end without a reason");

        let mut refused = Recording::new(1 << 20);
        refused.push(&text("x"));
        ended(FinishReason::ContentFilter)
            .iter()
            .for_each(|d| refused.push(d));
        assert!(refused.finish().is_none(), "filtered");

        let mut big = Recording::new(8);
        big.push(&text("0123456789"));
        ended(FinishReason::Stop).iter().for_each(|d| big.push(d));
        assert!(big.finish().is_none(), "past the limit");

        let mut fits = Recording::new(8);
        fits.push(&text("01234567"));
        ended(FinishReason::Stop).iter().for_each(|d| fits.push(d));
        assert!(fits.finish().is_some(), "at the limit");
    }
}
