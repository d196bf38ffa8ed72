//! The edge proxy's request handling, host-neutral.
//!
//! The Worker module only moves bytes between workerd and this module:
//! routing, gateway auth, the body limit, reading either client format,
//! rendering answers and errors in the format the client spoke, response
//! headers and the JSON log line all live here, where `cargo test` reaches
//! them on the fake platform.
//!
//! | method and path              | answer                                        |
//! |------------------------------|-----------------------------------------------|
//! | `POST /v1/chat/completions`  | OpenAI Chat Completions, whole or streamed    |
//! | `POST /v1/messages`          | Anthropic Messages, whole or streamed         |
//! | `GET /v1/models`             | the configured routes (OpenAI or Anthropic shape) |
//! | `GET /health`                | per provider: breaker, error rate, latency, last failure |
//! | `GET /`                      | a short JSON index                            |
//!
//! Errors always come in the client's format: OpenAI
//! `{"error":{"message","type","param","code"}}`, Anthropic
//! `{"type":"error","error":{"type","message"}}`. No input can panic.

mod sse;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::config::{Config, ConfigError, ConfigIssue, Secret, Validated};
use crate::engine::client::{CallOptions, Client, Entry, Reply};
use crate::engine::store::BreakerStore;
use crate::engine::stream::ChatStream;
use crate::error::{AttemptOutcome, Error, ErrorKind};
use crate::format::{anthropic, openai, FormatErrorKind};
use crate::platform::{Body, Headers, Platform, UnixMillis};
use crate::policy::breaker::{BreakerPolicy, StateName};
use crate::policy::stats::Health;

pub use sse::{Piece, PieceStream};

/// The API format a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// OpenAI Chat Completions.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl Format {
    /// The format to answer a request in when its path does not decide:
    /// Anthropic for `/v1/messages…` or an `anthropic-version` header,
    /// OpenAI otherwise.
    pub fn guess(path: &str, headers: &Headers) -> Format {
        if path.starts_with("/v1/messages") || headers.get("anthropic-version").is_some() {
            Format::Anthropic
        } else {
            Format::OpenAi
        }
    }
}

/// Every request header the gateway reads. A host for which copying all of
/// a request's headers costs more than looking a few up (workerd: an
/// iteration of a `Headers` through JS) may hand over just these.
pub const REQUEST_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "anthropic-version",
    "content-length",
    "x-request-id",
    "x-request-timeout-ms",
];

/// An incoming request, as the host hands it over.
pub struct Inbound {
    /// `GET`, `POST`, ….
    pub method: String,
    /// The URL path, without the query.
    pub path: String,
    /// Request headers: all of them, or at least [`REQUEST_HEADERS`].
    pub headers: Headers,
    /// The body, read only as far as the limit allows.
    pub body: Body,
}

/// The answer to hand back to the host.
pub struct Outbound {
    /// HTTP status.
    pub status: u16,
    /// Response headers.
    pub headers: Headers,
    /// The JSON body (empty for a stream).
    pub body: Vec<u8>,
    /// A streamed body (server-sent events), instead of `body`. Its
    /// [`Piece::Log`] items are for the host's log, not the client.
    /// Dropping it (the client went away) aborts the upstream request.
    pub stream: Option<PieceStream>,
    /// One structured JSON log line for the request (no secret, no body).
    pub log: String,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .field("body_len", &self.body.len())
            .field("stream", &self.stream.is_some())
            .finish()
    }
}

// ------------------------------------------------------------------ auth

/// Gateway auth: the client keys accepted, or the explicit opt-out.
#[derive(Clone)]
pub struct Auth {
    keys: Vec<Secret>,
    open: bool,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("keys", &self.keys.len())
            .field("open", &self.open)
            .finish()
    }
}

impl Auth {
    /// Accepts any of `keys`.
    pub fn keys(keys: Vec<Secret>) -> Self {
        Auth { keys, open: false }
    }

    /// Accepts every request. For local demos only.
    pub fn open() -> Self {
        Auth {
            keys: Vec::new(),
            open: true,
        }
    }

