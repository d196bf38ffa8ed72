//! The one classifier of provider failures.
//!
//! [`classify`] turns a status, headers and body into a [`ProviderError`]
//! whose [`ErrorKind`] decides the treatment. It reads both error body
//! shapes (OpenAI `{"error": {"message", "type", "code", "param"}}` and
//! Anthropic `{"type": "error", "error": {"type", "message"}}`) and plain
//! text. Adapters call it for every non-2xx response, and for a 2xx whose
//! body is an error object; they add only their quirks on top.

use serde_json::Value;

use crate::error::{ErrorKind, ProviderError};
use crate::platform::{Headers, UnixMillis};
use crate::policy::backoff::parse_retry_after;

/// The longest provider message kept in an error.
const MAX_MESSAGE: usize = 500;

/// A provider's error body, in either shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorBody {
    /// `error.type` (`invalid_request_error`, `overloaded_error`, …).
    pub kind: Option<String>,
    /// `error.code` (`insufficient_quota`, `context_length_exceeded`, …);
    /// numeric codes are kept as their decimal text.
    pub code: Option<String>,
    /// `error.message`, or the plain-text body.
    pub message: Option<String>,
    /// `error.param`, when given.
    pub param: Option<String>,
}

impl ErrorBody {
    /// Reads an error body from bytes: JSON in either shape, or text.
    pub fn parse(body: &[u8]) -> ErrorBody {
        match serde_json::from_slice::<Value>(body) {
            Ok(v) => ErrorBody::from_value(&v).unwrap_or_else(|| {
                if v.get("message").is_some_and(Value::is_string) {
                    ErrorBody::fields(&v)
                } else {
                    ErrorBody {
                        message: Some(truncate(&v.to_string())),
                        ..ErrorBody::default()
                    }
                }
            }),
            Err(_) => {
                let text = String::from_utf8_lossy(body);
                let text = text.trim();
                ErrorBody {
                    message: (!text.is_empty()).then(|| truncate(text)),
                    ..ErrorBody::default()
                }
            }
        }
    }

    /// The error object inside a parsed body, if it holds one: an `error`
    /// member that is an object or a string (OpenAI, Anthropic, Ollama,
    /// llama.cpp), a top-level `{"type": "error"}` (Anthropic) or
    /// `{"object": "error", "message"}` (vLLM), or such a body wrapped in an
    /// array (Gemini). `None` for a body that is not an error.
    pub fn from_value(v: &Value) -> Option<ErrorBody> {
        if let Value::Array(items) = v {
            return items.first().and_then(ErrorBody::from_value);
        }
        let tag = |key: &str| v.get(key).and_then(Value::as_str) == Some("error");
        match v.get("error").filter(|e| !e.is_null()) {
            Some(Value::Object(_)) => v.get("error").map(ErrorBody::fields),
            Some(Value::String(s)) => Some(ErrorBody {
                message: Some(truncate(s)),
                ..ErrorBody::default()
            }),
            Some(other) => Some(ErrorBody {
                message: Some(truncate(&other.to_string())),
                ..ErrorBody::default()
            }),
            None if tag("object") => Some(ErrorBody::fields(v)),
            None if tag("type") => Some(ErrorBody {
                message: Some("error without details".into()),
                ..ErrorBody::default()
            }),
            None => None,
        }
    }

    /// `type` (or Google's `status`), `code`, `message` and `param` of one
    /// error object.
    fn fields(e: &Value) -> ErrorBody {
        let get = |key: &str| e.get(key).and_then(text_of);
        ErrorBody {
            kind: get("type")
                .or_else(|| get("status"))
                .or_else(|| get("__type").map(|t| aws_type_name(&t).to_string())),
            code: get("code"),
            message: get("message").map(|m| truncate(&m)),
            param: get("param"),
        }
    }

    /// Type, code and message, lower-cased, for keyword checks.
    fn haystack(&self) -> String {
        let parts = [&self.kind, &self.code, &self.message];
        let mut s = String::new();
        for p in parts.into_iter().flatten() {
            s.push_str(&p.to_ascii_lowercase());
            s.push(' ');
        }
        s
    }

