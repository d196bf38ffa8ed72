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
//! | `POST /v1/responses`         | OpenAI Responses, whole or streamed           |
//! | `POST /v1/embeddings`        | OpenAI embeddings, failed over within one embedding model |
//! | `POST /v1/messages/count_tokens` | Anthropic token count, from a provider that serves it |
//! | `GET /v1/models`             | the configured routes (OpenAI or Anthropic shape) |
//! | `GET /v1/models/{id}`        | one route, in the same shapes                 |
//! | `GET /health`                | per provider: breaker, error rate, latency, last failure |
//! | `GET /metrics`               | this isolate's counters, Prometheus / OpenMetrics text |
//! | `GET /status`                | the status page (HTML; sign-in form at `POST /status/login`) |
//! | `GET /status/data`           | the status page's data (JSON) |
//! | `GET /`                      | a short JSON index                            |
//!
//! Errors always come in the client's format: OpenAI
//! `{"error":{"message","type","param","code"}}`, Anthropic
//! `{"type":"error","error":{"type","message"}}`. No input can panic.

mod auth;
pub(crate) mod buffered;
mod call;
mod endpoints;
mod keepalive;
mod labels;
pub mod limits;
mod log;
mod metrics;
mod models;
mod pass;
mod pass_responses;
mod point;
mod render;
mod request;
mod responses;
mod session;
mod sse;
mod status;

use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use crate::chat::Dialect;
use crate::config::{Config, ConfigError, ConfigIssue, Secret, Validated};
use crate::engine::client::{CallOptions, Client, Reply};
use crate::engine::store::BreakerStore;
use crate::engine::stream::ChatStream;
use crate::fleet::JournalSource;
use crate::format::{anthropic, openai, FormatErrorKind};
use crate::platform::{Body, Headers, Platform, UnixMillis};
use crate::policy::breaker::BreakerPolicy;
use crate::policy::stats::Health;

pub use auth::Auth;
pub use point::DataPoint;
pub use render::{error_response, render_error};
pub use request::url_path;
pub use sse::{Piece, PieceStream};

use log::{log_line, LogLine};
use render::{error_code, json_response};
pub use request::FORWARDED_HEADERS;
use request::{clip, read_body, read_chat, request_id};

/// The API format a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// OpenAI Chat Completions.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    Responses,
}

impl Format {
    /// The provider dialect of this format.
    pub fn dialect(self) -> Dialect {
        match self {
            Format::OpenAi => Dialect::OpenAi,
            Format::Anthropic => Dialect::Anthropic,
            Format::Responses => Dialect::Responses,
        }
    }

