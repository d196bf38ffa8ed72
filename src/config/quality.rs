//! A route's validators and escalation limits, as configured
//! (`quality.<route>`), checked into [`Quality`].
//!
//! ```json
//! "quality": {
//!   "extract": {
//!     "validators": [
//!       { "kind": "jsonSchema", "schema": { "type": "object", "required": ["name"] } },
//!       { "kind": "finishReason", "reject": ["length"] }
//!     ],
//!     "maxEscalations": 1,
//!     "maxCostUsd": 0.05,
//!     "onExhausted": "error"
//!   }
//! }
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::chat::FinishReason;
use crate::engine::client::Entry;
use crate::issue::ConfigIssue;
use crate::quality::{OnExhausted, Quality, Validator};

/// One route's validators and limits.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct QualityConfig {
    /// The checks every answer must pass, in order (none: the npm
    /// package's JS validators alone judge, with these limits).
    #[serde(default)]
    pub(crate) validators: Vec<ValidatorConfig>,
    /// How many rejected answers may go on to the next entry (default: as
    /// many as the route has entries).
    #[serde(default)]
    pub(crate) max_escalations: Option<u32>,
    /// No escalation once the request's attempts cost this much (US
    /// dollars, from the models' prices).
    #[serde(default)]
    pub(crate) max_cost_usd: Option<f64>,
    /// `lastAnswer` (default): the last rejected answer when none passed;
    /// `error`: a 502 in the client's format.
    #[serde(default)]
    pub(crate) on_exhausted: Option<OnExhaustedConfig>,
}

/// What to answer when every answer was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum OnExhaustedConfig {
    /// The last answer, as it is.
    LastAnswer,
    /// An error.
    Error,
}

/// One validator, by its `kind`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub(crate) enum ValidatorConfig {
    /// The answer's text is JSON.
    Json,
    /// The answer's text is JSON that `schema` (draft 2020-12) accepts.
    JsonSchema {
        /// The schema.
        schema: Value,
    },
    /// The answer's text matches `pattern` (the `regex` crate's syntax,
    /// Unicode classes included).
    Regex {
        /// The expression.
        pattern: String,
    },
    /// At least `value` characters.
    MinLength {
        /// The least.
        value: usize,
    },
    /// At most `value` characters.
    MaxLength {
        /// The most.
        value: usize,
    },
    /// The model did not stop for one of `reject` (`length`,
    /// `content_filter`, `tool_calls`, `stop`; Anthropic's `max_tokens`,
    /// `refusal`, … too).
    FinishReason {
        /// The reasons that reject an answer.
        reject: Vec<String>,
    },
    /// The model did not refuse (its refusal stop reason or field).
    NotRefusal,
}

/// The longest regex compiled (its source): a bound on the work a
/// configuration can ask for.
const MAX_PATTERN_BYTES: usize = 4096;

/// Checks every route's quality settings, each problem with its path.
pub(crate) fn build(
    config: &BTreeMap<String, QualityConfig>,
    routes: &BTreeMap<String, Vec<Entry>>,
    issues: &mut Vec<ConfigIssue>,
) -> BTreeMap<String, Quality> {
    let mut out = BTreeMap::new();
    for (route, q) in config {
        let path = format!("quality.{route}");
        if !routes.contains_key(route) {
            issues.push(ConfigIssue::new(
                &path,
                format!("unknown route \"{route}\""),
            ));
        }
        let validators = q
            .validators
            .iter()
            .enumerate()
            .filter_map(|(i, v)| validator(v, &format!("{path}.validators[{i}]"), issues))
            .collect();
        if let Some(cap) = q.max_cost_usd {
            if !(cap.is_finite() && cap > 0.0) {
                issues.push(ConfigIssue::new(
                    format!("{path}.maxCostUsd"),
                    "must be a positive number of US dollars",
                ));
            }
        }
        out.insert(
            route.clone(),
            Quality {
                validators,
                max_escalations: q.max_escalations,
                max_cost_usd: q.max_cost_usd,
                on_exhausted: match q.on_exhausted {
                    None | Some(OnExhaustedConfig::LastAnswer) => OnExhausted::LastAnswer,
                    Some(OnExhaustedConfig::Error) => OnExhausted::Error,
                },
                ..Quality::default()
            },
        );
    }
    out
}