    fn is(&self, names: &[&str]) -> bool {
        let eq = |f: &Option<String>| f.as_deref().is_some_and(|v| names.contains(&v));
        eq(&self.kind) || eq(&self.code)
    }

    fn mentions(&self, needles: &[&str]) -> bool {
        let hay = self.haystack();
        needles.iter().any(|n| hay.contains(n))
    }

    /// Out of credit or quota, as opposed to a per-minute limit. A mere
    /// mention of billing is not enough: Gemini's per-minute 429 points to
    /// "your plan and billing details" too.
    fn is_quota(&self) -> bool {
        self.is(&[
            "insufficient_quota",
            "billing_error",
            "billing_hard_limit_reached",
        ]) || self.mentions(&[
            "insufficient_quota",
            "billing_hard_limit",
            "credit balance",
            "insufficient credits",
            "insufficient balance",
        ])
    }

    /// A 429 that blames the request, not a full pool: OpenAI's "Request
    /// too large for gpt-4o … on tokens per min (TPM): Limit 30000,
    /// Requested 45000" comes with the code `rate_limit_exceeded` like any
    /// rate limit, but no wait lets a request bigger than the limit in. Told
    /// by its words, or by a `Requested` figure above the `Limit` with no
    /// `Used` figure (a full pool's message names what was used).
    fn is_request_over_limit(&self) -> bool {
        if self.mentions(&["request too large"]) {
            return true;
        }
        let Some(message) = &self.message else {
            return false;
        };
        let (mut limit, mut requested, mut used) = (None, None, false);
        let mut words = message.split_whitespace().map(|w| {
            w.trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_ascii_lowercase()
        });
        while let Some(word) = words.next() {
            let figure = |w: Option<String>| w.and_then(|w| w.replace(',', "").parse::<u64>().ok());
            match word.as_str() {
                "limit" => limit = limit.or(figure(words.next())),
                "requested" => requested = requested.or(figure(words.next())),
                "used" => used = true,
                _ => {}
            }
        }
        !used && matches!((limit, requested), (Some(l), Some(r)) if r > l)
    }

    fn is_context_length(&self) -> bool {
        self.is(&["context_length_exceeded", "string_above_max_length"])
            || self.mentions(&[
                "prompt is too long",
                "context length",
                "context_length",
                "context window",
                "context limit",
                "input is too long",
                "input token count",
                "too many tokens",
                "reduce the length of the messages",
                "request too large for model",
            ])
    }

    fn is_content_filter(&self) -> bool {
        self.is(&[
            "content_policy_violation",
            "content_filter",
            "invalid_prompt",
        ]) || self.mentions(&[
            "safety system",
            "content management policy",
            "content policy",
            "content filter",
            "usage policy",
            "flagged as potentially violating",
        ])
    }

    /// The kind an error object names by its type alone, for errors that
    /// arrive without a telling status (inside a 200).
    fn kind_by_type(&self) -> Option<ErrorKind> {
        // The code is the more specific name (`invalid_api_key` comes with
        // the type `invalid_request_error`), so it is asked first.
        [self.code.as_deref(), self.kind.as_deref()]
            .into_iter()
            .flatten()
            .find_map(|t| self.kind_named(t))
    }

