//! Google Vertex AI: one publisher's models in one project and region.
//!
//! - `publisher: "anthropic"`: Claude models through `rawPredict` and
//!   `streamRawPredict`, which take the Messages API body without `model`
//!   and with Vertex's `anthropic_version`, and answer as the Messages API
//!   does (whole and as its SSE events). The Anthropic adapter encodes and
//!   decodes; a Messages client's own body is sent as written, with those
//!   two edits, and its stream passes through.
//! - `publisher: "google"`: Gemini models through `generateContent` and
//!   `streamGenerateContent?alt=sse`, translated both ways by
//!   [`crate::format::gemini`].
//!
//! Every request carries `Authorization: Bearer` with an access token of
//! the configured service account ([`token`]), fetched before the request
//! when none is held. Errors come in Google's shape (`{"error": {"code",
//! "message", "status"}}`) and go through the shared classifier: 429
//! `RESOURCE_EXHAUSTED` is a rate limit, 503 `UNAVAILABLE` a server fault,
//! a 400 about the token count a context-length failure, 401/403 auth.

pub(crate) mod token;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::anthropic::Anthropic;
use super::classify::{self, ErrorBody};
use super::credential::Credential;
use super::{decode_data, decode_success, endpoint, Capabilities, Endpoint, Models, Provider};
use crate::chat::{ChatRequest, ChatResponse, Delta, Dialect};
use crate::error::{ErrorKind, ProviderError};
use crate::format::gemini;
use crate::platform::{BufferedResponse, HttpRequest, UnixMillis};
use crate::secret::Secret;
use crate::sse::SseEvent;

pub use token::ServiceAccount;

/// The `anthropic_version` Vertex AI takes in a Messages body.
pub(crate) const ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Whose models an entry serves, and so which API it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Publisher {
    /// Claude, through the Messages API (`rawPredict`).
    Anthropic,
    /// Gemini, through `generateContent`.
    Google,
}

impl Publisher {
    fn path(self) -> &'static str {
        match self {
            Publisher::Anthropic => "anthropic",
            Publisher::Google => "google",
        }
    }
}

/// The default endpoint of a region: `https://{region}-aiplatform.googleapis.com`,
/// without a prefix for the `global` location.
pub(crate) fn default_base_url(region: &str) -> String {
    if region == "global" {
        "https://aiplatform.googleapis.com".into()
    } else {
        format!("https://{region}-aiplatform.googleapis.com")
    }
}

/// A Vertex AI adapter. Built with [`Vertex::new`] or from configuration
/// (`"kind": "vertex"`) by [`crate::build_provider`].
#[derive(Debug)]
pub struct Vertex {
    id: String,
    base_url: String,
    project: String,
    region: String,
    publisher: Publisher,
    account: ServiceAccount,
    /// Encodes and decodes the Messages API for the `anthropic` publisher.
    anthropic: Anthropic,
    models: Models,
}

impl Vertex {
    /// An adapter named `id` for `publisher`'s models in `project` and
    /// `region`, authorised as `account`.
    pub fn new(
        id: impl Into<String>,
        project: impl Into<String>,
        region: impl Into<String>,
        publisher: Publisher,
        account: ServiceAccount,
    ) -> Self {
        let id = id.into();
        let region = region.into();
        let models = Models::new(Capabilities {
            prefill: publisher == Publisher::Anthropic,
            tools: true,
            ..Capabilities::default()
        });
        Vertex {
            anthropic: Anthropic::new(id.clone()).models(models.clone()),
            base_url: default_base_url(&region),
            id,
            project: project.into(),
            region,
            publisher,
            account,
            models,
        }
    }

    /// Sets the base URL (a regional endpoint by default).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_string();
        self
    }

    /// Sets the model capabilities.
    pub fn models(mut self, models: Models) -> Self {
        self.anthropic = self.anthropic.models(models.clone());
        self.models = models;
        self
    }

    /// Sets the `max_tokens` sent to a Claude model when a request has none.
    pub fn default_max_tokens(mut self, n: u32) -> Self {
        self.anthropic = self.anthropic.default_max_tokens(n);
        self
    }

    /// The URL of `model`'s `method`.
    fn url(&self, model: &str, method: &str) -> String {
        format!(
            "{}/v1/projects/{}/locations/{}/publishers/{}/models/{model}:{method}",
            self.base_url,
            self.project,
            self.region,
            self.publisher.path()
        )
    }

    /// The request, as the Anthropic adapter writes it for the Messages
    /// API, moved to `rawPredict`: `model` is in the URL, the version in
    /// the body.
    fn encode_anthropic(
        &self,
        req: &ChatRequest,
        model: &str,
    ) -> Result<HttpRequest, ProviderError> {
        let mut http = self.anthropic.encode(req, model)?;
        let mut body: Map<String, Value> = serde_json::from_slice(&http.body)
            .map_err(|e| ProviderError::new(ErrorKind::InvalidRequest, e.to_string()))?;
        body.remove("model");
        body.insert("anthropic_version".into(), ANTHROPIC_VERSION.into());
        http.body = serde_json::to_vec(&body)
            .map_err(|e| ProviderError::new(ErrorKind::InvalidRequest, e.to_string()))?;
        http.headers = http
            .headers
            .iter()
            .filter(|(name, _)| *name != "anthropic-version")
            .collect();
        let method = if req.stream {
            "streamRawPredict"
        } else {
            "rawPredict"
        };
        http.url = self.url(model, method);
        Ok(http)
    }

    /// The service account's token on `http`. The engine made it fresh
    /// just before; none held means no fetch was made (a caller driving the
    /// adapter by hand).
    fn bearer(&self, http: &mut HttpRequest) -> Result<(), ProviderError> {
        let Some(token) = self.account.current() else {
            return Err(ProviderError::new(
                ErrorKind::Auth,
                "no access token: the service account's token was not fetched",
            ));
        };
        http.headers
            .insert("authorization", format!("Bearer {}", token.expose()));
        Ok(())
    }

    fn encode_gemini(&self, req: &ChatRequest, model: &str) -> Result<HttpRequest, ProviderError> {
        self.models.check(req, model)?;
        let encoded = gemini::encode_request(req).map_err(|e| e.into_request_error())?;
        let body = serde_json::to_vec(&encoded)
            .map_err(|e| ProviderError::new(ErrorKind::InvalidRequest, e.to_string()))?;
        let method = if req.stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        let mut http = HttpRequest::post_json(self.url(model, method), body);
        http.omitted = encoded.omitted;
        Ok(http)
    }
}

