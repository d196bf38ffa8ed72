//! The npm package's JSON shapes (what `client.chat` resolves with, the
//! error classes' init, what a JS provider receives), written by hand; and
//! what it reads (requests, JS providers' answers), read by hand.
//! Compiled for the package and for the tests that hold these writers to
//! the derived serializers they replaced.

use serde_json::Value;

use super::Json;
use crate::chain::{Reply, ServedBy};
use crate::chat::{ChatRequest, Delta, FinishReason, Part, Role, Tool, ToolCall, ToolChoice};
use crate::chat::{ChatResponse, Message, Usage};
use crate::config::read::{invalid_type, Node, Shape, R};
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
    j.close_array()
        .key("raw")
        .value(&r.raw_value().unwrap_or_default())
        .close();
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

// ------------------------------------------------------------------ reading

/// `client.chat(request)`: the articles' request, plus the core's options.
pub(crate) fn read_request(n: &Node<'_>) -> R<ChatRequest> {
    const SHAPE: Shape = Shape {
        name: "struct JsRequest",
        fields: &[
            "model",
            "messages",
            "maxTokens",
            "temperature",
            "topP",
            "stop",
            "tools",
            "toolChoice",
            "metadata",
        ],
        required: 0b10,
        defaulted: !0b10,
        deny_unknown: true,
        skip: None,
    };
    let mut r = ChatRequest::default();
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => r.model = v.opt_string()?,
            1 => v.seq(&mut |_, m| {
                r.messages.push(read_message(m)?);
                Ok(())
            })?,
            2 => r.max_tokens = v.opt(Node::u32)?,
            3 => r.temperature = v.opt(Node::f64)?,
            4 => r.top_p = v.opt(Node::f64)?,
            5 => r.stop = v.strings()?,
            6 => v.seq(&mut |_, t| {
                r.tools.push(read_tool(t)?);
                Ok(())
            })?,
            7 => r.tool_choice = v.opt(read_tool_choice)?,
            _ => r.metadata = v.opt(|v| Ok(v.to_value()))?,
        }
        Ok(())
    })?;
    Ok(r)
}

/// `{ role, content }`, the content a string or parts.
pub(crate) fn read_message(n: &Node<'_>) -> R<Message> {
    const SHAPE: Shape = Shape {
        name: "struct JsMessage",
        fields: &["role", "content"],
        required: 0b11,
        defaulted: 0,
        deny_unknown: false,
        skip: None,
    };
    let mut m = Message {
        role: Role::User,
        content: Vec::new(),
    };
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => {
                const ROLES: [Role; 4] = [Role::System, Role::User, Role::Assistant, Role::Tool];
                m.role = ROLES[v.variant(&["system", "user", "assistant", "tool"])?];
            }
            _ => match v {
                Node::Str(text) => {
                    m.content = vec![Part::Text {
                        text: text.to_string(),
                    }]
                }
                Node::Seq(_) => v.seq(&mut |_, p| {
                    m.content.push(read_part(p)?);
                    Ok(())
                })?,
                _ => return Err(invalid_type(v, "a string or an array of parts")),
            },
        }
        Ok(())
    })?;
    Ok(m)
}

/// A part, tagged by `type`.
pub(crate) fn read_part(n: &Node<'_>) -> R<Part> {
    const TEXT: Shape = Shape {
        name: "struct variant Part::Text",
        fields: &["text"],
        required: 1,
        defaulted: 0,
        deny_unknown: false,
        skip: Some("type"),
    };
    const RESULT: Shape = Shape {
        name: "struct variant Part::ToolResult",
        fields: &["tool_call_id", "content", "is_error"],
        required: 0b11,
        defaulted: 0b100,
        deny_unknown: false,
        skip: Some("type"),
    };
    Ok(
        match n.tag(
            "type",
            &["text", "tool_call", "tool_result"],
            "internally tagged enum Part",
        )? {
            0 => {
                let mut text = String::new();
                n.fields(&TEXT, &mut |_, v| {
                    text = v.string()?;
                    Ok(())
                })?;
                Part::Text { text }
            }
            1 => Part::ToolCall(read_tool_call_in(n, Some("type"))?),
            _ => {
                let (mut id, mut content, mut is_error) = (String::new(), String::new(), false);
                n.fields(&RESULT, &mut |i, v| {
                    match i {
                        0 => id = v.string()?,
                        1 => content = v.string()?,
                        _ => is_error = v.bool()?,
                    }
                    Ok(())
                })?;
                Part::ToolResult {
                    tool_call_id: id,
                    content,
                    is_error,
                }
            }
        },
    )
}

