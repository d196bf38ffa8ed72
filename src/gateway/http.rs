//! What passes between the host and the gateway: the client's API format,
//! the request as the host hands it over and the answer it gets back.

use std::pin::Pin;

use futures_core::Stream;
use serde::Serialize;

use crate::chat::Dialect;
use crate::platform::{Body, Headers};

/// The API format a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Format {
    /// OpenAI Chat Completions.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    Responses,
}

impl Format {
    /// The format's name, as the log line writes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::OpenAi => "openai",
            Format::Anthropic => "anthropic",
            Format::Responses => "responses",
        }
    }

    /// The provider dialect of this format.
    pub(crate) fn dialect(self) -> Dialect {
        match self {
            Format::OpenAi => Dialect::OpenAi,
            Format::Anthropic => Dialect::Anthropic,
            Format::Responses => Dialect::Responses,
        }
    }

    /// The format to answer a request in when its path does not decide:
    /// Anthropic for `/v1/messages…` or an `anthropic-version` header,
    /// OpenAI otherwise.
    pub(crate) fn guess(path: &str, headers: &Headers) -> Format {
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
    // a request's priority class, lowered (`critical`, `standard`, `sheddable`)
    "x-priority",
    // the response cache's controls
    "cache-control",
    "x-cache-ttl",
    // trace context (`crate::trace`)
    "traceparent",
    "tracestate",
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

/// One piece of a streamed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Bytes for the client.
    Bytes(Vec<u8>),
    /// A log line for the host, when the stream ends (never sent).
    Log(String),
}

/// A streamed response body.
pub type PieceStream = Pin<Box<dyn Stream<Item = Piece>>>;
