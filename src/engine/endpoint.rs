//! Calls to the endpoints besides chat ([`Endpoint`]: embeddings, token
//! counting), walked over a route as a whole chat answer is: the same
//! cursor (breaker admission, skips, the forced call, the deadline), the
//! same retries and the same one breaker verdict per provider per request.
//! Entries whose provider does not serve the endpoint are left out of the
//! walk; an embeddings call goes only to a route whose entries declare one
//! embedding model ([`EmbeddingModel`], checked when the configuration is
//! validated), so a failover never mixes vectors of two models.

use std::borrow::Cow;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::chat::Usage;
use crate::engine::authorize::{is_refused, renewing};
use crate::engine::core::Core;
use crate::engine::cursor::{Cursor, Run};
use crate::engine::retry::Answer;
pub use crate::engine::route::EmbeddingModel;
use crate::engine::route::{CallOptions, Entry, Keyed, ServedBy};
use crate::engine::store::BreakerStore;
use crate::error::{Attempt, Error, ErrorKind, ProviderError};
use crate::platform::{Headers, Platform};
use crate::policy::breaker::Permit;
use crate::provider::{Endpoint, Provider, Upstream};
use crate::trace::{AttemptTrace, TraceParent};

/// A request to an [`Endpoint`]: the client's JSON body, sent to each
/// entry with `model` set to the entry's.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointCall {
    /// Which endpoint.
    pub endpoint: Endpoint,
    /// The route (or `provider/model`) the body's `model` names.
    pub model: Option<String>,
    /// The body as the client sent it.
    pub body: Map<String, Value>,
    /// The client's headers passed on ([`Endpoint::forwarded`]).
    pub headers: Headers,
    /// Where the call's work sits in a trace: each attempt sends its
    /// provider a `traceparent` of its own span under it.
    pub trace: Option<TraceParent>,
}

impl EndpointCall {
    /// A call of `endpoint` with `body`, on the route its `model` names.
    pub fn new(endpoint: Endpoint, body: Map<String, Value>) -> Self {
        let model = body.get("model").and_then(Value::as_str).map(str::to_owned);
        EndpointCall {
            endpoint,
            model,
            body,
            headers: Headers::new(),
            trace: None,
        }
    }

    /// The call, its attempts in `trace`.
    pub fn traced(mut self, trace: TraceParent) -> Self {
        self.trace = Some(trace);
        self
    }

    /// Passes on those of the client's `headers` the endpoint's API takes.
    pub fn forward(mut self, headers: &Headers) -> Self {
        for name in self.endpoint.forwarded() {
            if let Some(value) = headers.get(name) {
                self.headers.insert(name, value);
            }
        }
        self
    }

    /// The body for an entry's `model`.
    fn body_for(&self, model: &str) -> Result<Vec<u8>, ProviderError> {
        let mut body = self.body.clone();
        body.insert("model".into(), Value::String(model.to_owned()));
        serde_json::to_vec(&body)
            .map_err(|e| ProviderError::new(ErrorKind::InvalidRequest, e.to_string()))
    }
}

/// An endpoint's answer body. Its usage stays in the body, as the provider
/// reported it; its latency is not a chat answer's, so it stays out of the
/// latency figures that rank chat entries; and a rate-limited call waits
/// for its entry's retry rather than giving way to a tier mate.
impl Answer for Vec<u8> {
    const RANKS_LATENCY: bool = false;
    const GIVES_WAY: bool = false;
    fn usage(&self) -> Option<Usage> {
        None
    }
}

/// A successful call: the provider's answer as it came (JSON in the
/// endpoint's own format, its usage as the provider reported it), who gave
/// it, and every attempt on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointReply {
    /// The answer's body.
    pub body: Vec<u8>,
    /// The entry that answered.
    pub served_by: ServedBy,
    /// Every attempt, in order, the successful one last.
    pub attempts: Vec<Attempt>,
}

