//! A Chat Completions answer: read from a provider, rendered for a client.
//!
//! Reasoning travels in the fields OpenAI-compatible servers use:
//! `message.reasoning_content` (or `reasoning`) for the text, and
//! `message.thinking_blocks` (`{"type": "thinking", "thinking",
//! "signature"}` or `{"type": "redacted_thinking", "data"}`) for blocks a
//! client must send back unchanged.

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::{finish_reason, finish_reason_name, OutCall, OutUsage, WireUsage};
use crate::chat::{ChatResponse, Dialect, RawJson, Thinking, ToolCall};
use crate::format::wire::{self, required, Arguments, First, Loose, Obj, Str};
use crate::format::{index, join, FormatError, Read};

/// A Chat Completions answer as it arrives: what is read of it, and the
/// members that make it an error object instead.
#[derive(Deserialize)]
struct Completion<'a> {
    model: Option<String>,
    #[serde(borrow)]
    choices: Option<First<Obj<Choice<'a>>>>,
    usage: Option<Obj<WireUsage>>,
    error: Option<IgnoredAny>,
    #[serde(default, borrow)]
    object: Loose<'a>,
    #[serde(default, borrow, rename = "type")]
    kind: Loose<'a>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    message: Option<Obj<AnswerMessage>>,
    #[serde(borrow)]
    finish_reason: Option<Str<'a>>,
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct AnswerMessage {
    content: Option<AnswerContent>,
    refusal: Option<String>,
    tool_calls: Option<Vec<Obj<AnswerCall>>>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    thinking_blocks: Option<Vec<Obj<WireThinking>>>,
}

/// A `thinking_blocks` entry of an answer or a stream delta.
#[derive(Deserialize)]
pub(crate) struct WireThinking {
    #[serde(rename = "type")]
    kind: Option<String>,
    thinking: Option<String>,
    signature: Option<String>,
    data: Option<String>,
}

impl WireThinking {
    /// The block, `None` for one of an unknown type.
    pub(crate) fn into_thinking(self) -> Option<Thinking> {
        match self.kind.as_deref() {
            Some("thinking") | None => Some(Thinking {
                text: self.thinking.unwrap_or_default(),
                signature: self.signature.filter(|s| !s.is_empty()),
                redacted: None,
            }),
            Some("redacted_thinking") => Some(Thinking {
                redacted: self.data,
                ..Thinking::default()
            }),
            Some(_) => None,
        }
    }
}

#[derive(Deserialize)]
struct AnswerCall {
    id: Option<String>,
    function: Option<Obj<AnswerFunction>>,
}

#[derive(Deserialize)]
struct AnswerFunction {
    name: Option<String>,
    arguments: Option<Arguments>,
}

/// An answer's `content`: a string, or text and refusal parts joined.
struct AnswerContent(String);