    /// Whether auth is switched off.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Whether the request carries an accepted key, as
    /// `Authorization: Bearer <key>` or `x-api-key: <key>`. Every key is
    /// compared in constant time, all of them every time.
    pub fn check(&self, headers: &Headers) -> bool {
        if self.open {
            return true;
        }
        let bearer = headers
            .get("authorization")
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        let offered = [bearer, headers.get("x-api-key").map(str::trim)];
        let mut ok = false;
        for candidate in offered.into_iter().flatten() {
            for key in &self.keys {
                ok |= ct_eq(candidate.as_bytes(), key.expose().as_bytes());
            }
        }
        ok
    }
}

/// Compares two byte strings in time that depends only on their lengths.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

// ------------------------------------------------------------------ setup

/// A configuration read and validated once per isolate, before a store and
/// platform make it a [`Gateway`].
pub struct Setup {
    validated: Validated,
    auth: Auth,
}

impl Setup {
    /// Reads the `CONFIG` JSON and the secrets it names. Every problem is
    /// reported at once, each with its path; no message holds a secret.
    pub fn load(
        config: Option<&str>,
        secret: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Setup, ConfigError> {
        let Some(json) = config.filter(|c| !c.trim().is_empty()) else {
            return Err(ConfigError {
                issues: vec![ConfigIssue::new(
                    "CONFIG",
                    "not set: give the gateway its configuration as one JSON document \
                     (wrangler.toml [vars] CONFIG)",
                )],
            });
        };
        let config = Config::parse(json)?;
        let mut issues = Vec::new();
        let auth = auth_from(&config, secret, &mut issues);
        let validated = match config.validate(secret, &[]) {
            Ok(v) => Some(v),
            Err(e) => {
                issues.extend(e.issues);
                None
            }
        };
        match validated {
            Some(validated) if issues.is_empty() => Ok(Setup { validated, auth }),
            _ => Err(ConfigError { issues }),
        }
    }

    /// Gateway auth.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// The breaker policy of every provider without its own.
    pub fn breaker(&self) -> BreakerPolicy {
        self.validated.policies.breaker
    }

    /// Per-provider breaker policies, in provider id order.
    pub fn breakers(&self) -> &[(String, BreakerPolicy)] {
        &self.validated.breakers
    }

    /// The end-to-end deadline of a request.
    pub fn deadline(&self) -> Duration {
        self.validated.policies.client.deadline
    }

    /// The gateway, on `platform`, with breakers in `store`.
    pub fn into_gateway<P: Platform + 'static, S: BreakerStore + 'static>(
        self,
        platform: P,
        store: S,
    ) -> Gateway<P, S> {
        let client = self
            .validated
            .into_builder(platform, Vec::new())
            .build_with_store(store);
        Gateway::new(client, self.auth)
    }
}

fn auth_from(
    config: &Config,
    secret: &dyn Fn(&str) -> Option<String>,
    issues: &mut Vec<ConfigIssue>,
) -> Auth {
    let g = &config.gateway;
    let mut keys = Vec::new();
    for (i, name) in g.client_keys_env.iter().enumerate() {
        match secret(name).filter(|k| !k.trim().is_empty()) {
            Some(k) => keys.push(Secret::new(k.trim())),
            None => issues.push(ConfigIssue::new(
                format!("gateway.clientKeysEnv[{i}]"),
                format!("secret \"{name}\" is not set (wrangler secret put {name})"),
            )),
        }
    }
    if g.allow_unauthenticated {
        if !g.client_keys_env.is_empty() {
            issues.push(ConfigIssue::new(
                "gateway.allowUnauthenticated",
                "cannot be combined with clientKeysEnv",
            ));
        }
        return Auth::open();
    }
    if g.client_keys_env.is_empty() {
        issues.push(ConfigIssue::new(
            "gateway.clientKeysEnv",
            "no client keys: name the secrets holding them, or set \
             gateway.allowUnauthenticated for a local demo only",
        ));
    }
    Auth::keys(keys)
}

/// The 500 for a configuration that did not validate: every issue with its
/// path, in the client's format.
pub fn config_error(
    err: &ConfigError,
    path: &str,
    headers: &Headers,
    request_id: &str,
) -> Outbound {
    let format = Format::guess(path, headers);
    let mut out = error_response(format, 500, &err.to_string(), Some("invalid_configuration"));
    out.headers.insert("x-request-id", request_id);
    out.log = log_line(&mut LogLine {
        level: "error",
        request_id,
        path,
        status: 500,
        error: Some("invalid_configuration"),
        message: Some(&err.to_string()),
        ..LogLine::default()
    });
    out
}

// ------------------------------------------------------------------ routing

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Chat(Format),
    Models,
    Health,
    Index,
    NotFound,
    WrongMethod(&'static str),
}

fn route(method: &str, path: &str) -> Route {
    let path = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    let (want, r) = match path {
        "/v1/chat/completions" => ("POST", Route::Chat(Format::OpenAi)),
        "/v1/messages" => ("POST", Route::Chat(Format::Anthropic)),
        "/v1/models" => ("GET", Route::Models),
        "/health" => ("GET", Route::Health),
        "/" => ("GET", Route::Index),
        _ => return Route::NotFound,
    };
    let head_ok = want == "GET" && method.eq_ignore_ascii_case("HEAD");
    if method.eq_ignore_ascii_case(want) || head_ok {
        r
    } else {
        Route::WrongMethod(want)
    }
}

// ------------------------------------------------------------------ the gateway

/// The edge proxy: a [`Client`] plus auth, behind [`Gateway::handle`].
pub struct Gateway<P: Platform, S: BreakerStore> {
    client: Rc<Client<P, S>>,
    auth: Auth,
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// A gateway over `client`.
    pub fn new(client: Client<P, S>, auth: Auth) -> Self {
        Gateway {
            client: Rc::new(client),
            auth,
        }
    }

