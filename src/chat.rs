//! The provider-neutral chat request and response.
//!
//! Adapters translate these to and from each provider's wire format; the
//! Worker and the npm package translate the client's format into them.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The human side of the conversation.
    User,
    /// The model's earlier turns (and prefill).
    Assistant,
    /// The result of a tool call.
    Tool,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
        /// A prompt-cache breakpoint after this part, as the client wrote
        /// it (Anthropic's `{"type": "ephemeral", "ttl": …}`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<Value>,
    },
    /// An image, in a user message or a tool result.
    Image(Image),
    /// A tool call made by the assistant.
    ToolCall(ToolCall),
    /// The answer to an earlier tool call.
    ToolResult {
        /// The id of the call this answers.
        tool_call_id: String,
        /// The tool's output as text.
        content: String,
        /// Images the tool returned beside its text.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
        /// Whether the tool failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        /// A prompt-cache breakpoint after this result.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<Value>,
    },
    /// The model's reasoning in an earlier assistant turn, sent back so a
    /// provider that signed it can go on from it.
    Thinking(Thinking),
}

impl Part {
    /// A text part without a cache breakpoint.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text {
            text: text.into(),
            cache_control: None,
        }
    }
}

/// An image and where its bytes are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// The bytes, or where to fetch them.
    pub source: ImageSource,
    /// OpenAI's `detail` (`low`, `high`, `auto`), where the client set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// A prompt-cache breakpoint after this image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<Value>,
}

/// Where an image's bytes are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSource {
    /// Inline: base64 `data` of `media_type` (`image/png`, …).
    Base64 {
        /// The MIME type.
        media_type: String,
        /// The bytes in base64.
        data: String,
    },
    /// An http(s) URL the provider fetches.
    Url {
        /// The URL.
        url: String,
    },
}

/// A block of the model's reasoning. Anthropic signs each block; the
/// signature (or the encrypted `redacted` data) must come back unchanged
/// for a later turn to be accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thinking {
    /// The reasoning text (empty for a redacted block).
    #[serde(default)]
    pub text: String,
    /// The provider's signature of the block, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Anthropic's `redacted_thinking` data: encrypted reasoning, no text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<String>,
}

/// A message: a role and its parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Text, tool calls and tool results, in order.
    pub content: Vec<Part>,
}

impl Message {
    /// A message holding only `text`.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            content: vec![Part::text(text)],
        }
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::text(Role::System, text)
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::text(Role::User, text)
    }

    /// An assistant message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::text(Role::Assistant, text)
    }

    /// The text parts joined together.
    pub fn joined_text(&self) -> String {
        self.content
            .iter()
            .filter_map(|p| match p {
                Part::Text { text, .. } => Some(text.as_str()),
                Part::Image(_)
                | Part::ToolCall(_)
                | Part::ToolResult { .. }
                | Part::Thinking(_) => None,
            })
            .collect()
    }
}

/// A tool call: the model asks the caller to run `name` with `arguments`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call, echoed back in the tool result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as a JSON text (OpenAI's representation).
    pub arguments: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments, passed through as is.
    pub parameters: Value,
    /// A prompt-cache breakpoint after this tool's definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<Value>,
}

/// How the model may use tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "name", rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// A call to this tool.
    Tool(String),
}

/// A wire format that clients and providers both speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dialect {
    /// OpenAI Chat Completions (`/v1/chat/completions`).
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages (`/v1/messages`).
    #[serde(rename = "anthropic")]
    Anthropic,
    /// OpenAI Responses (`/v1/responses`): a client format, passed through
    /// to the providers that speak it.
    #[serde(rename = "responses")]
    Responses,
}

/// The client's request as it sent it, kept beside its neutral reading: a
/// provider that speaks the same dialect is sent this body (every field,
/// known, unknown and future), not a translation of the neutral one.
#[derive(Debug, Clone, PartialEq)]
pub struct Native {
    /// The dialect the body is written in.
    pub dialect: Dialect,
    /// The body's top-level object.
    pub body: serde_json::Map<String, Value>,
    /// Request headers meant for the provider (lower-case names), from the
    /// gateway's allow-list; never the client's credentials.
    pub headers: Vec<(String, String)>,
}

