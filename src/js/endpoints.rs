//! `client.embeddings(request, options)` and `client.countTokens(request,
//! options)`: an OpenAI embeddings body or an Anthropic count_tokens body,
//! answered on its route with the chat calls' failover, breakers and
//! retries ([`Client::call`](crate::Client::call)). The answer is the
//! provider's own, read for its vectors or its count, with who served it
//! and every attempt.

use std::rc::Rc;

use js_sys::{Object, Promise};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use super::shapes::Attempts;
use super::{convert, errors, Aborted, ResilientClient};
use crate::chat::Endpoint;
use crate::engine::client::ServedBy;
use crate::engine::endpoint::{EndpointCall, EndpointReply};
use crate::engine::timeout::timeout;
use crate::format::endpoints::read_endpoint;

#[wasm_bindgen]
impl ResilientClient {
    /// Embeds `request.input` (an OpenAI embeddings body) on the
    /// embeddings route its `model` names, failing over only among entries
    /// of one embedding model. Rejects with an `LLMError` subclass, or an
    /// `AbortError` when `options.signal` fires.
    #[wasm_bindgen(unchecked_return_type = "Promise<EmbeddingsResult>")]
    pub fn embeddings(
        &self,
        #[wasm_bindgen(unchecked_param_type = "EmbeddingsRequest")] request: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "ChatOptions")] options: Option<Object>,
    ) -> Promise {
        self.endpoint(Endpoint::Embeddings, request, options)
    }

    /// Counts the input tokens of `request` (an Anthropic count_tokens
    /// body) at the first provider of its route that counts them
    /// (Anthropic), failing over as `chat` does.
    #[wasm_bindgen(js_name = countTokens, unchecked_return_type = "Promise<CountTokensResult>")]
    pub fn count_tokens(
        &self,
        #[wasm_bindgen(unchecked_param_type = "CountTokensRequest")] request: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "ChatOptions")] options: Option<Object>,
    ) -> Promise {
        self.endpoint(Endpoint::CountTokens, request, options)
    }
}

impl ResilientClient {
    fn endpoint(&self, endpoint: Endpoint, request: JsValue, options: Option<Object>) -> Promise {
        let client = Rc::clone(&self.inner);
        let exhaustion = self.exhaustion;
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        let parsed = read_call(endpoint, &request)
            .and_then(|call| Ok((call, Self::call_options(&options)?)));
        future_to_promise(async move {
            let (call, (opts, signal)) = parsed?;
            let run = async { client.call(&call, opts).await };
            let result = match signal {
                None => run.await,
                Some(signal) => {
                    if signal.aborted() {
                        return Err(errors::abort_error(&signal.reason()));
                    }
                    match timeout(Aborted::new(&signal), run).await {
                        Ok(r) => r,
                        Err(_) => return Err(errors::abort_error(&signal.reason())),
                    }
                }
            };
            match result {
                Ok(reply) => result_of(endpoint, &reply),
                Err(e) => Err(errors::call_error(&e, exhaustion)),
            }
        })
    }
}

/// The request, checked as the gateway checks it.
fn read_call(endpoint: Endpoint, request: &JsValue) -> Result<EndpointCall, JsValue> {
    let bad =
        |m: &str| errors::client_error("invalid_request", 400, &format!("invalid request: {m}"));
    let json = convert::stringify(request).map_err(|m| bad(&m))?;
    let body = read_endpoint(endpoint, json.as_bytes()).map_err(|e| bad(&e.to_string()))?;
    Ok(EndpointCall::new(endpoint, body))
}

#[derive(Deserialize)]
struct EmbeddingsBody<'a> {
    #[serde(borrow)]
    data: Vec<EmbeddingItem<'a>>,
    #[serde(default)]
    model: Option<String>,
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct EmbeddingItem<'a> {
    index: u64,
    #[serde(borrow)]
    embedding: &'a RawValue,
}

#[derive(Deserialize)]
struct CountBody {
    input_tokens: u64,
}

/// `await client.embeddings(…)`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbeddingsResult<'a> {
    embeddings: Vec<&'a RawValue>,
    model: Option<String>,
    usage: Option<&'a RawValue>,
    served_by: &'a ServedBy,
    attempts: Attempts<'a>,
    raw: &'a RawValue,
}

/// `await client.countTokens(…)`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CountTokensResult<'a> {
    input_tokens: u64,
    served_by: &'a ServedBy,
    attempts: Attempts<'a>,
    raw: &'a RawValue,
}

fn result_of(endpoint: Endpoint, reply: &EndpointReply) -> Result<JsValue, JsValue> {
    // The engine checked the answer's shape; these reads cannot fail on it.
    let shape = |e: serde_json::Error| {
        errors::client_error("decode", 502, &format!("unreadable answer: {e}"))
    };
    let raw: &RawValue = serde_json::from_slice(&reply.body).map_err(shape)?;
    let attempts = Attempts(&reply.attempts);
    Ok(match endpoint {
        Endpoint::Embeddings => {
            let body: EmbeddingsBody<'_> = serde_json::from_str(raw.get()).map_err(shape)?;
            let mut data = body.data;
            data.sort_by_key(|d| d.index);
            errors::to_js(&EmbeddingsResult {
                embeddings: data.iter().map(|d| d.embedding).collect(),
                model: body.model,
                usage: body.usage,
                served_by: &reply.served_by,
                attempts,
                raw,
            })
        }
        Endpoint::CountTokens => {
            let body: CountBody = serde_json::from_str(raw.get()).map_err(shape)?;
            errors::to_js(&CountTokensResult {
                input_tokens: body.input_tokens,
                served_by: &reply.served_by,
                attempts,
                raw,
            })
        }
    })
}