    /// The client.
    pub fn client(&self) -> &Client<P, S> {
        &self.client
    }

    /// Gateway auth.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// Whether a host that can read a request body in one call (a JS
    /// `arrayBuffer()`) should, given the request's headers: when its
    /// declared length is within the limit. An oversized body must not be
    /// buffered to answer 413, and one of unknown length (chunked) may be
    /// oversized: both are read as a stream, as far as the limit allows.
    pub fn reads_body_whole(&self, headers: &Headers) -> bool {
        let limit = self.client.policy.max_request_bytes as u64;
        headers
            .get("content-length")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n <= limit)
    }

    /// Answers one request.
    pub async fn handle(&self, req: Inbound) -> Outbound {
        let Inbound {
            method,
            path,
            headers,
            body,
        } = req;
        let start = self.client.platform().now();
        let request_id = request_id(&headers, self.client.platform());
        let mut log = LogLine {
            request_id: &request_id,
            method: Some(&method),
            path: &path,
            auth_disabled: self.auth.is_open(),
            ..LogLine::default()
        };
        let r = route(&method, &path);
        let format = match r {
            Route::Chat(f) => f,
            _ => Format::guess(&path, &headers),
        };
        log.format = Some(format);
        let mut out = match r {
            Route::NotFound => error_response(
                format,
                404,
                &format!("no such endpoint: {}", clip(&path, 200)),
                Some("not_found"),
            ),
            Route::WrongMethod(allow) => {
                let mut o = error_response(
                    format,
                    405,
                    &format!("method {} not allowed here; use {allow}", clip(&method, 16)),
                    Some("method_not_allowed"),
                );
                o.headers.insert("allow", allow);
                o
            }
            Route::Index => json_response(200, &index()),
            _ if !self.auth.check(&headers) => {
                log.error = Some("unauthorized");
                error_response(
                    format,
                    401,
                    "invalid or missing API key: send it as Authorization: Bearer <key> or x-api-key",
                    Some("invalid_api_key"),
                )
            }
            Route::Health => json_response(200, &self.health()),
            Route::Models => json_response(200, &self.models(format)),
            Route::Chat(format) => self.chat(format, &headers, body, &mut log).await,
        };
        let now = self.client.platform().now();
        out.headers.insert("x-request-id", request_id.as_str());
        log.status = out.status;
        log.latency_ms = now.saturating_sub(start);
        out.log = log_line(&mut log);
        out
    }

