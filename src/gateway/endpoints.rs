//! `POST /v1/embeddings` (OpenAI format) and `POST /v1/messages/count_tokens`
//! (Anthropic format): the client's body checked, sent to the entries of
//! its route that serve the endpoint, with the chat path's failover,
//! breakers, retries and deadline, and the answering provider's body
//! returned as it came (its usage as the provider reported it).

use std::rc::Rc;

use super::call::{answer, asked_deadline};
use super::http::{Format, Outbound};
use super::log::LogLine;
use super::proxy::Gateway;
use super::tenants::Tenant;
use crate::chat::Endpoint;
use crate::engine::client::CallOptions;
use crate::engine::endpoint::EndpointCall;
use crate::engine::store::BreakerStore;
use crate::format::endpoints::read_endpoint;
use crate::platform::{Body, Headers, Platform};

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// Answers a request to `endpoint`, in `format` (the endpoint's own,
    /// unless the client said otherwise).
    pub(super) async fn endpoint(
        &self,
        endpoint: Endpoint,
        format: Format,
        headers: &Headers,
        body: Body,
        client: Option<&Rc<Tenant>>,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        let trace = self.trace_of(endpoint.name(), headers, log);
        let read = |bytes: &[u8]| read_endpoint(endpoint, bytes);
        let call = match self.read_request(format, headers, body, log, read).await {
            Ok(body) => EndpointCall::new(endpoint, body)
                .forward(headers)
                .traced(trace),
            Err(out) => return out,
        };
        log.route = call.model.clone();
        let mut opts = CallOptions {
            route: None,
            deadline: asked_deadline(headers),
            ..CallOptions::default()
        };
        let route = self.client.name_of(call.model.as_deref(), &opts);
        let ticket = match self.admit(client, route, 0, headers, format, log) {
            Ok((priority, ticket)) => {
                opts.priority = priority;
                opts.share = client.map(|t| t.share);
                ticket
            }
            Err(out) => return out,
        };
        let result = self.client.call(&call, opts).await;
        let mut out = answer(format, self.caller_holds_keys, result, log, |reply, _| {
            let mut headers = Headers::new();
            headers.insert("content-type", "application/json");
            Outbound {
                status: 200,
                headers,
                body: reply.body,
                stream: None,
                log: String::new(),
            }
        });
        self.settle(client, ticket, log, &mut out);
        out
    }
}
