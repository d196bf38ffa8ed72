//! Provider configuration: the `providers` map of the one JSON shape, and
//! [`build`], which validates an entry and turns it into an adapter.
//!
//! ```json
//! {
//!   "anthropic": { "kind": "anthropic", "models": { "claude-sonnet-4-5": { "contextWindow": 200000 } } },
//!   "openai":    { "kind": "openai", "organization": "org-1" },
//!   "groq":      { "kind": "openai-compatible", "preset": "groq" },
//!   "azure":     { "kind": "openai-compatible", "preset": "azure",
//!                  "baseUrl": "https://my-resource.openai.azure.com", "deployment": "gpt-4o" },
//!   "local":     { "kind": "openai-compatible", "preset": "ollama" },
//!   "bedrock":   { "kind": "bedrock", "region": "us-east-1" }
//! }
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

mod vertex;

use self::vertex::VertexConfig;
use crate::format::anthropic::StructuredOutput;
use crate::format::openai::MaxTokensField;
use crate::issue::ConfigIssue;
use crate::provider::anthropic::Anthropic;
use crate::provider::bedrock::sigv4::Credentials;
use crate::provider::bedrock::Bedrock;
use crate::provider::openai::OpenAi;
use crate::provider::preset::PresetName;
use crate::provider::{Capabilities, Models, Provider};
use crate::secret::Secret;

/// One entry of `providers`, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind")]
pub enum ProviderConfig {
    /// `"kind": "anthropic"`: the Messages API.
    #[serde(rename = "anthropic")]
    Anthropic(AnthropicConfig),
    /// `"kind": "openai"`: OpenAI's Chat Completions.
    #[serde(rename = "openai")]
    OpenAi(OpenAiConfig),
    /// `"kind": "openai-compatible"`: a preset's Chat Completions.
    #[serde(rename = "openai-compatible")]
    Compatible(CompatibleConfig),
    /// `"kind": "bedrock"`: AWS Bedrock's runtime, SigV4-signed.
    #[serde(rename = "bedrock")]
    Bedrock(BedrockConfig),
    /// `"kind": "vertex"`: one publisher's models on Google Vertex AI.
    #[serde(rename = "vertex")]
    Vertex(VertexConfig),
}

impl ProviderConfig {
    /// The models configured for this provider, by name.
    pub(crate) fn models(&self) -> &BTreeMap<String, ModelConfig> {
        match self {
            ProviderConfig::Anthropic(c) => &c.models,
            ProviderConfig::OpenAi(c) => &c.models,
            ProviderConfig::Compatible(c) => &c.models,
            ProviderConfig::Bedrock(c) => &c.models,
            ProviderConfig::Vertex(c) => &c.models,
        }
    }
}

impl ProviderConfig {
    /// The mistake in an entry, read again as its kind's struct. serde
    /// reads a tagged enum from a buffer, out of serde_path_to_error's
    /// sight, so a mistake inside an entry is reported at the entry; this
    /// names its field within (`preset`, `models.m.contextWindow`). `None`
    /// for an entry that is not an object with a known `kind`, or that
    /// reads.
    pub(crate) fn mistake_in(
        entry: Value,
    ) -> Option<serde_path_to_error::Error<serde_json::Error>> {
        let Value::Object(mut entry) = entry else {
            return None;
        };
        let kind = entry.remove("kind")?;
        let rest = Value::Object(entry);
        // The tags of the enum's variants.
        match kind.as_str()? {
            "anthropic" => serde_path_to_error::deserialize::<_, AnthropicConfig>(rest).err(),
            "openai" => serde_path_to_error::deserialize::<_, OpenAiConfig>(rest).err(),
            "openai-compatible" => {
                serde_path_to_error::deserialize::<_, CompatibleConfig>(rest).err()
            }
            "bedrock" => serde_path_to_error::deserialize::<_, BedrockConfig>(rest).err(),
            "vertex" => serde_path_to_error::deserialize::<_, VertexConfig>(rest).err(),
            _ => None,
        }
    }
}