    async fn chat(
        &self,
        format: Format,
        headers: &Headers,
        body: Body,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        let limit = self.client.policy.max_request_bytes;
        let declared = headers
            .get("content-length")
            .and_then(|v| v.trim().parse::<u64>().ok());
        let bytes = match read_body(body, limit, declared.is_some_and(|n| n > limit as u64)).await {
            Ok(b) => b,
            Err(BodyError::TooLarge) => {
                log.error = Some("request_too_large");
                return too_large(format, limit);
            }
            Err(BodyError::Unreadable) => {
                log.error = Some("bad_body");
                return error_response(format, 400, "the request body could not be read", None);
            }
        };
        let parsed = match format {
            Format::OpenAi => openai::parse_request(&bytes),
            Format::Anthropic => anthropic::parse_request(&bytes),
        };
        let request = match parsed {
            Ok(r) => r,
            Err(e) => {
                log.error = Some(match e.kind {
                    FormatErrorKind::Malformed => "malformed_request",
                    FormatErrorKind::Unsupported => "unsupported_request",
                });
                return error_response(format, 400, &e.to_string(), Some("invalid_request"));
            }
        };
        let route_name = request.model.clone();
        log.route = route_name.clone();
        let opts = CallOptions {
            route: None,
            deadline: headers
                .get("x-request-timeout-ms")
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
        };
        if request.stream {
            let include_usage = format == Format::OpenAi
                && serde_json::from_slice::<StreamOptions>(&bytes)
                    .is_ok_and(|o| o.stream_options.is_some_and(|o| o.include_usage));
            return self
                .chat_stream(format, request, opts, include_usage, log)
                .await;
        }
        let result = self.client.chat_with(request, opts).await;
        log.record_attempts(
            result
                .as_ref()
                .map_or_else(|e| e.attempts(), |r| r.attempts.as_slice()),
        );
        let mut out = match result {
            Ok(reply) => {
                log.served_by = Some(format!(
                    "{}/{}",
                    reply.served_by.provider, reply.served_by.model
                ));
                self.render_reply(format, reply, log)
            }
            Err(e) => {
                log.error = Some(error_code(&e));
                render_error(format, &e)
            }
        };
        log.answer_headers(&mut out);
        out
    }

    /// A streamed answer: the first item is awaited before answering, so a
    /// failure before the commit point is an ordinary error with its status.
    async fn chat_stream(
        &self,
        format: Format,
        request: crate::chat::ChatRequest,
        opts: CallOptions,
        include_usage: bool,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        let started = self.client.platform().now();
        log.stream = true;
        let mut stream = match ChatStream::open(Rc::clone(&self.client), request, opts) {
            Ok(s) => s,
            Err(e) => {
                log.error = Some(error_code(&e));
                return render_error(format, &e);
            }
        };
        let mut out = match stream.next().await {
            Some(Ok(first)) => {
                log.record_attempts(stream.attempts());
                let served = stream.served_by().cloned();
                log.served_by = served
                    .as_ref()
                    .map(|s| format!("{}/{}", s.provider, s.model));
                let model = match &first {
                    crate::chat::Delta::Start { model: Some(m) } => m.clone(),
                    _ => served.map(|s| s.model).unwrap_or_default(),
                };
                let encoder =
                    sse::Encoder::new(format, log.request_id, started / 1000, model, include_usage);
                let mut headers = Headers::new();
                headers.insert("content-type", "text/event-stream; charset=utf-8");
                headers.insert("cache-control", "no-cache");
                let body = sse::body(stream, encoder, first, log.request_id.to_string(), started);
                Outbound {
                    status: 200,
                    headers,
                    body: Vec::new(),
                    stream: Some(body),
                    log: String::new(),
                }
            }
            Some(Err(e)) => {
                log.record_attempts(e.attempts());
                log.error = Some(error_code(&e));
                render_error(format, &e)
            }
            None => error_response(format, 502, "the stream ended before it began", None),
        };
        log.answer_headers(&mut out);
        out
    }