/// A chat request, independent of any provider's format.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatRequest {
    /// The route or model the caller asked for. Each chain entry sends its
    /// own model; this is the caller's name for the route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The conversation, system messages included.
    pub messages: Vec<Message>,
    /// Output token limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    /// How the model may use the tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Whether the caller wants a stream.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    /// Caller metadata, passed through where the provider accepts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Sampling seed (OpenAI dialect only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Frequency penalty (OpenAI dialect only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// Presence penalty (OpenAI dialect only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// Top-k sampling (Anthropic dialect only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// Whether the model may call several tools in one turn (`None`: the
    /// provider's default, which is yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// The service tier, in the client's words (`auto`, `default`, `flex`,
    /// `priority` from OpenAI clients; `auto`, `standard_only` from
    /// Anthropic ones); each encoder maps or omits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
    /// How much the model should reason before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
    /// The shape the answer must take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// OpenAI's `prompt_cache_key` (OpenAI dialect only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    /// What the client sent that the neutral request does not hold: an
    /// encoder for another dialect refuses or omits each, by its gap.
    #[serde(skip)]
    pub untranslated: Vec<Untranslated>,
    /// The client's own body, when it came in a provider dialect.
    #[serde(skip)]
    pub native: Option<Box<Native>>,
    /// Where the request's work sits in a trace: each attempt sends its
    /// provider a `traceparent` naming a span of its own under it (`None`:
    /// none is sent).
    #[serde(skip)]
    pub trace: Option<crate::trace::TraceParent>,
}

/// How much the model should reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reasoning {
    /// No reasoning (Anthropic `thinking: {"type": "disabled"}`, OpenAI
    /// `reasoning_effort: "none"`).
    Disabled,
    /// OpenAI's `reasoning_effort`: `minimal`, `low`, `medium`, `high`, or
    /// a level this crate does not know, kept as sent.
    Effort {
        /// The level.
        effort: String,
    },
    /// Anthropic's `thinking: {"type": "enabled", "budget_tokens"}`.
    Budget {
        /// Tokens the model may spend thinking.
        budget_tokens: u32,
    },
    /// Anthropic's `thinking: {"type": "adaptive"}`: the model decides
    /// whether and how much to think, at `effort` (`output_config.effort`)
    /// when one is given.
    Adaptive {
        /// The effort level, as sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effort: Option<String>,
    },
}

/// The shape of the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Free text (the default).
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON matching a schema.
    JsonSchema(JsonSchema),
}

/// A named JSON Schema the answer must match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonSchema {
    /// The schema's name (a tool name where a forced tool carries it).
    pub name: String,
    /// What the schema is for, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The schema.
    pub schema: Value,
    /// OpenAI's `strict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// A piece of the client's request with no place in the neutral request.
#[derive(Debug, Clone, PartialEq)]
pub struct Untranslated {
    /// Where it was, as `messages[1].content[0]` or `logprobs`.
    pub path: String,
    /// Why it is not translated.
    pub gap: Gap,
    /// The dialect it was written in.
    pub dialect: Dialect,
    /// A top-level field's value, which an encoder of the same dialect
    /// sends as it came (`None` for a piece inside the messages or tools).
    pub value: Option<Value>,
}

/// Why a piece of a request is not translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gap {
    /// A field or content part this crate does not know: refused by an
    /// encoder for another dialect.
    Unknown,
    /// Known, but it changes the answer and the other dialect has no
    /// equivalent (`n > 1`, `logprobs`, server tools, …): refused.
    NoEquivalent,
    /// Known, only tunes or labels the request (`store`, `verbosity`, …),
    /// and the other dialect has no equivalent: left out, and named in the
    /// encoder's `omitted` list.
    Hint,
}

/// A request's hints that some provider has no setting for: an encoder
/// that cannot give one leaves it out and names it in the attempt's
/// omitted fields (`x-omitted-fields`), by its OpenAI name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hint {
    TopK,
    Seed,
    FrequencyPenalty,
    PresencePenalty,
    Metadata,
    ParallelToolCalls,
    ServiceTier,
    Reasoning,
    PromptCacheKey,
}

