//! Answers and errors in the client's format.

use serde::Serialize;
use serde_json::Value;

use super::http::{Format, Outbound};
use super::request::clip;
use crate::error::{Error, Exhausted};
use crate::format::{anthropic, openai};
use crate::platform::Headers;

pub(super) fn too_large(format: Format, limit: usize) -> Outbound {
    error_response(
        format,
        413,
        &format!("request body larger than {limit} bytes"),
        Some("request_too_large"),
    )
}

/// A chain error in the client's format answering `status`, with `Retry-After` when known.
pub(super) fn render_error_as(format: Format, e: &Error, status: u16) -> Outbound {
    let (message, code) = match e {
        Error::AllProvidersFailed(x) => (x.headline(), Some(e.code().to_string())),
        // Returned as is: the provider's own reason and code.
        Error::Rejected { error, .. } => (error.message_or_kind().to_string(), error.code.clone()),
        Error::InvalidRequest(m) => (m.clone(), Some(e.code().to_string())),
        Error::UnknownRoute(name) => (
            format!(
                "model \"{}\" names no configured route or model (GET /v1/models lists them)",
                clip(name, 200)
            ),
            Some(e.code().to_string()),
        ),
        // Only streams are interrupted; this gateway answers whole bodies.
        Error::Interrupted { .. }
        | Error::SpendCapReached { .. }
        | Error::Shed { .. }
        | Error::NoValidAnswer { .. } => (e.to_string(), Some(e.code().to_string())),
    };
    let mut body = error_body(format, status, &message, code.as_deref());
    if let Error::AllProvidersFailed(Exhausted { attempts }) | Error::NoValidAnswer { attempts } = e
    {
        // The attempts, for humans debugging a failover; SDKs ignore it.
        if let (Some(error), Ok(attempts)) = (
            body.get_mut("error").and_then(Value::as_object_mut),
            serde_json::to_value(attempts),
        ) {
            error.insert("attempts".into(), attempts);
        }
    }
    let mut out = json_response(status, &body);
    if let Some(after) = e.retry_after() {
        out.headers.insert(
            "retry-after",
            // Retry-After takes whole seconds: rounded up, at least one.
            (after.as_secs() + u64::from(after.subsec_nanos() > 0))
                .max(1)
                .to_string(),
        );
        if let Error::Shed { .. } = e {
            // Spread to the millisecond: OpenAI's SDKs read it first.
            out.headers
                .insert("retry-after-ms", after.as_millis().to_string());
        }
    }
    out
}

/// An error answer in the client's format.
pub(crate) fn error_response(
    format: Format,
    status: u16,
    message: &str,
    code: Option<&str>,
) -> Outbound {
    json_response(status, &error_body(format, status, message, code))
}

fn error_body(format: Format, status: u16, message: &str, code: Option<&str>) -> Value {
    match format {
        // The Responses API answers errors as Chat Completions does.
        Format::OpenAi | Format::Responses => openai::render_error(status, message, code),
        Format::Anthropic => anthropic::render_error(status, message),
    }
}

pub(super) fn json_response(status: u16, body: &impl Serialize) -> Outbound {
    let mut headers = Headers::new();
    headers.insert("content-type", "application/json");
    Outbound {
        status,
        headers,
        body: to_json(body, 512),
        stream: None,
        log: String::new(),
    }
}

/// `value` as JSON, written into a buffer of `capacity` bytes to start
/// with. The crate's shapes are plain data (string keys, no fallible
/// `Serialize`), so writing them cannot fail; an empty text stands for the
/// impossible case rather than a panic.
pub(super) fn to_json(value: &impl Serialize, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    match serde_json::to_writer(&mut out, value) {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}

/// [`to_json`], as text.
pub(super) fn to_json_text(value: &impl Serialize, capacity: usize) -> String {
    String::from_utf8(to_json(value, capacity)).unwrap_or_default()
}
