//! The package's JS-visible shapes as derived `Serialize` types: what
//! `client.chat` resolves with, the error classes' init, what a JS provider
//! receives. Written by serde_json and built by `JSON.parse`
//! ([`crate::js::errors::to_js`]); `types.d.ts` and `errors.js` describe
//! and read them.

use serde::ser::{Serialize, Serializer};
use serde_json::Value;

use crate::chat::{ChatRequest, Dialect, FinishReason, Message, Part, Role, Thinking, ToolCall};
use crate::chat::{ToolChoice, Usage};
use crate::config::ConfigIssue;
use crate::engine::client::{Reply, ServedBy};
use crate::error::{Attempt, ErrorKind, ProviderError};
use crate::js::parts::{PartsOut, ToolsOut};
use crate::js::request::{JsReasoning, JsResponseFormat};
use crate::platform::millis;

/// One attempt, as `result.attempts[i]` and `error.failures[i]` show it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct AttemptJs<'a> {
    provider: &'a str,
    model: &'a str,
    attempt: u32,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<ErrorKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retryable: Option<bool>,
    duration_ms: u64,
    started_at: u64,
    reached: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    omitted: &'a [String],
    /// `validator: reason`, for an answer the route's validators refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    rejected: Option<String>,
}

impl<'a> AttemptJs<'a> {
    fn new(a: &'a Attempt) -> Self {
        let error = a.error();
        AttemptJs {
            provider: &a.provider,
            model: &a.model,
            attempt: a.number,
            ok: error.is_none() && a.rejection().is_none(),
            kind: error.map(|e| e.kind),
            status: error.and_then(|e| e.status),
            code: error.and_then(|e| e.code.as_deref()),
            message: error.map(|e| e.message.as_str()),
            retry_after_ms: error.and_then(|e| e.retry_after).map(millis),
            retryable: error.map(ProviderError::is_retryable),
            duration_ms: millis(a.duration),
            started_at: a.started_at,
            reached: a.reached,
            usage: a.usage.as_ref(),
            omitted: &a.omitted,
            rejected: a.rejection(),
        }
    }
}

/// A list of attempts in their JS shape, written without collecting them.
#[derive(Clone, Copy)]
pub(crate) struct Attempts<'a>(pub &'a [Attempt]);

impl Serialize for Attempts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(AttemptJs::new))
    }
}

/// A name JS sees as a string: an error kind's (`rate_limited`, as serde
/// names it), or one of the package's own (`all_providers_failed`, …).
#[derive(Clone, Copy, serde::Serialize)]
#[serde(untagged)]
pub(crate) enum Name<'a> {
    Kind(ErrorKind),
    Str(&'a str),
}

impl Default for Name<'_> {
    fn default() -> Self {
        Name::Str("")
    }
}

/// The second argument of an error class's constructor.
#[derive(Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Init<'a> {
    pub kind: Name<'a>,
    pub retryable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<Name<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Attempts<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failures: Option<Attempts<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issues: Option<Issues<'a>>,
}

impl<'a> Init<'a> {
    /// The init of a provider's error: its kind, retryability, status,
    /// Retry-After and code.
    pub(crate) fn of(e: &'a ProviderError, provider: Option<&'a str>) -> Init<'a> {
        Init {
            kind: Name::Kind(e.kind),
            retryable: e.is_retryable(),
            status: e.status,
            retry_after_ms: e.retry_after.map(millis),
            code: e.code.as_deref().map(Name::Str),
            provider,
            ..Init::default()
        }
    }
}

/// A configuration's issues as `{ path, message }` objects.
#[derive(Clone, Copy)]
pub(crate) struct Issues<'a>(pub &'a [ConfigIssue]);

#[derive(serde::Serialize)]
struct Issue<'a> {
    path: &'a str,
    message: &'a str,
}

impl Serialize for Issues<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|i| Issue {
            path: &i.path,
            message: &i.message,
        }))
    }
}

/// A message's content: text-only content as one string, else its parts.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(String),
    Parts(PartsOut<'a>),
}

#[derive(serde::Serialize)]
struct JsMessage<'a> {
    role: Role,
    content: Content<'a>,
}

