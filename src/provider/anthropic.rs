//! The Anthropic Messages API adapter.
//!
//! Quirks on top of the shared classifier: 529 `overloaded_error` is a
//! server fault (the classifier already treats every 5xx so), a 400
//! `invalid_request_error` saying "prompt is too long" is a context-length
//! failure, and the `anthropic-ratelimit-*-reset` headers are informational
//! only: the wait comes from `retry-after`. In a stream, `event: error`
//! (`overloaded_error` mid-stream) ends the stream as an error.
//!
//! A request that came as a Messages client's own body ([`crate::Native`])
//! is sent as written, with only the changes `Anthropic::native_body` lists;
//! any other is encoded from the neutral request.

use super::classify::ErrorBody;
use serde_json::Value;

use super::native::{forward_headers, native_in, NativeBody};
use super::{
    decode_success, endpoint, event_error, event_json, event_shape_error, named_error_event,
    Capabilities, Endpoint, Models, Provider,
};
use crate::chat::{ChatRequest, ChatResponse, Delta, Dialect, Native};
use crate::error::{ErrorKind, ProviderError};
use crate::format::anthropic::stream::{decode_event, EVENTS};
use crate::format::anthropic::{decode_response, encode_request, EncodeOptions};
use crate::format::Read;
use crate::platform::{BufferedResponse, Headers, HttpRequest, UnixMillis};
use crate::policy::pool::{self, PoolHeaders, PoolReading};
use crate::secret::Secret;
use crate::sse::SseEvent;

/// The API version sent by default.
pub(crate) const DEFAULT_VERSION: &str = "2023-06-01";

/// The `max_tokens` sent when the request sets none (the API requires one).
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The API's base URL.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// A Messages API adapter. Built with [`Anthropic::new`] and the builder
/// methods, or from configuration by [`crate::build_provider`].
#[derive(Debug, Clone)]
pub struct Anthropic {
    id: String,
    base_url: String,
    key: Option<Secret>,
    version: String,
    default_max_tokens: u32,
    headers: Headers,
    models: Models,
}

impl Anthropic {
    /// An adapter named `id` with the defaults (no key yet).
    pub fn new(id: impl Into<String>) -> Self {
        Anthropic {
            id: id.into(),
            base_url: DEFAULT_BASE_URL.into(),
            key: None,
            version: DEFAULT_VERSION.into(),
            default_max_tokens: DEFAULT_MAX_TOKENS,
            headers: Headers::new(),
            models: Models::new(Capabilities {
                prefill: true,
                tools: true,
                ..Capabilities::default()
            }),
        }
    }

    /// Sets the base URL.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_string();
        self
    }

    /// Sets the key.
    pub fn api_key(mut self, key: Secret) -> Self {
        self.key = Some(key);
        self
    }

    /// Sets `anthropic-version`.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Sets the `max_tokens` used when a request has none.
    pub fn default_max_tokens(mut self, n: u32) -> Self {
        self.default_max_tokens = n;
        self
    }

    /// Adds a header to every request (`anthropic-beta`, …).
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.insert(name, value);
        self
    }

    /// Sets the model capabilities.
    pub fn models(mut self, models: Models) -> Self {
        self.models = models;
        self
    }
}

impl Anthropic {
    /// The client's own Messages body for `model`: every field as the
    /// client sent it (content blocks with `cache_control`, thinking blocks
    /// with their signatures, server tools, fields this crate does not
    /// know), except `model`, the entry's; `stream`, as the request
    /// streams; and `max_tokens`, which the API requires, set to the
    /// adapter's default when the client sent none.
    pub(crate) fn native_body<'a>(
        &self,
        native: &'a Native,
        model: &'a str,
        stream: bool,
    ) -> NativeBody<'a> {
        let mut body = NativeBody::new(native, model, stream);
        if body.get("max_tokens").is_none_or(Value::is_null) {
            body.set("max_tokens", Value::from(self.default_max_tokens));
        }
        body
    }
}

impl Provider for Anthropic {
    fn id(&self) -> &str {
        &self.id
    }

