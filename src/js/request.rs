//! `client.chat(request)` / `client.stream(request)`: the request's JS
//! shape and its reading into the core's [`ChatRequest`] — either from
//! the neutral fields, or from a provider-format `native` body, which a
//! provider of that dialect is then sent as is.

use std::fmt;

use serde::de;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::chat::{ChatRequest, Dialect, JsonSchema, Message, Native, Part, Reasoning};
use crate::chat::{ResponseFormat, Role, ToolChoice};
use crate::format::{anthropic, openai};
use crate::gateway::FORWARDED_HEADERS;
use crate::issue::{ConfigError, ConfigIssue};
use crate::js::parts::{PartIn, ToolIn};

/// The request: the neutral fields in camelCase, or `native` (with at
/// most `model` beside it). `stream` is not the caller's to set.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct JsRequest {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    messages: Option<Vec<JsMessage>>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(default)]
    top_k: Option<u32>,
    #[serde(default)]
    stop: Vec<String>,
    #[serde(default)]
    tools: Vec<ToolIn>,
    #[serde(default)]
    tool_choice: Option<ToolChoice>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    #[serde(default)]
    response_format: Option<JsResponseFormat>,
    #[serde(default)]
    reasoning: Option<JsReasoning>,
    #[serde(default)]
    seed: Option<i64>,
    #[serde(default)]
    frequency_penalty: Option<f64>,
    #[serde(default)]
    presence_penalty: Option<f64>,
    #[serde(default)]
    service_tier: Option<String>,
    #[serde(default)]
    prompt_cache_key: Option<String>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    native: Option<JsNative>,
}

/// `{ role, content }`; other fields are ignored.
#[derive(Deserialize)]
struct JsMessage {
    role: Role,
    content: Content,
}

/// A message's content: a string or an array of parts.
struct Content(Vec<Part>);

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> de::Visitor<'de> for Visit {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of parts")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Content, E> {
                Ok(Content(vec![Part::text(text)]))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut parts = Vec::new();
                while let Some(p) = seq.next_element::<PartIn>()? {
                    parts.push(p.into());
                }
                Ok(Content(parts))
            }
        }
        // JSON says what it holds; anything but a string or an array is
        // refused with what it was.
        d.deserialize_any(Visit)
    }
}

/// `{ type: "text" }`, `{ type: "json_object" }` or `{ type: "json_schema",
/// name, schema, strict?, description? }`: OpenAI's `response_format` with
/// the schema's fields one level up.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum JsResponseFormat {
    Text,
    JsonObject,
    JsonSchema(JsSchema),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JsSchema {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

impl From<JsResponseFormat> for ResponseFormat {
    fn from(f: JsResponseFormat) -> Self {
        match f {
            JsResponseFormat::Text => ResponseFormat::Text,
            JsResponseFormat::JsonObject => ResponseFormat::JsonObject,
            JsResponseFormat::JsonSchema(s) => ResponseFormat::JsonSchema(JsonSchema {
                name: s.name,
                description: s.description,
                schema: s.schema,
                strict: s.strict,
            }),
        }
    }
}

impl From<&ResponseFormat> for JsResponseFormat {
    fn from(f: &ResponseFormat) -> Self {
        match f {
            ResponseFormat::Text => JsResponseFormat::Text,
            ResponseFormat::JsonObject => JsResponseFormat::JsonObject,
            ResponseFormat::JsonSchema(s) => JsResponseFormat::JsonSchema(JsSchema {
                name: s.name.clone(),
                description: s.description.clone(),
                schema: s.schema.clone(),
                strict: s.strict,
            }),
        }
    }
}

/// `{ effort }` (OpenAI's levels), `{ budgetTokens }` (a thinking budget),
/// `{ adaptive: true, effort? }` (the model decides, Anthropic's adaptive
/// thinking) or `{ disabled: true }`: exactly one.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct JsReasoning {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    budget_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    adaptive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    disabled: Option<bool>,
}

impl JsReasoning {
    fn into_neutral(self) -> Result<Reasoning, String> {
        match (
            self.effort,
            self.budget_tokens,
            self.adaptive,
            self.disabled,
        ) {
            (Some(effort), None, None, None) => Ok(Reasoning::Effort { effort }),
            (None, Some(budget_tokens), None, None) => Ok(Reasoning::Budget { budget_tokens }),
            (effort, None, Some(true), None) => Ok(Reasoning::Adaptive { effort }),
            (None, None, None, Some(true)) => Ok(Reasoning::Disabled),
            (_, _, Some(false), _) => Err("adaptive: only `true` means anything".into()),
            (None, None, None, Some(false)) => Err("disabled: only `true` means anything".into()),
            _ => Err("give one of effort, budgetTokens, adaptive (with effort), disabled".into()),
        }
    }
}

impl From<&Reasoning> for JsReasoning {
    fn from(r: &Reasoning) -> Self {
        match r {
            Reasoning::Disabled => JsReasoning {
                disabled: Some(true),
                ..JsReasoning::default()
            },
            Reasoning::Effort { effort } => JsReasoning {
                effort: Some(effort.clone()),
                ..JsReasoning::default()
            },
            Reasoning::Budget { budget_tokens } => JsReasoning {
                budget_tokens: Some(*budget_tokens),
                ..JsReasoning::default()
            },
            Reasoning::Adaptive { effort } => JsReasoning {
                adaptive: Some(true),
                effort: effort.clone(),
                ..JsReasoning::default()
            },
        }
    }
}