impl Hint {
    /// The field's name in the OpenAI format.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Hint::TopK => "top_k",
            Hint::Seed => "seed",
            Hint::FrequencyPenalty => "frequency_penalty",
            Hint::PresencePenalty => "presence_penalty",
            Hint::Metadata => "metadata",
            Hint::ParallelToolCalls => "parallel_tool_calls",
            Hint::ServiceTier => "service_tier",
            Hint::Reasoning => "reasoning",
            Hint::PromptCacheKey => "prompt_cache_key",
        }
    }
}

impl ChatRequest {
    /// The hints this request sets, always in the order above; an encoder
    /// keeps those it cannot give ([`ChatRequest::omitted_hints`]).
    pub(crate) fn hints(&self) -> impl Iterator<Item = Hint> + '_ {
        [
            (Hint::TopK, self.top_k.is_some()),
            (Hint::Seed, self.seed.is_some()),
            (Hint::FrequencyPenalty, self.frequency_penalty.is_some()),
            (Hint::PresencePenalty, self.presence_penalty.is_some()),
            (Hint::Metadata, self.metadata.is_some()),
            (Hint::ParallelToolCalls, self.parallel_tool_calls.is_some()),
            (Hint::ServiceTier, self.service_tier.is_some()),
            (Hint::Reasoning, self.reasoning.is_some()),
            (Hint::PromptCacheKey, self.prompt_cache_key.is_some()),
        ]
        .into_iter()
        .filter_map(|(hint, set)| set.then_some(hint))
    }

    /// The names of the hints this request sets among `lacking` (those an
    /// encoder has no setting for), for its omitted fields.
    pub(crate) fn omitted_hints<'a>(
        &'a self,
        lacking: &'a [Hint],
    ) -> impl Iterator<Item = String> + 'a {
        self.hints()
            .filter(|h| lacking.contains(h))
            .map(|h| h.name().to_owned())
    }

    /// A request with these messages and nothing else set.
    pub fn new(messages: Vec<Message>) -> Self {
        ChatRequest {
            messages,
            ..Default::default()
        }
    }

    /// Whether a provider speaking `dialect` is sent the client's own body
    /// rather than a translation of the neutral request: when it speaks the
    /// body's dialect.
    pub fn sends_native(&self, dialect: Option<Dialect>) -> bool {
        dialect.is_some() && self.native.as_ref().map(|n| n.dialect) == dialect
    }

    /// Whether the client asked for token counts at the end of a stream:
    /// an Anthropic or Responses client always gets them (in
    /// `message_delta`, `response.completed`), an OpenAI client when it set
    /// `stream_options.include_usage`. Adapters then ask the provider for
    /// them whatever their own default.
    pub fn wants_usage(&self) -> bool {
        match self.native.as_deref() {
            Some(n) if matches!(n.dialect, Dialect::Anthropic | Dialect::Responses) => true,
            Some(n) => n
                .body
                .get("stream_options")
                .and_then(|o| o.get("include_usage"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            None => false,
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end or a stop sequence.
    Stop,
    /// The token limit was reached.
    Length,
    /// The model called tools.
    ToolCalls,
    /// The provider's content filter stopped it.
    ContentFilter,
    /// A reason this crate does not know, as the provider named it.
    Other(String),
}

/// Token counts, as the provider reported them.
///
/// One convention whatever the provider: `input_tokens` counts every input
/// token, cached ones included, as OpenAI's `prompt_tokens` does. An
/// Anthropic answer's `input_tokens`, `cache_read_input_tokens` and
/// `cache_creation_input_tokens` are added up into it on the way in (the
/// last two also kept as `cached_input_tokens` and
/// `cache_write_input_tokens`), and taken apart again on the way out.
/// `output_tokens` includes reasoning tokens, as both providers count it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Every input token, cached ones included.
    pub input_tokens: u64,
    /// Every output token, reasoning included.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_input_tokens: Option<u64>,
    /// Output tokens spent reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// A provider's answer, in the neutral format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatResponse {
    /// The text parts of the answer, joined.
    pub text: String,
    /// Tool calls, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The model's reasoning before the answer, block by block.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<Thinking>,
    /// The model that actually answered, as the provider named it.
    pub model: String,
    /// The provider id that answered (set by the chain).
    pub provider: String,
    /// Why the model stopped.
    pub finish_reason: Option<FinishReason>,
    /// Token counts, where the provider reported them.
    pub usage: Option<Usage>,
    /// The provider's response body, as the JSON text it arrived as (`None`
    /// from a provider without one). [`ChatResponse::raw_value`] parses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<RawJson>,
    /// The dialect `raw` is written in (`None` for a custom provider's).
    #[serde(skip)]
    pub dialect: Option<Dialect>,
}

impl ChatResponse {
    /// The provider's response body parsed as a [`Value`] (`Null` when there
    /// is none). It is parsed here, on each call: answers keep only the text.
    pub fn raw_value(&self) -> serde_json::Result<Value> {
        self.raw.as_ref().map_or(Ok(Value::Null), RawJson::to_value)
    }
}

/// A JSON text kept as it arrived, checked to be JSON but not parsed into a
/// tree: it serializes verbatim, and equals another of the same text.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// `json`, if it is one JSON value (surrounding whitespace allowed).
    pub fn from_string(json: String) -> serde_json::Result<Self> {
        RawValue::from_string(json).map(RawJson)
    }

    /// `bytes`, if they are one JSON value in UTF-8.
    pub fn from_slice(bytes: &[u8]) -> serde_json::Result<Self> {
        serde_json::from_slice(bytes).map(RawJson)
    }

    /// The JSON text of `v`.
    pub fn from_value(v: &Value) -> serde_json::Result<Self> {
        serde_json::value::to_raw_value(v).map(RawJson)
    }

    /// The text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The text parsed as a [`Value`].
    pub fn to_value(&self) -> serde_json::Result<Value> {
        serde_json::from_str(self.0.get())
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// One piece of a streamed answer, in the neutral format. Provider stream
/// decoders produce these; client-format encoders consume them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    /// The stream began; `model` is the model answering, when the provider
    /// says so up front. Providers may repeat it or leave it out.
    Start {
        /// The answering model.
        model: Option<String>,
    },
    /// More answer text.
    Text {
        /// The text added.
        text: String,
    },
    /// Part of a tool call: the first part for an `index` carries `id` and
    /// `name`, later parts extend `arguments`.
    ToolCall {
        /// Which call. Increasing, but not always dense or 0-based (an
        /// Anthropic content block index counts text blocks too): key on it
        /// in order of first appearance.
        index: u32,
        /// The call's id, on its first part.
        id: Option<String>,
        /// The tool's name, on its first part.
        name: Option<String>,
        /// A fragment of the JSON arguments.
        arguments: String,
    },
    /// Part of the model's reasoning: `text` extends the current block; a
    /// `signature` ends it (the next text starts a new block); `redacted`
    /// is a whole redacted block of its own.
    Thinking(Thinking),
    /// Why the model stopped.
    Finish {
        /// The reason.
        reason: FinishReason,
    },
    /// Token counts (OpenAI's final usage chunk, Anthropic's
    /// `message_start` / `message_delta`).
    Usage {
        /// The counts; a later `Usage` replaces the fields it sets.
        usage: Usage,
    },
    /// The provider marked the stream complete (`[DONE]`, `message_stop`).
    Done,
}

/// An endpoint besides chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// OpenAI `POST /v1/embeddings` (and the compatible providers').
    Embeddings,
    /// Anthropic `POST /v1/messages/count_tokens`.
    CountTokens,
}

impl Endpoint {
    /// The endpoint's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Embeddings => "embeddings",
            Endpoint::CountTokens => "count_tokens",
        }
    }

    /// The client's headers passed on to the provider, as on chat requests
    /// of the endpoint's API (never a key).
    pub fn forwarded(self) -> &'static [&'static str] {
        match self {
            Endpoint::Embeddings => &["openai-beta", "idempotency-key"],
            Endpoint::CountTokens => &["anthropic-beta"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omitted_hints_are_those_set_and_lacking_in_one_order() {
        let req = ChatRequest {
            seed: Some(1),
            top_k: Some(5),
            service_tier: Some("flex".into()),
            prompt_cache_key: Some("k".into()),
            ..ChatRequest::default()
        };
        let lacking = [Hint::PromptCacheKey, Hint::Seed, Hint::TopK, Hint::Metadata];
        let names: Vec<String> = req.omitted_hints(&lacking).collect();
        assert_eq!(names, ["top_k", "seed", "prompt_cache_key"]);
        assert_eq!(ChatRequest::default().hints().count(), 0);
    }
}
