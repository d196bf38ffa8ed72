//! Upstreams behind one abstraction.
//!
//! An HTTP [`Provider`] is sans-IO: it encodes a [`ChatRequest`] into an
//! [`HttpRequest`] and decodes a [`BufferedResponse`] into a [`ChatResponse`]
//! or a classified [`ProviderError`], with no IO of its own, so the same
//! adapter runs natively, in the Worker and in the npm package, and tests on
//! recorded fixtures. A streamed answer is decoded one [`SseEvent`] at a
//! time by [`Provider::decode_event`]. A [`CustomProvider`] is any async function that answers
//! a chat request (a JS object in the npm package, a scripted fake in tests).

pub(crate) mod anthropic;
pub mod bedrock;
pub mod classify;
pub(crate) mod credential;
pub(crate) mod endpoint;
pub(crate) mod native;
pub(crate) mod openai;
pub(crate) mod preset;
pub(crate) mod vertex;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::chat::{ChatRequest, ChatResponse, Delta, Dialect};
use crate::error::{ErrorKind, ProviderError};
use crate::format::{FormatError, Read};
use crate::platform::{BufferedResponse, Headers, HttpRequest, UnixMillis};
use crate::policy::pool::PoolReading;
use crate::sse::{SseDecoder, SseEvent};

pub(crate) use crate::chat::Endpoint;
pub use anthropic::Anthropic;
pub use bedrock::Bedrock;
pub use classify::{classify, ErrorBody};
pub use credential::Credential;
pub use openai::OpenAi;
pub use preset::{AuthStyle, Preset, PresetName, Quirks};
pub use vertex::{Publisher, ServiceAccount, Vertex};

/// What a provider's model can do, from configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Capabilities {
    /// Accepts a trailing assistant message and continues it.
    pub prefill: bool,
    /// Accepts tools.
    pub tools: bool,
    /// The context window in tokens, when known.
    pub context_window: Option<u32>,
    /// US dollars per million input tokens, when known.
    pub input_price_per_mtok: Option<f64>,
    /// US dollars per million output tokens, when known.
    pub output_price_per_mtok: Option<f64>,
    /// How a structured answer is asked of an Anthropic model (unused by
    /// other providers, which take `response_format` as it is).
    pub structured_output: crate::format::anthropic::StructuredOutput,
}

/// The capabilities of a provider's models: a default, and per-model
/// entries from configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Models {
    default: Capabilities,
    by_name: BTreeMap<String, Capabilities>,
}

impl Models {
    /// Every model has `default` until given its own entry.
    pub fn new(default: Capabilities) -> Self {
        Models {
            default,
            by_name: BTreeMap::new(),
        }
    }

    /// Sets `model`'s capabilities.
    pub fn insert(&mut self, model: impl Into<String>, caps: Capabilities) {
        self.by_name.insert(model.into(), caps);
    }

    /// Whether `model` has an entry of its own.
    pub(crate) fn has(&self, model: &str) -> bool {
        self.by_name.contains_key(model)
    }

    /// What `model` can do.
    pub fn get(&self, model: &str) -> Capabilities {
        self.by_name.get(model).unwrap_or(&self.default).clone()
    }

    /// Refuses a request `model` cannot take (tools to a model without
    /// them) as [`ErrorKind::Unsupported`], so the chain moves on.
    pub(crate) fn check(&self, req: &ChatRequest, model: &str) -> Result<(), ProviderError> {
        if !req.tools.is_empty() && !self.get(model).tools {
            return Err(ProviderError::new(
                ErrorKind::Unsupported,
                format!("model {model} is configured without tool support"),
            ));
        }
        Ok(())
    }
}