    fn kind_named(&self, name: &str) -> Option<ErrorKind> {
        Some(match name {
            "overloaded_error" | "api_error" | "server_error" | "timeout_error" | "UNAVAILABLE"
            | "INTERNAL" => ErrorKind::Server,
            "rate_limit_error"
            | "rate_limit_exceeded"
            | "requests"
            | "tokens"
            | "RESOURCE_EXHAUSTED" => ErrorKind::RateLimited,
            "insufficient_quota" | "billing_error" | "billing_hard_limit_reached" => {
                ErrorKind::QuotaExhausted
            }
            "authentication_error"
            | "permission_error"
            | "invalid_api_key"
            | "UNAUTHENTICATED"
            | "PERMISSION_DENIED" => ErrorKind::Auth,
            "not_found_error" | "model_not_found" | "NOT_FOUND" => ErrorKind::NotFound,
            "context_length_exceeded" => ErrorKind::ContextLength,
            "content_policy_violation" | "content_filter" => ErrorKind::ContentFilter,
            // AWS (Bedrock) exception names, from `x-amzn-ErrorType`, a
            // `__type` member or an event stream's `:exception-type`.
            "ThrottlingException" => ErrorKind::RateLimited,
            "ServiceUnavailableException"
            | "ModelNotReadyException"
            | "InternalServerException"
            | "InternalFailure"
            | "ModelTimeoutException"
            | "ModelErrorException"
            | "ModelStreamErrorException" => ErrorKind::Server,
            "AccessDeniedException"
            | "UnrecognizedClientException"
            | "InvalidSignatureException"
            | "IncompleteSignatureException"
            | "ExpiredTokenException"
            | "MissingAuthenticationTokenException" => ErrorKind::Auth,
            "ResourceNotFoundException" => ErrorKind::NotFound,
            "ServiceQuotaExceededException" => ErrorKind::QuotaExhausted,
            "ValidationException" => self.request_kind(),
            "invalid_request_error"
            | "request_too_large"
            | "BadRequestError"
            | "INVALID_ARGUMENT" => self.request_kind(),
            _ => return None,
        })
    }

    /// The kind of a failure blamed on the request (400, 413, 422).
    fn request_kind(&self) -> ErrorKind {
        if self.is_quota() {
            ErrorKind::QuotaExhausted
        } else if self.is_context_length() {
            ErrorKind::ContextLength
        } else if self.is_content_filter() {
            ErrorKind::ContentFilter
        } else {
            ErrorKind::InvalidRequest
        }
    }
}

/// A JSON scalar as text (codes are sometimes numbers).
fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::String(_) | Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

/// At most [`MAX_MESSAGE`] characters, control characters replaced.
pub(crate) fn truncate(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(MAX_MESSAGE)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().nth(MAX_MESSAGE).is_some() {
        out.push('…');
    }
    out
}

