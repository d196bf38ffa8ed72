//! The configuration's JSON shape: the whole document, the gateway's own
//! settings, a route's entry and the size limits, read with the place of
//! any mistake.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use serde_path_to_error::Segment;

use super::breaker::BreakerConfig;
use super::cache::CacheConfig;
use super::hedge::HedgeConfig;
use super::providers::ProviderConfig;
use super::quality::QualityConfig;
use super::retry::{BudgetConfig, RetryConfig};
use super::speed::LatencyConfig;
use super::{cost, embeddings};
use crate::issue::{path_text, ConfigError, ConfigIssue};

/// The whole configuration, as JSON from wrangler `[vars]` or from JS.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Providers by id.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Routes by name: ordered chains of entries. Each model listed under
    /// a provider's `models` is also a route of its own name (unless a route
    /// has that name), served by every provider that lists it; and
    /// `provider/model` always names that single entry.
    #[serde(default)]
    pub(crate) routes: BTreeMap<String, Vec<EntryConfig>>,
    /// The route for requests that name none (default `default`, else the
    /// first route).
    #[serde(default)]
    pub(crate) default_route: Option<String>,
    /// Retries, for every entry without its own.
    #[serde(default)]
    pub(crate) retry: RetryConfig,
    /// The retry budget.
    #[serde(default)]
    pub(crate) budget: BudgetConfig,
    /// Breakers, for every provider without its own.
    #[serde(default)]
    pub(crate) breaker: BreakerConfig,
    /// Per-provider breaker settings, over `breaker`.
    #[serde(default)]
    pub(crate) breakers: BTreeMap<String, BreakerConfig>,
    /// Per-attempt timeout (default 30 s).
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// End-to-end deadline over every retry and fallback (default 60 s).
    #[serde(default)]
    pub(crate) deadline_ms: Option<u64>,
    /// Streams: time-to-first-token deadline per attempt (default 10 s).
    #[serde(default)]
    pub(crate) first_token_timeout_ms: Option<u64>,
    /// Streams: the longest silence between chunks (default 10 s).
    #[serde(default)]
    pub(crate) idle_timeout_ms: Option<u64>,
    /// Streams at a gateway: the wait for the first item before the
    /// response goes out with keepalives, and their interval (default 15 s).
    #[serde(default)]
    pub(crate) keepalive_ms: Option<u64>,
    /// Size limits.
    #[serde(default)]
    pub(crate) limits: LimitsConfig,
    /// Whether `provider/model` may name a model no route lists (default
    /// false).
    #[serde(default)]
    pub allow_any_model: bool,
    /// Whether requests are steered by what providers say of their
    /// rate-limit pools (default true; false: 429s alone move traffic).
    #[serde(default)]
    pub(crate) steer_by_capacity: Option<bool>,
    /// Whether a route sheds its lower-priority requests while its
    /// providers cannot carry its load (default true).
    #[serde(default)]
    pub(crate) shed_by_priority: Option<bool>,
    /// Settings of the gateway host (the Worker).
    #[serde(default)]
    pub(crate) gateway: GatewayConfig,
    /// Prices for providers written in code, and routes' ordering and
    /// daily budgets.
    #[serde(default)]
    pub(crate) cost: cost::CostConfig,
    /// Latency objectives, streams' pace and demotion.
    #[serde(default)]
    pub(crate) latency: LatencyConfig,
    /// Hedged requests, by route name (none by default).
    #[serde(default)]
    pub(crate) hedge: BTreeMap<String, HedgeConfig>,
    /// Validators and escalation limits, by route name.
    #[serde(default)]
    pub(crate) quality: BTreeMap<String, QualityConfig>,
    /// The response cache, by route name (nothing is cached by default).
    #[serde(default)]
    pub(crate) cache: BTreeMap<String, CacheConfig>,
    /// Trace context: what is sent on to providers.
    #[serde(default)]
    pub(crate) tracing: TracingConfig,
}