    fn render_reply(&self, format: Format, reply: Reply, log: &mut LogLine<'_>) -> Outbound {
        let mut response = reply.response;
        if response.model.trim().is_empty() {
            response.model = reply.served_by.model.clone();
        }
        let id = log.request_id;
        match format {
            Format::OpenAi => {
                let created = self.client.platform().now() / 1000;
                json_response(
                    200,
                    &openai::render_response(&response, &format!("chatcmpl-{id}"), created),
                )
            }
            Format::Anthropic => {
                match anthropic::render_response(&response, &format!("msg_{id}")) {
                    Ok(v) => json_response(200, &v),
                    Err(e) => {
                        log.error = Some("untranslatable_response");
                        error_response(
                            format,
                            502,
                            &format!("the answer cannot be given in this format: {e}"),
                            None,
                        )
                    }
                }
            }
        }
    }

    /// `GET /health`.
    fn health(&self) -> HealthBody {
        let providers = self.client.health();
        let degraded = providers.iter().any(|h| h.state != StateName::Closed);
        HealthBody {
            providers,
            status: if degraded { "degraded" } else { "ok" },
            time: self.client.platform().now(),
        }
    }

    /// `GET /v1/models`: every configured route.
    fn models(&self, format: Format) -> Value {
        let routes: &BTreeMap<String, Vec<Entry>> = self.client.routes();
        match format {
            Format::OpenAi => json!({
                "object": "list",
                "data": routes.iter().map(|(name, entries)| json!({
                    "id": name,
                    "object": "model",
                    "created": 0,
                    "owned_by": "resilient-llm",
                    "entries": entries.iter().map(|e| format!("{}/{}", e.provider, e.model)).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            }),
            Format::Anthropic => {
                let data: Vec<Value> = routes
                    .keys()
                    .map(|name| {
                        json!({
                            "type": "model",
                            "id": name,
                            "display_name": name,
                            "created_at": "1970-01-01T00:00:00Z",
                        })
                    })
                    .collect();
                json!({
                    "first_id": routes.keys().next(),
                    "last_id": routes.keys().next_back(),
                    "has_more": false,
                    "data": data,
                })
            }
        }
    }
}

/// `GET /health`'s answer.
#[derive(Serialize)]
struct HealthBody {
    providers: Vec<Health>,
    status: &'static str,
    time: UnixMillis,
}

/// What a streamed OpenAI request asks of the stream besides its answer.
#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    stream_options: Option<IncludeUsage>,
}

#[derive(Deserialize)]
struct IncludeUsage {
    #[serde(default)]
    include_usage: bool,
}

/// The most of an oversized body read (and thrown away) before answering
/// 413: a client still sending when the answer comes may see a reset
/// instead of the 413.
const DRAIN_CAP: usize = 16 << 20;

enum BodyError {
    TooLarge,
    Unreadable,
}

/// Reads the body up to `limit` bytes. Over it (or when `over` already),
/// keeps nothing but reads on to the end (up to [`DRAIN_CAP`]) and fails
/// with `TooLarge`.
async fn read_body(mut body: Body, limit: usize, mut over: bool) -> Result<Vec<u8>, BodyError> {
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = body.chunk().await {
        let Ok(chunk) = chunk else {
            return Err(if over {
                BodyError::TooLarge
            } else {
                BodyError::Unreadable
            });
        };
        seen = seen.saturating_add(chunk.len());
        if !over {
            buf.extend_from_slice(&chunk);
            if buf.len() > limit {
                over = true;
                buf = Vec::new();
            }
        }
        if seen > DRAIN_CAP {
            break;
        }
    }
    if over {
        Err(BodyError::TooLarge)
    } else {
        Ok(buf)
    }
}

fn index() -> Value {
    json!({
        "name": "resilient-llm gateway",
        "endpoints": [
            "POST /v1/chat/completions",
            "POST /v1/messages",
            "GET /v1/models",
            "GET /health",
        ],
    })
}

fn too_large(format: Format, limit: usize) -> Outbound {
    error_response(
        format,
        413,
        &format!("request body larger than {limit} bytes"),
        Some("request_too_large"),
    )
}

/// A short machine name for an error, for the log and the OpenAI `code`.
fn error_code(e: &Error) -> &'static str {
    match e {
        Error::AllProvidersFailed(_) => "all_providers_failed",
        Error::Rejected { .. } => "rejected_by_provider",
        Error::InvalidRequest(_) => "invalid_request",
        Error::UnknownRoute(_) => "model_not_found",
        Error::Interrupted { .. } => "interrupted",
    }
}

/// A chain error in the client's format, with `Retry-After` when known.
pub fn render_error(format: Format, e: &Error) -> Outbound {
    let status = e.status();
    let (message, code) = match e {
        Error::AllProvidersFailed(x) => (x.headline(), Some(error_code(e).to_string())),
        // Returned as is: the provider's own reason and code.
        Error::Rejected { error, .. } => (
            if error.message.is_empty() {
                error.kind.describe().to_string()
            } else {
                error.message.clone()
            },
            error.code.clone(),
        ),
        Error::InvalidRequest(m) => (m.clone(), Some(error_code(e).to_string())),
        Error::UnknownRoute(name) => (
            format!(
                "model \"{}\" names no configured route or model (GET /v1/models lists them)",
                clip(name, 200)
            ),
            Some(error_code(e).to_string()),
        ),
        // Only streams are interrupted; this gateway answers whole bodies.
        Error::Interrupted { .. } => (e.to_string(), Some(error_code(e).to_string())),
    };
    let mut body = error_body(format, status, &message, code.as_deref());
    if let Error::AllProvidersFailed(x) = e {
        // The attempts, for humans debugging a failover; SDKs ignore it.
        if let (Some(error), Ok(attempts)) = (
            body.get_mut("error").and_then(Value::as_object_mut),
            serde_json::to_value(&x.attempts),
        ) {
            error.insert("attempts".into(), attempts);
        }
    }
    let mut out = json_response(status, &body);
    if let Some(after) = e.retry_after() {
        out.headers.insert(
            "retry-after",
            // Retry-After takes whole seconds: rounded up, at least one.
            (after.as_secs() + u64::from(after.subsec_nanos() > 0))
                .max(1)
                .to_string(),
        );
    }
    out
}

/// An error answer in the client's format.
pub fn error_response(format: Format, status: u16, message: &str, code: Option<&str>) -> Outbound {
    json_response(status, &error_body(format, status, message, code))
}

fn error_body(format: Format, status: u16, message: &str, code: Option<&str>) -> Value {
    match format {
        Format::OpenAi => openai::render_error(status, message, code),
        Format::Anthropic => anthropic::render_error(status, message),
    }
}

fn json_response(status: u16, body: &impl Serialize) -> Outbound {
    let mut headers = Headers::new();
    headers.insert("content-type", "application/json");
    Outbound {
        status,
        headers,
        body: to_json(body, 512),
        stream: None,
        log: String::new(),
    }
}

/// `value` as JSON, written into a buffer of `capacity` bytes to start
/// with. The crate's shapes are plain data (string keys, no fallible
/// `Serialize`), so writing them cannot fail; an empty text stands for the
/// impossible case rather than a panic.
fn to_json(value: &impl Serialize, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    match serde_json::to_writer(&mut out, value) {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}

/// [`to_json`], as text.
fn to_json_text(value: &impl Serialize, capacity: usize) -> String {
    String::from_utf8(to_json(value, capacity)).unwrap_or_default()
}

/// The client's `x-request-id` when it is short and plain, else a new one.
fn request_id(headers: &Headers, platform: &impl Platform) -> String {
    if let Some(id) = headers.get("x-request-id") {
        let plain = id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if plain && (8..=64).contains(&id.len()) {
            return id.to_string();
        }
    }
    let mut id = String::with_capacity(20);
    for _ in 0..2 {
        let n = (platform.random() * (1u64 << 40) as f64) as u64;
        id.push_str(&format!("{n:010x}"));
    }
    id
}

/// The path of an absolute URL (`https://host/v1/messages?x` →
/// `/v1/messages`), as a host hands over a request's URL; `/` when it has
/// none. The URL is a serialized WHATWG URL already, so no parser needed.
pub fn url_path(url: &str) -> &str {
    let rest = match url.find("://") {
        Some(i) => &url[i + 3..],
        None => url,
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let rest = &rest[..end];
    match rest.find('/') {
        Some(i) => &rest[i..],
        None => "/",
    }
}

fn clip(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

// ------------------------------------------------------------------ logging

/// One request's log line. The fields are in their keys' sorted order, so
/// every line lists its keys in one order.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct LogLine<'a> {
    attempts: usize,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    auth_disabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<Format>,
    latency_ms: UnixMillis,
    /// Empty until written: `error` for a 5xx answer, `info` otherwise.
    level: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    msg: &'static str,
    path: &'a str,
    request_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    route: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    served_by: Option<String>,
    status: u16,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    trail: Vec<TrailItem>,
}

impl LogLine<'_> {
    /// Notes the attempts: how many reached a provider, and the trail.
    fn record_attempts(&mut self, attempts: &[crate::error::Attempt]) {
        self.attempts = attempts.iter().filter(|a| a.number > 0).count();
        self.trail = attempts
            .iter()
            .map(|a| TrailItem {
                provider: a.provider.clone(),
                model: a.model.clone(),
                number: a.number,
                duration_ms: crate::platform::millis(a.duration),
                outcome: match &a.outcome {
                    AttemptOutcome::Success => Outcome::Ok,
                    AttemptOutcome::Failure { error } => Outcome::Failed(error.kind),
                },
                status: a.error().and_then(|e| e.status),
            })
            .collect();
    }

    /// `x-attempts` and `x-served-by` on an answer.
    fn answer_headers(&self, out: &mut Outbound) {
        out.headers.insert("x-attempts", self.attempts.to_string());
        if let Some(s) = &self.served_by {
            out.headers.insert("x-served-by", s.as_str());
        }
    }
}

/// One attempt in a log line's trail (keys sorted, as in [`LogLine`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TrailItem {
    duration_ms: u64,
    model: String,
    number: u32,
    outcome: Outcome,
    provider: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
}

/// How an attempt ended: `ok`, or the failure's kind (`rate_limited`, …).
#[derive(Debug)]
enum Outcome {
    Ok,
    Failed(ErrorKind),
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Outcome::Ok => s.serialize_str("ok"),
            Outcome::Failed(kind) => kind.serialize(s),
        }
    }
}

