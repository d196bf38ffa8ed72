//! The JSON log line of a request.

use serde::Serialize;

use super::http::{Format, Outbound};
use super::render::to_json_text;
use super::traced::Traced;
use crate::chat::Usage;
use crate::engine::spans::AnswerFacts;
use crate::error::{discarded_usage, Attempt, AttemptOutcome, ErrorKind};
use crate::platform::UnixMillis;
use crate::policy::price::{Bill, Cost, Prices};

/// One request's log line. The fields are in their keys' sorted order, so
/// every line lists its keys in one order.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LogLine<'a> {
    pub(super) attempts: usize,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) auth_disabled: bool,
    /// What the response cache did: `hit`, `miss`, `stale` or `bypass`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cache: Option<&'static str>,
    /// The named client whose key the request carried (never the key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) client: Option<&'a str>,
    /// What the attempts cost, where their usage and prices are known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cost: Option<Bill>,
    /// What a stored answer served instead of asking cost when it was asked.
    #[serde(rename = "costSavedUsd", skip_serializing_if = "Option::is_none")]
    pub(super) cost_saved: Option<Cost>,
    /// Tokens consumed by attempts that did not become the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) discarded_usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) format: Option<Format>,
    pub(super) latency_ms: UnixMillis,
    /// Empty until written: `error` for a 5xx answer, `info` otherwise.
    pub(super) level: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) method: Option<&'a str>,
    pub(super) msg: &'static str,
    /// Hints left out for the provider that answered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) omitted: Vec<String>,
    pub(super) path: &'a str,
    /// The request's priority class, when it has a route that sheds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) priority: Option<&'static str>,
    /// Why the request was refused: the client's limit (`requests`,
    /// `tokens`, `in_flight`, `spend`), `route` (one it may not use) or
    /// `shed` (its class, while its route sheds load).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) refused: Option<&'static str>,
    pub(super) request_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) route: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) served_by: Option<String>,
    pub(super) status: u16,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) stream: bool,
    /// The request's trace: its caller's `traceparent`'s, or one started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) trace_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) trail: Vec<TrailItem>,
    /// The bytes this request's answer was stored in, if it was.
    #[serde(skip)]
    pub(super) cache_stored: usize,
    /// The cache's result is counted by the stream's end, not from this
    /// line: a stream that went out before its first item and may yet be
    /// served stale ([`super::metrics::StaleTally`]).
    #[serde(skip)]
    pub(super) cache_deferred: bool,
    /// The client's prices, when it has any.
    #[serde(skip)]
    pub(super) prices: Option<&'a Prices>,
    /// The request's spans are recorded ([`super::traced`]).
    #[serde(skip)]
    pub(super) traced: Option<Traced>,
    /// A traced request's attempts, for its spans.
    #[serde(skip)]
    pub(super) trace_attempts: Vec<Attempt>,
    /// What a traced request's answer said of itself.
    #[serde(skip)]
    pub(super) answer_facts: AnswerFacts,
}

impl LogLine<'_> {
    /// Notes the attempts: how many reached a provider, the trail, the
    /// tokens spent on attempts that did not answer, and the hints left out
    /// for the one that did.
    pub(super) fn record_attempts(&mut self, attempts: &[Attempt]) {
        self.attempts = attempts.iter().filter(|a| a.number > 0).count();
        if self.traced.is_some() {
            self.trace_attempts = attempts.to_vec();
        }
        self.discarded_usage = discarded_usage(attempts);
        self.cost = self
            .prices
            .map(|p| p.bill(attempts))
            .filter(|b| b.total.is_some());
        let answered = attempts
            .iter()
            .rev()
            .find(|a| a.outcome == AttemptOutcome::Success);
        if let Some(answered) = answered {
            self.omitted.clone_from(&answered.omitted);
        }
        self.trail = attempts
            .iter()
            .map(|a| TrailItem {
                cost_usd: self.prices.and_then(|p| p.attempt_cost(a)),
                provider: a.provider.clone(),
                model: a.model.clone(),
                number: a.number,
                duration_ms: crate::platform::millis(a.duration),
                outcome: match &a.outcome {
                    AttemptOutcome::Success => Outcome::Ok,
                    AttemptOutcome::Failure { error } => Outcome::Failed(error.kind),
                    AttemptOutcome::Cancelled => Outcome::Cancelled,
                    AttemptOutcome::Rejected { .. } => {
                        Outcome::Rejected(a.rejection().unwrap_or_default())
                    }
                },
                reached: (!a.reached).then_some(false),
                reason: a
                    .error()
                    .filter(|e| refused_unsent(e.kind, a.reached))
                    .map(|e| e.message.clone()),
                status: a.error().and_then(|e| e.status),
                usage: a.usage,
            })
            .collect();
    }

    /// `x-attempts` and `x-served-by` on an answer; `x-omitted-fields`
    /// when hints were left out for the provider that answered, and
    /// `x-discarded-usage` when attempts that did not answer had reported
    /// tokens by the time the headers go.
    pub(super) fn answer_headers(&self, out: &mut Outbound) {
        out.headers.insert("x-attempts", self.attempts.to_string());
        if let Some(s) = &self.served_by {
            out.headers.insert("x-served-by", header_safe(s));
        }
        if !self.omitted.is_empty() {
            out.headers
                .insert("x-omitted-fields", self.omitted.join(", "));
        }
        if let Some(bill) = &self.cost {
            cost_headers(bill, out);
        }
        if let Some(u) = self.discarded_usage {
            out.headers.insert(
                "x-discarded-usage",
                format!(
                    "input_tokens={}, output_tokens={}",
                    u.input_tokens, u.output_tokens
                ),
            );
        }
    }
}