/// What a model can do and what it costs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ModelConfig {
    /// Context window in tokens.
    #[serde(default)]
    pub(crate) context_window: Option<u32>,
    /// Continues a trailing assistant message (default: Anthropic yes,
    /// OpenAI-style no).
    #[serde(default)]
    pub(crate) prefill: Option<bool>,
    /// Accepts tools (default yes).
    #[serde(default)]
    pub(crate) tools: Option<bool>,
    /// US dollars per million input tokens.
    #[serde(default)]
    pub(crate) input_price_per_mtok: Option<f64>,
    /// US dollars per million output tokens.
    #[serde(default)]
    pub(crate) output_price_per_mtok: Option<f64>,
    /// US dollars per million input tokens read from the prompt cache
    /// (default: the input price).
    #[serde(default)]
    pub(crate) cached_input_price_per_mtok: Option<f64>,
    /// US dollars per million input tokens written to the prompt cache
    /// (default: the input price).
    #[serde(default)]
    pub(crate) cache_write_price_per_mtok: Option<f64>,
    /// How an Anthropic model is asked for a structured answer
    /// (`response_format` from an OpenAI client): `"tool"` (the default,
    /// a forced tool whose input is the answer) or `"native"` (Anthropic's
    /// `output_format`, for models that support it).
    #[serde(default)]
    pub(crate) structured_output: Option<StructuredOutput>,
}

/// `"kind": "anthropic"`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AnthropicConfig {
    /// Base URL (default the Anthropic API).
    #[serde(default)]
    pub(crate) base_url: Option<String>,
    /// The key itself (for the npm package).
    #[serde(default)]
    pub(crate) api_key: Option<Secret>,
    /// The env var / Worker secret holding the key (default
    /// `ANTHROPIC_API_KEY`).
    #[serde(default)]
    pub(crate) api_key_env: Option<String>,
    /// Per-model capabilities.
    #[serde(default)]
    pub(crate) models: BTreeMap<String, ModelConfig>,
    /// Extra, non-secret headers.
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    /// `anthropic-version` (default `2023-06-01`).
    #[serde(default)]
    pub(crate) anthropic_version: Option<String>,
    /// `max_tokens` when a request sets none (default 4096).
    #[serde(default)]
    pub(crate) default_max_tokens: Option<u32>,
    /// Several secrets, each a key of its own: the provider becomes a
    /// tier of one upstream per key (`config/keys.rs`). Last, so an entry
    /// written as a shorter sequence still reads.
    #[serde(default)]
    pub(crate) api_key_envs: Option<Vec<super::KeyEnv>>,
}

/// `"kind": "openai"`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OpenAiConfig {
    /// Base URL (default the OpenAI API).
    #[serde(default)]
    pub(crate) base_url: Option<String>,
    /// The key itself (for the npm package).
    #[serde(default)]
    pub(crate) api_key: Option<Secret>,
    /// The env var / Worker secret holding the key (default
    /// `OPENAI_API_KEY`).
    #[serde(default)]
    pub(crate) api_key_env: Option<String>,
    /// Per-model capabilities.
    #[serde(default)]
    pub(crate) models: BTreeMap<String, ModelConfig>,
    /// Extra, non-secret headers.
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    /// `OpenAI-Organization`.
    #[serde(default)]
    pub(crate) organization: Option<String>,
    /// `OpenAI-Project`.
    #[serde(default)]
    pub(crate) project: Option<String>,
    /// `max_tokens` or `max_completion_tokens` (default the latter).
    #[serde(default)]
    pub(crate) max_tokens_field: Option<MaxTokensField>,
    /// Ask for usage on streams (default yes).
    #[serde(default)]
    pub(crate) stream_usage: Option<bool>,
    /// Several secrets, each a key of its own: the provider becomes a
    /// tier of one upstream per key (`config/keys.rs`). Last, so an entry
    /// written as a shorter sequence still reads.
    #[serde(default)]
    pub(crate) api_key_envs: Option<Vec<super::KeyEnv>>,
}

