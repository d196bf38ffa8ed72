//! Whether a request fits a model's context window, decided before it is
//! sent: its input counted as a lower bound in tokens, plus its
//! `max_tokens`.
//!
//! The lower bound counts words: the runs of text between whitespace, in
//! every text, tool call, tool result and reasoning part of the messages.
//! The tokenizers of the providers served here (OpenAI's and Anthropic's
//! byte-pair encodings, SentencePiece for Gemini and Llama) split text at
//! whitespace before merging, so no token spans two words and a text holds
//! at least as many tokens as words; English runs about 1.3 tokens a word.
//! Images, tool definitions and the format's own framing add tokens and are
//! left out, which keeps the bound low. A request this bound says does not
//! fit cannot fit; one it lets through may still be refused by the
//! provider, and then fails over as any context-length error does.

use crate::chat::{ChatRequest, Part};

/// At least how many tokens the messages of `req` take as input.
pub(crate) fn input_floor(req: &ChatRequest) -> u64 {
    let words = |s: &str| s.split_whitespace().count() as u64;
    let mut n = 0;
    for m in &req.messages {
        for part in &m.content {
            n += match part {
                Part::Text { text, .. } => words(text),
                Part::ToolCall(call) => words(&call.arguments).max(1),
                Part::ToolResult { content, .. } => words(content),
                Part::Thinking(t) => words(&t.text),
                Part::Image(_) => 0,
            };
        }
    }
    n
}

/// What a request needs of a context window: its input's lower bound and
/// its `max_tokens` (none given: nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Need {
    input: u64,
    output: u64,
}

impl Need {
    /// What `req` needs.
    pub(crate) fn of(req: &ChatRequest) -> Self {
        Need {
            input: input_floor(req),
            output: req.max_tokens.map_or(0, u64::from),
        }
    }

    /// Why a context window of `window` tokens cannot hold the request, or
    /// `None` when it may.
    pub(crate) fn overflow(&self, window: u32) -> Option<String> {
        let Need { input, output } = *self;
        let need = input.saturating_add(output);
        (need > u64::from(window)).then(|| {
            format!(
                "context_window: the request needs at least {need} tokens ({input} of input, \
                 counted as words, and max_tokens {output}); the context window is {window}"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{Message, ToolCall};

    fn request(texts: &[&str], max_tokens: Option<u32>) -> ChatRequest {
        let mut req = ChatRequest::new(texts.iter().map(|t| Message::user(*t)).collect());
        req.max_tokens = max_tokens;
        req
    }

    #[test]
    fn words_are_counted_across_messages_and_whitespace_of_any_kind() {
        let req = request(&["one two\tthree\n four", "  ", "five"], None);
        assert_eq!(input_floor(&req), 5);
        assert_eq!(input_floor(&request(&[""], None)), 0);
    }

    #[test]
    fn tool_calls_count_at_least_one_and_images_nothing() {
        let mut req = request(&["hi"], None);
        req.messages.push(Message {
            content: vec![Part::ToolCall(ToolCall {
                id: "c1".into(),
                name: "f".into(),
                arguments: "{}".into(),
            })],
            ..Message::assistant("")
        });
        assert_eq!(input_floor(&req), 2);
    }

    #[test]
    fn a_request_over_the_window_says_by_how_much() {
        let need = Need::of(&request(&["a b c d e"], Some(10)));
        assert_eq!(need.overflow(15), None, "exactly the window fits");
        let why = need.overflow(14).expect("15 > 14");
        assert_eq!(
            why,
            "context_window: the request needs at least 15 tokens (5 of input, counted as \
             words, and max_tokens 10); the context window is 14"
        );
        assert_eq!(
            Need::of(&request(&["a b"], None)).overflow(2),
            None,
            "no max_tokens: 0"
        );
    }

    #[test]
    fn a_long_word_is_one_token_at_least_not_more() {
        // Base64 or a long identifier: many tokens in truth, one in the bound.
        let req = request(&[&"x".repeat(10_000)], None);
        assert_eq!(input_floor(&req), 1);
    }
}