/// `x-cost-usd` (every attempt's cost known) and `x-cost-usd-answer` (the
/// answering attempt's share), as exact decimals of dollars.
pub(super) fn cost_headers(bill: &Bill, out: &mut Outbound) {
    if let Some(total) = bill.total {
        out.headers.insert("x-cost-usd", total.to_string());
    }
    if let Some(answer) = bill.answer {
        out.headers.insert("x-cost-usd-answer", answer.to_string());
    }
}

/// Bytes a header value built from names (a provider id, a model a client
/// may have chosen) carries percent-encoded: controls, space and `%`
/// (besides every non-ASCII byte), so any name makes a valid value and the
/// encoding reads back unambiguously.
const NOT_IN_HEADERS: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b' ').add(b'%');

/// `name` as a header value that every host accepts.
pub(super) fn header_safe(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, NOT_IN_HEADERS).to_string()
}

/// Whether a failure is the gateway's own refusal of an entry that could
/// not serve the request at all (a field it cannot be given, a request
/// beyond its context window), whose message is then the trail's reason.
fn refused_unsent(kind: ErrorKind, reached: bool) -> bool {
    kind == ErrorKind::Unsupported || (kind == ErrorKind::ContextLength && !reached)
}

/// One attempt in a log line's trail (keys sorted, as in [`LogLine`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TrailItem {
    /// What the attempt cost, when it reported usage and has a price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cost_usd: Option<Cost>,
    pub(super) duration_ms: u64,
    pub(super) model: String,
    pub(super) number: u32,
    pub(super) outcome: Outcome,
    pub(super) provider: String,
    /// `false` for an attempt that never reached its provider; left out
    /// for one that did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reached: Option<bool>,
    /// Why this entry could not serve the request at all (a field it cannot
    /// be given, `context_window: …`): the gateway's own words, so safe to log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) usage: Option<Usage>,
}

/// How an attempt ended: `ok`, the failure's kind (`rate_limited`, …), or
/// `rejected: <validator>: <reason>` for an answer a validator refused.
#[derive(Debug)]
pub(super) enum Outcome {
    Ok,
    Failed(ErrorKind),
    Cancelled,
    Rejected(String),
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Outcome::Ok => s.serialize_str("ok"),
            Outcome::Failed(kind) => kind.serialize(s),
            Outcome::Cancelled => s.serialize_str("cancelled"),
            Outcome::Rejected(why) => s.serialize_str(&format!("rejected: {why}")),
        }
    }
}

