//! The OpenAI Chat Completions adapter, for OpenAI and every
//! OpenAI-compatible provider (a [`Preset`] says where and how).
//!
//! Quirks on top of the shared classifier: an error object inside
//! `choices[0]` (OpenRouter) is an error too; everything else (429 with
//! `insufficient_quota`, `context_length_exceeded`, content policy,
//! `retry-after-ms`, `x-should-retry`) is the classifier's. In a stream, an
//! error object in a chunk (OpenAI), in its choice (OpenRouter) or in an
//! `event: error` (some compatible servers) ends the stream as an error.
//!
//! A request that came as a Chat Completions client's own body
//! ([`crate::Native`]) is sent as written, with only the changes
//! `OpenAi::native_body` lists; any other is encoded from the neutral request.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::classify::ErrorBody;
use super::native::{forward_headers, native_in, NativeBody};
use super::preset::{AuthStyle, Preset, PresetName};
use super::{
    decode_data, decode_success, endpoint, named_error_event, Capabilities, Endpoint, Models,
    Provider,
};
use crate::chat::{ChatRequest, ChatResponse, Delta, Dialect, Native};
use crate::error::{ErrorKind, ProviderError};
use crate::format::openai::stream::decode_chunk;
use crate::format::openai::{decode_response, encode_request, EncodeOptions, MaxTokensField};
use crate::format::responses::{
    decode_event as decode_responses_event, decode_response as decode_responses,
};
use crate::platform::{BufferedResponse, Headers, HttpRequest, UnixMillis};
use crate::policy::pool::{self, PoolHeaders, PoolReading};
use crate::secret::Secret;
use crate::sse::SseEvent;

mod responses;

/// A Chat Completions adapter. Built with [`OpenAi::new`] and the
/// builder methods, or from configuration by [`crate::build_provider`].
#[derive(Debug, Clone)]
pub struct OpenAi {
    id: String,
    preset: &'static Preset,
    base_url: String,
    path: String,
    api_version: Option<String>,
    deployment: Option<String>,
    key: Option<Secret>,
    headers: Headers,
    options: EncodeOptions,
    models: Models,
}

impl OpenAi {
    /// An adapter named `id` for `preset`, with its defaults (no key yet;
    /// an empty base URL for presets without a default).
    pub fn new(id: impl Into<String>, preset: PresetName) -> Self {
        let preset = preset.preset();
        OpenAi {
            id: id.into(),
            preset,
            base_url: preset.base_url.unwrap_or_default().to_string(),
            path: preset.path.to_string(),
            api_version: preset.quirks.api_version.map(str::to_string),
            deployment: None,
            key: None,
            headers: Headers::new(),
            options: EncodeOptions {
                max_tokens_field: preset.quirks.max_tokens_field,
                stream_usage: preset.quirks.stream_usage,
            },
            models: Models::new(Capabilities {
                prefill: false,
                tools: true,
                ..Capabilities::default()
            }),
        }
    }

    /// The preset this adapter follows.
    pub fn preset(&self) -> &'static Preset {
        self.preset
    }

    /// Sets the base URL (scheme and host, optionally a path prefix).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_string();
        self
    }

    /// Sets the endpoint path (`/v1/chat/completions` by default).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Sets the key.
    pub fn api_key(mut self, key: Secret) -> Self {
        self.key = Some(key);
        self
    }

    /// Sends `OpenAI-Organization`.
    pub fn organization(self, org: impl Into<String>) -> Self {
        self.header("openai-organization", org)
    }

    /// Sends `OpenAI-Project`.
    pub fn project(self, project: impl Into<String>) -> Self {
        self.header("openai-project", project)
    }

    /// Adds a header to every request.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.insert(name, value);
        self
    }

    /// Sets the Azure deployment (the model name is used when unset).
    pub fn deployment(mut self, deployment: impl Into<String>) -> Self {
        self.deployment = Some(deployment.into());
        self
    }

    /// Sets the `api-version` query parameter.
    pub fn api_version(mut self, version: impl Into<String>) -> Self {
        self.api_version = Some(version.into());
        self
    }

    /// Chooses the output token limit field.
    pub fn max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.options.max_tokens_field = field;
        self
    }

    /// Whether streamed requests ask for usage.
    pub fn stream_usage(mut self, on: bool) -> Self {
        self.options.stream_usage = on;
        self
    }

    /// Sets the model capabilities.
    pub fn models(mut self, models: Models) -> Self {
        self.models = models;
        self
    }

    /// Whether this provider serves the Responses API (`POST /responses`
    /// beside Chat Completions): OpenAI and Azure OpenAI. A Responses
    /// client's own body is sent to it as written; every other provider is
    /// sent a translation.
    pub fn speaks_responses(&self) -> bool {
        matches!(self.preset.name, PresetName::OpenAi | PresetName::Azure)
    }

    /// The URL a request for `model` goes to.
    pub fn url(&self, model: &str) -> String {
        self.url_at(&self.path, model)
    }

    /// The URL of the endpoint at `path` for `model`.
    fn url_at(&self, path: &str, model: &str) -> String {
        let path = if path.contains("{deployment}") {
            let deployment = self.deployment.as_deref().unwrap_or(model);
            Cow::Owned(path.replace("{deployment}", &path_segment(deployment)))
        } else {
            Cow::Borrowed(path)
        };
        // Sized once: `format!` would grow the string twice per request.
        let version = self.api_version.as_deref();
        let query = version.map_or(0, |v| "?api-version=".len() + v.len());
        let mut url = String::with_capacity(self.base_url.len() + path.len() + query);
        url.push_str(&self.base_url);
        url.push_str(&path);
        if let Some(v) = version {
            url.push_str("?api-version=");
            url.push_str(v);
        }
        url
    }
}