pub(crate) fn read_tool_call(n: &Node<'_>) -> R<ToolCall> {
    read_tool_call_in(n, None)
}

/// `{ id, name, arguments }`; `skip` is the tag of the part holding it.
fn read_tool_call_in(n: &Node<'_>, skip: Option<&'static str>) -> R<ToolCall> {
    let shape = Shape {
        name: "struct ToolCall",
        fields: &["id", "name", "arguments"],
        required: 0b111,
        defaulted: 0,
        deny_unknown: false,
        skip,
    };
    let mut c = ToolCall {
        id: String::new(),
        name: String::new(),
        arguments: String::new(),
    };
    n.fields(&shape, &mut |i, v| {
        *[&mut c.id, &mut c.name, &mut c.arguments][i] = v.string()?;
        Ok(())
    })?;
    Ok(c)
}

/// `{ name, description?, parameters }`.
pub(crate) fn read_tool(n: &Node<'_>) -> R<Tool> {
    const SHAPE: Shape = Shape {
        name: "struct Tool",
        fields: &["name", "description", "parameters"],
        required: 0b101,
        defaulted: 0b010,
        deny_unknown: false,
        skip: None,
    };
    let mut t = Tool {
        name: String::new(),
        description: None,
        parameters: Value::Null,
    };
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => t.name = v.string()?,
            1 => t.description = v.opt_string()?,
            _ => t.parameters = v.to_value(),
        }
        Ok(())
    })?;
    Ok(t)
}

/// `{ type: "auto" | "none" | "required" }` or `{ type: "tool", name }`.
pub(crate) fn read_tool_choice(n: &Node<'_>) -> R<ToolChoice> {
    const SHAPE: Shape = Shape {
        name: "adjacently tagged enum ToolChoice",
        fields: &["name"],
        required: 0,
        defaulted: 0,
        deny_unknown: false,
        skip: Some("type"),
    };
    const UNITS: [&str; 3] = [
        "unit variant ToolChoice::Auto",
        "unit variant ToolChoice::None",
        "unit variant ToolChoice::Required",
    ];
    let variant = n.tag(
        "type",
        &["auto", "none", "required", "tool"],
        "adjacently tagged enum ToolChoice",
    )?;
    // The content: a unit variant's must be absent or null, the tool's name
    // is required.
    let mut name = None;
    n.fields(&SHAPE, &mut |_, v| {
        match UNITS.get(variant) {
            Some(unit) if !v.is_null() => return Err(invalid_type(v, unit)),
            Some(_) => {}
            None => name = Some(v.string()?),
        }
        Ok(())
    })?;
    Ok(match variant {
        0 => ToolChoice::Auto,
        1 => ToolChoice::None,
        2 => ToolChoice::Required,
        _ => ToolChoice::Tool(name.ok_or_else(|| crate::config::read::missing_field("name"))?),
    })
}

/// Token counts: `{ inputTokens, outputTokens }`.
pub(crate) fn read_usage(n: &Node<'_>) -> R<Usage> {
    const SHAPE: Shape = Shape {
        name: "struct Usage",
        fields: &["inputTokens", "outputTokens"],
        required: 0b11,
        defaulted: 0,
        deny_unknown: false,
        skip: None,
    };
    let mut u = Usage::default();
    n.fields(&SHAPE, &mut |i, v| {
        *[&mut u.input_tokens, &mut u.output_tokens][i] = v.u64()?;
        Ok(())
    })?;
    Ok(u)
}

/// What a JS provider resolves with: the articles' `{ text, model }`, plus
/// optional tool calls, finish reason and usage. Other fields (`provider`,
/// `raw`) are allowed; `raw` is kept when it is JSON.
pub(crate) fn read_response(n: &Node<'_>) -> R<(ChatResponse, Option<String>)> {
    const SHAPE: Shape = Shape {
        name: "struct ProviderResponse",
        fields: &RESPONSE_FIELDS,
        required: 0,
        defaulted: !0,
        deny_unknown: false,
        skip: None,
    };
    let mut model = None;
    let mut r = ChatResponse {
        text: String::new(),
        tool_calls: Vec::new(),
        model: String::new(),
        provider: String::new(),
        finish_reason: None,
        usage: None,
        raw: None,
    };
    n.fields(&SHAPE, &mut |i, v| {
        match i {
            0 => r.text = v.string()?,
            1 => model = v.opt_string()?,
            2 => v.seq(&mut |_, c| {
                r.tool_calls.push(read_tool_call(c)?);
                Ok(())
            })?,
            3 => r.finish_reason = v.opt(|v| v.str().map(finish_reason))?,
            _ => r.usage = v.opt(read_usage)?,
        }
        Ok(())
    })?;
    Ok((r, model))
}

