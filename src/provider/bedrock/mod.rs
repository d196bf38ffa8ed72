//! The AWS Bedrock adapter (`kind: "bedrock"`).
//!
//! Anthropic models (`anthropic.…` ids and inference profiles such as
//! `us.anthropic.…`) are called through InvokeModel and
//! InvokeModelWithResponseStream with a Messages body: the client's own
//! when it wrote one, with `model` and `stream` left out and Bedrock's
//! `anthropic_version` added; their answers and stream events are read by
//! the Anthropic adapter. Every other model goes through Converse and
//! ConverseStream ([`converse`]). Requests are signed with SigV4
//! ([`sigv4`]) at the platform's time; streams arrive in the AWS
//! event-stream framing ([`eventstream`]), whose exception frames are
//! classified errors.

pub mod converse;
pub mod eventstream;
pub mod sigv4;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::Value;

use self::eventstream::{EventStreamDecoder, Frame};
use self::sigv4::{Credentials, Scope, SigningRequest};
use super::anthropic::Anthropic;
use super::classify::{self, ErrorBody};
use super::native::native_in;
use super::{decode_success, event_error, Capabilities, Models, Provider, StreamDecoder};
use crate::chat::{ChatRequest, ChatResponse, Delta, Dialect};
use crate::error::{ErrorKind, ProviderError};
use crate::format::anthropic::stream::EVENTS as ANTHROPIC_EVENTS;
use crate::format::anthropic::{encode_request, EncodeOptions};
use crate::platform::{BufferedResponse, Headers, HttpRequest, UnixMillis};
use crate::secret::Secret;
use crate::sse::SseEvent;

/// The `anthropic_version` Bedrock takes in a Messages body.
pub(crate) const ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// The signing name of the Bedrock runtime.
const SERVICE: &str = "bedrock";

/// Whether `model` is an Anthropic model on Bedrock: `anthropic.…`, an
/// inference profile `us.anthropic.…`, or an ARN ending in either.
pub fn is_anthropic(model: &str) -> bool {
    let id = model.rsplit('/').next().unwrap_or(model);
    let mut parts = id.split('.');
    let first = parts.next();
    first == Some("anthropic") || parts.next() == Some("anthropic")
}

/// A model id as one URL path segment: every byte but the unreserved
/// characters percent-encoded (`:` of `…-v1:0`, `/` of an ARN).
fn path_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for &b in id.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A Bedrock runtime adapter. Built with [`Bedrock::new`] and the builder
/// methods, or from configuration by [`crate::build_provider`].
#[derive(Debug, Clone)]
pub struct Bedrock {
    id: String,
    region: String,
    base_url: String,
    credentials: Option<Credentials>,
    anthropic_version: String,
    default_max_tokens: u32,
    headers: Headers,
    models: Models,
    /// Reads Messages answers and stream events (and classifies errors).
    anthropic: Anthropic,
}

impl Bedrock {
    /// An adapter named `id` for `region`, at
    /// `https://bedrock-runtime.<region>.amazonaws.com`, without
    /// credentials yet.
    pub fn new(id: impl Into<String>, region: impl Into<String>) -> Self {
        let id = id.into();
        let region = region.into();
        Bedrock {
            base_url: format!("https://bedrock-runtime.{region}.amazonaws.com"),
            anthropic: Anthropic::new(id.clone()),
            id,
            region,
            credentials: None,
            anthropic_version: ANTHROPIC_VERSION.into(),
            default_max_tokens: super::anthropic::DEFAULT_MAX_TOKENS,
            headers: Headers::new(),
            models: Models::new(Capabilities {
                tools: true,
                ..Capabilities::default()
            }),
        }
    }