impl OpenAi {
    /// The client's own Chat Completions body for `model`: every field as
    /// the client sent it, except
    /// - `model`, the entry's; `stream`, as the request streams;
    /// - on a stream, `stream_options.include_usage: true` merged into the
    ///   client's `stream_options` (the gateway counts every answer's
    ///   tokens), or `stream_options` removed for a preset that refuses it
    ///   ([`super::Quirks::stream_options`]);
    /// - the output token limit under the preset's field
    ///   ([`MaxTokensField`]): `max_tokens` ↔ `max_completion_tokens`, as
    ///   the neutral encoder writes it.
    fn native_body<'a>(&self, native: &'a Native, model: &'a str, stream: bool) -> NativeBody<'a> {
        let mut body = NativeBody::new(native, model, stream);
        if !self.preset.quirks.stream_options {
            body.remove("stream_options");
        } else if stream {
            let mut options = match body.get("stream_options") {
                Some(Value::Object(o)) => o.clone(),
                _ => Map::new(),
            };
            options.insert("include_usage".into(), Value::Bool(true));
            body.set("stream_options", Value::Object(options));
        }
        let (from, to) = match self.options.max_tokens_field {
            MaxTokensField::MaxTokens => ("max_completion_tokens", "max_tokens"),
            MaxTokensField::MaxCompletionTokens => ("max_tokens", "max_completion_tokens"),
        };
        body.rename(from, to);
        body
    }
}

/// `s` percent-encoded for use as one path segment.
fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Provider for OpenAi {
    fn id(&self) -> &str {
        &self.id
    }

    fn genai_name(&self) -> &str {
        self.preset.name.genai_name()
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.base_url)
    }

    fn pool(&self, headers: &Headers, now: UnixMillis) -> Option<PoolReading> {
        pool::read(PoolHeaders::OpenAi, headers, now)
    }

    fn encode(&self, req: &ChatRequest, model: &str) -> Result<HttpRequest, ProviderError> {
        self.models.check(req, model)?;
        let mut url = None;
        let (body, omitted) = match native_in(req, Dialect::OpenAi) {
            Some(native) => (
                self.native_body(native, model, req.stream).to_vec()?,
                Vec::new(),
            ),
            None if self.speaks_responses() && req.sends_native(Some(Dialect::Responses)) => {
                let (to, body) = responses::native(self, req, model)?;
                url = Some(to);
                (body, Vec::new())
            }
            None => {
                let mut options = self.options;
                options.stream_usage = self.preset.quirks.stream_options
                    && (options.stream_usage || req.wants_usage());
                let body =
                    encode_request(req, model, options).map_err(|e| e.into_request_error())?;
                let bytes = serde_json::to_vec(&body)
                    .map_err(|e| ProviderError::new(ErrorKind::InvalidRequest, e.to_string()))?;
                (bytes, body.omitted)
            }
        };
        let mut http = HttpRequest::post_json(url.unwrap_or_else(|| self.url(model)), body);
        http.omitted = omitted;
        self.authorize(&mut http);
        forward_headers(&mut http, req, &["openai-beta", "idempotency-key"]);
        Ok(http)
    }

    fn decode(
        &self,
        resp: &BufferedResponse,
        now: UnixMillis,
    ) -> Result<ChatResponse, ProviderError> {
        let secret = self.key.as_ref().map(Secret::expose);
        // Read as the common Chat Completions answer first: a Response object has no
        // `choices`, so only a body that fails that read is looked at again.
        let typed = |body: &[u8]| match decode_response(body) {
            Err(_) if responses::is_response(body) => decode_responses(body),
            read => read,
        };
        let error_in = |v: &Value| match v.get("object").and_then(Value::as_str) {
            Some("response") => responses::error_in(v),
            _ => error_in(v),
        };
        let mut out = decode_success(resp, now, secret, typed, error_in)?;
        out.provider = self.id.clone();
        Ok(out)
    }

    fn decode_event(&self, ev: &SseEvent) -> Result<Vec<Delta>, ProviderError> {
        let secret = self.key.as_ref().map(Secret::expose);
        if ev.event.as_deref() == Some("error") {
            return Err(named_error_event(ev, secret));
        }
        let data = ev.data.trim();
        if data == "[DONE]" {
            return Ok(vec![Delta::Done]);
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        if responses::is_event(ev) {
            return decode_data(data, secret, decode_responses_event, responses::error_in);
        }
        decode_data(data, secret, decode_chunk, error_in)
    }

    fn capabilities(&self, model: &str) -> Capabilities {
        self.models.get(model)
    }

    fn dialect(&self) -> Option<Dialect> {
        Some(Dialect::OpenAi)
    }

    fn dialect_of(&self, req: &ChatRequest, _model: &str) -> Option<Dialect> {
        // As `encode` decides: a Responses client's own body goes to the
        // Responses API of a provider that serves it.
        if self.speaks_responses() && req.sends_native(Some(Dialect::Responses)) {
            return Some(Dialect::Responses);
        }
        self.dialect()
    }

    fn serves(&self, endpoint: Endpoint) -> bool {
        endpoint == Endpoint::Embeddings && self.embeddings_path().is_some()
    }

    fn encode_endpoint(
        &self,
        endpoint: Endpoint,
        body: Vec<u8>,
        model: &str,
    ) -> Result<HttpRequest, ProviderError> {
        match (endpoint, self.embeddings_path()) {
            (Endpoint::Embeddings, Some(path)) => {
                let url = self.url_at(&path, model);
                let mut http = HttpRequest::post_json(url, body);
                self.authorize(&mut http);
                Ok(http)
            }
            _ => Err(endpoint::unsupported(&self.id, endpoint)),
        }
    }

    fn decode_endpoint(
        &self,
        endpoint: Endpoint,
        resp: &BufferedResponse,
        now: UnixMillis,
    ) -> Result<Vec<u8>, ProviderError> {
        endpoint::decode(endpoint, resp, now, self.key.as_ref().map(Secret::expose))
    }
}