/// An AWS error type as a bare exception name: `ThrottlingException`
/// from `ThrottlingException:http://internal.amazon.com/coral/…` (the
/// `x-amzn-ErrorType` header) or `com.amazon.coral.service#Throttling…`
/// (a `__type` member); an event stream's `throttlingException` with its
/// first letter raised.
pub(crate) fn aws_type_name(t: &str) -> String {
    let t = t.split(':').next().unwrap_or_default();
    let t = t.rsplit('#').next().unwrap_or_default().trim();
    let mut chars = t.chars();
    match chars.next() {
        Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

/// The kind for a status and error body: the failure table.
pub fn kind_for(status: u16, body: &ErrorBody) -> ErrorKind {
    // An AWS exception name is more specific than its status: AWS answers
    // ModelNotReadyException (a server not yet up) with a 429, and
    // ModelErrorException with a 424.
    let aws = body
        .kind
        .as_deref()
        .filter(|k| k.ends_with("Exception") || *k == "InternalFailure");
    if let Some(kind) = aws.and_then(|k| body.kind_named(k)) {
        return kind;
    }
    match status {
        429 if body.is_quota() => ErrorKind::QuotaExhausted,
        // Bigger than the limit itself: a fault of the request, handled as
        // one too long for the model (not retried, not counted; another
        // entry, with its own limits, may take it).
        429 if body.is_request_over_limit() => ErrorKind::ContextLength,
        429 => ErrorKind::RateLimited,
        402 => ErrorKind::QuotaExhausted,
        401 | 403 => ErrorKind::Auth,
        404 => ErrorKind::NotFound,
        408 | 409 => ErrorKind::Server,
        400 | 413 | 422 => body.request_kind(),
        400..=499 => ErrorKind::InvalidRequest,
        500..=599 => ErrorKind::Server,
        // An error object with a success status: trust what it names, and
        // take an unnamed one as a transient fault of the provider.
        200..=299 => match body.code.as_deref().and_then(|c| c.parse::<u16>().ok()) {
            Some(code @ 400..=599) => kind_for(code, body),
            Some(_) | None => body.kind_by_type().unwrap_or(ErrorKind::Server),
        },
        // 1xx and 3xx (a redirect means a misconfigured base URL or a
        // proxy in the way), and codes outside HTTP.
        _ => ErrorKind::Server,
    }
}

/// Classifies a failed response: kind, status, the provider's code and
/// message, Retry-After and `x-should-retry`.
pub fn classify(status: u16, headers: &Headers, body: &[u8], now: UnixMillis) -> ProviderError {
    let mut body = ErrorBody::parse(body);
    if body.kind.is_none() {
        // AWS names the error in a header beside a `{"message"}` body.
        body.kind = headers
            .get("x-amzn-errortype")
            .map(aws_type_name)
            .filter(|t| !t.is_empty());
    }
    classify_body(status, headers, body, now)
}

/// [`classify`] for an error body already read.
pub fn classify_body(
    status: u16,
    headers: &Headers,
    body: ErrorBody,
    now: UnixMillis,
) -> ProviderError {
    let kind = kind_for(status, &body);
    let message = match &body.message {
        Some(m) => m.clone(),
        None if (100..=599).contains(&status) => format!("HTTP {status} without an error message"),
        None => format!("unexpected HTTP status {status}"),
    };
    let mut e = ProviderError::new(kind, message)
        .with_status(status)
        .with_retry_after(parse_retry_after(headers, now));
    e.code = body.code.or(body.kind);
    e.should_retry = match headers.get("x-should-retry").map(str::trim) {
        Some(v) if v.eq_ignore_ascii_case("true") => Some(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Some(false),
        Some(_) | None => None,
    };
    e
}

/// Removes `secret`, pieces and masked forms of it, and anything shaped
/// like a key from the error's message and code (`redact.rs`), so that a
/// server echoing the key cannot leak it to the client or into logs.
pub fn redact(mut e: ProviderError, secret: Option<&str>) -> ProviderError {
    if let std::borrow::Cow::Owned(m) = crate::redact::redact(&e.message, secret) {
        e.message = m;
    }
    if let Some(code) = &e.code {
        if let std::borrow::Cow::Owned(c) = crate::redact::redact(code, secret) {
            e.code = Some(c);
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(status: u16, body: &str) -> ErrorKind {
        classify(status, &Headers::new(), body.as_bytes(), 0).kind
    }

    #[test]
    fn errors_inside_a_200_are_named_by_code_before_type() {
        let body = |code: &str| {
            format!(
                r#"{{"error":{{"message":"m","type":"invalid_request_error","code":"{code}"}}}}"#
            )
        };
        assert_eq!(kind(200, &body("invalid_api_key")), ErrorKind::Auth);
        assert_eq!(
            kind(200, &body("insufficient_quota")),
            ErrorKind::QuotaExhausted
        );
        assert_eq!(
            kind(200, &body("context_length_exceeded")),
            ErrorKind::ContextLength
        );
        assert_eq!(kind(200, &body("something_new")), ErrorKind::InvalidRequest);
        assert_eq!(
            kind(
                200,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#
            ),
            ErrorKind::Server
        );
    }

    #[test]
    fn statuses_follow_the_table() {
        assert_eq!(kind(429, ""), ErrorKind::RateLimited);
        assert_eq!(
            kind(
                429,
                r#"{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota"}}"#
            ),
            ErrorKind::QuotaExhausted
        );
        assert_eq!(kind(402, "pay up"), ErrorKind::QuotaExhausted);
        for s in [408, 409, 500, 502, 503, 504, 529] {
            assert_eq!(kind(s, "x"), ErrorKind::Server, "{s}");
        }
        assert_eq!(kind(401, ""), ErrorKind::Auth);
        assert_eq!(kind(403, ""), ErrorKind::Auth);
        assert_eq!(kind(404, ""), ErrorKind::NotFound);
        assert_eq!(kind(400, "bad"), ErrorKind::InvalidRequest);
        assert_eq!(kind(418, ""), ErrorKind::InvalidRequest);
        assert_eq!(kind(302, ""), ErrorKind::Server);
        assert_eq!(
            kind(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#
            ),
            ErrorKind::ContextLength
        );
        assert_eq!(
            kind(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens"}}"#
            ),
            ErrorKind::InvalidRequest
        );
    }

    #[test]
    fn a_429_for_a_request_over_the_limit_is_the_requests_fault() {
        let openai = |message: &str| {
            format!(
                r#"{{"error":{{"message":"{message}","type":"tokens","param":null,"code":"rate_limit_exceeded"}}}}"#
            )
        };
        let too_large = openai(
            "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 45000. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.",
        );
        let e = classify(429, &Headers::new(), too_large.as_bytes(), 0);
        assert_eq!(e.kind, ErrorKind::ContextLength);
        assert!(!e.is_retryable() && !e.trips_breaker() && e.fails_over());
        // The same figures without the words still tell it.
        assert_eq!(
            kind(
                429,
                &openai("Tokens per min (TPM): Limit 30,000, Requested 45,000.")
            ),
            ErrorKind::ContextLength
        );
        // A full pool is a rate limit: it names what was used.
        assert_eq!(
            kind(
                429,
                &openai("Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.")
            ),
            ErrorKind::RateLimited
        );
        assert_eq!(
            kind(429, &openai("Limit 30000, Requested 2000.")),
            ErrorKind::RateLimited
        );
        assert_eq!(
            kind(
                429,
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50,000 input tokens per minute."}}"#
            ),
            ErrorKind::RateLimited
        );
        // Anthropic's request over its size limit is a 413.
        assert_eq!(
            kind(
                413,
                r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#
            ),
            ErrorKind::InvalidRequest
        );
    }

    #[test]
    fn plain_text_is_truncated_and_headers_read() {
        let long = "x".repeat(2000);
        let h: Headers = [("retry-after", "3"), ("x-should-retry", "false")]
            .into_iter()
            .collect();
        let e = classify(503, &h, long.as_bytes(), 0);
        assert_eq!(e.message.chars().count(), MAX_MESSAGE + 1);
        assert_eq!(e.retry_after, Some(std::time::Duration::from_secs(3)));
        assert_eq!(e.should_retry, Some(false));
        let e = classify(503, &Headers::new(), b"", 0);
        assert_eq!(e.message, "HTTP 503 without an error message");
    }

    #[test]
    fn aws_exceptions_are_named_by_header_member_or_stream_type() {
        let aws = |status: u16, header: &str, body: &str| {
            let h: Headers = [("x-amzn-ErrorType", header)].into_iter().collect();
            classify(status, &h, body.as_bytes(), 0)
        };
        let e = aws(
            429,
            "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            r#"{"message":"Too many requests, please wait before trying again."}"#,
        );
        assert_eq!(e.kind, ErrorKind::RateLimited);
        assert_eq!(e.code.as_deref(), Some("ThrottlingException"));
        assert_eq!(
            e.message,
            "Too many requests, please wait before trying again."
        );
        assert_eq!(
            aws(429, "ModelNotReadyException", "{}").kind,
            ErrorKind::Server
        );
        assert_eq!(
            aws(424, "ModelErrorException", "{}").kind,
            ErrorKind::Server
        );
        assert_eq!(
            aws(503, "ServiceUnavailableException", "{}").kind,
            ErrorKind::Server
        );
        assert_eq!(
            aws(403, "AccessDeniedException", "{}").kind,
            ErrorKind::Auth
        );
        assert_eq!(
            aws(
                400,
                "ValidationException",
                r#"{"message":"Input is too long for requested model."}"#
            )
            .kind,
            ErrorKind::ContextLength
        );
        assert_eq!(
            aws(
                400,
                "ValidationException",
                r#"{"message":"temperature: bad"}"#
            )
            .kind,
            ErrorKind::InvalidRequest
        );
        assert_eq!(
            kind(
                403,
                r#"{"__type":"com.amazon.coral.service#UnrecognizedClientException","message":"The security token included in the request is invalid."}"#
            ),
            ErrorKind::Auth
        );
        assert_eq!(
            aws_type_name("modelStreamErrorException"),
            "ModelStreamErrorException"
        );
    }

    #[test]
    fn echoed_keys_are_redacted() {
        let e = classify(401, &Headers::new(), b"bad key sk-secret-123", 0);
        let e = redact(e, Some("sk-secret-123"));
        assert_eq!(e.message, "bad key ***");
    }
}
