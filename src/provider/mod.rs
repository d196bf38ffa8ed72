//! Upstreams behind one abstraction.
//!
//! An HTTP [`Provider`] is sans-IO: it encodes a [`ChatRequest`] into an
//! [`HttpRequest`] and decodes a [`BufferedResponse`] into a [`ChatResponse`]
//! or a classified [`ProviderError`], with no IO of its own, so the same
//! adapter runs natively, in the Worker and in the npm package, and tests on
//! recorded fixtures. A [`CustomProvider`] is any async function that answers
//! a chat request (a JS object in the npm package, a scripted fake in tests).

use std::future::Future;
use std::pin::Pin;

use crate::chat::{ChatRequest, ChatResponse};
use crate::error::ProviderError;
use crate::platform::{BufferedResponse, HttpRequest, UnixMillis};

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
}

/// A sans-IO HTTP adapter for one provider.
pub trait Provider {
    /// The provider's id in the configuration (`anthropic`, `groq`, …).
    fn id(&self) -> &str;

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

    /// What `model` can do.
    fn capabilities(&self, model: &str) -> Capabilities;
}

/// A boxed, non-`Send` future.
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A provider implemented as an async call rather than HTTP: the articles'
/// `{ name, chat(request, signal) }`. Dropping the returned future must
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
