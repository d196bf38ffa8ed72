//! `"kind": "vertex"` in the `providers` map.
//!
//! ```json
//! "vertex": { "kind": "vertex", "publisher": "anthropic", "project": "my-project",
//!             "region": "us-east5", "serviceAccountKeyEnv": "VERTEX_SERVICE_ACCOUNT_KEY",
//!             "models": { "claude-sonnet-4-5@20250929": {} } }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::{Check, ModelConfig};
use crate::provider::vertex::{Publisher, ServiceAccount, Vertex};
use crate::secret::Secret;

/// The secret read for the key when `serviceAccountKeyEnv` is not set.
pub(crate) const DEFAULT_KEY_ENV: &str = "GOOGLE_SERVICE_ACCOUNT_KEY";

/// `"kind": "vertex"`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VertexConfig {
    /// Whose models: `"anthropic"` (Claude, the Messages API) or
    /// `"google"` (Gemini).
    pub(crate) publisher: Publisher,
    /// The Google Cloud project id.
    pub(crate) project: String,
    /// The location (`us-east5`, `europe-west1`, `global`).
    pub(crate) region: String,
    /// Base URL (default `https://{region}-aiplatform.googleapis.com`).
    #[serde(default)]
    pub(crate) base_url: Option<String>,
    /// The service account's key file itself, as JSON text or an object
    /// (for the npm package).
    #[serde(default, deserialize_with = "key_json")]
    pub(crate) service_account_key: Option<Secret>,
    /// The env var / Worker secret holding the key file's JSON (default
    /// `GOOGLE_SERVICE_ACCOUNT_KEY`).
    #[serde(default)]
    pub(crate) service_account_key_env: Option<String>,
    /// Per-model capabilities.
    #[serde(default)]
    pub(crate) models: BTreeMap<String, ModelConfig>,
    /// `max_tokens` sent to a Claude model when a request sets none
    /// (default 4096).
    #[serde(default)]
    pub(crate) default_max_tokens: Option<u32>,
}

/// A key file given as JSON text or as the object itself, kept as text.
fn key_json<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Secret>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(Secret::new(s))),
        Some(v @ Value::Object(_)) => Ok(Some(Secret::new(v.to_string()))),
        Some(_) => Err(serde::de::Error::custom(
            "serviceAccountKey must be the key file's JSON, as text or an object",
        )),
    }
}

/// A project id or location as it may stand in a URL path.
fn path_segment(v: &mut Check<'_>, field: &str, value: &str) {
    let ok = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if !ok {
        v.issue(field, "must be a non-empty name of letters, digits, - _ .");
    }
}

/// Validates the entry and builds the adapter; `None` after an issue.
pub(crate) fn build(
    id: &str,
    c: &VertexConfig,
    secret: &dyn Fn(&str) -> Option<String>,
    v: &mut Check<'_>,
) -> Option<Vertex> {
    path_segment(v, "project", &c.project);
    path_segment(v, "region", &c.region);
    let key = v.secret(
        ("serviceAccountKey", "serviceAccountKeyEnv"),
        &c.service_account_key,
        &c.service_account_key_env,
        Some(DEFAULT_KEY_ENV),
        true,
        secret,
    );
    let account = key.and_then(|key| match ServiceAccount::from_json(key.expose()) {
        Ok(a) => Some(a),
        Err(why) => {
            let field = if c.service_account_key.is_some() {
                "serviceAccountKey"
            } else {
                "serviceAccountKeyEnv"
            };
            v.issue(field, format!("the service-account key {why}"));
            None
        }
    });
    let models = v.models(&c.models, c.publisher == Publisher::Anthropic);
    let base = crate::provider::vertex::default_base_url(&c.region);
    let url = v.url(c.base_url.as_deref(), Some(&base));
    if c.default_max_tokens == Some(0) {
        v.issue("defaultMaxTokens", "must be at least 1");
    }
    let mut p = Vertex::new(
        id,
        c.project.clone(),
        c.region.clone(),
        c.publisher,
        account?,
    )
    .models(models);
    if let Some(url) = url {
        p = p.base_url(url);
    }
    if let Some(n) = c.default_max_tokens {
        p = p.default_max_tokens(n);
    }
    Some(p)
}
