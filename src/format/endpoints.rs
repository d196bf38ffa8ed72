//! A client's request to an endpoint besides chat, checked before it is
//! passed on: an OpenAI embeddings body (`input` a string, strings, tokens
//! or token lists; `encoding_format` `float` or `base64`; `dimensions`) or
//! an Anthropic count_tokens body (`model`, `messages`). The body goes to
//! the provider as the client wrote it, every field kept, `model` the
//! entry's; a mistake is answered here, with its path, not by a provider.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::FormatError;
use crate::chat::Endpoint;
use crate::json::path_text;

/// What an embeddings request must hold, in the types it must have.
#[derive(Deserialize)]
#[allow(dead_code)] // read to check the body, which is sent as it came
struct EmbeddingsRequest {
    model: String,
    input: Input,
    #[serde(default)]
    encoding_format: Option<EncodingFormat>,
    #[serde(default)]
    dimensions: Option<u32>,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
#[allow(dead_code)]
enum Input {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

impl Input {
    fn is_empty(&self) -> bool {
        match self {
            Input::Text(_) => false,
            Input::Texts(v) => v.is_empty(),
            Input::Tokens(v) => v.is_empty(),
            Input::TokenLists(v) => v.is_empty() || v.iter().any(Vec::is_empty),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum EncodingFormat {
    Float,
    Base64,
}

/// What a count_tokens request must hold.
#[derive(Deserialize)]
#[allow(dead_code)]
struct CountTokensRequest {
    model: String,
    messages: Vec<Map<String, Value>>,
}

/// The client's body for `endpoint`, checked.
pub(crate) fn read_endpoint(
    endpoint: Endpoint,
    bytes: &[u8],
) -> Result<Map<String, Value>, FormatError> {
    let mistake = |m: crate::json::Mistake| {
        let message = match m.error.classify() {
            serde_json::error::Category::Data => untagged_hint(&m.error.to_string()),
            _ => m.error.to_string(),
        };
        FormatError::malformed(path_text(&m.path), message)
    };
    let body: Map<String, Value> = crate::json::read(bytes).map_err(mistake)?;
    match endpoint {
        Endpoint::Embeddings => {
            let req: EmbeddingsRequest = crate::json::read(bytes).map_err(mistake)?;
            if req.input.is_empty() {
                return Err(FormatError::malformed(
                    "input",
                    "must not be empty (nor hold an empty token list)",
                ));
            }
            if req.dimensions == Some(0) {
                return Err(FormatError::malformed(
                    "dimensions",
                    "must be greater than 0",
                ));
            }
        }
        Endpoint::CountTokens => {
            let req: CountTokensRequest = crate::json::read(bytes).map_err(mistake)?;
            if req.messages.is_empty() {
                return Err(FormatError::malformed(
                    "messages",
                    "at least one message is required",
                ));
            }
        }
    }
    Ok(body)
}

/// serde's message for a value no form of `input` takes, said the way a
/// client can act on.
fn untagged_hint(message: &str) -> String {
    if message.contains("untagged enum Input") {
        "must be a string, an array of strings, an array of token ids or an array of \
         token-id arrays"
            .into()
    } else {
        message.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embed(body: &str) -> Result<Map<String, Value>, FormatError> {
        read_endpoint(Endpoint::Embeddings, body.as_bytes())
    }

    #[test]
    fn every_input_form_is_taken_and_kept_as_sent() {
        for input in [r#""a""#, r#"["a","b"]"#, "[1,2,3]", "[[1,2],[3]]"] {
            let body = format!(
                r#"{{"model":"embed","input":{input},"encoding_format":"base64","dimensions":256,"extra":true}}"#
            );
            let got = embed(&body).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(got["extra"], true);
            assert_eq!(got["dimensions"], 256);
        }
    }

    #[test]
    fn mistakes_name_their_field() {
        let cases = [
            (r#"{"input":"a"}"#, ""),
            (r#"{"model":"m","input":[]}"#, "input"),
            (r#"{"model":"m","input":[[]]}"#, "input"),
            (r#"{"model":"m","input":{"a":1}}"#, "input"),
            (
                r#"{"model":"m","input":"a","encoding_format":"int8"}"#,
                "encoding_format",
            ),
            (r#"{"model":"m","input":"a","dimensions":0}"#, "dimensions"),
            (r#"{"model":"m","input":"a","dimensions":-1}"#, "dimensions"),
            ("[1]", ""),
            ("{", ""),
        ];
        for (body, path) in cases {
            let e = embed(body).expect_err(body);
            assert_eq!(e.path, path, "{body}: {e}");
        }
        let e = embed(r#"{"model":"m","input":{"a":1}}"#).unwrap_err();
        assert!(e.message.contains("array of strings"), "{e}");
    }

    #[test]
    fn count_tokens_needs_a_model_and_messages() {
        let ok = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"system":"s"}"#;
        assert_eq!(
            read_endpoint(Endpoint::CountTokens, ok.as_bytes()).unwrap()["system"],
            "s"
        );
        for (body, path) in [
            (r#"{"model":"m","messages":[]}"#, "messages"),
            (r#"{"model":"m"}"#, ""),
            (r#"{"model":1,"messages":[{}]}"#, "model"),
        ] {
            let e = read_endpoint(Endpoint::CountTokens, body.as_bytes()).expect_err(body);
            assert_eq!(e.path, path, "{body}: {e}");
        }
    }
}