    /// The format to answer a request in when its path does not decide:
    /// Anthropic for `/v1/messages…` or an `anthropic-version` header,
    /// OpenAI otherwise.
    pub fn guess(path: &str, headers: &Headers) -> Format {
        if path.starts_with("/v1/messages") || headers.get("anthropic-version").is_some() {
            Format::Anthropic
        } else if path.starts_with("/v1/responses") {
            Format::Responses
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
    "x-hedge",
    // the status page's sign-in; read by the status routes only, never forwarded
    "cookie",
    "origin",
    "sec-fetch-site",
    "host",
    // FORWARDED_HEADERS
    "anthropic-beta",
    "openai-beta",
    "idempotency-key",
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

// ------------------------------------------------------------------ setup

/// A configuration read and validated once per isolate, before a store and
/// platform make it a [`Gateway`].
pub struct Setup {
    validated: Validated,
    auth: Auth,
    ledger: Option<Rc<dyn crate::engine::cost::SpendLedger>>,
    journals: Option<Rc<dyn JournalSource>>,
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
            Some(validated) if issues.is_empty() => Ok(Setup {
                validated,
                auth,
                ledger: None,
                journals: None,
            }),
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
        let mut builder = self.validated.into_builder(platform, Vec::new());
        if let Some(ledger) = self.ledger {
            builder = builder.spend_ledger(ledger);
        }
        let mut gateway = Gateway::new(builder.build_with_store(store), self.auth);
        gateway.journals = self.journals;
        gateway
    }

    /// Reads what the fleet remembers of each breaker from `journals`, for
    /// the status page and `/metrics` (the Worker's breaker objects).
    pub fn journals(mut self, journals: Rc<dyn JournalSource>) -> Self {
        self.journals = Some(journals);
        self
    }

    /// Keeps the routes' daily spending in `ledger` too (the Worker's
    /// fleet-wide spend objects).
    pub fn spend_ledger(mut self, ledger: Rc<dyn crate::engine::cost::SpendLedger>) -> Self {
        self.ledger = Some(ledger);
        self
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
    Model,
    Call(crate::provider::Endpoint),
    Health,
    Metrics,
    Status,
    StatusData,
    StatusLogin,
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
        p if p.len() > 11 && p.starts_with("/v1/models/") => ("GET", Route::Model),
        "/v1/embeddings" => ("POST", Route::Call(crate::provider::Endpoint::Embeddings)),
        "/v1/messages/count_tokens" => {
            ("POST", Route::Call(crate::provider::Endpoint::CountTokens))
        }
        "/v1/chat/completions" => ("POST", Route::Chat(Format::OpenAi)),
        "/v1/messages" => ("POST", Route::Chat(Format::Anthropic)),
        "/v1/responses" => ("POST", Route::Chat(Format::Responses)),
        "/v1/models" => ("GET", Route::Models),
        "/health" => ("GET", Route::Health),
        "/metrics" => ("GET", Route::Metrics),
        "/status" => ("GET", Route::Status),
        "/status/data" => ("GET", Route::StatusData),
        "/status/login" => ("POST", Route::StatusLogin),
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
    metrics: metrics::Metrics,
    changes: std::cell::RefCell<status::Changes>,
    point: std::cell::RefCell<Option<DataPoint>>,
    journals: Option<Rc<dyn JournalSource>>,
    caller_holds_keys: bool,
    /// Takes the end line of a stream whose body is dropped unfinished.
    log: Option<sse::LogSink>,
    logins: std::cell::RefCell<session::Throttle>,
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// A gateway over `client`.
    pub fn new(client: Client<P, S>, auth: Auth) -> Self {
        Self::shared(Rc::new(client), auth)
    }

    /// A gateway over a client its host also calls directly (the npm
    /// package's `client.fetch` shares the breakers of `client.chat`).
    pub fn shared(client: Rc<Client<P, S>>, auth: Auth) -> Self {
        let known = labels::Known::new(
            client.provider_ids(),
            client
                .routes()
                .values()
                .flatten()
                .map(|e| (e.provider.as_str(), e.model.as_str())),
        );
        Gateway {
            metrics: metrics::Metrics::new(known),
            client,
            auth,
            changes: Default::default(),
            point: Default::default(),
            journals: None,
            caller_holds_keys: false,
            log: None,
            logins: Default::default(),
        }
    }

    /// Errors answer the status the failures share (a lone 401 is a 401,
    /// a route of 429s a 429; [`crate::Error::caller_status`]), as the npm
    /// package's `chat()` rejects: for a host whose caller holds the
    /// providers' keys itself (`client.fetch`). A gateway's own clients get
    /// 503 for those instead: the upstream's key is not theirs to fix.
    pub fn caller_holds_keys(mut self) -> Self {
        self.caller_holds_keys = true;
        self
    }

    /// Has the end line of a streamed answer whose body the host drops
    /// before reading it to its end (the client went away) written by
    /// `sink`, with outcome `client_closed`; a body read to its end hands
    /// its line out as a [`Piece::Log`] instead. Without a sink such a
    /// line is lost.
    pub fn log_to(mut self, sink: impl Fn(&str) + 'static) -> Self {
        self.log = Some(Rc::new(sink));
        self
    }

    /// The client.
    pub fn client(&self) -> &Client<P, S> {
        &self.client
    }

    /// The data point of the request [`handle`](Gateway::handle) answered
    /// last. A host takes it right after `handle` completes, before it awaits
    /// anything else: on one thread no other request can finish in between.
    pub fn take_point(&self) -> Option<DataPoint> {
        self.point.borrow_mut().take()
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
        let limit = self.client.policy().max_request_bytes as u64;
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
            prices: Some(&self.client.cost_policy().prices).filter(|p| !p.is_empty()),
            ..LogLine::default()
        };
        let r = route(&method, &path);
        let format = match r {
            Route::Chat(f) => f,
            _ => Format::guess(&path, &headers),
        };
        log.format = Some(format);
        let oversized = limits::oversized_header(&headers);
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
            _ if oversized.is_some() => {
                log.error = Some("header_too_large");
                let name = oversized.unwrap_or_default();
                error_response(
                    format,
                    400,
                    &limits::header_message(name),
                    Some("invalid_request"),
                )
            }
            Route::Status if self.signed_in(&headers) => self.status(true).await,
            Route::Status => html_response(401, status::login_page(None)),
            Route::StatusData if self.signed_in(&headers) => self.status(false).await,
            Route::StatusLogin => self.login(&headers, body, &mut log).await,
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
            Route::Metrics => self.metrics_page().await,
            // Reached with a header key, which the guard above also takes.
            Route::StatusData => self.status(false).await,
            Route::Models => json_response(200, &models::list(self.client.routes(), format)),
            Route::Model => self.model(format, &path),
            Route::Call(e) => self.endpoint(e, format, &headers, body, &mut log).await,
            Route::Chat(format) => self.chat(format, &headers, body, &mut log).await,
        };
        let now = self.client.platform().now();
        out.headers.insert("x-request-id", request_id.as_str());
        log.status = out.status;
        log.latency_ms = now.saturating_sub(start);
        self.metrics.record(&log);
        let states = self
            .client
            .provider_ids()
            .map(|k| (k, self.client.provider_state(k)));
        self.changes.borrow_mut().observe(now, &log, states);
        *self.point.borrow_mut() = Some(DataPoint::of(&log));
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
        let bytes = match self.read_request(format, headers, body, log).await {
            Ok(b) => b,
            Err(out) => return out,
        };
        let request = match read_chat(format, &bytes, headers) {
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
            deadline: call::asked_deadline(headers),
            // A request that must not run twice says so.
            no_hedge: headers
                .get("x-hedge")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("off")),
        };
        let echo = responses::echo(format, &request);
        if request.stream && self.buffers_stream(&request, &opts) {
            let include_usage = request.wants_usage();
            return self
                .chat_buffered(format, request, opts, include_usage, echo, log)
                .await;
        }
        if request.stream {
            let include_usage = request.wants_usage();
            return self
                .chat_stream(format, request, opts, include_usage, echo, log)
                .await;
        }
        let result = self.client.chat_with(request, opts).await;
        call::answer(format, self.caller_holds_keys, result, log, |reply, log| {
            self.render_reply(format, reply, echo.as_ref(), log)
        })
    }