impl<P: Platform, S: BreakerStore> Core<P, S> {
    /// Answers `call` over `chain`, the route `name` resolves to (`named`:
    /// a route of the configuration, not `provider/model`), failing over
    /// among the entries whose provider serves the endpoint.
    pub(super) async fn call(
        &self,
        call: &EndpointCall,
        chain: Cow<'_, [Entry]>,
        name: &str,
        named: bool,
        opts: &CallOptions,
    ) -> Result<EndpointReply, Error> {
        let chain = self.serving(call, chain, name, named)?;
        let mut walk = Cursor::over(self, chain, opts);
        // The call's size, for the breaker's verdict on a timeout: one
        // serialisation per call, not one per entry tried.
        let size = crate::policy::timeouts::size_of_body(&call.body);
        while let Some(permit) = walk.admit(self).await {
            let (entry, run) = walk.entry_and_run();
            let (result, moved) = self
                .run_admitted(entry, permit, size, async |permit| {
                    self.run_call(entry, permit, call, run).await
                })
                .await;
            run.breaker_moved(&entry, moved);
            match result {
                Ok(body) => {
                    return Ok(EndpointReply {
                        body,
                        served_by: walk.served_by(),
                        attempts: walk.run.take_attempts(),
                    })
                }
                Err(error) if error.fails_over() => walk.fail_over(self, &error),
                Err(error) => return Err(walk.stop(error)),
            }
        }
        Err(walk.exhausted())
    }

    /// The entries of `call`'s route (`chain`, named `name`) that serve its
    /// endpoint.
    fn serving(
        &self,
        call: &EndpointCall,
        chain: Cow<'_, [Entry]>,
        name: &str,
        named: bool,
    ) -> Result<Cow<'static, [Entry]>, Error> {
        // A named route's entries fail over to each other: for vectors,
        // only when they declare one model. `provider/model` is one entry.
        if call.endpoint == Endpoint::Embeddings
            && named
            && chain.iter().any(|e| e.embeddings.is_none())
        {
            return Err(Error::InvalidRequest(format!(
                "model: route \"{name}\" is not an embeddings route (its entries declare no \
                 embeddings model family and dimensions)"
            )));
        }
        let serving: Vec<Entry> = chain
            .iter()
            .filter(|e| match self.upstreams.get(&e.provider) {
                Some(Upstream::Http(p)) => p.serves(call.endpoint),
                Some(Upstream::Custom(_)) | None => false,
            })
            .cloned()
            .collect();
        if serving.is_empty() {
            return Err(Error::InvalidRequest(format!(
                "model: no provider of route \"{name}\" serves {}",
                call.endpoint.name()
            )));
        }
        Ok(Cow::Owned(serving))
    }

    /// Tries `entry` until it answers or retrying cannot help, as
    /// [`Client::run_entry`] does for chat.
    async fn run_call(
        &self,
        entry: Keyed<'_>,
        permit: &mut Permit,
        call: &EndpointCall,
        run: &mut Run,
    ) -> Result<Vec<u8>, ProviderError> {
        let Some(Upstream::Http(provider)) = self.upstreams.get(&entry.provider) else {
            return Err(crate::provider::endpoint::unsupported(
                &entry.provider,
                call.endpoint,
            ));
        };
        let refused =
            |t: &(Result<Vec<u8>, ProviderError>, bool)| t.0.as_ref().is_err_and(is_refused);
        let trace = call.trace.as_ref();
        self.retry_entry(entry, permit, run, trace, |limit, at| async move {
            let (result, reached) = renewing(
                &self.platform,
                Some(provider.as_ref()),
                limit,
                refused,
                |e| (Err(e), false),
                |limit| self.call_once(provider.as_ref(), call, entry, limit, at),
            )
            .await;
            (result, reached, Vec::new())
        })
        .await
    }

    /// One attempt at `entry` under `limit`, at its place `at` in the
    /// call's trace: the answer, and whether the request reached the
    /// provider.
    async fn call_once(
        &self,
        provider: &dyn Provider,
        call: &EndpointCall,
        entry: Keyed<'_>,
        limit: Duration,
        at: Option<AttemptTrace<'_>>,
    ) -> (Result<Vec<u8>, ProviderError>, bool) {
        let model = entry.model.as_str();
        let encode = || {
            let body = call.body_for(model)?;
            let mut http = provider.encode_endpoint(call.endpoint, body, model)?;
            for (name, value) in call.headers.iter() {
                http.headers.insert(name, value);
            }
            Ok(http)
        };
        let (resp, reached, _) = self.exchange(provider, entry.key, limit, at, encode).await;
        let now = self.platform.now();
        let result = resp.and_then(|b| provider.decode_endpoint(call.endpoint, &b, now));
        (result, reached)
    }
}