/// The log line's text, its level decided by the status when not set.
fn log_line(l: &mut LogLine<'_>) -> String {
    if l.level.is_empty() {
        l.level = if l.status >= 500 { "error" } else { "info" };
    }
    l.msg = "request";
    to_json_text(l, 384)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_list_their_keys_sorted_and_decide_their_level() {
        let attempts = [
            crate::error::Attempt {
                provider: "p".into(),
                model: "m".into(),
                number: 1,
                started_at: 3,
                duration: Duration::from_millis(12),
                reached: true,
                usage: None,
                omitted: Vec::new(),
                outcome: AttemptOutcome::Failure {
                    error: crate::error::ProviderError::new(ErrorKind::RateLimited, "x")
                        .with_status(429),
                },
            },
            crate::error::Attempt {
                provider: "q\"".into(),
                model: "m".into(),
                number: 0,
                started_at: 3,
                duration: Duration::ZERO,
                reached: false,
                usage: None,
                omitted: Vec::new(),
                outcome: AttemptOutcome::Success,
            },
        ];
        let mut full = LogLine {
            request_id: "r1",
            method: Some("POST"),
            path: "/v1/messages",
            format: Some(Format::Anthropic),
            route: Some("default".into()),
            status: 503,
            served_by: Some("p/m".into()),
            latency_ms: 42,
            error: Some("all_providers_failed"),
            message: Some("bad\nthing"),
            auth_disabled: true,
            stream: true,
            ..LogLine::default()
        };
        full.record_attempts(&attempts);
        assert_eq!(
            log_line(&mut full),
            concat!(
                r#"{"attempts":1,"authDisabled":true,"error":"all_providers_failed","#,
                r#""format":"anthropic","latencyMs":42,"level":"error","message":"bad\nthing","#,
                r#""method":"POST","msg":"request","path":"/v1/messages","requestId":"r1","#,
                r#""route":"default","servedBy":"p/m","status":503,"stream":true,"trail":["#,
                r#"{"durationMs":12,"model":"m","number":1,"outcome":"rate_limited","#,
                r#""provider":"p","status":429},"#,
                r#"{"durationMs":0,"model":"m","number":0,"outcome":"ok","provider":"q\""}]}"#,
            )
        );
        for (level, status, want) in [
            ("", 200, "info"),
            ("", 500, "error"),
            ("error", 200, "error"),
        ] {
            let mut l = LogLine {
                level,
                status,
                ..LogLine::default()
            };
            let v: Value = serde_json::from_str(&log_line(&mut l)).unwrap();
            assert_eq!(v["level"], want);
            assert_eq!(v["msg"], "request");
            assert_eq!(v.as_object().map(|o| o.len()), Some(7), "{v}");
        }
    }

    #[test]
    fn constant_time_comparison_is_still_a_comparison() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"abcd"));
        assert!(!ct_eq(b"", b"a"));
        assert!(ct_eq(b"", b""));
    }

    #[test]
    fn request_headers_names_every_header_read() {
        // Every header looked up in this module by name (a `get` on `headers`).
        let src = include_str!("mod.rs");
        let mut read = Vec::new();
        for (i, _) in src.match_indices(".get(\"") {
            if src[..i].trim_end().ends_with("headers") {
                let name = &src[i + 6..];
                read.push(&name[..name.find('"').unwrap()]);
            }
        }
        assert!(read.len() >= 6, "{read:?}");
        for name in read {
            assert!(
                REQUEST_HEADERS.contains(&name),
                "{name} is read but not in REQUEST_HEADERS"
            );
        }
    }

    #[test]
    fn paths_of_urls() {
        assert_eq!(
            url_path("https://gw.example/v1/messages?beta=1"),
            "/v1/messages"
        );
        assert_eq!(url_path("http://127.0.0.1:8787/"), "/");
        assert_eq!(url_path("http://127.0.0.1:8787"), "/");
        assert_eq!(url_path("http://h?q=/x"), "/");
        assert_eq!(url_path("http://h/a/b#f"), "/a/b");
        assert_eq!(
            url_path("http://h/v1/chat/completions/"),
            "/v1/chat/completions/"
        );
    }

    #[test]
    fn routes_and_methods() {
        assert_eq!(
            route("POST", "/v1/messages/"),
            Route::Chat(Format::Anthropic)
        );
        assert_eq!(
            route("post", "/v1/chat/completions"),
            Route::Chat(Format::OpenAi)
        );
        assert_eq!(route("HEAD", "/health"), Route::Health);
        assert_eq!(route("POST", "/health"), Route::WrongMethod("GET"));
        assert_eq!(route("GET", "/v1/messages/count_tokens"), Route::NotFound);
    }

    #[test]
    fn keys_in_either_header() {
        let auth = Auth::keys(vec![Secret::new("k1"), Secret::new("k2")]);
        let h = |n: &str, v: &str| [(n, v)].into_iter().collect::<Headers>();
        assert!(auth.check(&h("authorization", "Bearer k2")));
        assert!(auth.check(&h("x-api-key", "k1")));
        assert!(!auth.check(&h("authorization", "k1")));
        assert!(!auth.check(&h("x-api-key", "k3")));
        assert!(!Auth::keys(vec![]).check(&h("x-api-key", "")));
    }
}