/// The log line's text, its level decided by the status when not set.
pub(super) fn log_line(l: &mut LogLine<'_>) -> String {
    if l.level.is_empty() {
        l.level = if l.status >= 500 { "error" } else { "info" };
    }
    l.msg = "request";
    to_json_text(l, 384)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::time::Duration;

    #[test]
    fn log_lines_list_their_keys_sorted_and_decide_their_level() {
        let attempts = [
            crate::error::Attempt {
                provider: "p".into(),
                model: "m".into(),
                number: 1,
                started_at: 3,
                duration: Duration::from_millis(12),
                reached: true,
                usage: None,
                omitted: Vec::new(),
                span: None,
                breaker: None,
                outcome: AttemptOutcome::Failure {
                    error: crate::error::ProviderError::new(ErrorKind::RateLimited, "x")
                        .with_status(429),
                },
            },
            crate::error::Attempt {
                provider: "q\"".into(),
                model: "m".into(),
                number: 0,
                started_at: 3,
                duration: Duration::ZERO,
                reached: false,
                usage: None,
                omitted: Vec::new(),
                span: None,
                breaker: None,
                outcome: AttemptOutcome::Success,
            },
        ];
        let mut full = LogLine {
            request_id: "r1",
            method: Some("POST"),
            path: "/v1/messages",
            format: Some(Format::Anthropic),
            route: Some("default".into()),
            status: 503,
            served_by: Some("p/m".into()),
            latency_ms: 42,
            error: Some("all_providers_failed"),
            message: Some("bad\nthing"),
            auth_disabled: true,
            stream: true,
            ..LogLine::default()
        };
        full.record_attempts(&attempts);
        assert_eq!(
            log_line(&mut full),
            concat!(
                r#"{"attempts":1,"authDisabled":true,"error":"all_providers_failed","#,
                r#""format":"anthropic","latencyMs":42,"level":"error","message":"bad\nthing","#,
                r#""method":"POST","msg":"request","path":"/v1/messages","requestId":"r1","#,
                r#""route":"default","servedBy":"p/m","status":503,"stream":true,"trail":["#,
                r#"{"durationMs":12,"model":"m","number":1,"outcome":"rate_limited","#,
                r#""provider":"p","status":429},"#,
                r#"{"durationMs":0,"model":"m","number":0,"outcome":"ok","provider":"q\"","#,
                r#""reached":false}]}"#,
            )
        );
        for (level, status, want) in [
            ("", 200, "info"),
            ("", 500, "error"),
            ("error", 200, "error"),
        ] {
            let mut l = LogLine {
                level,
                status,
                ..LogLine::default()
            };
            let v: Value = serde_json::from_str(&log_line(&mut l)).unwrap();
            assert_eq!(v["level"], want);
            assert_eq!(v["msg"], "request");
            assert_eq!(v.as_object().map(|o| o.len()), Some(7), "{v}");
        }
    }

    #[test]
    fn omitted_hints_and_discarded_tokens_reach_the_headers_and_the_line() {
        let usage = |i, o| {
            Some(crate::chat::Usage {
                input_tokens: i,
                output_tokens: o,
                ..Default::default()
            })
        };
        let attempt = |outcome, usage, omitted: &[&str]| Attempt {
            provider: "p".into(),
            model: "m".into(),
            number: 1,
            started_at: 0,
            duration: Duration::ZERO,
            reached: true,
            outcome,
            usage,
            omitted: omitted.iter().map(|s| s.to_string()).collect(),
            span: None,
            breaker: None,
        };
        let cut = AttemptOutcome::Failure {
            error: crate::error::ProviderError::new(ErrorKind::Transport, "reset"),
        };
        let attempts = [
            attempt(cut.clone(), usage(10, 3), &["top_k"]),
            attempt(cut, usage(10, 0), &[]),
            attempt(
                AttemptOutcome::Success,
                usage(12, 4),
                &["seed", "frequency_penalty"],
            ),
        ];
        let mut line = LogLine::default();
        line.record_attempts(&attempts);
        let mut out = super::super::render::json_response(200, &Value::Null);
        line.answer_headers(&mut out);
        assert_eq!(
            out.headers.get("x-omitted-fields"),
            Some("seed, frequency_penalty"),
            "what was left out for the provider that answered"
        );
        assert_eq!(
            out.headers.get("x-discarded-usage"),
            Some("input_tokens=20, output_tokens=3")
        );
        let v: Value = serde_json::from_str(&log_line(&mut line)).unwrap();
        assert_eq!(
            v["omitted"],
            serde_json::json!(["seed", "frequency_penalty"])
        );
        assert_eq!(
            v["discardedUsage"],
            serde_json::json!({"inputTokens": 20, "outputTokens": 3})
        );
        assert_eq!(v["trail"][2]["usage"]["outputTokens"], 4);

        // Nothing left out, nothing discarded: no such headers.
        let mut line = LogLine::default();
        line.record_attempts(&attempts[2..2]);
        let mut out = super::super::render::json_response(200, &Value::Null);
        line.answer_headers(&mut out);
        assert_eq!(out.headers.get("x-omitted-fields"), None);
        assert_eq!(out.headers.get("x-discarded-usage"), None);
    }

    #[test]
    fn header_values_from_names_are_safe_for_any_byte() {
        assert_eq!(header_safe("openai/gpt-4.1-mini"), "openai/gpt-4.1-mini");
        assert_eq!(
            header_safe("p/a\r\nset-cookie: x"),
            "p/a%0D%0Aset-cookie:%20x"
        );
        assert_eq!(header_safe("p/é\u{0}%"), "p/%C3%A9%00%25");
        for b in 0..=255u8 {
            let name = format!("p/{}", char::from(b));
            let v = header_safe(&name);
            assert!(v.bytes().all(|c| (0x21..0x7f).contains(&c)), "{b}: {v:?}");
        }
    }
}
