//! The response cache at the gateway: which requests it looks up, what it
//! stores, and how a stored answer is served (whole or as the client's
//! stream events), fresh or, when every entry of the route failed, stale.
//! The key, the entry and the store are [`crate::cache`]'s.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;

use super::buffered::events;
use super::http::{Format, Outbound};
use super::log::LogLine;
use super::pass::PassWriter;
use super::proxy::Gateway;
use crate::cache::answers::{answer_cost, reply_of};
use crate::cache::{cache_key, tenant_of, AnswerStore, CachePolicy, Controls, KeyParts, Scope};
use crate::cache::{EventRecording, Events, Freshness, Recording, Stored};
use crate::chat::{ChatRequest, ChatResponse, Delta};
use crate::engine::client::{CallOptions, Client, Reply, ServedBy};
use crate::engine::store::BreakerStore;
use crate::engine::stream::RawEvent;
use crate::error::Attempt;
use crate::format::responses::Echo;
use crate::platform::{Headers, Platform};
use crate::policy::price::Cost;
use crate::sse::SseDecoder;

/// The routes that cache and where their answers are kept.
pub(super) struct Answers {
    pub(super) policies: BTreeMap<String, CachePolicy>,
    pub(super) store: Rc<dyn AnswerStore>,
    /// The most a streamed answer may grow to and still be recorded.
    pub(super) max_entry_bytes: usize,
}

/// One request's place in the cache, worked out before it is asked.
pub(super) struct Lookup {
    key: String,
    policy: CachePolicy,
    pub(super) controls: Controls,
    /// An answer past its TTL within its stale window: served only if
    /// every entry fails.
    pub(super) stale: Option<Rc<Stored>>,
}

impl Lookup {
    /// Where an answer to this request is written: the lookup less what
    /// it found.
    fn for_writes(&self) -> Lookup {
        Lookup {
            key: self.key.clone(),
            policy: self.policy,
            controls: self.controls,
            stale: None,
        }
    }

    /// The answer's TTL: the route's, or less when the client asked.
    fn ttl(&self) -> Duration {
        self.policy.ttl_for(self.controls.ttl)
    }
}

/// Writes answers to the store under one lookup.
struct Keeper<P: Platform, S: BreakerStore> {
    client: Rc<Client<P, S>>,
    store: Rc<dyn AnswerStore>,
    lookup: Lookup,
}

impl<P: Platform, S: BreakerStore> Keeper<P, S> {
    /// Stores `response`, given by `served_by` after `attempts` (what it
    /// cost, from the client's prices, is what a hit will save); the bytes
    /// stored, 0 when the client said `no-store` or the TTL is nothing.
    fn keep(
        &self,
        response: ChatResponse,
        events: Option<Events>,
        served_by: &ServedBy,
        attempts: &[Attempt],
    ) -> usize {
        let ttl = self.lookup.ttl();
        if self.lookup.controls.no_store || ttl.is_zero() {
            return 0;
        }
        let now = self.client.platform().now();
        let keep = self.lookup.policy.keep_for(ttl);
        let by = (served_by.provider.as_str(), served_by.model.as_str());
        let cost = answer_cost(&self.client, attempts);
        let mut stored = Stored::new(response, by, cost, now, (ttl, keep));
        stored.events = events;
        let bytes = stored.to_bytes();
        let n = bytes.len();
        self.store.put(&self.lookup.key, bytes, now, keep);
        n
    }
}

/// A streamed answer on its way into the cache: what its client was sent,
/// stored once the stream completed in one attempt's answer (never one
/// cut, continued after the commit point, refused or filtered).
pub(super) struct Recorder<P: Platform, S: BreakerStore> {
    recording: Recording,
    /// The provider's events, when they went to the client as they came.
    events: EventRecording,
    /// The client's format: the dialect of the events passed through.
    format: Format,
    keeper: Keeper<P, S>,
    stored_bytes: Counter,
}

impl<P: Platform, S: BreakerStore> Recorder<P, S> {
    /// A delta the client was sent.
    pub(super) fn push(&mut self, delta: &Delta) {
        self.recording.push(delta);
    }

    /// A provider event passed through to the client, as it came.
    pub(super) fn push_event(&mut self, bytes: &[u8], usage_only: bool) {
        self.events.push(bytes, usage_only);
    }