/// A 2xx answer as `typed` reads it, or the classified error the response
/// holds. The typed read is all a healthy answer costs; a body it does not
/// take for an answer is read again as a [`Value`], the way the classifier
/// reads every error body, to tell an error object (`error_in`, which an
/// error inside a 200 is too) from malformed JSON or a wrong shape
/// ([`ErrorKind::Decode`]). `secret` is redacted from any message.
pub(crate) fn decode_success<T>(
    resp: &BufferedResponse,
    now: UnixMillis,
    secret: Option<&str>,
    typed: impl FnOnce(&[u8]) -> Result<Read<T>, FormatError>,
    error_in: impl FnOnce(&Value) -> Option<ErrorBody>,
) -> Result<T, ProviderError> {
    let fail = |e| classify::redact(e, secret);
    if !(200..=299).contains(&resp.status) {
        return Err(fail(classify(resp.status, &resp.headers, &resp.body, now)));
    }
    let shape = match typed(&resp.body) {
        Ok(Read::Answer(answer)) => return Ok(answer),
        Ok(Read::Error) => None,
        Err(e) => Some(e),
    };
    let v: Value = serde_json::from_slice(&resp.body).map_err(|e| {
        fail(
            ProviderError::new(
                ErrorKind::Decode,
                format!("malformed JSON in an HTTP {} response: {e}", resp.status),
            )
            .with_status(resp.status),
        )
    })?;
    match (error_in(&v), shape) {
        (Some(body), _) => Err(fail(classify::classify_body(
            resp.status,
            &resp.headers,
            body,
            now,
        ))),
        (None, Some(e)) => Err(fail(e.into_decode_error(resp.status))),
        // Marked as an error by the typed read, in a form `error_in` does
        // not take apart: an error without details.
        (None, None) => Err(fail(classify::classify_body(
            resp.status,
            &resp.headers,
            ErrorBody::default(),
            now,
        ))),
    }
}

/// A stream event's data as `typed` reads it, or the error it is: the
/// error object it carries (`error_in`, classified by [`event_error`]), or
/// [`ErrorKind::Decode`] for malformed JSON or a wrong shape, a chunk the
/// caller may skip. Read again as a [`Value`] only when it is not an answer.
/// `secret` is redacted from any message.
pub(crate) fn decode_data<T>(
    data: &str,
    secret: Option<&str>,
    typed: impl FnOnce(&[u8]) -> Result<Read<T>, FormatError>,
    error_in: impl FnOnce(&Value) -> Option<ErrorBody>,
) -> Result<T, ProviderError> {
    let shape = match typed(data.as_bytes()) {
        Ok(Read::Answer(answer)) => return Ok(answer),
        Ok(Read::Error) => None,
        Err(e) => Some(e),
    };
    let v = event_json(data, secret)?;
    match (error_in(&v), shape) {
        (Some(body), _) => Err(event_error(body, secret)),
        (None, Some(e)) => Err(event_shape_error(e, secret)),
        (None, None) => Err(event_error(ErrorBody::default(), secret)),
    }
}

/// The error a stream event carries, classified as an error object with no
/// telling status (as inside a 200: what it names by type, else a server
/// fault). The event has no status of its own, so none is set; `secret` is
/// redacted from the message.
pub(crate) fn event_error(body: ErrorBody, secret: Option<&str>) -> ProviderError {
    let mut body = body;
    if body.message.is_none() {
        body.message = Some("error event without a message".into());
    }
    let mut e = classify::classify_body(200, &Headers::new(), body, 0);
    e.status = None;
    classify::redact(e, secret)
}

/// The error of an `event: error` event, whatever its data holds (an error
/// object in either shape, other JSON, text, nothing).
pub(crate) fn named_error_event(ev: &SseEvent, secret: Option<&str>) -> ProviderError {
    let body = ErrorBody::parse(ev.data.trim().as_bytes());
    event_error(body, secret)
}

/// A stream event's data as JSON: malformed data is [`ErrorKind::Decode`],
/// a chunk the caller may skip; `secret` is redacted from what it quotes.
pub(crate) fn event_json(data: &str, secret: Option<&str>) -> Result<Value, ProviderError> {
    serde_json::from_str(data).map_err(|e| {
        let e = ProviderError::new(
            ErrorKind::Decode,
            format!("malformed JSON in a stream event: {e}"),
        );
        // serde quotes the bytes it choked on, which may hold the key.
        classify::redact(e, secret)
    })
}

/// A stream event that is JSON but not the expected shape, as
/// [`ErrorKind::Decode`], `secret` redacted from what it quotes.
pub(crate) fn event_shape_error(e: FormatError, secret: Option<&str>) -> ProviderError {
    let e = ProviderError::new(ErrorKind::Decode, format!("malformed stream event: {e}"));
    classify::redact(e, secret)
}

/// A sans-IO HTTP adapter for one provider.
pub trait Provider {
    /// The provider's id in the configuration (`anthropic`, `groq`, …).
    fn id(&self) -> &str;

