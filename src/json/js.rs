//! The npm package's JSON shapes (what `client.chat` resolves with, the
//! error classes' init, what a JS provider receives), written by hand.
//! Compiled for the package and for the tests that hold these writers to
//! the derived serializers they replaced.

use super::Json;
use crate::chain::{Reply, ServedBy};
use crate::chat::{ChatRequest, Delta, FinishReason, Part, Role, Tool, ToolCall, ToolChoice};
use crate::config::ConfigIssue;
use crate::error::{Attempt, AttemptOutcome, ProviderError};
use crate::event::Event;
use crate::platform::millis;

/// One attempt, as `result.attempts[i]` and `error.failures[i]` show it.
pub(crate) fn attempt(j: &mut Json, a: &Attempt) {
    let error = match &a.outcome {
        AttemptOutcome::Success => None,
        AttemptOutcome::Failure { error } => Some(error),
    };
    j.open()
        .s("provider", &a.provider)
        .s("model", &a.model)
        .n("attempt", a.number.into())
        .b("ok", error.is_none());
    if let Some(e) = error {
        j.s("kind", e.kind.name())
            .some_n("status", e.status.map(u64::from))
            .some_s("code", e.code.as_deref())
            .s("message", &e.message)
            .some_n("retryAfterMs", e.retry_after.map(millis))
            .b("retryable", e.is_retryable());
    }
    j.n("durationMs", millis(a.duration))
        .n("startedAt", a.started_at)
        .b("reached", a.reached)
        .close();
}

/// `"key":[attempt, …]`.
fn attempts(j: &mut Json, key: &str, list: &[Attempt]) {
    j.key(key).open_array();
    for a in list {
        attempt(j, a);
    }
    j.close_array();
}

/// The second argument of an error class's constructor.
#[derive(Default)]
pub(crate) struct Init<'a> {
    pub kind: &'a str,
    pub retryable: bool,
    pub status: Option<u16>,
    pub retry_after_ms: Option<u64>,
    pub code: Option<&'a str>,
    pub provider: Option<&'a str>,
    pub attempts: Option<&'a [Attempt]>,
    pub failures: Option<&'a [Attempt]>,
    pub issues: Option<&'a [ConfigIssue]>,
}

impl Init<'_> {
    /// The init of a provider's error: its kind, retryability, status, Retry-After and code.
    pub(crate) fn of<'a>(e: &'a ProviderError, provider: Option<&'a str>) -> Init<'a> {
        Init {
            kind: e.kind.name(),
            retryable: e.is_retryable(),
            status: e.status,
            retry_after_ms: e.retry_after.map(millis),
            code: e.code.as_deref(),
            provider,
            ..Init::default()
        }
    }

    pub(crate) fn write(&self, j: &mut Json) {
        j.open()
            .s("kind", self.kind)
            .b("retryable", self.retryable)
            .some_n("status", self.status.map(u64::from))
            .some_n("retryAfterMs", self.retry_after_ms)
            .some_s("code", self.code)
            .some_s("provider", self.provider);
        if let Some(list) = self.attempts {
            attempts(j, "attempts", list);
        }
        if let Some(list) = self.failures {
            attempts(j, "failures", list);
        }
        if let Some(issues) = self.issues {
            j.key("issues").open_array();
            for i in issues {
                j.open().s("path", &i.path).s("message", &i.message).close();
            }
            j.close_array();
        }
        j.close();
    }
}

/// The name `client.chat` gives a finish reason.
pub(crate) fn finish_reason_name(r: &FinishReason) -> &str {
    match r {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(s) => s,
    }
}

/// `await client.chat(…)`.
pub(crate) fn chat_result(j: &mut Json, reply: &Reply) {
    let r = &reply.response;
    j.open()
        .s("text", &r.text)
        .s("model", &r.model)
        .s("provider", &r.provider)
        .key("servedBy");
    reply.served_by.write_json(j);
    attempts(j, "attempts", &reply.attempts);
    j.key("usage");
    match &r.usage {
        Some(u) => u.write_json(j),
        None => {
            j.null();
        }
    }
    j.opt_s(
        "finishReason",
        r.finish_reason.as_ref().map(finish_reason_name),
    )
    .key("toolCalls")
    .open_array();
    for c in &r.tool_calls {
        c.write_json(j);
    }
    j.close_array().key("raw").value(&r.raw).close();
}

