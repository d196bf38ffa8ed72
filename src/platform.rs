//! The host: clock, timers, randomness and HTTP, handed to the core.
//!
//! The core never reads a clock, starts a timer, draws a random number or opens
//! a socket itself (`clippy.toml` forbids it); everything goes through a
//! [`Platform`]. Native tests use [`crate::testing::FakePlatform`], the npm
//! package and the Worker use the web platform over the JS globals.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;

/// Milliseconds since the Unix epoch. Wall-clock time, because breaker
/// snapshots outlive the isolate that wrote them.
pub type UnixMillis = u64;

/// The host: clock, timers, randomness, HTTP. Single-threaded by design.
#[allow(async_fn_in_trait)] // futures are !Send on wasm; nothing here crosses threads
pub trait Platform {
    /// Wall-clock time in milliseconds since the Unix epoch.
    fn now(&self) -> UnixMillis;
    /// A uniform random number in `[0, 1)`.
    fn random(&self) -> f64;
    /// Completes after `dur`. Dropping the future cancels the timer.
    fn sleep(&self, dur: Duration) -> impl Future<Output = ()>;
    /// Sends `req` and resolves once the status and headers are in; the body
    /// streams afterwards. Dropping the returned future, or the body, MUST
    /// abort the request. With a [`timeout`](HttpRequest::timeout), the
    /// platform MUST abort the request once it has passed, and fail the wait
    /// for the status line, or the body read after it, with
    /// [`TransportErrorKind::TimedOut`].
    fn fetch(&self, req: HttpRequest)
        -> impl Future<Output = Result<HttpResponse, TransportError>>;
}

/// An HTTP request built by a provider adapter.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// `GET`, `POST`, ….
    pub method: String,
    /// Absolute URL.
    pub url: String,
    /// Header names are lower case.
    pub headers: Headers,
    /// The request body (JSON for every provider).
    pub body: Vec<u8>,
    /// The whole exchange's time limit, from the call to the body's end:
    /// the host's own timer aborts the request when it passes (on the web,
    /// a `setTimeout` whose callback is the `AbortController`'s own `abort`,
    /// not a Rust closure). `None` for no limit.
    pub timeout: Option<Duration>,
    /// Sampling hints of the request that the provider has no setting
    /// for, left out of `body` (never sent; the attempt's record names
    /// them).
    pub omitted: Vec<String>,
}

impl HttpRequest {
    /// A `POST` of a JSON body.
    pub fn post_json(url: impl Into<String>, body: Vec<u8>) -> Self {
        let mut headers = Headers::new();
        headers.insert("content-type", "application/json");
        HttpRequest {
            method: "POST".into(),
            url: url.into(),
            headers,
            body,
            timeout: None,
            omitted: Vec::new(),
        }
    }
}

impl fmt::Debug for HttpRequest {
    // Headers carry provider keys: never print them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &self.headers.names().collect::<Vec<_>>())
            .field("body_len", &self.body.len())
            .field("timeout", &self.timeout)
            .field("omitted", &self.omitted)
            .finish()
    }
}

/// An ordered, case-insensitive header list (names stored in lower case).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Headers(Vec<(String, String)>);

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Headers(Vec::new())
    }

    /// Sets `name` to `value`, replacing any earlier value.
    pub fn insert(&mut self, name: &str, value: impl Into<String>) {
        let name = name.to_ascii_lowercase();
        self.0.retain(|(n, _)| *n != name);
        self.0.push((name, value.into()));
    }

    /// Adds a value without removing earlier ones.
    pub fn append(&mut self, name: &str, value: impl Into<String>) {
        self.0.push((name.to_ascii_lowercase(), value.into()));
    }

    /// The first value of `name`, compared case-insensitively.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every `(name, value)` pair in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// The header names, for logs that must not show values.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| n.as_str())
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl<N: AsRef<str>, V: Into<String>> FromIterator<(N, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Self {
        let mut h = Headers::new();
        for (n, v) in iter {
            h.append(n.as_ref(), v);
        }
        h
    }
}

/// A response whose status and headers have arrived; the body streams.
pub struct HttpResponse {
    /// HTTP status code.
    pub status: u16,
    /// Response headers.
    pub headers: Headers,
    /// The body, read chunk by chunk.
    pub body: Body,
}

impl fmt::Debug for HttpResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpResponse")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

/// A response read to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferedResponse {
    /// HTTP status code.
    pub status: u16,
    /// Response headers.
    pub headers: Headers,
    /// The whole body.
    pub body: Vec<u8>,
}

/// A body's chunks, as a boxed stream.
pub type ChunkStream = Pin<Box<dyn Stream<Item = Result<Vec<u8>, TransportError>>>>;

/// A whole body read in one call, as a boxed future.
pub type WholeRead = Pin<Box<dyn Future<Output = Result<Vec<u8>, TransportError>>>>;

/// A body a host can read either whole, in one call, or chunk by chunk; the
/// reader decides ([`Body::read_to_end`] asks for it whole, [`Body::chunk`]
/// streams it). Whole reads cost a host with a per-call overhead (a JS
/// `arrayBuffer()` against a `ReadableStream` reader loop) far less.
pub trait BodySource {
    /// The whole body in one read, when the host can tell beforehand that it
    /// fits in `limit` bytes (a declared length); else the chunks.
    fn whole(self: Box<Self>, limit: usize) -> Result<WholeRead, ChunkStream>;
    /// The body chunk by chunk.
    fn chunks(self: Box<Self>) -> ChunkStream;
}

/// A response body: chunks as they arrive. Dropping it aborts the transfer.
pub struct Body(BodyInner);

enum BodyInner {
    Full(Option<Vec<u8>>),
    Stream(ChunkStream),
    Whole(Option<WholeRead>),
    Source(Option<Box<dyn BodySource>>),
}