    /// Sets the base URL (a VPC endpoint, a test server).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_string();
        self
    }

    /// Sets the credentials that sign each request.
    pub fn credentials(mut self, creds: Credentials) -> Self {
        self.credentials = Some(creds);
        self
    }

    /// Sets `anthropic_version` in Messages bodies.
    pub fn anthropic_version(mut self, version: impl Into<String>) -> Self {
        self.anthropic_version = version.into();
        self
    }

    /// Sets the `max_tokens` used when a request has none.
    pub fn default_max_tokens(mut self, n: u32) -> Self {
        self.default_max_tokens = n;
        self.anthropic = self.anthropic.default_max_tokens(n);
        self
    }

    /// Adds a header to every request.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.insert(name, value);
        self
    }

    /// Sets the model capabilities (a model without an entry takes
    /// prefill when it is an Anthropic model).
    pub fn models(mut self, models: Models) -> Self {
        self.anthropic = self.anthropic.models(models.clone());
        self.models = models;
        self
    }

    fn secret(&self) -> Option<&str> {
        self.credentials
            .as_ref()
            .map(|c| c.secret_access_key.expose())
    }

    /// The Messages body for an Anthropic model.
    fn messages_body(
        &self,
        req: &ChatRequest,
        model: &str,
    ) -> Result<(Vec<u8>, Vec<String>), ProviderError> {
        let beta: Vec<&str> = req
            .native
            .as_deref()
            .into_iter()
            .flat_map(|n| n.headers.iter())
            .filter(|(name, _)| name == "anthropic-beta")
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect();
        if let Some(native) = native_in(req, Dialect::Anthropic) {
            let mut body = self.anthropic.native_body(native, model, req.stream);
            body.remove("model");
            body.remove("stream");
            body.set(
                "anthropic_version",
                Value::from(self.anthropic_version.as_str()),
            );
            if !beta.is_empty() && body.get("anthropic_beta").is_none() {
                body.set("anthropic_beta", Value::from(beta));
            }
            return Ok((body.to_vec()?, Vec::new()));
        }
        let opts = EncodeOptions {
            default_max_tokens: self.default_max_tokens,
            structured_output: self.models.get(model).structured_output,
        };
        let encoded = encode_request(req, model, opts).map_err(|e| e.into_request_error())?;
        let omitted = encoded.omitted.clone();
        // Written and read back rather than built with `to_value`, which
        // would compile a second serializer for every Messages type (about
        // 4 KB of the gzipped Worker).
        let written = serde_json::to_vec(&encoded)
            .map_err(|e| ProviderError::new(ErrorKind::InvalidRequest, e.to_string()))?;
        let mut v: Value = serde_json::from_slice(&written)
            .map_err(|e| ProviderError::new(ErrorKind::InvalidRequest, e.to_string()))?;
        if let Some(map) = v.as_object_mut() {
            map.remove("model");
            map.remove("stream");
            map.insert(
                "anthropic_version".into(),
                Value::from(self.anthropic_version.as_str()),
            );
            if !beta.is_empty() {
                map.insert("anthropic_beta".into(), Value::from(beta));
            }
        }
        let bytes = serde_json::to_vec(&v)
            .map_err(|e| ProviderError::new(ErrorKind::InvalidRequest, e.to_string()))?;
        Ok((bytes, omitted))
    }
}

impl Provider for Bedrock {
    fn id(&self) -> &str {
        &self.id
    }

    fn genai_name(&self) -> &str {
        "aws.bedrock"
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.base_url)
    }

    fn encode(&self, req: &ChatRequest, model: &str) -> Result<HttpRequest, ProviderError> {
        self.models.check(req, model)?;
        let anthropic = is_anthropic(model);
        let action = match (anthropic, req.stream) {
            (true, false) => "invoke",
            (true, true) => "invoke-with-response-stream",
            (false, false) => "converse",
            (false, true) => "converse-stream",
        };
        let url = format!("{}/model/{}/{action}", self.base_url, path_segment(model));
        let (body, omitted) = if anthropic {
            self.messages_body(req, model)?
        } else {
            let (body, omitted) =
                converse::encode_request(req).map_err(|e| e.into_request_error())?;
            let bytes = serde_json::to_vec(&body)
                .map_err(|e| ProviderError::new(ErrorKind::InvalidRequest, e.to_string()))?;
            (bytes, omitted)
        };
        let mut http = HttpRequest::post_json(url, body);
        http.omitted = omitted;
        for (name, value) in self.headers.iter() {
            http.headers.insert(name, value);
        }
        let accept = if req.stream {
            "application/vnd.amazon.eventstream"
        } else {
            "application/json"
        };
        http.headers.insert("accept", accept);
        Ok(http)
    }

    fn sign(&self, http: &mut HttpRequest, now: UnixMillis) -> Result<(), ProviderError> {
        let Some(creds) = &self.credentials else {
            return Err(ProviderError::new(
                ErrorKind::Auth,
                "no AWS credentials are configured for this provider",
            ));
        };
        let rest = http
            .url
            .strip_prefix("https://")
            .or_else(|| http.url.strip_prefix("http://"))
            .ok_or_else(|| ProviderError::new(ErrorKind::InvalidRequest, "not an http(s) URL"))?;
        let (host, path_query) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (path, query) = path_query.split_once('?').unwrap_or((path_query, ""));
        let scope = Scope {
            region: &self.region,
            service: SERVICE,
            amz_date: sigv4::amz_date(now),
        };
        http.headers.insert("x-amz-date", scope.amz_date.clone());
        if let Some(token) = &creds.session_token {
            http.headers.insert("x-amz-security-token", token.expose());
        }
        let mut signed: Vec<(&str, &str)> = vec![("host", host)];
        signed.extend(http.headers.iter());
        let authorization = sigv4::authorization(
            creds,
            &scope,
            &SigningRequest {
                method: &http.method,
                path,
                query,
                headers: &signed,
                payload: &http.body,
            },
        );
        http.headers.insert("authorization", authorization);
        Ok(())
    }

    fn decode(
        &self,
        resp: &BufferedResponse,
        now: UnixMillis,
    ) -> Result<ChatResponse, ProviderError> {
        let secret = self.secret();
        // A Messages answer has `content`; a Converse one `output`. Either
        // way a failure is classified by the one classifier.
        let messages = !(200..=299).contains(&resp.status) || !looks_like_converse(&resp.body);
        let mut out = if messages {
            self.anthropic
                .decode(resp, now)
                .map_err(|e| classify::redact(e, secret))?
        } else {
            decode_success(resp, now, secret, converse::decode_response, |v| {
                v.get("message")
                    .filter(|_| v.get("output").is_none())
                    .map(|_| ErrorBody::parse(v.to_string().as_bytes()))
            })?
        };
        out.provider = self.id.clone();
        Ok(out)
    }

    fn decode_event(&self, ev: &SseEvent) -> Result<Vec<Delta>, ProviderError> {
        match ev.event.as_deref() {
            Some(name) if converse::EVENTS.contains(&name) => {
                converse::decode_event(name, ev.data.as_bytes()).map_err(|e| {
                    ProviderError::new(ErrorKind::Decode, format!("malformed stream event: {e}"))
                })
            }
            _ => self
                .anthropic
                .decode_event(ev)
                .map_err(|e| classify::redact(e, self.secret())),
        }
    }

    fn capabilities(&self, model: &str) -> Capabilities {
        let mut caps = self.models.get(model);
        if !self.models.has(model) {
            caps.prefill = is_anthropic(model);
        }
        caps
    }

    fn dialect_for(&self, model: &str) -> Option<Dialect> {
        is_anthropic(model).then_some(Dialect::Anthropic)
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(BedrockStream {
            frames: EventStreamDecoder::default(),
            secret: self.secret().map(Secret::new),
        })
    }
}