/// `"kind": "openai-compatible"`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CompatibleConfig {
    /// Which provider.
    pub(crate) preset: PresetName,
    /// Base URL (default the preset's; required for azure and custom).
    #[serde(default)]
    pub(crate) base_url: Option<String>,
    /// The key itself (for the npm package).
    #[serde(default)]
    pub(crate) api_key: Option<Secret>,
    /// The env var / Worker secret holding the key (default the preset's,
    /// e.g. `GROQ_API_KEY`; none for self-hosted servers).
    #[serde(default)]
    pub(crate) api_key_env: Option<String>,
    /// Per-model capabilities.
    #[serde(default)]
    pub(crate) models: BTreeMap<String, ModelConfig>,
    /// Extra, non-secret headers.
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    /// Endpoint path (default the preset's).
    #[serde(default)]
    pub(crate) path: Option<String>,
    /// Azure deployment (default the model name).
    #[serde(default)]
    pub(crate) deployment: Option<String>,
    /// `api-version` query parameter (Azure default `2024-10-21`).
    #[serde(default)]
    pub(crate) api_version: Option<String>,
    /// `max_tokens` or `max_completion_tokens` (default the preset's).
    #[serde(default)]
    pub(crate) max_tokens_field: Option<MaxTokensField>,
    /// Ask for usage on streams (default the preset's).
    #[serde(default)]
    pub(crate) stream_usage: Option<bool>,
    /// Several secrets, each a key of its own: the provider becomes a
    /// tier of one upstream per key (`config/keys.rs`). Last, so an entry
    /// written as a shorter sequence still reads.
    #[serde(default)]
    pub(crate) api_key_envs: Option<Vec<super::KeyEnv>>,
}

/// `"kind": "bedrock"`. Each credential is given itself (the npm package)
/// or as the name of the env var / Worker secret holding it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BedrockConfig {
    /// The AWS region (`us-east-1`): the signing scope and the default host.
    pub(crate) region: String,
    /// Base URL (default `https://bedrock-runtime.<region>.amazonaws.com`).
    #[serde(default)]
    pub(crate) base_url: Option<String>,
    /// The access key id itself.
    #[serde(default)]
    pub(crate) access_key_id: Option<Secret>,
    /// The secret holding the access key id (default `AWS_ACCESS_KEY_ID`).
    #[serde(default)]
    pub(crate) access_key_id_env: Option<String>,
    /// The secret access key itself.
    #[serde(default)]
    pub(crate) secret_access_key: Option<Secret>,
    /// The secret holding the secret access key (default
    /// `AWS_SECRET_ACCESS_KEY`).
    #[serde(default)]
    pub(crate) secret_access_key_env: Option<String>,
    /// A session token itself (temporary credentials).
    #[serde(default)]
    pub(crate) session_token: Option<Secret>,
    /// The secret holding a session token (default `AWS_SESSION_TOKEN`,
    /// used when set).
    #[serde(default)]
    pub(crate) session_token_env: Option<String>,
    /// Per-model capabilities, by Bedrock model id or inference profile.
    #[serde(default)]
    pub(crate) models: BTreeMap<String, ModelConfig>,
    /// Extra, non-secret headers.
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    /// `anthropic_version` in Messages bodies (default `bedrock-2023-05-31`).
    #[serde(default)]
    pub(crate) anthropic_version: Option<String>,
    /// `max_tokens` when a request to an Anthropic model sets none (default 4096).
    #[serde(default)]
    pub(crate) default_max_tokens: Option<u32>,
}

/// The part of an OpenAI-compatible endpoint path a base URL as the
/// OpenAI SDK takes it already ends with: the path without its
/// `/chat/completions` (`/v1`, `/openai/v1`, `/v1beta/openai`); empty when
/// the path has no such tail or a `{deployment}` in it (Azure).
fn api_root(path: &str) -> &str {
    match path.strip_suffix("/chat/completions") {
        Some(root) if !root.contains('{') => root,
        _ => "",
    }
}

