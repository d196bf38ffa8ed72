//! The checks an answer must pass on a route with validators: pure
//! functions of the answer, each naming what it found wrong.
//!
//! Every check reads the answer's text (its text parts joined; a structured
//! answer's forced tool already given back as text), except `finishReason`
//! and `notRefusal`, which read why the model stopped.

use std::fmt;

use serde_json::Value;

use crate::chat::{ChatResponse, Dialect, FinishReason};
use crate::format::openai::finish_reason_name;

/// One check on an answer.
pub enum Validator {
    /// The text parses as one JSON value.
    Json,
    /// The text parses as JSON that a JSON Schema (draft 2020-12) accepts.
    #[cfg(feature = "schema")]
    JsonSchema(Box<crate::quality::schema::Schema>),
    /// The text matches a regular expression (anywhere, unless anchored).
    Regex(regex::Regex),
    /// At least this many characters (Unicode scalar values).
    MinLength(usize),
    /// At most this many characters.
    MaxLength(usize),
    /// The model did not stop for one of these reasons (`length`: the
    /// answer was cut at the token limit).
    FinishReason(Vec<FinishReason>),
    /// The model did not refuse: see [`refusal`].
    NotRefusal,
}

impl fmt::Debug for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Validator::Regex(r) => write!(f, "Regex({:?})", r.as_str()),
            #[cfg(feature = "schema")]
            Validator::JsonSchema(_) => f.write_str(self.name()),
            Validator::MinLength(n) => write!(f, "MinLength({n})"),
            Validator::MaxLength(n) => write!(f, "MaxLength({n})"),
            Validator::FinishReason(r) => write!(f, "FinishReason({r:?})"),
            Validator::Json | Validator::NotRefusal => f.write_str(self.name()),
        }
    }
}

/// Why an answer was rejected: the validator's name and what it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// `json`, `jsonSchema`, `regex`, `minLength`, `maxLength`,
    /// `finishReason`, `notRefusal`, or a function validator's name.
    pub validator: String,
    /// What was wrong, for humans; cut to 300 characters.
    pub reason: String,
}

impl Rejection {
    /// A rejection by `validator`, its reason cut to a log line's share.
    pub fn new(validator: impl Into<String>, reason: impl Into<String>) -> Self {
        let reason: String = reason.into();
        let reason = match reason.char_indices().nth(MAX_REASON_CHARS) {
            Some((at, _)) => format!("{}…", &reason[..at]),
            None => reason,
        };
        Rejection {
            validator: validator.into(),
            reason,
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.validator, self.reason)
    }
}

/// The longest reason kept: a schema error may quote a long answer.
const MAX_REASON_CHARS: usize = 300;

impl Validator {
    /// The name it is configured by, which its rejections carry.
    pub fn name(&self) -> &'static str {
        match self {
            Validator::Json => "json",
            #[cfg(feature = "schema")]
            Validator::JsonSchema(_) => "jsonSchema",
            Validator::Regex(_) => "regex",
            Validator::MinLength(_) => "minLength",
            Validator::MaxLength(_) => "maxLength",
            Validator::FinishReason(_) => "finishReason",
            Validator::NotRefusal => "notRefusal",
        }
    }

    /// Checks `answer`: `Err` says what is wrong.
    pub fn check(&self, answer: &ChatResponse) -> Result<(), Rejection> {
        let reject = |reason: String| Err(Rejection::new(self.name(), reason));
        let text = answer.text.as_str();
        match self {
            Validator::Json => match serde_json::from_str::<Value>(text) {
                Ok(_) => Ok(()),
                Err(e) => reject(format!("not JSON: {e}")),
            },
            #[cfg(feature = "schema")]
            Validator::JsonSchema(schema) => {
                let value = match serde_json::from_str::<Value>(text) {
                    Ok(v) => v,
                    Err(e) => return reject(format!("not JSON: {e}")),
                };
                match schema.check(&value) {
                    Ok(()) => Ok(()),
                    Err((at, what)) => {
                        let at = if at.is_empty() { "/" } else { at.as_str() };
                        reject(format!("at {at}: {what}"))
                    }
                }
            }
            Validator::Regex(re) => match re.is_match(text) {
                true => Ok(()),
                false => reject(format!("does not match /{}/", re.as_str())),
            },
            Validator::MinLength(min) => {
                let n = text.chars().count();
                match n >= *min {
                    true => Ok(()),
                    false => reject(format!("{n} characters, fewer than {min}")),
                }
            }
            Validator::MaxLength(max) => {
                let n = text.chars().count();
                match n <= *max {
                    true => Ok(()),
                    false => reject(format!("{n} characters, more than {max}")),
                }
            }
            Validator::FinishReason(rejected) => match &answer.finish_reason {
                Some(r) if rejected.contains(r) => reject(format!(
                    "the model stopped for \"{}\"",
                    finish_reason_name(r)
                )),
                Some(_) | None => Ok(()),
            },
            Validator::NotRefusal => match refusal(answer) {
                Some(why) => reject(why),
                None => Ok(()),
            },
        }
    }
}

