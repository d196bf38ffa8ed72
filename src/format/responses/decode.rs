//! Outbound: a Responses-speaking provider's answer and stream events read
//! into the neutral answer and deltas, for the gateway's bookkeeping (usage,
//! finish, the text a continuation goes on from) and for a client of
//! another format.

use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::chat::{ChatResponse, Delta, Dialect, FinishReason, RawJson, Thinking, ToolCall, Usage};
use crate::format::wire::{self, Loose};
use crate::format::{FormatError, Read};

/// A Response object, as far as the neutral answer reads it.
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(default)]
    output: Option<Vec<Item>>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    incomplete_details: Option<Incomplete>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// `null` in every answer that is not a failure.
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(default, borrow, rename = "type")]
    kind: Loose<'a>,
}

#[derive(Deserialize)]
struct Incomplete {
    #[serde(default)]
    reason: Option<String>,
}

/// An output item: a message, a function call or reasoning; any other type
/// (hosted tool calls) has no neutral form and is skipped.
#[derive(Deserialize)]
struct Item {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    content: Option<Vec<ContentPart>>,
    #[serde(default)]
    summary: Option<Vec<ContentPart>>,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<wire::Arguments>,
}

#[derive(Deserialize)]
struct ContentPart {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<CachedDetails>,
    #[serde(default)]
    output_tokens_details: Option<ReasoningDetails>,
}

#[derive(Deserialize)]
struct CachedDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ReasoningDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    fn neutral(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens.unwrap_or(0),
            output_tokens: self.output_tokens.unwrap_or(0),
            cached_input_tokens: self
                .input_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens),
            cache_write_input_tokens: None,
            reasoning_tokens: self
                .output_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens),
        }
    }
}

/// The finish reason of a Response: `incomplete` for a token limit or a
/// content filter, else `tool_calls` when it called a function.
fn finish_of(status: Option<&str>, incomplete: Option<&Incomplete>, calls: bool) -> FinishReason {
    match (status, incomplete.and_then(|i| i.reason.as_deref())) {
        (Some("incomplete"), Some("max_output_tokens")) => FinishReason::Length,
        (Some("incomplete"), Some("content_filter")) => FinishReason::ContentFilter,
        (Some("incomplete"), Some(other)) => FinishReason::Other(other.to_string()),
        _ if calls => FinishReason::ToolCalls,
        _ => FinishReason::Stop,
    }
}

fn texts(parts: &[ContentPart], kinds: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| p.kind.as_deref().is_some_and(|k| kinds.contains(&k)))
        .filter_map(|p| p.text.as_deref().or(p.refusal.as_deref()))
        .collect()
}

/// Reads a Responses answer: [`Read::Error`] when the body is an error
/// object (a non-null `error`, or `type: "error"`). `raw` keeps the body's
/// text, for a Responses client to get it as it came.
pub(crate) fn decode_response(body: &[u8]) -> Result<Read<ChatResponse>, FormatError> {
    let wire::Obj(a) = wire::read::<wire::Obj<Answer<'_>>>(body)?;
    if a.error.is_some() || a.kind.is_error() {
        return Ok(Read::Error);
    }
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut thinking = Vec::new();
    for item in wire::required(a.output, || "output".into())? {
        match item.kind.as_deref() {
            Some("message") => text.push_str(&texts(
                item.content.as_deref().unwrap_or_default(),
                &["output_text", "refusal"],
            )),
            Some("function_call") => tool_calls.push(ToolCall {
                id: item.call_id.unwrap_or_default(),
                name: item.name.unwrap_or_default(),
                arguments: item.arguments.map(|a| a.0).unwrap_or_else(|| "{}".into()),
            }),
            Some("reasoning") => {
                let mut t = texts(
                    item.content.as_deref().unwrap_or_default(),
                    &["reasoning_text"],
                );
                if t.is_empty() {
                    t = texts(
                        item.summary.as_deref().unwrap_or_default(),
                        &["summary_text"],
                    );
                }
                thinking.push(Thinking {
                    text: t,
                    ..Thinking::default()
                });
            }
            _ => {}
        }
    }
    let finish = finish_of(
        a.status.as_deref(),
        a.incomplete_details.as_ref(),
        !tool_calls.is_empty(),
    );
    let raw = RawJson::from_slice(body)
        .map_err(|e| FormatError::malformed("", format!("malformed JSON: {e}")))?;
    Ok(Read::Answer(ChatResponse {
        text,
        tool_calls,
        thinking,
        model: a.model.unwrap_or_default(),
        provider: String::new(),
        finish_reason: Some(finish),
        usage: a.usage.map(|u| u.neutral()),
        raw: Some(raw),
        dialect: Some(Dialect::Responses),
    }))
}

