//! The provider APIs' endpoints besides chat: embeddings and token
//! counting. Both are one JSON request and one JSON answer, which the
//! gateway passes through in the client's own format: a provider that
//! serves the endpoint builds the request ([`super::Provider::encode_endpoint`])
//! and its answer is checked for shape here, an error classified by the
//! shared classifier, before it goes to the client unchanged.

use serde::Deserialize;

use super::classify::ErrorBody;
use super::decode_success;
use crate::chat::Endpoint;
use crate::error::{ErrorKind, ProviderError};
use crate::format::{FormatError, Read};
use crate::platform::{BufferedResponse, UnixMillis};

/// The error of an entry whose provider does not serve `endpoint`: the
/// chain moves on to the next entry without a call.
pub(crate) fn unsupported(provider: &str, endpoint: Endpoint) -> ProviderError {
    ProviderError::new(
        ErrorKind::Unsupported,
        format!("provider \"{provider}\" does not serve {}", endpoint.name()),
    )
}

// The shapes are read to check an answer, which goes out as it came: their
// fields are never looked at.

/// An embeddings answer as far as it is checked: vectors with their index.
#[derive(Deserialize)]
#[allow(dead_code)]
struct EmbeddingsShape {
    data: Vec<EmbeddingShape>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct EmbeddingShape {
    index: u64,
    embedding: Vector,
}

/// A vector: floats, or base64 (`encoding_format: "base64"`).
#[derive(Deserialize)]
#[serde(untagged)]
#[allow(dead_code)]
enum Vector {
    Floats(Vec<f64>),
    Base64(String),
}

/// A count_tokens answer.
#[derive(Deserialize)]
#[allow(dead_code)]
struct CountShape {
    input_tokens: u64,
}

/// A provider's answer from `endpoint`: its body, unchanged, when it has
/// the endpoint's shape; otherwise the classified error it holds (an error
/// object, a non-2xx status) or [`ErrorKind::Decode`]. `secret` is
/// redacted from any message.
pub(crate) fn decode(
    endpoint: Endpoint,
    resp: &BufferedResponse,
    now: UnixMillis,
    secret: Option<&str>,
) -> Result<Vec<u8>, ProviderError> {
    let typed = |body: &[u8]| -> Result<Read<Vec<u8>>, FormatError> {
        let checked = match endpoint {
            Endpoint::Embeddings => serde_json::from_slice::<EmbeddingsShape>(body).map(|_| ()),
            Endpoint::CountTokens => serde_json::from_slice::<CountShape>(body).map(|_| ()),
        };
        match checked {
            Ok(()) => Ok(Read::Answer(body.to_vec())),
            Err(e) => Err(FormatError::malformed("", e.to_string())),
        }
    };
    decode_success(resp, now, secret, typed, ErrorBody::from_value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::Headers;

    fn resp(status: u16, body: &str) -> BufferedResponse {
        BufferedResponse {
            status,
            headers: Headers::new(),
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn answers_pass_unchanged_and_errors_are_classified() {
        let ok = r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-1]}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}"#;
        let out = decode(Endpoint::Embeddings, &resp(200, ok), 0, None).unwrap();
        assert_eq!(out, ok.as_bytes());
        let b64 = r#"{"data":[{"index":0,"embedding":"AAAAPw=="}]}"#;
        assert!(decode(Endpoint::Embeddings, &resp(200, b64), 0, None).is_ok());
        let count = r#"{"input_tokens":12}"#;
        assert!(decode(Endpoint::CountTokens, &resp(200, count), 0, None).is_ok());

        let e = decode(Endpoint::CountTokens, &resp(200, ok), 0, None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Decode);
        let overloaded =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let e = decode(Endpoint::CountTokens, &resp(529, overloaded), 0, None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Server);
        assert!(e.fails_over());
        let inside = r#"{"error":{"message":"bad key sk-123","type":"invalid_request_error"}}"#;
        let e = decode(Endpoint::Embeddings, &resp(200, inside), 0, Some("sk-123")).unwrap_err();
        assert!(!e.message.contains("sk-123"), "{e}");
    }
}