struct Messages<'a>(&'a [Message]);

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|m| JsMessage {
            role: m.role,
            content: if m.content.iter().all(|p| matches!(p, Part::Text { .. })) {
                Content::Text(m.joined_text())
            } else {
                Content::Parts(PartsOut(&m.content))
            },
        }))
    }
}

/// What a JS provider's `chat(request, signal)` receives: the request with
/// the entry's `model`, text-only messages as plain strings, and the
/// caller's native body when it gave one.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProviderRequest<'a> {
    model: &'a str,
    messages: Messages<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<u32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "is_no_tools")]
    tools: ToolsOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'a ToolChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<JsResponseFormat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<JsReasoning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_tier: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    native: Option<NativeOut<'a>>,
}

/// The caller's native body, as it gave it: what the neutral fields could
/// not hold is there, so a JS provider loses nothing.
#[derive(serde::Serialize)]
struct NativeOut<'a> {
    dialect: Dialect,
    body: &'a serde_json::Map<String, Value>,
    headers: Headers<'a>,
}

/// Header pairs as a `{ name: value }` object.
struct Headers<'a>(&'a [(String, String)]);

impl Serialize for Headers<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

fn is_no_tools(t: &ToolsOut<'_>) -> bool {
    t.0.is_empty()
}

impl<'a> ProviderRequest<'a> {
    pub(crate) fn new(req: &'a ChatRequest, model: &'a str) -> Self {
        ProviderRequest {
            model,
            messages: Messages(&req.messages),
            max_tokens: req.max_tokens,
            temperature: req.temperature,
            top_p: req.top_p,
            top_k: req.top_k,
            stop: &req.stop,
            tools: ToolsOut(&req.tools),
            tool_choice: req.tool_choice.as_ref(),
            parallel_tool_calls: req.parallel_tool_calls,
            response_format: req.response_format.as_ref().map(Into::into),
            reasoning: req.reasoning.as_ref().map(Into::into),
            seed: req.seed,
            frequency_penalty: req.frequency_penalty,
            presence_penalty: req.presence_penalty,
            service_tier: req.service_tier.as_deref(),
            prompt_cache_key: req.prompt_cache_key.as_deref(),
            metadata: req.metadata.as_ref(),
            native: req.native.as_deref().map(|n| NativeOut {
                dialect: n.dialect,
                body: &n.body,
                headers: Headers(&n.headers),
            }),
        }
    }
}

/// `await client.chat(…)`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChatResult<'a> {
    text: &'a str,
    model: &'a str,
    provider: &'a str,
    served_by: &'a ServedBy,
    attempts: Attempts<'a>,
    usage: Option<&'a Usage>,
    finish_reason: Option<&'a str>,
    tool_calls: &'a [ToolCall],
    thinking: &'a [Thinking],
    raw: Option<&'a crate::chat::RawJson>,
    /// What the attempts cost (`totalUsd`, `answerUsd`), `null` when no
    /// attempt reported usage of a priced model.
    cost: Option<crate::policy::price::Bill>,
}

/// `client.costs()`.
#[derive(serde::Serialize)]
pub(crate) struct CostReport {
    pub(crate) costs: Vec<crate::engine::cost::ModelCost>,
    pub(crate) spend: Vec<crate::engine::cost::SpendHealth>,
}

impl<'a> ChatResult<'a> {
    pub(crate) fn new(reply: &'a Reply, prices: &crate::policy::price::Prices) -> Self {
        let r = &reply.response;
        ChatResult {
            text: &r.text,
            model: &r.model,
            provider: &r.provider,
            served_by: &reply.served_by,
            attempts: Attempts(&reply.attempts),
            usage: r.usage.as_ref(),
            finish_reason: r.finish_reason.as_ref().map(finish_reason_name),
            tool_calls: &r.tool_calls,
            thinking: &r.thinking,
            raw: r.raw.as_ref(),
            cost: Some(prices.bill(&reply.attempts)).filter(|b| b.total.is_some()),
        }
    }
}

/// The name `client.chat` gives a finish reason.
fn finish_reason_name(r: &FinishReason) -> &str {
    match r {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(s) => s,
    }
}