/// What a JS provider's `chat(request, signal)` receives: the request with
/// the entry's `model`, and text-only messages as plain strings.
pub(crate) fn provider_request(j: &mut Json, req: &ChatRequest, model: &str) {
    j.open().s("model", model).key("messages").open_array();
    for m in &req.messages {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        j.open().s("role", role).key("content");
        if m.content.iter().all(|p| matches!(p, Part::Text { .. })) {
            j.str(&m.joined_text());
        } else {
            j.open_array();
            for p in &m.content {
                p.write_json(j);
            }
            j.close_array();
        }
        j.close();
    }
    j.close_array()
        .some_n("maxTokens", req.max_tokens.map(u64::from));
    for (key, x) in [("temperature", req.temperature), ("topP", req.top_p)] {
        if let Some(x) = x {
            j.key(key).f64(x);
        }
    }
    if !req.stop.is_empty() {
        j.key("stop").open_array();
        for s in &req.stop {
            j.str(s);
        }
        j.close_array();
    }
    if !req.tools.is_empty() {
        j.key("tools").open_array();
        for t in &req.tools {
            t.write_json(j);
        }
        j.close_array();
    }
    if let Some(c) = &req.tool_choice {
        j.key("toolChoice");
        c.write_json(j);
    }
    if let Some(m) = &req.metadata {
        j.key("metadata").value(m);
    }
    j.close();
}

impl ToolCall {
    pub(crate) fn write_json(&self, j: &mut Json) {
        j.open();
        self.write_fields(j);
        j.close();
    }

    fn write_fields(&self, j: &mut Json) {
        j.s("id", &self.id)
            .s("name", &self.name)
            .s("arguments", &self.arguments);
    }
}

impl Part {
    pub(crate) fn write_json(&self, j: &mut Json) {
        j.open();
        match self {
            Part::Text { text } => {
                j.s("type", "text").s("text", text);
            }
            Part::ToolCall(c) => {
                j.s("type", "tool_call");
                c.write_fields(j);
            }
            Part::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => {
                j.s("type", "tool_result")
                    .s("tool_call_id", tool_call_id)
                    .s("content", content);
                if *is_error {
                    j.b("is_error", true);
                }
            }
        }
        j.close();
    }
}

impl Tool {
    pub(crate) fn write_json(&self, j: &mut Json) {
        j.open()
            .s("name", &self.name)
            .some_s("description", self.description.as_deref())
            .key("parameters")
            .value(&self.parameters)
            .close();
    }
}

impl ToolChoice {
    pub(crate) fn write_json(&self, j: &mut Json) {
        j.open();
        match self {
            ToolChoice::Auto => j.s("type", "auto"),
            ToolChoice::None => j.s("type", "none"),
            ToolChoice::Required => j.s("type", "required"),
            ToolChoice::Tool(name) => j.s("type", "tool").s("name", name),
        };
        j.close();
    }
}

impl FinishReason {
    pub(crate) fn write_json(&self, j: &mut Json) {
        match self {
            FinishReason::Stop => j.str("stop"),
            FinishReason::Length => j.str("length"),
            FinishReason::ToolCalls => j.str("tool_calls"),
            FinishReason::ContentFilter => j.str("content_filter"),
            FinishReason::Other(s) => j.open().s("other", s).close(),
        };
    }
}

impl Delta {
    pub(crate) fn write_json(&self, j: &mut Json) {
        j.open();
        match self {
            Delta::Start { model } => {
                j.s("type", "start").opt_s("model", model.as_deref());
            }
            Delta::Text { text } => {
                j.s("type", "text").s("text", text);
            }
            Delta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                j.s("type", "tool_call")
                    .n("index", (*index).into())
                    .opt_s("id", id.as_deref())
                    .opt_s("name", name.as_deref())
                    .s("arguments", arguments);
            }
            Delta::Finish { reason } => {
                j.s("type", "finish").key("reason");
                reason.write_json(j);
            }
            Delta::Usage { usage } => {
                j.s("type", "usage").key("usage");
                usage.write_json(j);
            }
            Delta::Done => {
                j.s("type", "done");
            }
        }
        j.close();
    }
}

impl ServedBy {
    pub(crate) fn write_json(&self, j: &mut Json) {
        j.open()
            .s("provider", &self.provider)
            .s("model", &self.model)
            .opt_s("label", self.label.as_deref())
            .close();
    }
}

impl Event<'_> {
    pub(crate) fn write_json(&self, j: &mut Json) {
        j.open();
        let error = match self {
            Event::Retry {
                provider,
                model,
                attempt,
                delay,
                error,
            } => {
                j.s("type", "retry")
                    .s("provider", provider)
                    .s("model", model)
                    .n("attempt", (*attempt).into())
                    .n("delayMs", millis(*delay));
                Some(error)
            }
            Event::ProviderFailed {
                provider,
                model,
                error,
            } => {
                j.s("type", "provider_failed")
                    .s("provider", provider)
                    .s("model", model);
                Some(error)
            }
            Event::Failover { from, to, error } => {
                j.s("type", "failover").s("from", from).s("to", to);
                Some(error)
            }
            Event::Breaker { provider, from, to } => {
                j.s("type", "breaker")
                    .s("provider", provider)
                    .s("from", from.wire())
                    .s("to", to.wire());
                None
            }
            Event::MalformedChunk { provider, error } => {
                j.s("type", "malformed_chunk").s("provider", provider);
                Some(error)
            }
            Event::BudgetExhausted { provider } => {
                j.s("type", "budget_exhausted").s("provider", provider);
                None
            }
        };
        if let Some(e) = error {
            j.key("error");
            e.write_json(j);
        }
        j.close();
    }
}
