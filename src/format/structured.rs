//! Structured answers through a forced tool, given back as the client
//! expects them.
//!
//! A provider without a structured-output setting of its own (Anthropic in
//! its default `"tool"` mode) is asked for a `json_object` / `json_schema`
//! answer by a tool named after the schema, which the model is made to
//! call: the call's input is the answer. A client that asked for a
//! structured answer expects it as the message's text, with finish reason
//! `stop`, not as a tool call: [`unwrap_answer`] does that to a whole
//! answer, [`AnswerStream`] to a stream's deltas. Both are for any answer
//! to such a request, whichever provider gave it: an answer without the
//! tool's call passes unchanged.

use crate::chat::{ChatRequest, ChatResponse, Delta, FinishReason, ResponseFormat};

use super::anthropic::ANSWER_TOOL;

/// The name of the tool that carries a structured answer to `req`: the
/// schema's name, [`ANSWER_TOOL`] for `json_object`; `None` when `req`
/// asks for no structured answer.
pub(crate) fn answer_tool(req: &ChatRequest) -> Option<&str> {
    match &req.response_format {
        Some(ResponseFormat::JsonSchema(s)) => Some(&s.name),
        Some(ResponseFormat::JsonObject) => Some(ANSWER_TOOL),
        Some(ResponseFormat::Text) | None => None,
    }
}

/// The answer tool's name, when a call of that name can only be the
/// answer (no tool of the request has it).
fn unwrappable(req: &ChatRequest) -> Option<&str> {
    answer_tool(req).filter(|name| req.tools.iter().all(|t| t.name != *name))
}

/// Turns the answer tool's call in `resp` into the answer's text (the
/// call's arguments, the JSON answer; text the model wrote before calling
/// it is replaced) and a `tool_calls` finish into `stop` when no other call
/// is left.
pub(crate) fn unwrap_answer(req: &ChatRequest, resp: &mut ChatResponse) {
    // A provider sent the client's own body was given no answer tool.
    if req.sends_native(resp.dialect) {
        return;
    }
    let Some(name) = unwrappable(req) else {
        return;
    };
    let Some(at) = resp.tool_calls.iter().position(|c| c.name == name) else {
        return;
    };
    let call = resp.tool_calls.remove(at);
    resp.text = call.arguments;
    if resp.tool_calls.is_empty() && resp.finish_reason == Some(FinishReason::ToolCalls) {
        resp.finish_reason = Some(FinishReason::Stop);
    }
}

/// The stream counterpart of [`unwrap_answer`]: the answer tool's argument
/// fragments become text deltas, and its `tool_calls` finish `stop`.
#[derive(Debug, Clone, Default)]
pub(crate) struct AnswerStream {
    name: Option<String>,
    /// The provider's index of the answer's call, once it began.
    index: Option<u32>,
    /// Another tool was called too.
    other_calls: bool,
}

impl AnswerStream {
    /// A filter for the stream answering `req` (one that changes nothing
    /// when `req` asks for no structured answer).
    pub(crate) fn new(req: &ChatRequest) -> Self {
        AnswerStream {
            name: unwrappable(req).map(str::to_string),
            ..AnswerStream::default()
        }
    }

    /// `d` as the client is to see it; `None` when nothing is left of it
    /// (the answer call's opening fragment without arguments).
    pub(crate) fn map(&mut self, d: Delta) -> Option<Delta> {
        let Some(answer) = self.name.as_deref() else {
            return Some(d);
        };
        match d {
            Delta::ToolCall {
                index,
                name,
                arguments,
                id,
            } => {
                let opens_answer = self.index.is_none() && name.as_deref() == Some(answer);
                if opens_answer {
                    self.index = Some(index);
                }
                if opens_answer || self.index == Some(index) {
                    return (!arguments.is_empty()).then_some(Delta::Text { text: arguments });
                }
                self.other_calls = true;
                Some(Delta::ToolCall {
                    index,
                    id,
                    name,
                    arguments,
                })
            }
            Delta::Finish {
                reason: FinishReason::ToolCalls,
            } if self.index.is_some() && !self.other_calls => Some(Delta::Finish {
                reason: FinishReason::Stop,
            }),
            other => Some(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{JsonSchema, Message, ToolCall};

    fn req() -> ChatRequest {
        ChatRequest {
            response_format: Some(ResponseFormat::JsonSchema(JsonSchema {
                name: "weather".into(),
                description: None,
                schema: serde_json::json!({"type": "object"}),
                strict: Some(true),
            })),
            ..ChatRequest::new(vec![Message::user("hi")])
        }
    }

    #[test]
    fn the_answer_tool_becomes_the_text() {
        let mut resp = ChatResponse {
            text: "Here you are:".into(),
            tool_calls: vec![ToolCall {
                id: "t".into(),
                name: "weather".into(),
                arguments: r#"{"c":18}"#.into(),
            }],
            thinking: Vec::new(),
            model: "m".into(),
            provider: "p".into(),
            finish_reason: Some(FinishReason::ToolCalls),
            usage: None,
            raw: None,
            dialect: None,
        };
        unwrap_answer(&req(), &mut resp);
        assert_eq!(resp.text, r#"{"c":18}"#);
        assert!(resp.tool_calls.is_empty());
        assert_eq!(resp.finish_reason, Some(FinishReason::Stop));
    }

    #[test]
    fn stream_fragments_of_the_answer_become_text() {
        let mut s = AnswerStream::new(&req());
        let open = Delta::ToolCall {
            index: 1,
            id: Some("t".into()),
            name: Some("weather".into()),
            arguments: String::new(),
        };
        assert_eq!(s.map(open), None);
        let more = Delta::ToolCall {
            index: 1,
            id: None,
            name: None,
            arguments: "{\"c\"".into(),
        };
        assert_eq!(
            s.map(more),
            Some(Delta::Text {
                text: "{\"c\"".into()
            })
        );
        let finish = Delta::Finish {
            reason: FinishReason::ToolCalls,
        };
        assert_eq!(
            s.map(finish),
            Some(Delta::Finish {
                reason: FinishReason::Stop
            })
        );
    }
}