pub(crate) const RESPONSE_FIELDS: [&str; 5] =
    ["text", "model", "toolCalls", "finishReason", "usage"];

pub(crate) fn finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "tool_use" => FinishReason::ToolCalls,
        "content_filter" | "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// The readers against the derived `Deserialize` impls they replaced,
/// through the same tree (what `parse_json` gave the package): the same
/// value, or the same first mistake. Inside a tagged part the hand-written
/// path may be longer: it names the field.
#[cfg(test)]
mod reading {
    use serde::Deserialize;
    use serde_json::Value;

    use crate::chat::{ChatRequest, Message, Part, Role, Tool, ToolChoice};
    use crate::config::path::from_str;
    use crate::config::read::read_json;

    /// A message's content, as the package read it.
    #[derive(Debug)]
    enum Content {
        Text(String),
        Parts(Vec<Part>),
    }

    impl<'de> Deserialize<'de> for Content {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Content;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a string or an array of parts")
                }
                fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Content, E> {
                    Ok(Content::Text(s.to_string()))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<Content, A::Error> {
                    let mut parts = Vec::new();
                    while let Some(p) = seq.next_element::<Part>()? {
                        parts.push(p);
                    }
                    Ok(Content::Parts(parts))
                }
            }
            d.deserialize_any(V)
        }
    }

    #[derive(Debug, Deserialize)]
    struct JsMessage {
        role: Role,
        content: Content,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct JsRequest {
        #[serde(default)]
        model: Option<String>,
        messages: Vec<JsMessage>,
        #[serde(default)]
        max_tokens: Option<u32>,
        #[serde(default)]
        temperature: Option<f64>,
        #[serde(default)]
        top_p: Option<f64>,
        #[serde(default)]
        stop: Vec<String>,
        #[serde(default)]
        tools: Vec<Tool>,
        #[serde(default)]
        tool_choice: Option<ToolChoice>,
        #[serde(default)]
        metadata: Option<Value>,
    }

    impl From<JsRequest> for ChatRequest {
        fn from(r: JsRequest) -> Self {
            ChatRequest {
                model: r.model,
                messages: r
                    .messages
                    .into_iter()
                    .map(|m| Message {
                        role: m.role,
                        content: match m.content {
                            Content::Text(text) => vec![Part::Text { text }],
                            Content::Parts(parts) => parts,
                        },
                    })
                    .collect(),
                max_tokens: r.max_tokens,
                temperature: r.temperature,
                top_p: r.top_p,
                stop: r.stop,
                tools: r.tools,
                tool_choice: r.tool_choice,
                stream: false,
                metadata: r.metadata,
            }
        }
    }

    fn same_request(json: &str) {
        let derived = from_str::<JsRequest>(json).map(ChatRequest::from);
        let by_hand = read_json(json, super::read_request);
        match (&derived, &by_hand) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{json}"),
            (Err((pa, ma)), Err((pb, mb))) => {
                assert_eq!(ma, mb, "{json}");
                assert!(pb.starts_with(pa.as_str()), "{json}: {pa} vs {pb}");
            }
            _ => panic!("{json}: derived {derived:?}, by hand {by_hand:?}"),
        }
    }

    #[test]
    fn requests_read_as_derived() {
        for json in [
            r#"{"messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"m","messages":[{"role":"system","content":"s"},{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_call","id":"c","name":"f","arguments":"{}"}]},{"role":"tool","content":[{"type":"tool_result","tool_call_id":"c","content":"ok","is_error":true},{"type":"tool_result","tool_call_id":"d","content":"ok","extra":1}]}],"maxTokens":5,"temperature":0.5,"topP":1,"stop":["x"],"tools":[{"name":"f","parameters":{"type":"object"}},{"name":"g","description":"d","parameters":null,"x":1}],"toolChoice":{"type":"tool","name":"f"},"metadata":{"user_id":"u"}}"#,
            r#"{"messages":[],"toolChoice":{"type":"auto"},"metadata":null,"model":null}"#,
            r#"{"messages":[],"toolChoice":{"type":"none","x":1}}"#,
            r#"{"messages":[],"toolChoice":{"type":"required"}}"#,
            r#"{"messages":[{"role":{"user":null},"content":[]}]}"#,
            r#"{"messages":[{"content":"x","role":"user","name":"n"}]}"#,
            r#"{"messages":[["user","hi"]]}"#,
        ] {
            assert!(read_json(json, super::read_request).is_ok(), "{json}");
            same_request(json);
        }
        for json in [
            "{}",
            "[]",
            "null",
            r#"{"messages":{}}"#,
            r#"{"messages":[{"role":"admin","content":"x"}]}"#,
            r#"{"messages":[{"role":"user","content":42}]}"#,
            r#"{"messages":[{"role":"user"}]}"#,
            r#"{"messages":[{"content":"x"}]}"#,
            r#"{"messages":[{"role":"user","content":[{"text":"x"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"image","url":"x"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"text"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"tool_call","id":"c"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"tool_result","tool_call_id":"c","content":"x","is_error":"no"}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a","type":"text"}]}]}"#,
            r#"{"messages":[{"role":"user","content":["x"]}]}"#,
            r#"{"messages":[],"maxTokens":-1}"#,
            r#"{"messages":[],"maxTokens":1.5}"#,
            r#"{"messages":[],"temperature":"hot"}"#,
            r#"{"messages":[],"stop":"x"}"#,
            r#"{"messages":[],"stop":[1]}"#,
            r#"{"messages":[],"tools":[{"name":"f"}]}"#,
            r#"{"messages":[],"tools":[{"parameters":{}}]}"#,
            r#"{"messages":[],"tools":[{"name":1,"parameters":{}}]}"#,
            r#"{"messages":[],"toolChoice":"auto"}"#,
            r#"{"messages":[],"toolChoice":{"type":"any"}}"#,
            r#"{"messages":[],"toolChoice":{"type":"tool"}}"#,
            r#"{"messages":[],"toolChoice":{"type":"tool","name":1}}"#,
            r#"{"messages":[],"toolChoice":{"name":"f"}}"#,
            r#"{"messages":[],"bogus":1}"#,
            r#"{"messages":[],"messages":[]}"#,
            r#"{"messages":[],"stream":true}"#,
        ] {
            assert!(read_json(json, super::read_request).is_err(), "{json}");
            same_request(json);
        }
        for json in [
            r#"{"messages":[],"toolChoice":{"type":"auto","name":"x"}}"#,
            r#"{"messages":[],"toolChoice":{"type":"auto","name":null}}"#,
            r#"{"messages":[],"toolChoice":{"name":"f","type":"tool"}}"#,
            r#"{"messages":[],"toolChoice":["tool","f"]}"#,
            r#"{"messages":[],"toolChoice":{"type":"tool","name":"f","name":"g"}}"#,
            r#"{"messages":[],"toolChoice":{"type":"tool","name":null}}"#,
            r#"{"messages":[],"toolChoice":{"type":"tool","name":"f","x":1}}"#,
            r#"{"messages":[],"toolChoice":{"type":"auto","type":"auto"}}"#,
        ] {
            same_request(json);
        }
    }

    /// What a JS provider resolved with, as the package read it.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ProviderResponse {
        #[serde(default)]
        text: String,
        #[serde(default)]
        model: Option<String>,
        #[serde(default)]
        tool_calls: Vec<crate::chat::ToolCall>,
        #[serde(default)]
        finish_reason: Option<String>,
        #[serde(default)]
        usage: Option<crate::chat::Usage>,
    }

    #[test]
    fn providers_answers_read_as_derived() {
        for json in [
            "{}",
            r#"{"text":"hi","model":"m","toolCalls":[{"id":"c","name":"f","arguments":"{}"}],"finishReason":"tool_use","usage":{"inputTokens":1,"outputTokens":2}}"#,
            r#"{"text":"hi","finishReason":"weird","usage":null,"model":null}"#,
            r#"{"text":5}"#,
            r#"{"toolCalls":[{"id":"c"}]}"#,
            r#"{"usage":{"inputTokens":1}}"#,
            r#"{"usage":{"inputTokens":-1,"outputTokens":2}}"#,
            r#"{"finishReason":1}"#,
            "[]",
            r#"["t","m"]"#,
        ] {
            let derived = from_str::<ProviderResponse>(json).map(|r| {
                (
                    r.text,
                    r.model,
                    r.tool_calls,
                    r.finish_reason.map(|f| super::finish_reason(&f)),
                    r.usage,
                )
            });
            let by_hand = read_json(json, super::read_response)
                .map(|(r, model)| (r.text, model, r.tool_calls, r.finish_reason, r.usage));
            assert_eq!(derived, by_hand, "{json}");
        }
    }
}
