//! Cost-aware ordering: a route's entries by what this request is expected
//! to cost on each (a route's `strategy: "cheapest"`).
//!
//! The expectation is the entry's prices applied to the request's size: its
//! input estimated from the text it carries (about four bytes a token, the
//! common rule of thumb for English text and code; the crate counts no
//! tokens) and its output as `max_tokens`, the most it may cost. Breakers and
//! failure handling apply to the reordered route as to any other.

use crate::chat::{ChatRequest, Part, Usage};
use crate::policy::price::Prices;

/// How a route orders its entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Strategy {
    /// In the order configured.
    #[default]
    Ordered,
    /// Cheapest expected cost for the request first.
    Cheapest,
}

/// The output tokens assumed for a request that sets no `max_tokens`.
pub(crate) const DEFAULT_OUTPUT_TOKENS: u64 = 4096;

/// Bytes of text per token assumed by the input estimate.
const BYTES_PER_TOKEN: u64 = 4;

/// The usage a request may cause: its input estimated from its text, its
/// output at `max_tokens`.
pub(crate) fn expected_usage(req: &ChatRequest) -> Usage {
    let mut bytes = 0;
    for m in &req.messages {
        for part in &m.content {
            bytes += match part {
                Part::Text { text, .. } => text.len(),
                Part::ToolCall(call) => call.name.len() + call.arguments.len(),
                Part::ToolResult { content, .. } => content.len(),
                Part::Thinking(t) => t.text.len(),
                Part::Image(_) => 0,
            };
        }
    }
    Usage {
        input_tokens: (bytes as u64).div_ceil(BYTES_PER_TOKEN),
        output_tokens: req.max_tokens.map_or(DEFAULT_OUTPUT_TOKENS, u64::from),
        ..Usage::default()
    }
}

/// The order in which to try `entries` (`(provider, model)` pairs) for a
/// request of `usage`: cheapest expected cost first; entries without a
/// price after every priced one, in route order (a cost that is not known
/// is not taken for a low one); ties keep route order.
pub(crate) fn cheapest(entries: &[(&str, &str)], prices: &Prices, usage: &Usage) -> Vec<usize> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    // Stable: equal costs keep their route order.
    order.sort_by_key(|&i| {
        let (provider, model) = entries[i];
        match prices.cost(provider, model, usage) {
            Some(cost) => (0, cost),
            None => (1, Default::default()),
        }
    });
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{Message, Role};
    use crate::policy::price::Price;

    fn price(input: f64, output: f64) -> Price {
        Price {
            input: Price::per_mtok(input).unwrap(),
            output: Price::per_mtok(output).unwrap(),
            ..Price::default()
        }
    }

    #[test]
    fn cheapest_first_then_unpriced_in_route_order() {
        let mut prices = Prices::default();
        prices.insert("strong", "big", price(3.0, 15.0));
        prices.insert("cheap", "small", price(0.15, 0.6));
        prices.insert("mid", "m", price(1.0, 2.0));
        let entries = [
            ("strong", "big"),
            ("unknown", "x"),
            ("cheap", "small"),
            ("other", "y"),
            ("mid", "m"),
        ];
        let usage = Usage {
            input_tokens: 1000,
            output_tokens: 500,
            ..Usage::default()
        };
        assert_eq!(cheapest(&entries, &prices, &usage), [2, 4, 0, 1, 3]);
    }

    #[test]
    fn the_request_size_decides_between_input_and_output_heavy_prices() {
        let mut prices = Prices::default();
        // Cheap input, dear output; and the other way round.
        prices.insert("a", "reader", price(0.1, 10.0));
        prices.insert("b", "writer", price(5.0, 1.0));
        let entries = [("a", "reader"), ("b", "writer")];
        let mut req = ChatRequest::new(vec![Message::text(Role::User, "x".repeat(400_000))]);
        req.max_tokens = Some(10);
        let long_prompt = expected_usage(&req);
        assert_eq!(long_prompt.input_tokens, 100_000);
        assert_eq!(long_prompt.output_tokens, 10);
        assert_eq!(cheapest(&entries, &prices, &long_prompt), [0, 1]);
        let mut req = ChatRequest::new(vec![Message::text(Role::User, "hi")]);
        req.max_tokens = Some(2000);
        assert_eq!(cheapest(&entries, &prices, &expected_usage(&req)), [1, 0]);
        req.max_tokens = None;
        assert_eq!(expected_usage(&req).output_tokens, DEFAULT_OUTPUT_TOKENS);
        assert_eq!(expected_usage(&req).input_tokens, 1);
    }
}