/// Validates one provider entry and builds its adapter. `secret` looks up
/// an environment variable or Worker secret by name; `path` is the entry's
/// path (`providers.openai`). Every problem is pushed to `issues` with its
/// path; the adapter is returned only when there was none. No message ever
/// holds a secret's value.
pub fn build_provider(
    id: &str,
    cfg: &ProviderConfig,
    secret: &dyn Fn(&str) -> Option<String>,
    path: &str,
    issues: &mut Vec<ConfigIssue>,
) -> Option<Box<dyn Provider>> {
    let before = issues.len();
    let mut v = Check { path, issues };
    let provider: Box<dyn Provider> = match cfg {
        ProviderConfig::Anthropic(c) => {
            let key = v.key(
                &c.api_key,
                &c.api_key_env,
                Some("ANTHROPIC_API_KEY"),
                true,
                secret,
            );
            let mut p = Anthropic::new(id).models(v.models(&c.models, true));
            if let Some(url) = v.api_url(
                c.base_url.as_deref(),
                Some(crate::provider::anthropic::DEFAULT_BASE_URL),
                "/v1",
            ) {
                p = p.base_url(url);
            }
            for (name, value) in v.headers(&c.headers) {
                p = p.header(name, value);
            }
            if let Some(version) = &c.anthropic_version {
                v.non_empty("anthropicVersion", version);
                p = p.version(version.clone());
            }
            if let Some(n) = c.default_max_tokens {
                if n == 0 {
                    v.issue("defaultMaxTokens", "must be at least 1");
                }
                p = p.default_max_tokens(n);
            }
            if let Some(key) = key {
                p = p.api_key(key);
            }
            Box::new(p)
        }
        ProviderConfig::OpenAi(c) => {
            let key = v.key(
                &c.api_key,
                &c.api_key_env,
                Some("OPENAI_API_KEY"),
                true,
                secret,
            );
            let mut p = OpenAi::new(id, PresetName::OpenAi).models(v.models(&c.models, false));
            let preset = PresetName::OpenAi.preset();
            if let Some(url) = v.api_url(
                c.base_url.as_deref(),
                preset.base_url,
                api_root(preset.path),
            ) {
                p = p.base_url(url);
            }
            for (name, value) in v.headers(&c.headers) {
                p = p.header(name, value);
            }
            if let Some(org) = &c.organization {
                v.non_empty("organization", org);
                p = p.organization(org.clone());
            }
            if let Some(project) = &c.project {
                v.non_empty("project", project);
                p = p.project(project.clone());
            }
            if let Some(f) = c.max_tokens_field {
                p = p.max_tokens_field(f);
            }
            if let Some(on) = c.stream_usage {
                p = p.stream_usage(on);
            }
            if let Some(key) = key {
                p = p.api_key(key);
            }
            Box::new(p)
        }
        ProviderConfig::Compatible(c) => {
            let preset = c.preset.preset();
            let key = v.key(
                &c.api_key,
                &c.api_key_env,
                preset.key_env,
                preset.key_required,
                secret,
            );
            let mut p = OpenAi::new(id, c.preset).models(v.models(&c.models, false));
            let endpoint = c.path.as_deref().unwrap_or(preset.path);
            if let Some(url) = v.api_url(c.base_url.as_deref(), preset.base_url, api_root(endpoint))
            {
                p = p.base_url(url);
            }
            for (name, value) in v.headers(&c.headers) {
                p = p.header(name, value);
            }
            if let Some(path) = &c.path {
                if !path.starts_with('/') {
                    v.issue("path", "must start with /");
                }
                p = p.path(path.clone());
            }
            if let Some(d) = &c.deployment {
                if !endpoint.contains("{deployment}") {
                    v.issue(
                        "deployment",
                        "only used by paths with {deployment} (preset azure)",
                    );
                } else if d.is_empty() || d.contains(['/', '?', '#']) {
                    v.issue("deployment", "must be a non-empty name without / ? #");
                }
                p = p.deployment(d.clone());
            }
            if let Some(version) = &c.api_version {
                v.non_empty("apiVersion", version);
                p = p.api_version(version.clone());
            }
            if let Some(f) = c.max_tokens_field {
                p = p.max_tokens_field(f);
            }
            if let Some(on) = c.stream_usage {
                p = p.stream_usage(on);
            }
            if let Some(key) = key {
                p = p.api_key(key);
            }
            Box::new(p)
        }
        ProviderConfig::Bedrock(c) => {
            let region_ok = !c.region.is_empty()
                && c.region
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-');
            if !region_ok {
                v.issue("region", "must be an AWS region name such as us-east-1");
            }
            let fields = |value: &'static str, env: &'static str, default: &'static str| {
                (value, env, default)
            };
            let key_id = v.key_at(
                fields("accessKeyId", "accessKeyIdEnv", "AWS_ACCESS_KEY_ID"),
                &c.access_key_id,
                &c.access_key_id_env,
                true,
                secret,
            );
            let secret_key = v.key_at(
                fields(
                    "secretAccessKey",
                    "secretAccessKeyEnv",
                    "AWS_SECRET_ACCESS_KEY",
                ),
                &c.secret_access_key,
                &c.secret_access_key_env,
                true,
                secret,
            );
            let token = v.key_at(
                fields("sessionToken", "sessionTokenEnv", "AWS_SESSION_TOKEN"),
                &c.session_token,
                &c.session_token_env,
                false,
                secret,
            );
            let mut p = Bedrock::new(id, c.region.as_str()).models(v.models(&c.models, false));
            if let Some(url) = c.base_url.as_deref() {
                if let Some(url) = v.url(Some(url), None) {
                    p = p.base_url(url);
                }
            }
            for (name, value) in v.headers(&c.headers) {
                p = p.header(name, value);
            }
            if let Some(version) = &c.anthropic_version {
                v.non_empty("anthropicVersion", version);
                p = p.anthropic_version(version.clone());
            }
            if let Some(n) = c.default_max_tokens {
                if n == 0 {
                    v.issue("defaultMaxTokens", "must be at least 1");
                }
                p = p.default_max_tokens(n);
            }
            if let (Some(access_key_id), Some(secret_access_key)) = (key_id, secret_key) {
                p = p.credentials(Credentials {
                    access_key_id,
                    secret_access_key,
                    session_token: token,
                });
            }
            Box::new(p)
        }
        ProviderConfig::Vertex(c) => Box::new(vertex::build(id, c, secret, &mut v)?),
    };
    (issues.len() == before).then_some(provider)
}