    /// A streamed answer: the first item is awaited before answering, so a
    /// failure before the commit point is an ordinary error with its status.
    async fn chat_stream(
        &self,
        format: Format,
        request: crate::chat::ChatRequest,
        opts: CallOptions,
        include_usage: bool,
        echo: Option<crate::format::responses::Echo>,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        let started = self.client.platform().now();
        log.stream = true;
        let mut stream = match ChatStream::open(Rc::clone(&self.client), request, opts) {
            Ok(s) => s,
            Err(e) => {
                log.error = Some(error_code(&e));
                return self.render_error(format, &e);
            }
        };
        stream.pass_through(format.dialect());
        stream.idle_timers(sse::idle_timers(&self.client));
        let keepalive = self.client.policy().keepalive;
        let (stream, first) = match keepalive::first_item(&self.client, stream, keepalive).await {
            Ok(first) => first,
            Err(pending) => {
                let then = keepalive::answer(
                    format,
                    log.request_id.to_string(),
                    started,
                    include_usage,
                    echo,
                    self.log.clone(),
                );
                let body =
                    keepalive::body(Rc::clone(&self.client), pending, format, keepalive, then);
                // No x-attempts or x-served-by: not known yet (the
                // stream's end log line has them).
                return Outbound {
                    status: 200,
                    headers: sse_headers(),
                    body: Vec::new(),
                    stream: Some(body),
                    log: String::new(),
                };
            }
        };
        let mut out = match first {
            Some(Ok(first)) => {
                log.record_attempts(stream.attempts());
                // The attempt answering is still open: it counts too.
                log.attempts += usize::from(stream.in_flight());
                log.omitted = stream.omitted().to_vec();
                let served = stream.served_by().cloned();
                log.served_by = served
                    .as_ref()
                    .map(|s| format!("{}/{}", s.provider, s.model));
                let encoder = sse::Encoder::for_first(
                    format,
                    Some(&first),
                    served.map(|s| s.model),
                    log.request_id,
                    started / 1000,
                    include_usage,
                    echo,
                );
                let headers = sse_headers();
                let body = sse::body(
                    stream,
                    encoder,
                    Ok(first),
                    log.request_id.to_string(),
                    started,
                    log.attempts,
                    self.log.clone(),
                );
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
                self.render_error(format, &e)
            }
            None => error_response(format, 502, "the stream ended before it began", None),
        };
        log.answer_headers(&mut out);
        out
    }

