//! The edge proxy: a [`Client`] plus the gateway's keys, counters and
//! sign-ins, and what its host may set and ask of it.

use crate::trace::export::{ExportPolicy, Exporter};
use std::cell::RefCell;
use std::rc::Rc;

use super::auth::Auth;
use super::cache::Answers;
use super::labels::Known;
use super::metrics::Metrics;
use super::point::{DataPoint, PointSource};
use super::session::Throttle;
use super::sse::LogSink;
use super::status::Changes;
use super::tenants::Tenants;
use crate::cache::{AnswerStore, CacheBounds, CachePolicy, MemoryCache};
use crate::engine::client::Client;
use crate::engine::store::BreakerStore;
use crate::fleet::JournalSource;
use crate::platform::{Headers, Platform};

/// The edge proxy: a [`Client`] plus auth, behind [`Gateway::handle`].
pub struct Gateway<P: Platform, S: BreakerStore> {
    pub(super) client: Rc<Client<P, S>>,
    pub(super) auth: Auth,
    pub(super) metrics: Metrics,
    pub(super) changes: RefCell<Changes>,
    pub(super) point: RefCell<Option<PointSource>>,
    pub(super) journals: Option<Rc<dyn JournalSource>>,
    pub(super) caller_holds_keys: bool,
    /// Takes the end line of a stream whose body is dropped unfinished.
    pub(super) log: Option<LogSink>,
    pub(super) logins: RefCell<Throttle>,
    /// The response cache: the routes that cache, and the store.
    pub(super) answers: Answers,
    /// Where the requests' spans wait to be exported, when they are.
    pub(super) exporter: Option<Rc<Exporter>>,
    /// The clients [`Auth`] finds keys of, with their limits.
    pub(super) tenants: Tenants,
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// A gateway over `client`.
    pub fn new(client: Client<P, S>, auth: Auth) -> Self {
        Self::shared(Rc::new(client), auth)
    }

    /// A gateway over a client its host also calls directly (the npm
    /// package's `client.fetch` shares the breakers of `client.chat`).
    pub fn shared(client: Rc<Client<P, S>>, auth: Auth) -> Self {
        let known = Known::new(
            client.provider_ids(),
            client
                .routes()
                .values()
                .flatten()
                .map(|e| (e.provider.as_str(), e.model.as_str())),
        );
        Gateway {
            metrics: Metrics::new(known),
            client,
            auth,
            changes: Default::default(),
            point: Default::default(),
            journals: None,
            caller_holds_keys: false,
            log: None,
            logins: Default::default(),
            answers: Answers {
                policies: Default::default(),
                store: Rc::new(MemoryCache::new(0, 0)),
                max_entry_bytes: 0,
            },
            exporter: None,
            tenants: Tenants::default(),
        }
    }

    /// The clients `auth`'s keys name, with their limits.
    pub(super) fn tenants(mut self, tenants: Tenants) -> Self {
        self.tenants = tenants;
        self
    }

    /// Records each request's spans for export under `policy`
    /// ([`Gateway::export_traces`] sends them).
    pub fn traces(mut self, policy: ExportPolicy) -> Self {
        self.exporter = Some(Rc::new(Exporter::new(policy)));
        self
    }

    /// Errors answer the status the failures share (a lone 401 is a 401,
    /// a route of 429s a 429; [`crate::Error::caller_status`]), as the npm
    /// package's `chat()` rejects: for a host whose caller holds the
    /// providers' keys itself (`client.fetch`). A gateway's own clients get
    /// 503 for those instead: the upstream's key is not theirs to fix.
    pub fn caller_holds_keys(mut self) -> Self {
        self.caller_holds_keys = true;
        self
    }

    /// Has the end line of a streamed answer whose body the host drops
    /// before reading it to its end (the client went away) written by
    /// `sink`, with outcome `client_closed`; a body read to its end hands
    /// its line out as a [`Piece::Log`](super::http::Piece::Log) instead.
    /// Without a sink such a line is lost.
    pub fn log_to(mut self, sink: impl Fn(&str) + 'static) -> Self {
        self.log = Some(Rc::new(sink));
        self
    }

    /// Caches the answers of the routes `policies` names, in a
    /// [`MemoryCache`] within `bounds` until [`Gateway::answer_store`] gives
    /// another store.
    pub fn cache(
        mut self,
        policies: std::collections::BTreeMap<String, CachePolicy>,
        bounds: CacheBounds,
    ) -> Self {
        self.answers = Answers {
            policies,
            store: Rc::new(MemoryCache::new(bounds.max_entries, bounds.max_bytes)),
            max_entry_bytes: bounds.max_bytes,
        };
        self
    }

    /// Keeps cached answers in `store` (a data centre's HTTP cache, a
    /// shared store) instead of memory.
    pub fn answer_store(mut self, store: Rc<dyn AnswerStore>) -> Self {
        self.answers.store = store;
        self
    }

    /// The client.
    pub fn client(&self) -> &Client<P, S> {
        &self.client
    }

    /// The data point of the request [`handle`](Gateway::handle) answered
    /// last. A host takes it right after `handle` completes, before it awaits
    /// anything else: on one thread no other request can finish in between.
    pub fn take_point(&self) -> Option<DataPoint> {
        self.point.borrow_mut().take().map(DataPoint::of)
    }

    /// Gateway auth.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// Whether a host that can read a request body in one call (a JS
    /// `arrayBuffer()`) should, given the request's headers: when its
    /// declared length is within the limit. An oversized body must not be
    /// buffered to answer 413, and one of unknown length (chunked) may be
    /// oversized: both are read as a stream, as far as the limit allows.
    pub fn reads_body_whole(&self, headers: &Headers) -> bool {
        let limit = self.client.policy().max_request_bytes as u64;
        headers
            .get("content-length")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n <= limit)
    }
}