/// Whether a 2xx body is a Converse answer (`"output"` at the top).
fn looks_like_converse(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        output: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Probe>(body).is_ok_and(|p| p.output.is_some())
}

/// An InvokeModelWithResponseStream chunk: `{"bytes": base64 of an
/// Anthropic stream event}`.
#[derive(Deserialize)]
struct Chunk {
    bytes: String,
}

/// The `type` of an Anthropic stream event.
#[derive(Deserialize)]
struct EventType {
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// Bedrock's event-stream body as the events the adapter reads: a chunk
/// as the Anthropic event it carries (named by its `type`, so a Messages
/// client is passed it as Anthropic would send it), a Converse event as
/// its payload named by `:event-type`, an exception as its classified
/// error.
#[derive(Debug, Default)]
pub struct BedrockStream {
    frames: EventStreamDecoder,
    /// The signing key, kept out of what a decode error quotes.
    secret: Option<Secret>,
}

impl BedrockStream {
    fn events(&self, frames: Vec<Frame>, out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        for frame in frames {
            out.extend(frame_event(&frame).map_err(|e| self.redact(e))?);
        }
        Ok(())
    }

    /// serde quotes the bytes it choked on, and an exception frame the
    /// provider's message: either may hold the key.
    fn redact(&self, e: ProviderError) -> ProviderError {
        classify::redact(e, self.secret.as_ref().map(Secret::expose))
    }
}

impl StreamDecoder for BedrockStream {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        let mut frames = Vec::new();
        let fed = self.frames.feed(chunk, &mut frames);
        self.events(frames, out)?;
        fed.map_err(|e| ProviderError::new(ErrorKind::Decode, e.to_string()))
    }

    fn finish(&mut self, _out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        self.frames
            .finish()
            .map_err(|e| ProviderError::new(ErrorKind::Decode, e.to_string()))
    }
}

/// One frame as the event it carries (`None` for a frame of no interest).
pub fn frame_event(frame: &Frame) -> Result<Option<SseEvent>, ProviderError> {
    let text = || String::from_utf8_lossy(&frame.payload).into_owned();
    match frame.header(":message-type") {
        Some("exception") => {
            let mut body = ErrorBody::parse(&frame.payload);
            body.kind = frame
                .header(":exception-type")
                .map(classify::aws_type_name)
                .or(body.kind);
            Err(event_error(body, None))
        }
        Some("error") => {
            let body = ErrorBody {
                kind: frame.header(":error-code").map(classify::aws_type_name),
                message: frame.header(":error-message").map(str::to_string),
                ..ErrorBody::default()
            };
            Err(event_error(body, None))
        }
        _ => match frame.header(":event-type") {
            Some("chunk") => {
                let chunk: Chunk = serde_json::from_slice(&frame.payload).map_err(|e| {
                    ProviderError::new(ErrorKind::Decode, format!("malformed Bedrock chunk: {e}"))
                })?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(chunk.bytes.as_bytes())
                    .map_err(|e| {
                        ProviderError::new(
                            ErrorKind::Decode,
                            format!("malformed Bedrock chunk: {e}"),
                        )
                    })?;
                let data = String::from_utf8(bytes).map_err(|_| {
                    ProviderError::new(ErrorKind::Decode, "a Bedrock chunk that is not UTF-8")
                })?;
                let kind = serde_json::from_str::<EventType>(&data)
                    .ok()
                    .and_then(|t| t.kind)
                    .filter(|k| ANTHROPIC_EVENTS.contains(&k.as_str()) || k == "error");
                Ok(Some(SseEvent {
                    event: kind,
                    data,
                    id: None,
                    retry: None,
                }))
            }
            Some(name) => Ok(Some(SseEvent {
                event: Some(name.to_string()),
                data: text(),
                id: None,
                retry: None,
            })),
            None => Ok(None),
        },
    }
}
