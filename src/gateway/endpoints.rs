//! `POST /v1/embeddings` (OpenAI format) and `POST /v1/messages/count_tokens`
//! (Anthropic format): the client's body checked, sent to the entries of
//! its route that serve the endpoint, with the chat path's failover,
//! breakers, retries and deadline, and the answering provider's body
//! returned as it came (its usage as the provider reported it).

use std::time::Duration;

use super::log::LogLine;
use super::render::{error_code, too_large};
use super::request::{read_body, BodyError};
use super::{error_response, render_error, Format, Gateway, Outbound};
use crate::engine::client::CallOptions;
use crate::engine::endpoint::EndpointCall;
use crate::engine::store::BreakerStore;
use crate::format::endpoints::read_endpoint;
use crate::platform::{Body, Headers, Platform};
use crate::provider::Endpoint;

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// Answers a request to `endpoint`, in `format` (the endpoint's own,
    /// unless the client said otherwise).
    pub(super) async fn endpoint(
        &self,
        endpoint: Endpoint,
        format: Format,
        headers: &Headers,
        body: Body,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        let limit = self.client.policy.max_request_bytes;
        let declared = headers
            .get("content-length")
            .and_then(|v| v.trim().parse::<u64>().ok());
        let bytes = match read_body(body, limit, declared.is_some_and(|n| n > limit as u64)).await {
            Ok(b) => b,
            Err(BodyError::TooLarge) => {
                log.error = Some("request_too_large");
                return too_large(format, limit);
            }
            Err(BodyError::Unreadable) => {
                log.error = Some("bad_body");
                return error_response(format, 400, "the request body could not be read", None);
            }
        };
        let call = match read_endpoint(endpoint, &bytes) {
            Ok(body) => EndpointCall::new(endpoint, body).forward(headers),
            Err(e) => {
                log.error = Some("malformed_request");
                return error_response(format, 400, &e.to_string(), Some("invalid_request"));
            }
        };
        log.route = call.model.clone();
        let opts = CallOptions {
            route: None,
            deadline: headers
                .get("x-request-timeout-ms")
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
            ..CallOptions::default()
        };
        let result = self.client.call(&call, opts).await;
        log.record_attempts(
            result
                .as_ref()
                .map_or_else(|e| e.attempts(), |r| r.attempts.as_slice()),
        );
        let mut out = match result {
            Ok(reply) => {
                log.served_by = Some(format!(
                    "{}/{}",
                    reply.served_by.provider, reply.served_by.model
                ));
                let mut headers = Headers::new();
                headers.insert("content-type", "application/json");
                Outbound {
                    status: 200,
                    headers,
                    body: reply.body,
                    stream: None,
                    log: String::new(),
                }
            }
            Err(e) => {
                log.error = Some(error_code(&e));
                render_error(format, &e)
            }
        };
        log.answer_headers(&mut out);
        out
    }
}