/// Whether the model refused, and how it said so: a finish reason of
/// `content_filter` (OpenAI's `content_filter`, Anthropic's `refusal` stop
/// reason, Gemini's `SAFETY`, `RECITATION`, `BLOCKLIST`, … block reasons),
/// or, in an OpenAI answer, a `refusal` in the message (structured outputs'
/// way of declining). Refusing in plain words is not detected: a regex
/// validator can catch the wording a route expects.
pub fn refusal(answer: &ChatResponse) -> Option<String> {
    if answer.finish_reason == Some(FinishReason::ContentFilter) {
        return Some("the model refused (finish reason content_filter / refusal)".into());
    }
    if answer.dialect != Some(Dialect::OpenAi) {
        return None;
    }
    let raw = answer.raw_value().ok()?;
    let said = raw.pointer("/choices/0/message/refusal")?.as_str()?;
    (!said.trim().is_empty()).then(|| format!("the model refused: {said}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::RawJson;

    fn answer(text: &str) -> ChatResponse {
        ChatResponse {
            text: text.into(),
            tool_calls: Vec::new(),
            thinking: Vec::new(),
            model: "m".into(),
            provider: "p".into(),
            finish_reason: Some(FinishReason::Stop),
            usage: None,
            raw: None,
            dialect: None,
        }
    }

    #[cfg(feature = "schema")]
    fn schema(v: Value) -> Validator {
        Validator::JsonSchema(Box::new(
            crate::quality::schema::Schema::compile(&v).unwrap(),
        ))
    }

    #[test]
    fn json_passes_json_and_rejects_prose() {
        assert_eq!(Validator::Json.check(&answer(r#" {"a": 1} "#)), Ok(()));
        let r = Validator::Json
            .check(&answer("Sure! {\"a\": 1}"))
            .unwrap_err();
        assert_eq!(r.validator, "json");
        assert!(r.reason.starts_with("not JSON: expected value"), "{r}");
    }

    #[cfg(feature = "schema")]
    #[test]
    fn json_schema_names_where_the_answer_breaks_it() {
        let v = schema(serde_json::json!({
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}
        }));
        assert_eq!(v.check(&answer(r#"{"name":"Ada","age":36}"#)), Ok(()));
        let r = v
            .check(&answer(r#"{"name":"Ada","age":"old"}"#))
            .unwrap_err();
        assert_eq!(r.validator, "jsonSchema");
        assert!(r.reason.starts_with("at /age: "), "{r}");
        let r = v.check(&answer(r#"{"age":1}"#)).unwrap_err();
        assert!(r.reason.contains("missing properties 'name'"), "{r}");
        let r = v.check(&answer("not json")).unwrap_err();
        assert!(r.reason.starts_with("not JSON"), "{r}");
    }

    #[test]
    fn regex_matches_anywhere_unless_anchored() {
        let v = Validator::Regex(regex::Regex::new(r"\bSKU-\d{4}\b").unwrap());
        assert_eq!(v.check(&answer("the part is SKU-1234.")), Ok(()));
        let r = v.check(&answer("the part is SKU-12")).unwrap_err();
        assert_eq!(r.to_string(), r"regex: does not match /\bSKU-\d{4}\b/");
    }

    #[test]
    fn regex_has_unicode_classes() {
        let v = Validator::Regex(regex::Regex::new(r"^\p{Lu}\p{Ll}+ \p{Han}+$").unwrap());
        assert_eq!(v.check(&answer("Émile 日本")), Ok(()));
        assert!(v.check(&answer("emile 日本")).is_err());
    }

    #[test]
    fn lengths_count_characters_not_bytes() {
        // Four characters, twelve bytes.
        let text = "日本語だ";
        assert_eq!(Validator::MinLength(4).check(&answer(text)), Ok(()));
        assert_eq!(Validator::MaxLength(4).check(&answer(text)), Ok(()));
        let r = Validator::MinLength(5).check(&answer(text)).unwrap_err();
        assert_eq!(r.to_string(), "minLength: 4 characters, fewer than 5");
        let r = Validator::MaxLength(3).check(&answer(text)).unwrap_err();
        assert_eq!(r.to_string(), "maxLength: 4 characters, more than 3");
    }

    #[test]
    fn finish_reason_rejects_the_named_reasons_only() {
        let v = Validator::FinishReason(vec![FinishReason::Length]);
        assert_eq!(v.check(&answer("ok")), Ok(()));
        let mut cut = answer("half an ans");
        cut.finish_reason = Some(FinishReason::Length);
        let r = v.check(&cut).unwrap_err();
        assert_eq!(
            r.to_string(),
            "finishReason: the model stopped for \"length\""
        );
        cut.finish_reason = None;
        assert_eq!(v.check(&cut), Ok(()));
    }

    #[test]
    fn not_refusal_reads_the_stop_reason_and_openai_refusal_field() {
        assert_eq!(Validator::NotRefusal.check(&answer("here it is")), Ok(()));
        let mut refused = answer("I can't help with that.");
        refused.finish_reason = Some(FinishReason::ContentFilter);
        let r = Validator::NotRefusal.check(&refused).unwrap_err();
        assert_eq!(r.validator, "notRefusal");

        let mut openai = answer("I can't help with that.");
        openai.dialect = Some(Dialect::OpenAi);
        openai.raw = Some(
            RawJson::from_string(
                r#"{"choices":[{"message":{"content":null,"refusal":"I can't help with that."}}]}"#
                    .into(),
            )
            .unwrap(),
        );
        let r = Validator::NotRefusal.check(&openai).unwrap_err();
        assert_eq!(r.reason, "the model refused: I can't help with that.");
        openai.raw = Some(
            RawJson::from_string(
                r#"{"choices":[{"message":{"content":"ok","refusal":null}}]}"#.into(),
            )
            .unwrap(),
        );
        assert_eq!(Validator::NotRefusal.check(&openai), Ok(()));
    }

    #[test]
    fn a_long_reason_is_cut() {
        let r = Rejection::new("json", "x".repeat(1000));
        assert_eq!(r.reason.chars().count(), MAX_REASON_CHARS + 1);
        assert!(r.reason.ends_with('…'));
    }
}