impl Provider for Vertex {
    fn id(&self) -> &str {
        &self.id
    }

    fn genai_name(&self) -> &str {
        "gcp.vertex_ai"
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.base_url)
    }

    fn encode(&self, req: &ChatRequest, model: &str) -> Result<HttpRequest, ProviderError> {
        let mut http = match self.publisher {
            Publisher::Anthropic => self.encode_anthropic(req, model)?,
            Publisher::Google => self.encode_gemini(req, model)?,
        };
        self.bearer(&mut http)?;
        Ok(http)
    }

    fn decode(
        &self,
        resp: &BufferedResponse,
        now: UnixMillis,
    ) -> Result<ChatResponse, ProviderError> {
        let token = self.account.current();
        let secret = token.as_ref().map(Secret::expose);
        match self.publisher {
            Publisher::Anthropic => self
                .anthropic
                .decode(resp, now)
                .map_err(|e| classify::redact(e, secret)),
            Publisher::Google => {
                let mut out = decode_success(
                    resp,
                    now,
                    secret,
                    gemini::decode_response,
                    ErrorBody::from_value,
                )?;
                out.provider = self.id.clone();
                Ok(out)
            }
        }
    }

    fn decode_event(&self, ev: &SseEvent) -> Result<Vec<Delta>, ProviderError> {
        let token = self.account.current();
        let secret = token.as_ref().map(Secret::expose);
        match self.publisher {
            Publisher::Anthropic => self
                .anthropic
                .decode_event(ev)
                .map_err(|e| classify::redact(e, secret)),
            Publisher::Google => {
                let data = ev.data.trim();
                if data.is_empty() {
                    return Ok(Vec::new());
                }
                decode_data(data, secret, gemini::decode_chunk, ErrorBody::from_value)
            }
        }
    }

    fn capabilities(&self, model: &str) -> Capabilities {
        self.models.get(model)
    }

    fn dialect(&self) -> Option<Dialect> {
        match self.publisher {
            Publisher::Anthropic => Some(Dialect::Anthropic),
            Publisher::Google => None,
        }
    }

    fn credential(&self) -> Option<&dyn Credential> {
        Some(&self.account)
    }

    fn serves(&self, endpoint: Endpoint) -> bool {
        endpoint == Endpoint::CountTokens && self.publisher == Publisher::Anthropic
    }

    /// Claude's token count: one `count-tokens:rawPredict` path for every
    /// model, which stays in the body, with Vertex's `anthropic_version`.
    fn encode_endpoint(
        &self,
        endpoint: Endpoint,
        body: Vec<u8>,
        _model: &str,
    ) -> Result<HttpRequest, ProviderError> {
        if !self.serves(endpoint) {
            return Err(endpoint::unsupported(&self.id, endpoint));
        }
        let invalid =
            |e: serde_json::Error| ProviderError::new(ErrorKind::InvalidRequest, e.to_string());
        let mut body: Map<String, Value> = serde_json::from_slice(&body).map_err(invalid)?;
        body.entry("anthropic_version")
            .or_insert_with(|| ANTHROPIC_VERSION.into());
        let url = self.url("count-tokens", "rawPredict");
        let mut http = HttpRequest::post_json(url, serde_json::to_vec(&body).map_err(invalid)?);
        self.bearer(&mut http)?;
        Ok(http)
    }

    fn decode_endpoint(
        &self,
        endpoint: Endpoint,
        resp: &BufferedResponse,
        now: UnixMillis,
    ) -> Result<Vec<u8>, ProviderError> {
        let token = self.account.current();
        endpoint::decode(endpoint, resp, now, token.as_ref().map(Secret::expose))
    }
}