/// `tracing`: W3C trace context, and the export of spans.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct TracingConfig {
    /// Send each attempt's `traceparent` (and the caller's `tracestate`)
    /// to its provider (default true).
    #[serde(default)]
    pub(crate) propagate: Option<bool>,
    /// Export each request's spans over OTLP/HTTP (none without it).
    #[serde(default)]
    pub(crate) export: Option<ExportConfig>,
}

/// `tracing.export`: where spans go.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ExportConfig {
    /// The collector's OTLP/HTTP traces URL.
    pub(crate) endpoint: String,
    /// Headers sent with each export: header name → the secret holding
    /// its value.
    #[serde(default)]
    pub(crate) headers_env: BTreeMap<String, String>,
    /// The share of the traces starting here that are kept (default 1).
    #[serde(default)]
    pub(crate) sample_ratio: Option<f64>,
    /// The exported resource's `service.name` (default `resilient-llm`).
    #[serde(default)]
    pub(crate) service_name: Option<String>,
    /// How long one export may take (default 5000).
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// The most spans waiting to be sent (default 2048).
    #[serde(default)]
    pub(crate) max_queue_spans: Option<usize>,
    /// The most spans in one export (default 512).
    #[serde(default)]
    pub(crate) max_batch_spans: Option<usize>,
    /// Records the messages asked and answered in the spans (default
    /// false: they may hold what must not leave the gateway).
    #[serde(default)]
    pub(crate) capture_content: bool,
}

/// The gateway's own settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct GatewayConfig {
    /// Names of the secrets holding the client keys the gateway accepts.
    #[serde(default)]
    pub(crate) client_keys_env: Vec<String>,
    /// Serve without client keys. For local demos only: the gateway logs a
    /// warning on every start.
    #[serde(default)]
    pub(crate) allow_unauthenticated: bool,
    /// Named clients, each with its keys, routes and limits.
    #[serde(default)]
    pub(crate) clients: Vec<super::clients::ClientConfig>,
}

/// One entry of a route.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct EntryConfig {
    /// A provider id from `providers`.
    pub(crate) provider: String,
    /// The model to ask it for.
    pub(crate) model: String,
    /// A name for logs.
    pub(crate) label: Option<String>,
    /// This entry's per-attempt timeout.
    pub(crate) timeout_ms: Option<u64>,
    /// This entry's retry settings, over the client's.
    pub(crate) retry: Option<RetryConfig>,
    /// This entry's time-to-first-token deadline for streams.
    pub(crate) first_token_timeout_ms: Option<u64>,
    /// The embedding model it serves, which makes its route an
    /// embeddings route ([`embeddings`]).
    #[serde(default)]
    pub(crate) embeddings: Option<embeddings::EmbeddingsConfig>,
    /// Its tier: entries sharing a priority split load by `weight`
    /// (`tier.rs`). Defaulted, so an entry written as a shorter sequence
    /// still reads.
    #[serde(default)]
    pub(crate) priority: Option<u32>,
    /// Its share of its tier's load (default 1).
    #[serde(default)]
    pub(crate) weight: Option<u32>,
    /// This entry's objective for whole answers (see [`LatencyConfig`]).
    #[serde(default)]
    pub(crate) latency_slo_ms: Option<u64>,
    /// This entry's objective for a stream's first token.
    #[serde(default)]
    pub(crate) ttft_slo_ms: Option<u64>,
    /// The slowest pace this entry's streams may start at.
    #[serde(default)]
    pub(crate) min_tokens_per_second: Option<f64>,
    /// Over how many first tokens the pace is judged.
    #[serde(default)]
    pub(crate) rate_window_tokens: Option<u32>,
}