    fn genai_name(&self) -> &str {
        "anthropic"
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.base_url)
    }

    fn pool(&self, headers: &Headers, now: UnixMillis) -> Option<PoolReading> {
        pool::read(PoolHeaders::Anthropic, headers, now)
    }

    fn encode(&self, req: &ChatRequest, model: &str) -> Result<HttpRequest, ProviderError> {
        self.models.check(req, model)?;
        let url = format!("{}/v1/messages", self.base_url);
        let (body, omitted) = match native_in(req, Dialect::Anthropic) {
            Some(native) => (
                self.native_body(native, model, req.stream).to_vec()?,
                Vec::new(),
            ),
            None => {
                let opts = EncodeOptions {
                    default_max_tokens: self.default_max_tokens,
                    structured_output: self.models.get(model).structured_output,
                };
                let body = encode_request(req, model, opts).map_err(|e| e.into_request_error())?;
                let bytes = serde_json::to_vec(&body)
                    .map_err(|e| ProviderError::new(ErrorKind::InvalidRequest, e.to_string()))?;
                (bytes, body.omitted)
            }
        };
        let mut http = HttpRequest::post_json(url, body);
        http.omitted = omitted;
        for (name, value) in self.headers.iter() {
            http.headers.insert(name, value);
        }
        forward_headers(&mut http, req, &["anthropic-beta", "idempotency-key"]);
        http.headers
            .insert("anthropic-version", self.version.clone());
        if let Some(key) = &self.key {
            http.headers.insert("x-api-key", key.expose());
        }
        Ok(http)
    }

    fn decode(
        &self,
        resp: &BufferedResponse,
        now: UnixMillis,
    ) -> Result<ChatResponse, ProviderError> {
        let secret = self.key.as_ref().map(Secret::expose);
        let mut out = decode_success(resp, now, secret, decode_response, ErrorBody::from_value)?;
        out.provider = self.id.clone();
        Ok(out)
    }

    fn decode_event(&self, ev: &SseEvent) -> Result<Vec<Delta>, ProviderError> {
        let secret = self.key.as_ref().map(Secret::expose);
        let named = ev.event.as_deref();
        match named {
            Some("error") => return Err(named_error_event(ev, secret)),
            Some("ping") => return Ok(Vec::new()),
            Some(name) if !EVENTS.contains(&name) => return Ok(Vec::new()),
            Some(_) | None => {}
        }
        let data = ev.data.trim();
        if data.is_empty() {
            let done = named == Some("message_stop");
            return Ok(if done { vec![Delta::Done] } else { Vec::new() });
        }
        let shape = match decode_event(named, data.as_bytes()) {
            Ok(Read::Answer(deltas)) => return Ok(deltas),
            Ok(Read::Error) => None,
            Err(e) => Some(e),
        };
        // Not an answer: an error object, or data of the wrong shape.
        let v = event_json(data, secret)?;
        if let Some(body) = ErrorBody::from_value(&v) {
            return Err(event_error(body, secret));
        }
        match shape {
            // Without an `event:` field or a `type`, nothing says what the
            // data is: it is read as nothing, as an unknown event is.
            Some(_) if named.is_none() && v.get("type").and_then(Value::as_str).is_none() => {
                Ok(Vec::new())
            }
            Some(e) => Err(event_shape_error(e, secret)),
            None => Err(event_error(ErrorBody::default(), secret)),
        }
    }

    fn capabilities(&self, model: &str) -> Capabilities {
        self.models.get(model)
    }

    fn dialect(&self) -> Option<Dialect> {
        Some(Dialect::Anthropic)
    }

    fn serves(&self, endpoint: Endpoint) -> bool {
        endpoint == Endpoint::CountTokens
    }

    fn encode_endpoint(
        &self,
        endpoint: Endpoint,
        body: Vec<u8>,
        _model: &str,
    ) -> Result<HttpRequest, ProviderError> {
        if endpoint != Endpoint::CountTokens {
            return Err(endpoint::unsupported(&self.id, endpoint));
        }
        let url = format!("{}/v1/messages/count_tokens", self.base_url);
        let mut http = HttpRequest::post_json(url, body);
        for (name, value) in self.headers.iter() {
            http.headers.insert(name, value);
        }
        http.headers
            .insert("anthropic-version", self.version.clone());
        if let Some(key) = &self.key {
            http.headers.insert("x-api-key", key.expose());
        }
        Ok(http)
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