impl OpenAi {
    /// The embeddings endpoint beside the chat one (`…/chat/completions`
    /// → `…/embeddings`: OpenAI, Azure deployments and the compatible
    /// servers); none for a custom path of another form.
    fn embeddings_path(&self) -> Option<String> {
        let prefix = self.path.strip_suffix("/chat/completions")?;
        Some(format!("{prefix}/embeddings"))
    }

    /// The adapter's own headers and its key, as on every chat request.
    fn authorize(&self, http: &mut HttpRequest) {
        for (name, value) in self.headers.iter() {
            http.headers.insert(name, value);
        }
        if let Some(key) = &self.key {
            match self.preset.auth {
                AuthStyle::Bearer => {
                    let key = key.expose();
                    let mut value = String::with_capacity("Bearer ".len() + key.len());
                    value.push_str("Bearer ");
                    value.push_str(key);
                    http.headers.insert("authorization", value)
                }
                AuthStyle::ApiKeyHeader(name) => http.headers.insert(name, key.expose()),
                AuthStyle::None => {}
            }
        }
    }
}

/// The error object of a body: at the top, or in the first choice.
fn error_in(v: &Value) -> Option<ErrorBody> {
    ErrorBody::from_value(v).or_else(|| choice_error(v))
}

/// An upstream failure OpenRouter reports inside the first choice: an
/// `error` object, or `finish_reason: "error"` alone (an answer cut short,
/// never a finished one).
fn choice_error(v: &Value) -> Option<ErrorBody> {
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0).or_else(|| c.get("0")))?;
    match choice.get("error").filter(|e| !e.is_null()) {
        Some(e) => {
            let mut m = serde_json::Map::new();
            m.insert("error".into(), e.clone());
            ErrorBody::from_value(&Value::Object(m))
        }
        None if choice.get("finish_reason").and_then(Value::as_str) == Some("error") => {
            Some(ErrorBody {
                kind: Some("server_error".into()),
                message: Some("the answer ended with finish_reason \"error\"".into()),
                ..ErrorBody::default()
            })
        }
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_name_cannot_escape_its_path_segment() {
        let p = OpenAi::new("az", PresetName::Azure).base_url("https://r.example");
        assert_eq!(
            p.url("a/b?c"),
            "https://r.example/openai/deployments/a%2Fb%3Fc/chat/completions?api-version=2024-10-21"
        );
        let p = OpenAi::new("g", PresetName::Groq);
        assert_eq!(
            p.url("llama/x"),
            "https://api.groq.com/openai/v1/chat/completions"
        );
    }
}