    /// Stores the answer of a stream that ended cleanly, given by
    /// `served_by` after `attempts`, unless it was `continued` after its
    /// commit point or is not an answer to keep; the bytes stored.
    pub(super) fn complete(
        self,
        served_by: Option<&ServedBy>,
        attempts: &[Attempt],
        continued: bool,
    ) -> Option<usize> {
        let served_by = served_by.filter(|_| !continued)?;
        let response = self.recording.finish()?;
        let events = self.events.finish(self.format.dialect());
        let n = self.keeper.keep(response, events, served_by, attempts);
        self.stored_bytes.inc_by(n as u64);
        Some(n).filter(|n| *n > 0)
    }
}

/// How a stored answer is being served.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Served {
    Hit,
    Stale,
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// The lookup for `request`, on a route that caches; `None` on one
    /// that does not. A request whose body cannot be canonicalised is
    /// neither looked up nor stored (`x-cache: bypass`).
    pub(super) fn cache_lookup(
        &self,
        format: Format,
        request: &ChatRequest,
        opts: &CallOptions,
        headers: &Headers,
        log: &mut LogLine<'_>,
    ) -> Option<Lookup> {
        let route = self.client.route_name(request, opts)?;
        let policy = *self.answers.policies.get(route)?;
        let controls = Controls::of(headers);
        let tenant = match policy.scope {
            Scope::Shared => None,
            Scope::Client => Some(self.tenant(headers)),
        };
        let native = request.native.as_ref();
        let key = native.and_then(|n| {
            let parts = KeyParts {
                route,
                format: format.name(),
                tenant: tenant.as_ref().map(|t| &t[..]),
                headers: &n.headers,
            };
            cache_key(parts, &n.body)
        });
        let Some(key) = key else {
            log.cache = Some("bypass");
            return None;
        };
        log.cache = Some(if controls.no_cache { "bypass" } else { "miss" });
        Some(Lookup {
            key,
            policy,
            controls,
            stale: None,
        })
    }

    /// Who is asking, as the cache's scope `client` separates them: a
    /// digest of the client key the request was let in with (auth off: one
    /// client).
    fn tenant(&self, headers: &Headers) -> [u8; 32] {
        let key = self.auth.matched(headers);
        tenant_of(key.map_or(&b""[..], |k| k.expose().as_bytes()))
    }

    /// The fresh answer stored for `lookup`, unless the client said
    /// `no-cache`; one past its TTL within its stale window is kept in
    /// `lookup.stale`.
    pub(super) async fn cache_find(&self, lookup: &mut Lookup) -> Option<Stored> {
        if lookup.controls.no_cache {
            return None;
        }
        let now = self.client.platform().now();
        let bytes = self.answers.store.get(&lookup.key, now).await?;
        let stored = Stored::from_bytes(&bytes)?;
        match stored.freshness(now) {
            Freshness::Fresh => Some(stored),
            Freshness::Stale => {
                lookup.stale = Some(Rc::new(stored));
                None
            }
            Freshness::Expired => None,
        }
    }

    /// Stores `reply` under `lookup`, if it may be: the client did not say
    /// `no-store`, and the answer ended well ([`crate::cache::entry::storable`]).
    pub(super) fn cache_put(&self, lookup: &Lookup, reply: &Reply, log: &mut LogLine<'_>) {
        if !crate::cache::entry::storable(&reply.response) {
            return;
        }
        let keeper = Keeper {
            client: Rc::clone(&self.client),
            store: Rc::clone(&self.answers.store),
            lookup: lookup.for_writes(),
        };
        let (response, by) = (reply.response.clone(), &reply.served_by);
        log.cache_stored = keeper.keep(response, None, by, &reply.attempts);
    }

    /// What a streamed answer on `lookup` needs to store itself once it
    /// completed; `None` when it is not to be stored (`no-store`, a TTL of
    /// nothing).
    pub(super) fn stream_recorder(
        &self,
        format: Format,
        lookup: Option<&Lookup>,
    ) -> Option<Recorder<P, S>> {
        let lookup = lookup.filter(|l| !l.controls.no_store && !l.ttl().is_zero())?;
        let stored_bytes = self.metrics.cache_stored_bytes();
        Some(Recorder {
            recording: Recording::new(self.answers.max_entry_bytes),
            events: EventRecording::new(self.answers.max_entry_bytes),
            format,
            keeper: Keeper {
                client: Rc::clone(&self.client),
                store: Rc::clone(&self.answers.store),
                lookup: lookup.for_writes(),
            },
            stored_bytes,
        })
    }

    /// A stored answer as the client asked for it: whole (the provider's
    /// own body when it is in the client's dialect) or as its stream
    /// events, with `x-cache`, `age` and what it saved.
    /// `stream` is `Some(include_usage)` for a streaming request.
    pub(super) fn serve_stored(
        &self,
        format: Format,
        stored: Stored,
        served: Served,
        stream: Option<bool>,
        echo: Option<Echo>,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        let now = self.client.platform().now();
        log.cache = Some(match served {
            Served::Hit => "hit",
            Served::Stale => "stale",
        });
        log.served_by = Some(format!("{}/{}", stored.provider, stored.model));
        log.cost_saved = stored.cost_pico.map(Cost::from_picodollars);
        let age = stored.age_secs(now);
        let mut out = match stream {
            Some(include_usage) => {
                log.stream = true;
                let replay = Replay {
                    format,
                    request_id: log.request_id,
                    now,
                    include_usage,
                    echo,
                };
                let mut headers = Headers::new();
                headers.insert("content-type", "text/event-stream; charset=utf-8");
                headers.insert("cache-control", "no-cache");
                Outbound {
                    status: 200,
                    headers,
                    body: replay.events(&stored, served),
                    stream: None,
                    log: String::new(),
                }
            }
            // `render_reply` names the entry's model where the provider
            // named none.
            None => self.render_reply(format, reply_of(stored), echo.as_ref(), log),
        };
        log.answer_headers(&mut out);
        cache_header(log, &mut out);
        out.headers.insert("age", age.to_string());
        if let Some(saved) = log.cost_saved {
            out.headers.insert("x-cost-saved-usd", saved.to_string());
        }
        out
    }
}