/// Size limits.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct LimitsConfig {
    /// The largest request body a gateway accepts (default 1 MiB).
    pub(crate) max_request_bytes: Option<usize>,
    /// The largest provider response read (default 8 MiB).
    pub(crate) max_response_bytes: Option<usize>,
    /// The in-memory response cache's most answers (default 1000).
    #[serde(default)]
    pub(crate) cache_max_entries: Option<usize>,
    /// The in-memory response cache's most bytes (default 16 MiB).
    #[serde(default)]
    pub(crate) cache_max_bytes: Option<usize>,
}

impl Config {
    /// Reads a configuration from JSON text; [`Config::validate`] checks
    /// it. A syntax or type mistake is reported with its path, line and
    /// column (`routes.default[0].timeoutMs: invalid type: string "5",
    /// expected u64 at line 1 column 52`).
    pub fn parse(json: &str) -> Result<Config, ConfigError> {
        crate::json::read(json.as_bytes()).map_err(|m| ConfigError {
            issues: vec![Config::issue(json, m.path, &m.error)],
        })
    }

    /// The issue of the mistake serde_json found at `path`. One inside a
    /// provider entry is named at its field ([`ProviderConfig::mistake_in`]),
    /// with the position of the first report (the entry's end).
    fn issue(json: &str, mut path: Vec<Segment>, e: &serde_json::Error) -> ConfigIssue {
        let inner = match &path[..] {
            [Segment::Map { key: top }, Segment::Map { key: id }]
                if top == "providers" && e.is_data() =>
            {
                serde_json::from_str::<Value>(json)
                    .ok()
                    .and_then(|mut doc| {
                        ProviderConfig::mistake_in(doc.get_mut(top)?.get_mut(id)?.take())
                    })
            }
            _ => None,
        };
        match inner {
            Some(inner) => {
                path.extend(inner.path().iter().cloned());
                let at = format!(" at line {} column {}", e.line(), e.column());
                ConfigIssue::new(path_text(&path), format!("{}{at}", inner.inner()))
            }
            None => ConfigIssue::new(path_text(&path), e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Config;

    /// The one issue of a configuration that does not parse.
    fn err(json: &str) -> (String, String) {
        let e = Config::parse(json).unwrap_err();
        assert_eq!(e.issues.len(), 1, "{e}");
        let issue = e.issues.into_iter().next().unwrap();
        (issue.path, issue.message)
    }

    #[test]
    fn every_form_serde_accepts_is_read() {
        for json in [
            "{}",
            r#"{"providers":{},"routes":{}}"#,
            "[]",
            r#"{"gateway":[[]]}"#,
            r#"{"providers":{"p":["openai",null,null,null,{},{},null,null,null,null]}}"#,
            r#"{"providers":{"p":["openai-compatible","groq",null,null,null,{},{}]}}"#,
            r#"{"timeoutMs":null,"defaultRoute":null,"limits":[1,2],"retry":[null,null,3]}"#,
            r#"{"routes":{"r":[["p","m",null,null,null,null]]}}"#,
            r#"{"providers":{"c":{"preset":"azure","kind":"openai-compatible","deployment":"d",
                "maxTokensField":{"max_completion_tokens":null}}}}"#,
        ] {
            assert!(Config::parse(json).is_ok(), "{json}");
        }
    }