impl<'de> Deserialize<'de> for AnswerContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Part<'a> {
            #[serde(borrow, rename = "type")]
            kind: Option<Str<'a>>,
            text: Option<String>,
            refusal: Option<String>,
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AnswerContent;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<AnswerContent, E> {
                Ok(AnswerContent(s.to_string()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<AnswerContent, E> {
                Ok(AnswerContent(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<AnswerContent, A::Error> {
                let mut out = String::new();
                while let Some(Obj(part)) = seq.next_element::<Obj<Part<'_>>>()? {
                    let kind = part.kind.as_ref().map(Str::as_str);
                    let text = match kind {
                        Some("text") => part.text,
                        Some("refusal") => part.refusal,
                        Some(kind @ ("image_url" | "input_audio" | "file")) => {
                            return Err(de::Error::custom(format!(
                                "{kind} content cannot be translated"
                            )))
                        }
                        Some(other) => {
                            return Err(de::Error::custom(format!(
                                "unknown content part type \"{other}\""
                            )))
                        }
                        None => return Err(de::Error::custom("a content part without a type")),
                    };
                    match text {
                        Some(t) => out.push_str(&t),
                        None => {
                            return Err(de::Error::custom(format!(
                                "a {} part without its {0}",
                                kind.unwrap_or_default()
                            )))
                        }
                    }
                }
                Ok(AnswerContent(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads a Chat Completions answer: [`Read::Error`] when the body is an
/// error object (at the top, or OpenRouter's in the first choice: an
/// `error`, or `finish_reason: "error"`), for the classifier to read.
/// `raw` keeps the body's text.
pub fn decode_response(body: &[u8]) -> Result<Read<ChatResponse>, FormatError> {
    let Obj(c) = wire::read::<Obj<Completion<'_>>>(body)?;
    let first = c.choices.as_ref().and_then(|f| f.0.as_ref());
    let choice_error = first
        .is_some_and(|Obj(ch)| ch.error.is_some() || wire::is_error(ch.finish_reason.as_ref()));
    if wire::says_error(&c.error, &c.object, &c.kind) || choice_error {
        return Ok(Read::Error);
    }
    let Obj(choice) = required(c.choices, || "choices".into())?
        .0
        .ok_or_else(|| FormatError::malformed("choices", "no choice in the answer"))?;
    let Obj(msg) = required(choice.message, || "choices[0].message".into())?;
    let mut text = msg.content.map(|c| c.0).unwrap_or_default();
    if text.is_empty() {
        if let Some(refusal) = msg.refusal {
            text = refusal;
        }
    }
    let mut tool_calls = Vec::new();
    for (i, Obj(call)) in msg.tool_calls.unwrap_or_default().into_iter().enumerate() {
        let at = || index("choices[0].message.tool_calls", i);
        let Obj(function) = required(call.function, || join(&at(), "function"))?;
        tool_calls.push(ToolCall {
            id: call.id.unwrap_or_default(),
            name: required(function.name, || join(&join(&at(), "function"), "name"))?,
            arguments: function.arguments.map_or_else(|| "{}".into(), |a| a.0),
        });
    }
    let thinking = match msg.thinking_blocks {
        Some(blocks) if !blocks.is_empty() => blocks
            .into_iter()
            .filter_map(|Obj(b)| b.into_thinking())
            .collect(),
        Some(_) | None => msg
            .reasoning_content
            .or(msg.reasoning)
            .filter(|t| !t.is_empty())
            .map(|text| {
                vec![Thinking {
                    text,
                    ..Thinking::default()
                }]
            })
            .unwrap_or_default(),
    };
    Ok(Read::Answer(ChatResponse {
        text,
        tool_calls,
        thinking,
        model: c.model.unwrap_or_default(),
        provider: String::new(),
        finish_reason: choice.finish_reason.map(|r| finish_reason(r.as_str())),
        usage: c.usage.map(|Obj(u)| u.into()),
        raw: Some(
            RawJson::from_slice(body).map_err(|e| FormatError::malformed("", e.to_string()))?,
        ),
        dialect: Some(Dialect::OpenAi),
    }))
}

/// A `chat.completion` object, as [`render_response`] renders it;
/// serialize it to answer.
#[derive(Debug, Serialize)]
pub struct ResponseBody<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [OutChoice<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<OutUsage>,
}

#[derive(Debug, Serialize)]
struct OutChoice<'a> {
    index: u32,
    message: OutAnswer<'a>,
    /// Always `null`.
    logprobs: (),
    finish_reason: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct OutAnswer<'a> {
    role: &'static str,
    /// `null` for an answer of tool calls only.
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    thinking_blocks: Vec<OutThinking<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutCall<'a>>,
    /// Always `null`: a refusal is answered as text.
    refusal: (),
}

/// A `thinking_blocks` entry as an answer or a stream delta carries it.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum OutThinking<'a> {
    Thinking {
        thinking: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        signature: Option<&'a str>,
    },
    RedactedThinking {
        data: &'a str,
    },
}

impl<'a> OutThinking<'a> {
    pub(crate) fn of(t: &'a Thinking) -> Self {
        match &t.redacted {
            Some(data) => OutThinking::RedactedThinking { data },
            None => OutThinking::Thinking {
                thinking: &t.text,
                signature: t.signature.as_deref(),
            },
        }
    }
}

/// Renders a neutral answer as a `chat.completion` object. `model` in the
/// output is the model that actually answered.
pub fn render_response<'a>(resp: &'a ChatResponse, id: &'a str, created: u64) -> ResponseBody<'a> {
    let content =
        (!resp.text.is_empty() || resp.tool_calls.is_empty()).then_some(resp.text.as_str());
    let reasoning: String = resp.thinking.iter().map(|t| t.text.as_str()).collect();
    ResponseBody {
        id,
        object: "chat.completion",
        created,
        model: &resp.model,
        choices: [OutChoice {
            index: 0,
            message: OutAnswer {
                role: "assistant",
                content,
                reasoning_content: (!reasoning.is_empty()).then_some(reasoning),
                thinking_blocks: resp.thinking.iter().map(OutThinking::of).collect(),
                tool_calls: resp.tool_calls.iter().map(OutCall::of).collect(),
                refusal: (),
            },
            logprobs: (),
            finish_reason: resp.finish_reason.as_ref().map(finish_reason_name),
        }],
        usage: resp.usage.map(OutUsage::from),
    }
}
