//! The routing table: a request's method and path to what answers it.
//!
//! | method and path              | answer                                        |
//! |------------------------------|-----------------------------------------------|
//! | `POST /v1/chat/completions`  | OpenAI Chat Completions, whole or streamed    |
//! | `POST /v1/messages`          | Anthropic Messages, whole or streamed         |
//! | `POST /v1/responses`         | OpenAI Responses, whole or streamed           |
//! | `POST /v1/embeddings`        | OpenAI embeddings, failed over within one embedding model |
//! | `POST /v1/messages/count_tokens` | Anthropic token count, from a provider that serves it |
//! | `GET /v1/models`             | the configured routes (OpenAI or Anthropic shape) |
//! | `GET /v1/models/{id}`        | one route, in the same shapes                 |
//! | `GET /health`                | per provider: breaker, error rate, latency, last failure |
//! | `GET /metrics`               | this isolate's counters, Prometheus / OpenMetrics text |
//! | `GET /status`                | the status page (HTML; sign-in form at `POST /status/login`) |
//! | `GET /status/data`           | the status page's data (JSON) |
//! | `GET /`                      | a short JSON index                            |

use serde_json::{json, Value};

use super::http::Format;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    Chat(Format),
    Models,
    Model,
    Call(crate::provider::Endpoint),
    Health,
    Metrics,
    Status,
    StatusData,
    StatusLogin,
    Index,
    NotFound,
    WrongMethod(&'static str),
}

pub(super) fn route(method: &str, path: &str) -> Route {
    let path = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    let (want, r) = match path {
        p if p.len() > 11 && p.starts_with("/v1/models/") => ("GET", Route::Model),
        "/v1/embeddings" => ("POST", Route::Call(crate::provider::Endpoint::Embeddings)),
        "/v1/messages/count_tokens" => {
            ("POST", Route::Call(crate::provider::Endpoint::CountTokens))
        }
        "/v1/chat/completions" => ("POST", Route::Chat(Format::OpenAi)),
        "/v1/messages" => ("POST", Route::Chat(Format::Anthropic)),
        "/v1/responses" => ("POST", Route::Chat(Format::Responses)),
        "/v1/models" => ("GET", Route::Models),
        "/health" => ("GET", Route::Health),
        "/metrics" => ("GET", Route::Metrics),
        "/status" => ("GET", Route::Status),
        "/status/data" => ("GET", Route::StatusData),
        "/status/login" => ("POST", Route::StatusLogin),
        "/" => ("GET", Route::Index),
        _ => return Route::NotFound,
    };
    let head_ok = want == "GET" && method.eq_ignore_ascii_case("HEAD");
    if method.eq_ignore_ascii_case(want) || head_ok {
        r
    } else {
        Route::WrongMethod(want)
    }
}

/// `GET /`: the endpoints, for a person who opens the gateway's URL.
pub(super) fn index() -> Value {
    json!({
        "name": "resilient-llm gateway",
        "endpoints": [
            "POST /v1/chat/completions",
            "POST /v1/messages",
            "POST /v1/responses",
            "POST /v1/embeddings",
            "POST /v1/messages/count_tokens",
            "GET /v1/models",
            "GET /health",
            "GET /metrics",
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_methods() {
        assert_eq!(
            route("POST", "/v1/messages/"),
            Route::Chat(Format::Anthropic)
        );
        assert_eq!(
            route("post", "/v1/chat/completions"),
            Route::Chat(Format::OpenAi)
        );
        assert_eq!(route("HEAD", "/health"), Route::Health);
        assert_eq!(route("POST", "/health"), Route::WrongMethod("GET"));
        assert_eq!(
            route("GET", "/v1/messages/count_tokens"),
            Route::WrongMethod("POST")
        );
        assert_eq!(route("GET", "/v1/models/a%2Fb/"), Route::Model);
        assert_eq!(route("GET", "/v1/models/"), Route::Models);
        assert_eq!(route("POST", "/v1/modelsx"), Route::NotFound);
    }
}
