//! A `generateContent` answer, whole or as one chunk of
//! `streamGenerateContent?alt=sse`, read into the neutral answer or deltas.

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use crate::chat::{ChatResponse, Delta, FinishReason, RawJson, Thinking, ToolCall, Usage};
use crate::format::{FormatError, Read};

/// An answer (or a stream chunk, which has the same shape).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    #[serde(default)]
    candidates: Vec<Candidate>,
    usage_metadata: Option<UsageMetadata>,
    model_version: Option<String>,
    prompt_feedback: Option<PromptFeedback>,
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    content: Option<CandidateContent>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct CandidateContent {
    #[serde(default)]
    parts: Vec<AnswerPart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnswerPart {
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    thought_signature: Option<String>,
    function_call: Option<FunctionCall>,
}

#[derive(Deserialize)]
struct FunctionCall {
    id: Option<String>,
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
}

/// Token counts. Proto3 JSON leaves out a count that is zero, so within a
/// report that is given, a missing count is zero; a missing report is no
/// usage at all.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    cached_content_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
}

impl UsageMetadata {
    /// The neutral counts: input is the whole prompt (cached tokens
    /// included, as Gemini counts them); output includes the thoughts,
    /// which Gemini counts apart from the candidates.
    fn usage(&self) -> Option<Usage> {
        if self.prompt_token_count.is_none() && self.candidates_token_count.is_none() {
            return None;
        }
        let thoughts = self.thoughts_token_count;
        Some(Usage {
            input_tokens: self.prompt_token_count.unwrap_or(0),
            output_tokens: self.candidates_token_count.unwrap_or(0) + thoughts.unwrap_or(0),
            cached_input_tokens: self.cached_content_token_count,
            cache_write_input_tokens: None,
            reasoning_tokens: thoughts,
        })
    }
}

/// Gemini's finish reason in the neutral form; `calls` says whether the
/// candidate called a function (Gemini says `STOP` then too).
fn finish_reason(reason: &str, calls: bool) -> FinishReason {
    match reason {
        "STOP" if calls => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        other => FinishReason::Other(other.to_ascii_lowercase()),
    }
}

/// A call's id: Gemini's own when it gives one, else one made from the
/// call's place in the answer (calls are answered by name; the id only
/// pairs a result with its call in the client's format).
fn call_id(call: &FunctionCall, place: usize) -> String {
    match &call.id {
        Some(id) if !id.is_empty() => id.clone(),
        _ => format!("call_{place}_{}", call.name),
    }
}

fn read(body: &[u8]) -> Result<Read<Answer>, FormatError> {
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|e| FormatError::malformed("", format!("not a Gemini answer: {e}")))?;
    Ok(if answer.error.is_some() {
        Read::Error
    } else {
        Read::Answer(answer)
    })
}

/// Reads a whole answer: its first candidate's text, function calls and
/// thoughts, finish reason and usage. [`Read::Error`] for an error object.
/// An answer without candidates is a prompt Gemini blocked (finish reason
/// `content_filter`).
pub fn decode_response(body: &[u8]) -> Result<Read<ChatResponse>, FormatError> {
    let a = match read(body)? {
        Read::Answer(a) => a,
        Read::Error => return Ok(Read::Error),
    };
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut thinking = Vec::new();
    let first = a.candidates.into_iter().next();
    let reason = first.as_ref().and_then(|c| c.finish_reason.clone());
    let parts = first
        .and_then(|c| c.content)
        .map(|c| c.parts)
        .unwrap_or_default();
    for p in parts {
        if let Some(call) = &p.function_call {
            tool_calls.push(ToolCall {
                id: call_id(call, tool_calls.len()),
                name: call.name.clone(),
                arguments: call
                    .args
                    .as_ref()
                    .map_or_else(|| "{}".into(), Value::to_string),
            });
        } else if p.thought {
            thinking.push(Thinking {
                text: p.text.unwrap_or_default(),
                signature: p.thought_signature,
                redacted: None,
            });
        } else if let Some(t) = p.text {
            text.push_str(&t);
        }
    }
    let finish_reason = match (reason, &a.prompt_feedback) {
        (Some(r), _) => Some(finish_reason(&r, !tool_calls.is_empty())),
        (
            None,
            Some(PromptFeedback {
                block_reason: Some(_),
            }),
        ) => Some(FinishReason::ContentFilter),
        (None, _) => None,
    };
    let raw = RawJson::from_slice(body)
        .map_err(|e| FormatError::malformed("", format!("not JSON: {e}")))?;
    Ok(Read::Answer(ChatResponse {
        text,
        tool_calls,
        thinking,
        model: a.model_version.unwrap_or_default(),
        provider: String::new(),
        finish_reason,
        usage: a.usage_metadata.as_ref().and_then(UsageMetadata::usage),
        raw: Some(raw),
        dialect: None,
    }))
}

/// Reads one chunk of a streamed answer. Each chunk is a whole answer of
/// its own shape holding the next parts; the last one has the finish
/// reason and the usage, which are given only then (earlier chunks repeat
/// running counts). A function call comes whole in one part, so each is
/// one [`Delta::ToolCall`], numbered by its place in its chunk after the
/// chunk's text parts and made unique by its id.
pub fn decode_chunk(body: &[u8]) -> Result<Read<Vec<Delta>>, FormatError> {
    let a = match read(body)? {
        Read::Answer(a) => a,
        Read::Error => return Ok(Read::Error),
    };
    let mut out = vec![Delta::Start {
        model: a.model_version,
    }];
    let first = a.candidates.into_iter().next();
    let reason = first.as_ref().and_then(|c| c.finish_reason.clone());
    let parts = first
        .and_then(|c| c.content)
        .map(|c| c.parts)
        .unwrap_or_default();
    let mut calls = 0usize;
    for (i, p) in parts.into_iter().enumerate() {
        if let Some(call) = &p.function_call {
            out.push(Delta::ToolCall {
                index: u32::try_from(i).unwrap_or(u32::MAX),
                id: Some(call_id(call, i)),
                name: Some(call.name.clone()),
                arguments: call
                    .args
                    .as_ref()
                    .map_or_else(|| "{}".into(), Value::to_string),
            });
            calls += 1;
        } else if p.thought {
            out.push(Delta::Thinking(Thinking {
                text: p.text.unwrap_or_default(),
                signature: p.thought_signature,
                redacted: None,
            }));
        } else if let Some(text) = p.text.filter(|t| !t.is_empty()) {
            out.push(Delta::Text { text });
        }
    }
    let blocked = a.prompt_feedback.is_some_and(|f| f.block_reason.is_some());
    let reason = match reason {
        Some(r) => Some(finish_reason(&r, calls > 0)),
        None if blocked => Some(FinishReason::ContentFilter),
        None => None,
    };
    if let Some(reason) = reason {
        out.push(Delta::Finish { reason });
        if let Some(usage) = a.usage_metadata.as_ref().and_then(UsageMetadata::usage) {
            out.push(Delta::Usage { usage });
        }
    }
    Ok(Read::Answer(out))
}