/// Validation helpers writing issues under one entry's path.
pub(crate) struct Check<'a> {
    path: &'a str,
    issues: &'a mut Vec<ConfigIssue>,
}

impl Check<'_> {
    pub(crate) fn issue(&mut self, field: &str, message: impl Into<String>) {
        self.issues
            .push(ConfigIssue::new(format!("{}.{field}", self.path), message));
    }

    pub(crate) fn non_empty(&mut self, field: &str, value: &str) {
        if value.trim().is_empty() {
            self.issue(field, "must not be empty");
        }
    }

    /// The key from `apiKey`, or from the secret named by `apiKeyEnv` (or
    /// the default name).
    fn key(
        &mut self,
        api_key: &Option<Secret>,
        api_key_env: &Option<String>,
        default_env: Option<&str>,
        required: bool,
        secret: &dyn Fn(&str) -> Option<String>,
    ) -> Option<Secret> {
        let fields = ("apiKey", "apiKeyEnv");
        self.secret(fields, api_key, api_key_env, default_env, required, secret)
    }

    /// [`Check::key`] for a credential under other field names
    /// (`(value field, env field, default secret name)`).
    fn key_at(
        &mut self,
        (field, env_field, default_env): (&str, &str, &str),
        value: &Option<Secret>,
        env: &Option<String>,
        required: bool,
        secret: &dyn Fn(&str) -> Option<String>,
    ) -> Option<Secret> {
        self.secret(
            (field, env_field),
            value,
            env,
            Some(default_env),
            required,
            secret,
        )
    }

    /// A secret given in the field `fields.0`, or read from the secret
    /// named by the field `fields.1` (or the default name).
    pub(crate) fn secret(
        &mut self,
        (field, env_field): (&str, &str),
        value: &Option<Secret>,
        env: &Option<String>,
        default_env: Option<&str>,
        required: bool,
        secret: &dyn Fn(&str) -> Option<String>,
    ) -> Option<Secret> {
        if let Some(key) = value {
            if env.is_some() {
                self.issue(
                    field,
                    format!("set either {field} or {env_field}, not both"),
                );
            }
            if key.expose().trim().is_empty() {
                self.issue(field, "must not be empty");
            }
            return Some(key.clone());
        }
        let Some(name) = env.as_deref().or(default_env) else {
            if required {
                self.issue(
                    env_field,
                    format!("a key is required: set {env_field} or {field}"),
                );
            }
            return None;
        };
        if name.trim().is_empty() {
            self.issue(env_field, "must not be empty");
            return None;
        }
        match secret(name).filter(|v| !v.trim().is_empty()) {
            Some(value) => Some(Secret::new(value)),
            None if required || env.is_some() => {
                self.issue(env_field, format!("secret \"{name}\" is not set"));
                None
            }
            None => None,
        }
    }

    /// The base URL, checked: `http(s)://host[/prefix]`.
    pub(crate) fn url(&mut self, url: Option<&str>, default: Option<&str>) -> Option<String> {
        let Some(url) = url.or(default) else {
            self.issue("baseUrl", "required for this provider");
            return None;
        };
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"));
        let host = rest.map(|r| r.split('/').next().unwrap_or_default());
        match host {
            None => self.issue("baseUrl", format!("\"{url}\" is not an http(s) URL")),
            Some("") => self.issue("baseUrl", format!("\"{url}\" has no host")),
            Some(_) if url.contains(|c: char| c.is_whitespace() || c == '?' || c == '#') => {
                self.issue("baseUrl", "must not contain spaces, a query or a fragment")
            }
            Some(_) => return Some(url.to_string()),
        }
        None
    }

    /// The base URL, checked ([`url`](Self::url)), without a trailing copy
    /// of `root`, the part of the path the adapter appends itself before
    /// its endpoint (`/v1` of `/v1/chat/completions`, OpenRouter's
    /// `/api/v1`): `https://api.openai.com/v1`, as the OpenAI SDK and the
    /// providers' docs write a base URL, would otherwise be asked
    /// `/v1/v1/chat/completions` and answer 404.
    fn api_url(&mut self, url: Option<&str>, default: Option<&str>, root: &str) -> Option<String> {
        let url = self.url(url, default)?;
        let trimmed = url.trim_end_matches('/');
        match trimmed.strip_suffix(root) {
            Some(base)
                if !root.is_empty()
                    && base
                        .split_once("://")
                        .is_some_and(|(_, host)| !host.is_empty()) =>
            {
                Some(base.to_string())
            }
            _ => Some(url),
        }
    }

    /// The extra headers, checked: valid names, no line breaks, no
    /// credentials (those belong in apiKey / apiKeyEnv).
    fn headers<'h>(&mut self, headers: &'h BTreeMap<String, String>) -> Vec<(&'h str, &'h str)> {
        let mut out = Vec::new();
        for (name, value) in headers {
            let field = format!("headers.{name}");
            let token = |c: char| {
                c.is_ascii_alphanumeric()
                    || (c.is_ascii() && b"!#$%&'*+-.^_`|~".contains(&(c as u8)))
            };
            if name.is_empty() || !name.chars().all(token) {
                self.issue(&field, "is not a valid header name");
            } else if value.contains(['\r', '\n']) {
                self.issue(&field, "must not contain line breaks");
            } else if [
                "authorization",
                "x-api-key",
                "api-key",
                "proxy-authorization",
            ]
            .contains(&name.to_ascii_lowercase().as_str())
            {
                self.issue(&field, "credentials go in apiKey or apiKeyEnv");
            } else {
                out.push((name.as_str(), value.as_str()));
            }
        }
        out
    }

    /// The model table, checked; `prefill` is the provider's default.
    pub(crate) fn models(
        &mut self,
        models: &BTreeMap<String, ModelConfig>,
        prefill: bool,
    ) -> Models {
        let default = Capabilities {
            prefill,
            tools: true,
            ..Capabilities::default()
        };
        let mut table = Models::new(default.clone());
        for (name, m) in models {
            let field = format!("models.{name}");
            if name.trim().is_empty() {
                self.issue("models", "model names must not be empty");
            }
            if m.context_window == Some(0) {
                self.issue(&format!("{field}.contextWindow"), "must be at least 1");
            }
            for (key, price) in [
                ("inputPricePerMtok", m.input_price_per_mtok),
                ("outputPricePerMtok", m.output_price_per_mtok),
                ("cachedInputPricePerMtok", m.cached_input_price_per_mtok),
                ("cacheWritePricePerMtok", m.cache_write_price_per_mtok),
            ] {
                if price.is_some_and(|p| !p.is_finite() || p < 0.0) {
                    self.issue(&format!("{field}.{key}"), "must be a non-negative number");
                }
            }
            table.insert(
                name.clone(),
                Capabilities {
                    prefill: m.prefill.unwrap_or(default.prefill),
                    tools: m.tools.unwrap_or(default.tools),
                    context_window: m.context_window,
                    input_price_per_mtok: m.input_price_per_mtok,
                    output_price_per_mtok: m.output_price_per_mtok,
                    structured_output: m.structured_output.unwrap_or_default(),
                },
            );
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> Result<ProviderConfig, serde_json::Error> {
        serde_json::from_value(v)
    }

    fn check(v: serde_json::Value, env: &[(&str, &str)]) -> (bool, Vec<String>) {
        let cfg = parse(v).unwrap();
        let lookup = |name: &str| {
            env.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        };
        let mut issues = Vec::new();
        let built = build_provider("p", &cfg, &lookup, "providers.p", &mut issues).is_some();
        (built, issues.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn unknown_fields_are_refused_inside_each_kind() {
        let e = parse(serde_json::json!({"kind": "openai", "bogus": 1})).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let e =
            parse(serde_json::json!({"kind": "openai-compatible", "preset": "nope"})).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }

    #[test]
    fn every_problem_is_reported_with_its_path_and_no_value() {
        let (built, issues) = check(
            serde_json::json!({
                "kind": "openai-compatible", "preset": "azure", "deployment": "a/b",
                "headers": {"Authorization": "Bearer sk-x"},
                "models": {"m": {"contextWindow": 0, "inputPricePerMtok": -1.0}}
            }),
            &[],
        );
        assert!(!built);
        assert_eq!(
            issues,
            [
                "providers.p.apiKeyEnv: secret \"AZURE_OPENAI_API_KEY\" is not set",
                "providers.p.models.m.contextWindow: must be at least 1",
                "providers.p.models.m.inputPricePerMtok: must be a non-negative number",
                "providers.p.baseUrl: required for this provider",
                "providers.p.headers.Authorization: credentials go in apiKey or apiKeyEnv",
                "providers.p.deployment: must be a non-empty name without / ? #",
            ]
        );
        assert!(issues.iter().all(|i| !i.contains("sk-x")));
    }

    #[test]
    fn self_hosted_presets_need_no_key() {
        let (built, issues) = check(
            serde_json::json!({"kind": "openai-compatible", "preset": "ollama"}),
            &[],
        );
        assert!(built, "{issues:?}");
        let (built, issues) = check(
            serde_json::json!({"kind": "anthropic", "baseUrl": "ftp://x"}),
            &[("ANTHROPIC_API_KEY", "k")],
        );
        assert!(!built);
        assert_eq!(
            issues,
            ["providers.p.baseUrl: \"ftp://x\" is not an http(s) URL"]
        );
    }
}