    #[test]
    fn type_errors_name_their_path_line_and_column() {
        let (path, message) =
            err(r#"{"routes":{"default":[{"provider":"a","model":"m","timeoutMs":"5"}]}}"#);
        assert_eq!(path, "routes.default[0].timeoutMs");
        assert_eq!(
            message,
            r#"invalid type: string "5", expected u64 at line 1 column 65"#
        );
        let (path, message) = err(r#"{"retry":{"maxAttempts":1.5}}"#);
        assert_eq!(path, "retry.maxAttempts");
        assert!(message.starts_with("invalid type: floating point `1.5`, expected u32"));
        let (path, message) = err(r#"{"deadlineMs":-1}"#);
        assert_eq!(path, "deadlineMs");
        assert!(message.starts_with("invalid value: integer `-1`, expected u64"));
        let (path, message) = err(r#"{"timeoutMs":null,"limits":[]}"#);
        assert_eq!(path, "limits");
        assert!(
            message.starts_with("invalid length 0, expected"),
            "{message}"
        );
    }

    #[test]
    fn unknown_missing_and_duplicate_fields() {
        let (path, message) = err(r#"{"retry":{"maxAttempt":3}}"#);
        assert_eq!(path, "retry.maxAttempt");
        assert!(message.starts_with("unknown field `maxAttempt`, expected one of"));
        let (path, message) = err(r#"{"routes":{"r":[{"provider":"a"}]}}"#);
        assert_eq!(path, "routes.r[0]");
        assert!(message.starts_with("missing field `model`"), "{message}");
        let (path, message) = err(r#"{"retry":{"maxAttempts":1,"maxAttempts":2}}"#);
        assert_eq!(path, "retry");
        assert!(message.starts_with("duplicate field `maxAttempts`"));
        let (path, _) = err(r#"{"timeoutMs":1,"timeoutMs":2}"#);
        assert_eq!(path, "(root)");
    }

    #[test]
    fn a_mistake_inside_a_provider_entry_names_its_field() {
        for (json, at, start) in [
            (
                r#"{"providers":{"p":{"kind":"openai-compatible","preset":"nope"}}}"#,
                "providers.p.preset",
                "unknown variant `nope`",
            ),
            (
                r#"{"providers":{"p":{"kind":"openai","maxTokensField":"x"}}}"#,
                "providers.p.maxTokensField",
                "unknown variant `x`",
            ),
            (
                r#"{"providers":{"p":{"kind":"openai","models":{"m":{"contextWindow":-1}}}}}"#,
                "providers.p.models.m.contextWindow",
                "invalid value: integer `-1`, expected u32",
            ),
            (
                r#"{"providers":{"p":{"kind":"anthropic","organization":"o"}}}"#,
                "providers.p.organization",
                "unknown field `organization`",
            ),
            (
                r#"{"providers":{"p":{"kind":"openai-compatible","preset":"groq","streamUsage":"y"}}}"#,
                "providers.p.streamUsage",
                "invalid type: string \"y\", expected a boolean",
            ),
            (
                r#"{"providers":{"p":{"kind":"openai-compatible"}}}"#,
                "providers.p",
                "missing field `preset`",
            ),
            (
                r#"{"providers":{"p":{"kind":"nope"}}}"#,
                "providers.p.kind",
                "unknown variant `nope`",
            ),
            (
                r#"{"providers":{"p":{}}}"#,
                "providers.p",
                "missing field `kind`",
            ),
            (
                r#"{"providers":{"p":{"kind":"openai","baseUrl":"a","baseUrl":"b"}}}"#,
                "providers.p",
                "duplicate field `baseUrl`",
            ),
            (
                r#"{"providers":{"p":["openai",1]}}"#,
                "providers.p",
                "invalid type",
            ),
        ] {
            let (path, message) = err(json);
            assert_eq!(path, at, "{json}");
            assert!(message.starts_with(start), "{json}: {message}");
            assert!(message.contains(" at line 1 column "), "{json}: {message}");
        }
    }

    #[test]
    fn syntax_errors_keep_their_position() {
        let (path, message) = err(r#"{"retry":{"maxAttempts":3,}}"#);
        assert_eq!(path, "retry");
        assert_eq!(message, "trailing comma at line 1 column 27");
        let (path, message) = err("{");
        assert_eq!(path, "(root)");
        assert!(message.starts_with("EOF"), "{message}");
        let (path, message) = err("{} x");
        assert_eq!(path, "(root)");
        assert!(message.starts_with("trailing characters"), "{message}");
        let (path, _) = err("");
        assert_eq!(path, "(root)");
    }
}