    /// A whole answer: the provider's body as it came when it is in the
    /// client's dialect (every field: several choices, logprobs, token
    /// details, `model` as the provider named it), else the neutral answer
    /// rendered in the client's format.
    fn render_reply(
        &self,
        format: Format,
        reply: Reply,
        echo: Option<&crate::format::responses::Echo>,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        if let (Some(dialect), Some(raw)) = (reply.response.dialect, &reply.response.raw) {
            if dialect == format.dialect() {
                let mut headers = Headers::new();
                headers.insert("content-type", "application/json");
                return Outbound {
                    status: 200,
                    headers,
                    body: raw.get().as_bytes().to_vec(),
                    stream: None,
                    log: String::new(),
                };
            }
        }
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
            Format::Responses => {
                let created = self.client.platform().now() / 1000;
                responses::render(&response, id, created, echo)
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

    /// `GET /status` (`html`) or `GET /status/data`: the same data.
    async fn status(&self, html: bool) -> Outbound {
        let fleet = self.fleet_journals().await;
        let health = self.client.health();
        let changes = self.changes.borrow();
        let now = self.client.platform().now();
        let body = status::StatusBody::new(now, &health, &changes, &fleet);
        if html {
            html_response(200, status::page(&body))
        } else {
            json_response(200, &body)
        }
    }

    /// Whether a status route's request carries a key, or a live sign-in.
    fn signed_in(&self, headers: &Headers) -> bool {
        let now = self.client.platform().now();
        session::check(&self.auth, headers, status::COOKIE, now)
    }

    /// `POST /status/login`: a form with the gateway key, from the page's
    /// own origin; an accepted key starts a signed session (the cookie
    /// holds no key). Refused keys are throttled (`session.rs`).
    async fn login(&self, headers: &Headers, body: Body, log: &mut LogLine<'_>) -> Outbound {
        let now = self.client.platform().now();
        if self.auth.is_open() {
            let problem = "auth is switched off: the status page needs no sign-in";
            return html_response(401, status::login_page(Some(problem)));
        }
        if !session::same_origin(headers) {
            log.error = Some("cross_origin");
            let problem = "sign in from the status page itself";
            return html_response(403, status::login_page(Some(problem)));
        }
        if let Some(until) = self.logins.borrow().blocked(now) {
            log.error = Some("unauthorized");
            let problem = "too many refused keys: try again in a minute";
            let mut out = html_response(429, status::login_page(Some(problem)));
            let wait = until.saturating_sub(now).div_ceil(1000);
            out.headers.insert("retry-after", wait.to_string());
            return out;
        }
        let form = read_body(body, 4096, false).await.unwrap_or_default();
        let key = form_urlencoded::parse(&form)
            .find(|(k, _)| k == "key")
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_default();
        let Some(secret) = self.auth.find(&key) else {
            self.logins.borrow_mut().fail(now);
            log.error = Some("unauthorized");
            return html_response(401, status::login_page(Some("that key is not accepted")));
        };
        let cookie = cookie::Cookie::build((status::COOKIE, session::issue(secret, now)))
            .path("/status")
            .http_only(true)
            .secure(true)
            .same_site(cookie::SameSite::Strict)
            .max_age(cookie::time::Duration::milliseconds(
                i64::try_from(session::LIFETIME_MS).unwrap_or(i64::MAX),
            ));
        let mut out = html_response(303, String::new());
        out.headers.insert("location", "/status");
        out.headers
            .insert("set-cookie", cookie.build().encoded().to_string());
        out
    }

    /// What each breaker's object has journaled, by breaker key
    /// (`provider/model`), for the keys whose objects answer (none without
    /// fleet-wide breakers). Asked all at once: the slowest object bounds
    /// the wait.
    async fn fleet_journals(&self) -> Vec<(String, crate::fleet::Journal)> {
        let Some(journals) = &self.journals else {
            return Vec::new();
        };
        let keys: Vec<String> = self
            .client
            .provider_ids()
            .flat_map(|p| self.client.provider_keys(p))
            .map(|(key, _, _)| key.to_owned())
            .collect();
        let asked = keys.iter().map(|k| journals.journal_of(k));
        let answers = futures_util::future::join_all(asked).await;
        keys.into_iter()
            .zip(answers)
            .filter_map(|(k, j)| Some((k, j?)))
            .collect()
    }

    /// `GET /metrics`.
    async fn metrics_page(&self) -> Outbound {
        let fleet = self.fleet_journals().await;
        let mut headers = Headers::new();
        headers.insert("content-type", metrics::CONTENT_TYPE);
        Outbound {
            status: 200,
            headers,
            body: self
                .metrics
                .render(&self.client.health(), &fleet, &self.client.cost_totals())
                .into_bytes(),
            stream: None,
            log: String::new(),
        }
    }

    /// `GET /health`.
    fn health(&self) -> HealthBody {
        let providers = self.client.health();
        let degraded = providers.iter().any(Health::is_degraded);
        HealthBody {
            providers,
            status: if degraded { "degraded" } else { "ok" },
            time: self.client.platform().now(),
            costs: self.client.cost_totals(),
            spend: self.client.spend(),
        }
    }

    /// `GET /v1/models/{id}`.
    fn model(&self, format: Format, path: &str) -> Outbound {
        let id = path.trim_end_matches('/').trim_start_matches("/v1/models/");
        match models::one(self.client.routes(), format, id) {
            Some(m) => json_response(200, &m),
            None => error_response(
                format,
                404,
                &format!(
                    "no route or model \"{}\" (GET /v1/models lists them)",
                    clip(id, 200)
                ),
                Some("model_not_found"),
            ),
        }
    }
}

/// An HTML page that loads nothing from elsewhere, and is not cached.
fn html_response(status: u16, html: String) -> Outbound {
    let mut headers = Headers::new();
    headers.insert("content-type", "text/html; charset=utf-8");
    headers.insert("cache-control", "no-store");
    headers.insert("content-security-policy", status::csp());
    Outbound {
        status,
        headers,
        body: html.into_bytes(),
        stream: None,
        log: String::new(),
    }
}

/// `GET /health`'s answer.
#[derive(Serialize)]
struct HealthBody {
    /// What each provider's model cost, from the usage reported.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    costs: Vec<crate::engine::cost::ModelCost>,
    providers: Vec<Health>,
    /// Each route with a daily budget: what it spent today.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    spend: Vec<crate::engine::cost::SpendHealth>,
    status: &'static str,
    time: UnixMillis,
}

/// The headers of a streamed answer.
fn sse_headers() -> Headers {
    let mut headers = Headers::new();
    headers.insert("content-type", "text/event-stream; charset=utf-8");
    headers.insert("cache-control", "no-cache");
    headers
}

/// What a streamed OpenAI request asks of the stream besides its answer.
fn index() -> Value {
    json!({
        "name": "resilient-llm gateway",
        "endpoints": [
            "POST /v1/chat/completions",
            "POST /v1/messages",
            "POST /v1/responses",
            "POST /v1/embeddings",
            "POST /v1/messages/count_tokens",
            "GET /v1/models",
            "GET /health",
            "GET /metrics",
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_headers_names_every_header_read() {
        // Every header looked up in these modules by name (a `get` on `headers`).
        let src = concat!(
            include_str!("mod.rs"),
            include_str!("auth.rs"),
            include_str!("request.rs")
        );
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
        for name in FORWARDED_HEADERS {
            assert!(
                REQUEST_HEADERS.contains(name),
                "{name} is forwarded but not read"
            );
        }
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
        assert_eq!(
            route("GET", "/v1/messages/count_tokens"),
            Route::WrongMethod("POST")
        );
        assert_eq!(route("GET", "/v1/models/a%2Fb/"), Route::Model);
        assert_eq!(route("GET", "/v1/models/"), Route::Models);
        assert_eq!(route("POST", "/v1/modelsx"), Route::NotFound);
    }
}
