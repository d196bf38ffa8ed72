//! The Responses API side of the OpenAI adapter: a Responses client's own
//! body sent to a provider that serves it (OpenAI, Azure OpenAI), and its
//! answers and events told apart from Chat Completions ones.
//!
//! The body goes as the client wrote it, every field included (hosted
//! tools, `previous_response_id`, `store`, `include`, …), with only `model`
//! (the entry's) and `stream` (as the request streams) decided here. A
//! whole answer comes back to a Responses client as the provider's body,
//! a stream as the provider's events (`Provider::dialect_of` reports the
//! Responses dialect for such a request), read into deltas only for the
//! gateway's bookkeeping.

use serde::Deserialize;
use serde_json::{json, Value};

use super::super::classify::ErrorBody;
use super::super::native::NativeBody;
use super::OpenAi;
use crate::chat::ChatRequest;
use crate::error::ProviderError;
use crate::provider::preset::PresetName;
use crate::sse::SseEvent;

/// The URL and body of a Responses request: beside the Chat Completions
/// endpoint for OpenAI, `{resource}/openai/v1/responses` for Azure (whose v1 API takes
/// the deployment as `model`).
pub(super) fn native(
    p: &OpenAi,
    req: &ChatRequest,
    model: &str,
) -> Result<(String, Vec<u8>), ProviderError> {
    let Some(native) = req.native.as_deref() else {
        return Err(ProviderError::new(
            crate::error::ErrorKind::InvalidRequest,
            "a Responses request without its body",
        ));
    };
    let model = match p.preset.name {
        PresetName::Azure => p.deployment.as_deref().unwrap_or(model),
        _ => model,
    };
    let body = NativeBody::new(native, model, req.stream).to_vec()?;
    let url = match p.preset.name {
        PresetName::Azure => format!("{}/openai/v1/responses", p.base_url),
        // Beside the configured Chat Completions path (`/v1/chat/completions`
        // → `/v1/responses`).
        _ => {
            let path = p
                .path
                .strip_suffix("/chat/completions")
                .map_or_else(|| "/v1/responses".to_string(), |b| format!("{b}/responses"));
            format!("{}{path}", p.base_url)
        }
    };
    Ok((url, body))
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(default, borrow)]
    object: Option<crate::format::wire::Str<'a>>,
}

/// Whether a body is a Response object (`"object": "response"`), read
/// without the rest of it.
pub(super) fn is_response(body: &[u8]) -> bool {
    serde_json::from_slice::<Head<'_>>(body)
        .ok()
        .and_then(|h| h.object)
        .is_some_and(|o| o.as_str() == "response")
}

/// Whether a stream event is a Responses event (named `response.…`).
pub(super) fn is_event(ev: &SseEvent) -> bool {
    ev.event
        .as_deref()
        .is_some_and(|name| name.starts_with("response."))
}

/// The error object of a Responses body or event: a `response.failed`
/// event's `response.error`, an `error` event's own fields, or the usual
/// `error` member.
pub(super) fn error_in(v: &Value) -> Option<ErrorBody> {
    if let Some(e) = v.get("response").and_then(|r| r.get("error")) {
        return ErrorBody::from_value(&json!({ "error": e }));
    }
    if v.get("type").and_then(Value::as_str) == Some("error") && v.get("message").is_some() {
        return ErrorBody::from_value(&json!({ "error": v }));
    }
    ErrorBody::from_value(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{Dialect, Native};
    use crate::provider::Provider;

    fn request(body: Value) -> ChatRequest {
        let Value::Object(map) = body.clone() else {
            panic!("an object")
        };
        let mut req = crate::format::responses::request_from_value(&body).unwrap();
        req.native = Some(Box::new(Native {
            dialect: Dialect::Responses,
            body: map,
            headers: Vec::new(),
        }));
        req
    }

    #[test]
    fn openai_and_azure_are_sent_the_clients_body_at_their_responses_endpoint() {
        let req =
            request(json!({"model": "route", "input": "hi", "tools": [{"type": "web_search"}]}));
        let openai = OpenAi::new("o", PresetName::OpenAi);
        assert!(openai.speaks_responses());
        let http = openai.encode(&req, "gpt-x").unwrap();
        assert_eq!(http.url, "https://api.openai.com/v1/responses");
        let sent: Value = serde_json::from_slice(&http.body).unwrap();
        assert_eq!(
            sent,
            json!({"model": "gpt-x", "input": "hi", "tools": [{"type": "web_search"}]})
        );

        let azure = OpenAi::new("az", PresetName::Azure)
            .base_url("https://r.example")
            .deployment("dep-1");
        let http = azure.encode(&req, "gpt-x").unwrap();
        assert_eq!(http.url, "https://r.example/openai/v1/responses");
        let sent: Value = serde_json::from_slice(&http.body).unwrap();
        assert_eq!(
            sent["model"], "dep-1",
            "Azure's v1 API takes the deployment"
        );

        // A Chat Completions-only preset is sent a translation, which
        // cannot carry a hosted tool.
        let groq = OpenAi::new("g", PresetName::Groq);
        assert!(!groq.speaks_responses());
        let err = groq.encode(&req, "llama").unwrap_err();
        assert!(err.message.starts_with("tools[0].type"), "{}", err.message);
    }

    #[test]
    fn answers_and_events_are_told_apart_and_their_errors_read() {
        assert!(is_response(
            br#"{"id":"r","object":"response","output":[]}"#
        ));
        assert!(!is_response(
            br#"{"object":"chat.completion","choices":[]}"#
        ));
        let named = |name: Option<&str>| SseEvent {
            event: name.map(str::to_string),
            data: "{}".into(),
            ..SseEvent::default()
        };
        assert!(is_event(&named(Some("response.created"))));
        assert!(!is_event(&named(None)));
        let failed = json!({"type": "response.failed",
            "response": {"error": {"code": "server_error", "message": "boom"}}});
        assert_eq!(error_in(&failed).unwrap().message.as_deref(), Some("boom"));
        let event = json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"});
        let body = error_in(&event).unwrap();
        assert_eq!(body.code.as_deref(), Some("rate_limit_exceeded"));
        assert_eq!(body.message.as_deref(), Some("slow down"));
    }
}