impl Body {
    /// A body that is already complete.
    pub fn full(bytes: impl Into<Vec<u8>>) -> Self {
        Body(BodyInner::Full(Some(bytes.into())))
    }

    /// A body read from a stream of chunks.
    pub fn stream(s: impl Stream<Item = Result<Vec<u8>, TransportError>> + 'static) -> Self {
        Body(BodyInner::Stream(Box::pin(s)))
    }

    /// A body read in one call: the future resolves to all of it, which
    /// [`chunk`](Body::chunk) hands over as one chunk.
    pub fn whole(read: impl Future<Output = Result<Vec<u8>, TransportError>> + 'static) -> Self {
        Body(BodyInner::Whole(Some(Box::pin(read))))
    }

    /// A body read whole or by chunks, as its reader asks (see [`BodySource`]).
    pub fn source(source: impl BodySource + 'static) -> Self {
        Body(BodyInner::Source(Some(Box::new(source))))
    }

    /// The next chunk; `None` at the end of the body.
    pub async fn chunk(&mut self) -> Option<Result<Vec<u8>, TransportError>> {
        if let BodyInner::Source(source) = &mut self.0 {
            let source = source.take()?;
            self.0 = BodyInner::Stream(source.chunks());
        }
        match &mut self.0 {
            BodyInner::Full(bytes) => bytes.take().map(Ok),
            BodyInner::Stream(s) => poll_fn(|cx| s.as_mut().poll_next(cx)).await,
            BodyInner::Whole(read) => match read {
                Some(r) => {
                    let out = r.await;
                    *read = None;
                    Some(out)
                }
                None => None,
            },
            BodyInner::Source(_) => None,
        }
    }

    /// Reads the whole body, failing once it grows past `limit` bytes.
    pub async fn read_to_end(mut self, limit: usize) -> Result<Vec<u8>, TransportError> {
        if let BodyInner::Source(source) = &mut self.0 {
            match source.take().map(|s| s.whole(limit)) {
                Some(Ok(read)) => self.0 = BodyInner::Whole(Some(read)),
                Some(Err(chunks)) => self.0 = BodyInner::Stream(chunks),
                None => return Ok(Vec::new()),
            }
        }
        let mut out = Vec::new();
        while let Some(chunk) = self.chunk().await {
            let chunk = chunk?;
            if out.is_empty() {
                out = chunk; // a whole body, or the first chunk: no copy
            } else {
                out.extend_from_slice(&chunk);
            }
            if out.len() > limit {
                return Err(too_large(limit));
            }
        }
        Ok(out)
    }
}

fn too_large(limit: usize) -> TransportError {
    TransportError::new(
        TransportErrorKind::BodyTooLarge,
        format!("response body larger than {limit} bytes"),
    )
}

/// What went wrong below HTTP: the request got no (complete) response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct TransportError {
    /// The class of failure.
    pub kind: TransportErrorKind,
    /// Detail from the host, for humans.
    pub message: String,
}

impl TransportError {
    /// A transport error of `kind`.
    pub fn new(kind: TransportErrorKind, message: impl Into<String>) -> Self {
        TransportError {
            kind,
            message: message.into(),
        }
    }

    /// Classifies a host's error message (Node, browsers and workerd only give
    /// text) into a kind. Unknown text is [`TransportErrorKind::Other`].
    pub fn from_message(message: impl Into<String>) -> Self {
        let message = message.into();
        let lower = message.to_ascii_lowercase();
        let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
        let kind = if has(&[
            "econnreset",
            "reset",
            "socket hang up",
            "epipe",
            "other side closed",
        ]) {
            TransportErrorKind::Reset
        } else if has(&["econnrefused", "refused"]) {
            TransportErrorKind::Refused
        } else if has(&["enotfound", "eai_again", "dns", "name not resolved"]) {
            TransportErrorKind::Dns
        } else if has(&["tls", "ssl", "certificate"]) {
            TransportErrorKind::Tls
        } else if has(&["abort"]) {
            TransportErrorKind::Aborted
        } else {
            TransportErrorKind::Other
        };
        TransportError { kind, message }
    }

    /// Whether the request may have reached the server: a reset or a cut
    /// body happen after sending; refused, DNS and TLS failures before.
    pub fn reached(&self) -> bool {
        match self.kind {
            TransportErrorKind::Reset
            | TransportErrorKind::BodyTooLarge
            | TransportErrorKind::Aborted
            | TransportErrorKind::TimedOut
            | TransportErrorKind::Other => true,
            TransportErrorKind::Refused | TransportErrorKind::Dns | TransportErrorKind::Tls => {
                false
            }
        }
    }
}

/// Classes of transport failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TransportErrorKind {
    /// The connection was reset or closed mid-response.
    Reset,
    /// Nothing listened at the address.
    Refused,
    /// The host name did not resolve.
    Dns,
    /// The TLS handshake failed.
    Tls,
    /// The response body exceeded the configured limit.
    BodyTooLarge,
    /// The host aborted the request.
    Aborted,
    /// The request's [`timeout`](HttpRequest::timeout) passed before its
    /// response was complete.
    TimedOut,
    /// Anything else the host reported.
    Other,
}

impl fmt::Display for TransportErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransportErrorKind::Reset => "connection reset",
            TransportErrorKind::Refused => "connection refused",
            TransportErrorKind::Dns => "DNS failure",
            TransportErrorKind::Tls => "TLS failure",
            TransportErrorKind::BodyTooLarge => "body too large",
            TransportErrorKind::Aborted => "aborted",
            TransportErrorKind::TimedOut => "timed out",
            TransportErrorKind::Other => "network error",
        })
    }
}

/// Converts a [`Duration`] to whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