/// A stored answer replayed as one client's stream.
pub(super) struct Replay<'a> {
    pub(super) format: Format,
    pub(super) request_id: &'a str,
    pub(super) now: u64,
    pub(super) include_usage: bool,
    pub(super) echo: Option<Echo>,
}

impl Replay<'_> {
    /// `stored` as the client's stream events (the provider's own, as they
    /// came, to a client of its dialect when they were recorded); served
    /// stale, an OpenAI client's stream ends with a comment saying so.
    pub(super) fn events(self, stored: &Stored, served: Served) -> Vec<u8> {
        let (format, now) = (self.format, self.now);
        let own = stored.events.as_ref();
        let own = own.filter(|e| e.dialect == format.dialect());
        let mut body = match own.and_then(|e| passed_again(e, format, self.include_usage)) {
            Some(body) => body,
            None => self.encoded(stored),
        };
        if served == Served::Stale && format == Format::OpenAi {
            let age = stored.age_secs(now);
            body.extend_from_slice(
                format!(": x-cache stale: every provider failed; this answer is {age} s old\n\n")
                    .as_bytes(),
            );
        }
        body
    }

    /// `stored`'s answer encoded as the client's stream.
    fn encoded(self, stored: &Stored) -> Vec<u8> {
        // The events name the model the entry asked for when the provider
        // named none.
        let response = if stored.response.model.trim().is_empty() {
            let mut named = stored.response.clone();
            named.model.clone_from(&stored.model);
            Cow::Owned(named)
        } else {
            Cow::Borrowed(&stored.response)
        };
        events(
            self.format,
            &response,
            self.request_id,
            self.now / 1000,
            self.include_usage,
            self.echo,
        )
    }
}

/// The provider's recorded events written again as a stream passed through
/// writes them (an OpenAI client not asking for usage is not given the
/// usage-only chunk; a stream the provider did not end is ended); `None`
/// if one does not read back as an event.
fn passed_again(recorded: &Events, format: Format, include_usage: bool) -> Option<Vec<u8>> {
    let mut writer = PassWriter::new(format, include_usage);
    let longest = recorded.events.iter().map(|e| e.sse.len()).max()?;
    let mut decoder = SseDecoder::new(longest.saturating_add(1));
    let mut read = Vec::with_capacity(1);
    let mut body = Vec::with_capacity(recorded.events.iter().map(|e| e.sse.len()).sum());
    for e in &recorded.events {
        let bytes = e.sse.as_bytes();
        // Each recorded event ends with the blank line that dispatched it,
        // but a last one the provider's stream end dispatched.
        decoder.feed(bytes, &mut read).ok()?;
        let event = match read.pop() {
            Some(event) => event,
            None => decoder.finish()?,
        };
        body.extend(writer.raw(RawEvent {
            event,
            bytes: Some(bytes.to_vec()),
            usage_only: e.usage_only,
        }));
    }
    body.extend(writer.finish());
    Some(body)
}

/// `x-cache` on an answer, from what the log line says of it.
pub(super) fn cache_header(log: &LogLine<'_>, out: &mut Outbound) {
    if let Some(state) = log.cache {
        out.headers.insert("x-cache", state);
    }
}