/// A stream event, as far as the deltas read it.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<wire::Str<'a>>,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    output_index: Option<u32>,
    #[serde(default)]
    item: Option<Item>,
    #[serde(default)]
    response: Option<EventResponse>,
}

/// The Response in a lifecycle event: its model, status and usage.
#[derive(Deserialize)]
struct EventResponse {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    incomplete_details: Option<Incomplete>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    output: Option<Vec<Item>>,
}

/// Reads one Responses stream event into deltas: [`Read::Error`] for an
/// `error` or `response.failed` event. Events the neutral answer has no
/// place for (hosted tool progress, item and part boundaries) give none.
pub(crate) fn decode_event(data: &[u8]) -> Result<Read<Vec<Delta>>, FormatError> {
    let wire::Obj(ev) = wire::read::<wire::Obj<Event<'_>>>(data)?;
    let kind = ev.kind.as_ref().map(wire::Str::as_str).unwrap_or_default();
    let index = ev.output_index.unwrap_or(0);
    Ok(Read::Answer(match kind {
        "error" | "response.failed" => return Ok(Read::Error),
        "response.created" => vec![Delta::Start {
            model: ev.response.and_then(|r| r.model),
        }],
        "response.output_text.delta" | "response.refusal.delta" => {
            vec![Delta::Text {
                text: ev.delta.unwrap_or_default(),
            }]
        }
        "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
            vec![Delta::Thinking(Thinking {
                text: ev.delta.unwrap_or_default(),
                ..Thinking::default()
            })]
        }
        "response.output_item.added" => match ev.item {
            Some(item) if item.kind.as_deref() == Some("function_call") => vec![Delta::ToolCall {
                index,
                id: item.call_id,
                name: item.name,
                arguments: item.arguments.map(|a| a.0).unwrap_or_default(),
            }],
            _ => Vec::new(),
        },
        "response.function_call_arguments.delta" => vec![Delta::ToolCall {
            index,
            id: None,
            name: None,
            arguments: ev.delta.unwrap_or_default(),
        }],
        "response.completed" | "response.incomplete" => {
            let r = wire::required(ev.response, || "response".into())?;
            let calls = r
                .output
                .iter()
                .flatten()
                .any(|i| i.kind.as_deref() == Some("function_call"));
            let mut out = vec![Delta::Finish {
                reason: finish_of(r.status.as_deref(), r.incomplete_details.as_ref(), calls),
            }];
            if let Some(u) = &r.usage {
                out.push(Delta::Usage { usage: u.neutral() });
            }
            out.push(Delta::Done);
            out
        }
        _ => Vec::new(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reads_into_text_calls_usage_and_keeps_its_body() {
        let body = br#"{"id":"resp_1","object":"response","status":"completed","model":"gpt-x","error":null,
            "output":[{"type":"reasoning","id":"rs","summary":[{"type":"summary_text","text":"think"}]},
              {"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]},
              {"type":"function_call","id":"fc","call_id":"c1","name":"get","arguments":"{}"}],
            "usage":{"input_tokens":5,"output_tokens":3,"total_tokens":8,"input_tokens_details":{"cached_tokens":1}}}"#;
        let Read::Answer(a) = decode_response(body).unwrap() else {
            panic!("an answer")
        };
        assert_eq!(a.text, "Hi");
        assert_eq!(a.tool_calls[0].id, "c1");
        assert_eq!(a.thinking[0].text, "think");
        assert_eq!(a.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(a.usage.unwrap().cached_input_tokens, Some(1));
        assert_eq!(a.dialect, Some(Dialect::Responses));
        assert_eq!(a.raw.unwrap().get().as_bytes(), body);
        let err = br#"{"error":{"message":"no","type":"invalid_request_error"}}"#;
        assert_eq!(decode_response(err).unwrap(), Read::Error);
    }

    #[test]
    fn events_read_into_deltas() {
        let d = |s: &str| match decode_event(s.as_bytes()).unwrap() {
            Read::Answer(d) => d,
            Read::Error => vec![],
        };
        assert_eq!(
            d(r#"{"type":"response.output_text.delta","delta":"Hel","output_index":0}"#),
            [Delta::Text { text: "Hel".into() }]
        );
        assert_eq!(
            d(
                r#"{"type":"response.completed","response":{"status":"incomplete",
                "incomplete_details":{"reason":"max_output_tokens"},"output":[]}}"#
            ),
            [
                Delta::Finish {
                    reason: FinishReason::Length
                },
                Delta::Done
            ]
        );
        assert_eq!(
            decode_event(br#"{"type":"response.failed","response":{}}"#).unwrap(),
            Read::Error
        );
        assert!(d(r#"{"type":"response.web_search_call.searching"}"#).is_empty());
    }
}