    /// Who the provider is in a trace: the OpenTelemetry GenAI
    /// conventions' `gen_ai.provider.name` (`openai`, `anthropic`,
    /// `aws.bedrock`, `gcp.vertex_ai`, …); its id unless it says otherwise.
    fn genai_name(&self) -> &str {
        self.id()
    }

    /// The base URL its requests go to, if it has one (a trace's
    /// `server.address` is its host).
    fn base_url(&self) -> Option<&str> {
        None
    }

    /// Builds the HTTP request that asks `model` to answer `req`. Fails with
    /// [`crate::ErrorKind::Unsupported`] when the request cannot be
    /// expressed for this provider.
    fn encode(&self, req: &ChatRequest, model: &str) -> Result<HttpRequest, ProviderError>;

    /// Reads a complete response: a success becomes a [`ChatResponse`], any
    /// failure (including an error object inside a 200) a classified
    /// [`ProviderError`]. `now` resolves HTTP-date Retry-After values.
    fn decode(
        &self,
        resp: &BufferedResponse,
        now: UnixMillis,
    ) -> Result<ChatResponse, ProviderError>;

    /// Reads one event of a streamed answer (a request encoded with
    /// `stream: true` whose response status was a success): one
    /// [`SseEvent`] in, zero or more [`Delta`]s out, in order. Stateless, so
    /// one adapter serves any number of streams at once.
    ///
    /// - An error event (OpenAI `data: {"error": {…}}`, Anthropic
    ///   `event: error` with `{"type": "error", "error": {…}}`) is `Err`,
    ///   classified by the shared classifier as an error object that arrived
    ///   with no telling status: `overloaded_error` is
    ///   [`ErrorKind::Server`], `rate_limit_error`
    ///   [`ErrorKind::RateLimited`], an unnamed error a server fault. The
    ///   error's `status` is `None`.
    /// - Data that is not valid JSON, or JSON of the wrong shape, is
    ///   `Err` of kind [`ErrorKind::Decode`] with a message saying so: a
    ///   malformed chunk, which the caller may skip.
    /// - Keep-alives (Anthropic `ping`), events with empty data and unknown
    ///   event types yield no deltas.
    /// - The end of the stream (`data: [DONE]`, `message_stop`) is
    ///   [`Delta::Done`].
    /// - [`Delta::Start`] may come more than once (OpenAI-compatible servers
    ///   that repeat `role` in every chunk): a later one only names the
    ///   model again. A tool call's `index` tells calls apart and grows with
    ///   each new call, but need not count from 0 without gaps (Anthropic
    ///   numbers content blocks, text included).
    fn decode_event(&self, ev: &SseEvent) -> Result<Vec<Delta>, ProviderError>;

    /// What `model` can do.
    fn capabilities(&self, model: &str) -> Capabilities;

    /// The dialect this provider's API speaks, if it is one a client may
    /// speak too.
    fn dialect(&self) -> Option<Dialect> {
        None
    }

    /// The dialect this provider speaks for `model`: [`Provider::dialect`]
    /// unless the API differs by model (Bedrock speaks Messages to
    /// Anthropic models and Converse to the others).
    fn dialect_for(&self, _model: &str) -> Option<Dialect> {
        self.dialect()
    }

    /// The dialect [`Provider::encode`] writes `req` in for `model`:
    /// [`Provider::dialect_for`] unless the provider serves a second API
    /// the client's own body can go to (OpenAI's Responses API beside Chat
    /// Completions). A stream in this dialect may pass through to a client
    /// that speaks it.
    fn dialect_of(&self, _req: &ChatRequest, model: &str) -> Option<Dialect> {
        self.dialect_for(model)
    }

    /// Completes a request [`Provider::encode`] built, at `now` by the
    /// platform's clock, just before it is sent: for a provider whose
    /// credentials sign the request itself (AWS SigV4). Nothing by default.
    fn sign(&self, _http: &mut HttpRequest, _now: UnixMillis) -> Result<(), ProviderError> {
        Ok(())
    }