/// `{ dialect, body, headers? }`: the caller's own provider-format body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsNative {
    dialect: Dialect,
    body: Map<String, Value>,
    #[serde(default)]
    headers: Map<String, Value>,
}

fn issue(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        issues: vec![ConfigIssue::new(path, message)],
    }
}

impl JsRequest {
    /// The neutral request, checked beyond what serde checks.
    pub(crate) fn into_request(mut self) -> Result<ChatRequest, ConfigError> {
        let model = self.model.take();
        let mut req = match self.native.take() {
            Some(native) => {
                // One source of truth: a neutral field beside the body would
                // be sent to some entries and not to others.
                if self.messages.is_some() || !self.is_empty() {
                    return Err(issue(
                        "native",
                        "the request is read from native.body: give no other field beside it but model",
                    ));
                }
                read_native(native)?
            }
            None => self.neutral()?,
        };
        if model.is_some() {
            req.model = model;
        }
        req.stream = false;
        Ok(req)
    }

    /// Whether no field but `model`, `messages` and `native` is set.
    fn is_empty(&self) -> bool {
        let JsRequest {
            model: _,
            messages: _,
            native: _,
            max_tokens,
            temperature,
            top_p,
            top_k,
            stop,
            tools,
            tool_choice,
            parallel_tool_calls,
            response_format,
            reasoning,
            seed,
            frequency_penalty,
            presence_penalty,
            service_tier,
            prompt_cache_key,
            metadata,
            user,
        } = self;
        max_tokens.is_none()
            && temperature.is_none()
            && top_p.is_none()
            && top_k.is_none()
            && stop.is_empty()
            && tools.is_empty()
            && tool_choice.is_none()
            && parallel_tool_calls.is_none()
            && response_format.is_none()
            && reasoning.is_none()
            && seed.is_none()
            && frequency_penalty.is_none()
            && presence_penalty.is_none()
            && service_tier.is_none()
            && prompt_cache_key.is_none()
            && metadata.is_none()
            && user.is_none()
    }

    fn neutral(self) -> Result<ChatRequest, ConfigError> {
        let messages = self
            .messages
            .ok_or_else(|| issue("messages", "required (or a native body)"))?;
        let reasoning = self
            .reasoning
            .map(JsReasoning::into_neutral)
            .transpose()
            .map_err(|m| issue("reasoning", m))?;
        let metadata = match (self.metadata, self.user) {
            (m, None) => m,
            (None, Some(user)) => Some(serde_json::json!({ "user_id": user })),
            (Some(Value::Object(mut m)), Some(user)) => {
                m.insert("user_id".into(), Value::String(user));
                Some(Value::Object(m))
            }
            (Some(_), Some(_)) => {
                return Err(issue("metadata", "must be an object beside user"));
            }
        };
        Ok(ChatRequest {
            model: None,
            messages: messages
                .into_iter()
                .map(|m| Message {
                    role: m.role,
                    content: m.content.0,
                })
                .collect(),
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            top_p: self.top_p,
            stop: self.stop,
            tools: self.tools.into_iter().map(Into::into).collect(),
            tool_choice: self.tool_choice,
            stream: false,
            metadata,
            seed: self.seed,
            frequency_penalty: self.frequency_penalty,
            presence_penalty: self.presence_penalty,
            top_k: self.top_k,
            parallel_tool_calls: self.parallel_tool_calls,
            service_tier: self.service_tier,
            reasoning,
            response_format: self.response_format.map(Into::into),
            prompt_cache_key: self.prompt_cache_key,
            untranslated: Vec::new(),
            native: None,
            // `options.traceparent`, if given (`ResilientClient::call_args`).
            trace: None,
        })
    }
}

/// The neutral request read from a native body by the format crate's
/// reader of its dialect, as the gateway reads a client's, with the body
/// and its forwardable headers kept beside it.
fn read_native(native: JsNative) -> Result<ChatRequest, ConfigError> {
    let mut headers = Vec::with_capacity(native.headers.len());
    for (name, value) in native.headers {
        let path = format!("native.headers.{name}");
        let lower = name.to_ascii_lowercase();
        if !FORWARDED_HEADERS.contains(&lower.as_str()) {
            return Err(issue(
                path,
                format!(
                    "not forwarded to providers; only {} are",
                    FORWARDED_HEADERS.join(", ")
                ),
            ));
        }
        let Value::String(value) = value else {
            return Err(issue(path, "must be a string"));
        };
        headers.push((lower, value));
    }
    let body = Value::Object(native.body);
    let read = match native.dialect {
        Dialect::OpenAi => openai::request_from_value(&body),
        Dialect::Anthropic => anthropic::request_from_value(&body),
        Dialect::Responses => crate::format::responses::request_from_value(&body),
    };
    let mut req = read.map_err(|e| {
        let path = if e.path.is_empty() {
            "native.body".to_string()
        } else {
            format!("native.body.{}", e.path)
        };
        issue(path, e.message)
    })?;
    // Built as an object above, so this always holds.
    if let Value::Object(body) = body {
        req.native = Some(Box::new(Native {
            dialect: native.dialect,
            body,
            headers,
        }));
    }
    Ok(req)
}