fn validator(v: &ValidatorConfig, path: &str, issues: &mut Vec<ConfigIssue>) -> Option<Validator> {
    let mut issue = |at: String, message: String| {
        issues.push(ConfigIssue::new(at, message));
        None
    };
    match v {
        ValidatorConfig::Json => Some(Validator::Json),
        #[cfg(feature = "schema")]
        ValidatorConfig::JsonSchema { schema } => {
            match crate::quality::schema::Schema::compile(schema) {
                Ok(s) => Some(Validator::JsonSchema(Box::new(s))),
                // The schema's own mistake, at its place inside the schema.
                Err((at, e)) => issue(
                    format!("{path}.schema{}", pointer_path(&at)),
                    format!("not a valid JSON Schema (draft 2020-12): {e}"),
                ),
            }
        }
        ValidatorConfig::Regex { pattern } if pattern.len() > MAX_PATTERN_BYTES => issue(
            format!("{path}.pattern"),
            format!("longer than {MAX_PATTERN_BYTES} bytes"),
        ),
        ValidatorConfig::Regex { pattern } => match regex::Regex::new(pattern) {
            Ok(re) => Some(Validator::Regex(re)),
            Err(e) => issue(format!("{path}.pattern"), format!("not a valid regex: {e}")),
        },
        #[cfg(not(feature = "schema"))]
        ValidatorConfig::JsonSchema { .. } => issue(
            path.to_string(),
            "not in this build: cargo feature \"schema\" (the Worker and the npm package have \
             it); without it, `json` with a `regex`"
                .into(),
        ),
        ValidatorConfig::MinLength { value } => Some(Validator::MinLength(*value)),
        ValidatorConfig::MaxLength { value } => Some(Validator::MaxLength(*value)),
        ValidatorConfig::FinishReason { reject } if reject.is_empty() => issue(
            format!("{path}.reject"),
            "name at least one finish reason".into(),
        ),
        ValidatorConfig::FinishReason { reject } => {
            let mut reasons = Vec::new();
            for (i, name) in reject.iter().enumerate() {
                match finish_reason(name) {
                    Some(r) => reasons.push(r),
                    None => {
                        issue(
                            format!("{path}.reject[{i}]"),
                            format!("unknown finish reason \"{name}\""),
                        );
                    }
                }
            }
            Some(Validator::FinishReason(reasons))
        }
        ValidatorConfig::NotRefusal => Some(Validator::NotRefusal),
    }
}

/// A finish reason by its OpenAI or Anthropic name.
fn finish_reason(name: &str) -> Option<FinishReason> {
    let known = |r: FinishReason| (!matches!(r, FinishReason::Other(_))).then_some(r);
    known(crate::format::openai::finish_reason(name))
        .or_else(|| known(crate::format::anthropic::finish_reason(name)))
}

/// A JSON pointer (`/properties/age/type`) as the rest of a config path
/// (`.properties.age.type`; an index as `[0]`).
#[cfg_attr(not(feature = "schema"), allow(dead_code))]
fn pointer_path(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            out.push('.');
            out.push_str(&seg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_become_config_paths() {
        assert_eq!(pointer_path(""), "");
        assert_eq!(
            pointer_path("/properties/a~1b/type"),
            ".properties.a/b.type"
        );
        assert_eq!(pointer_path("/allOf/0/type"), ".allOf[0].type");
    }

    #[test]
    fn finish_reasons_by_either_name() {
        assert_eq!(finish_reason("length"), Some(FinishReason::Length));
        assert_eq!(finish_reason("max_tokens"), Some(FinishReason::Length));
        assert_eq!(finish_reason("refusal"), Some(FinishReason::ContentFilter));
        assert_eq!(finish_reason("nonsense"), None);
    }
}