    /// A decoder of a streamed answer's body into the events
    /// [`Provider::decode_event`] reads: Server-Sent Events by default.
    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(SseDecoder::default())
    }

    /// What an answer's headers (of an answer that arrived at `now`, a
    /// success or an error) say of the provider's rate-limit pool, in the
    /// family of headers it sends ([`crate::policy::pool`]); `None` by
    /// default, and for providers that send none (Bedrock, Vertex AI).
    fn pool(&self, _headers: &Headers, _now: UnixMillis) -> Option<PoolReading> {
        None
    }

    /// The token this provider needs fetched before [`Provider::encode`]
    /// (none, by default).
    fn credential(&self) -> Option<&dyn Credential> {
        None
    }

    /// Whether this provider serves `endpoint` for its models.
    fn serves(&self, _endpoint: Endpoint) -> bool {
        false
    }

    /// Builds the request for `endpoint` from the client's JSON `body`
    /// (whose `model` is already the entry's). [`ErrorKind::Unsupported`]
    /// where [`Provider::serves`] is false.
    fn encode_endpoint(
        &self,
        endpoint: Endpoint,
        _body: Vec<u8>,
        _model: &str,
    ) -> Result<HttpRequest, ProviderError> {
        Err(endpoint::unsupported(self.id(), endpoint))
    }

    /// Reads `endpoint`'s answer: the body unchanged when it has the
    /// endpoint's shape, else the classified error.
    fn decode_endpoint(
        &self,
        endpoint: Endpoint,
        resp: &BufferedResponse,
        now: UnixMillis,
    ) -> Result<Vec<u8>, ProviderError> {
        endpoint::decode(endpoint, resp, now, None)
    }
}

/// A streamed answer's framing: body bytes in, [`SseEvent`]s out. An error
/// fails the attempt (an event stream's exception frame is a classified
/// one; bytes that are not the framing are [`ErrorKind::Decode`]).
pub trait StreamDecoder {
    /// Feeds a chunk; complete events are appended to `out`.
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ProviderError>;

    /// The end of the body: any last event.
    fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), ProviderError>;

    /// [`StreamDecoder::feed`], also appending to `raw` each new event's
    /// bytes as they came, for a stream passed through byte for byte: one
    /// entry per event, `None` where they were not kept (the event is then
    /// written from its fields). A framing that is not the client's keeps none.
    fn feed_raw(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<SseEvent>,
        raw: &mut Vec<Option<Vec<u8>>>,
    ) -> Result<(), ProviderError> {
        let before = out.len();
        let fed = self.feed(chunk, out);
        raw.extend(std::iter::repeat_with(|| None).take(out.len() - before));
        fed
    }

    /// After [`StreamDecoder::feed_raw`], the bytes of the event being read
    /// (and comments before it), not yet handed out; `None` where they
    /// are not kept.
    fn unsent(&self) -> Option<&[u8]> {
        None
    }
}

impl StreamDecoder for SseDecoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        SseDecoder::feed(self, chunk, out)
            .map_err(|e| ProviderError::new(ErrorKind::Decode, e.to_string()))
    }

    fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        out.extend(SseDecoder::finish(self));
        Ok(())
    }

    fn feed_raw(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<SseEvent>,
        raw: &mut Vec<Option<Vec<u8>>>,
    ) -> Result<(), ProviderError> {
        SseDecoder::feed_raw(self, chunk, out, raw)
            .map_err(|e| ProviderError::new(ErrorKind::Decode, e.to_string()))
    }

    fn unsent(&self) -> Option<&[u8]> {
        SseDecoder::unsent(self)
    }
}

/// A boxed, non-`Send` future.
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A provider implemented as an async call rather than HTTP, like the npm
/// package's `{ name, chat(request, signal) }`. Dropping the returned future must
/// abandon the call (the npm package aborts the `AbortSignal`).
pub trait CustomProvider {
    /// Answers `req` with `model`.
    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        model: &'a str,
    ) -> LocalFuture<'a, Result<ChatResponse, ProviderError>>;

    /// What `model` can do (nothing special, by default).
    fn capabilities(&self, _model: &str) -> Capabilities {
        Capabilities::default()
    }
}

/// One configured upstream.
pub enum Upstream {
    /// An HTTP provider, called through the platform's `fetch`.
    Http(Box<dyn Provider>),
    /// An async provider.
    Custom(Box<dyn CustomProvider>),
}

impl Upstream {
    /// What `model` can do at this upstream.
    pub fn capabilities(&self, model: &str) -> Capabilities {
        match self {
            Upstream::Http(p) => p.capabilities(model),
            Upstream::Custom(p) => p.capabilities(model),
        }
    }
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upstream::Http(p) => write!(f, "Upstream::Http({})", p.id()),
            Upstream::Custom(_) => f.write_str("Upstream::Custom"),
        }
    }
}
