//! Reading a client's request: its body within the limit, the neutral
//! request beside the client's own body, its id.

use std::fmt::Write as _;

use serde_json::Value;

use super::http::Format;
use super::limits::check_request;
use crate::chat::{ChatRequest, Dialect, Native};
use crate::format::{anthropic, openai, parse_json, responses, FormatError};
use crate::platform::{Headers, Platform};

/// Request headers that mean something to a provider, forwarded from the
/// client to the providers that read them. Never a credential
/// (`authorization`, `x-api-key`), a cookie or one of the gateway's own.
pub const FORWARDED_HEADERS: &[&str] = &["anthropic-beta", "openai-beta", "idempotency-key"];

/// Reads a chat request in the client's `format`: the body is parsed once,
/// read into the neutral request, and kept as the request's native body
/// (with the [`FORWARDED_HEADERS`] the client sent), which a provider of
/// the same dialect is sent instead of a translation.
pub(super) fn read_chat(
    format: Format,
    bytes: &[u8],
    headers: &Headers,
) -> Result<ChatRequest, FormatError> {
    let value = parse_json(bytes)?;
    let (dialect, mut request) = match format {
        Format::OpenAi => (Dialect::OpenAi, openai::request_from_value(&value)?),
        Format::Anthropic => (Dialect::Anthropic, anthropic::request_from_value(&value)?),
        Format::Responses => (Dialect::Responses, responses::request_from_value(&value)?),
    };
    check_request(&request)?;
    // The readers take only an object, so this is the body's own map.
    if let Value::Object(body) = value {
        let headers = FORWARDED_HEADERS
            .iter()
            .filter_map(|name| Some((name.to_string(), headers.get(name)?.to_string())))
            .collect();
        request.native = Some(Box::new(Native {
            dialect,
            body,
            headers,
        }));
    }
    Ok(request)
}

/// The client's `x-request-id` when it is short and plain, else a new one.
pub(super) fn request_id(headers: &Headers, platform: &impl Platform) -> String {
    if let Some(id) = headers.get("x-request-id") {
        let plain = id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if plain && (8..=64).contains(&id.len()) {
            return id.to_string();
        }
    }
    let mut id = String::with_capacity(20);
    for _ in 0..2 {
        let n = (platform.random() * (1u64 << 40) as f64) as u64;
        let _ = write!(id, "{n:010x}"); // a String takes every write
    }
    id
}

/// The path of an absolute URL (`https://host/v1/messages?x` →
/// `/v1/messages`), as a host hands over a request's URL; `/` when it has
/// none. The URL is a serialized WHATWG URL already, so no parser needed.
pub fn url_path(url: &str) -> &str {
    let rest = match url.find("://") {
        Some(i) => &url[i + 3..],
        None => url,
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let rest = &rest[..end];
    match rest.find('/') {
        Some(i) => &rest[i..],
        None => "/",
    }
}

pub(super) fn clip(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::http::REQUEST_HEADERS;

    #[test]
    fn paths_of_urls() {
        assert_eq!(
            url_path("https://gw.example/v1/messages?beta=1"),
            "/v1/messages"
        );
        assert_eq!(url_path("http://127.0.0.1:8787/"), "/");
        assert_eq!(url_path("http://127.0.0.1:8787"), "/");
        assert_eq!(url_path("http://h?q=/x"), "/");
        assert_eq!(url_path("http://h/a/b#f"), "/a/b");
        assert_eq!(
            url_path("http://h/v1/chat/completions/"),
            "/v1/chat/completions/"
        );
    }

    #[test]
    fn request_headers_names_every_header_read() {
        // Every header looked up in these modules by name (a `get` on `headers`).
        let src = concat!(
            include_str!("http.rs"),
            include_str!("setup.rs"),
            include_str!("route.rs"),
            include_str!("proxy.rs"),
            include_str!("dispatch.rs"),
            include_str!("chat.rs"),
            include_str!("health.rs"),
            include_str!("login.rs"),
            include_str!("models.rs"),
            include_str!("auth.rs"),
            include_str!("request.rs"),
            include_str!("../cache/controls.rs")
        );
        let mut read = Vec::new();
        for (i, _) in src.match_indices(".get(\"") {
            if src[..i].trim_end().ends_with("headers") {
                let name = &src[i + 6..];
                read.push(&name[..name.find('"').unwrap()]);
            }
        }
        assert!(read.len() >= 6, "{read:?}");
        for name in read {
            assert!(
                REQUEST_HEADERS.contains(&name),
                "{name} is read but not in REQUEST_HEADERS"
            );
        }
        for name in FORWARDED_HEADERS {
            assert!(
                REQUEST_HEADERS.contains(name),
                "{name} is forwarded but not read"
            );
        }
    }
}
