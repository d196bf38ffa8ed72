//! The response cache for a Rust caller of [`Client`] (and the outage
//! simulator): the gateway's cache without HTTP. A request on a route with
//! a [`CachePolicy`] is answered from the store when its answer is fresh,
//! asked of the route otherwise and its answer stored; when every entry of
//! the route fails, an answer past its TTL within its stale window is given
//! instead of the error.
//!
//! ```no_run
//! # async fn run(client: resilient_llm::Client<resilient_llm::testing::FakePlatform>,
//! #     validated: resilient_llm::Validated) -> Result<(), resilient_llm::Error> {
//! use resilient_llm::cache::ResponseCache;
//! use resilient_llm::{CallOptions, ChatRequest, Message};
//!
//! let cache = ResponseCache::new(validated.cache.clone(), validated.cache_bounds);
//! let request = ChatRequest::new(vec![Message::user("spam or not: …")]);
//! let cached = cache.chat(&client, request, CallOptions::default(), None).await?;
//! println!("{:?}: {}", cached.outcome, cached.reply.response.text);
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::{Map, Value};

use super::controls::Controls;
use super::entry::{storable, Freshness, Stored};
use super::key::{cache_key, tenant_of, KeyParts, Scope};
use super::policy::{CacheBounds, CachePolicy};
use super::store::{AnswerStore, MemoryCache};
use crate::chat::{ChatRequest, Dialect};
use crate::engine::client::{CallOptions, Client, Reply, ServedBy};
use crate::engine::store::BreakerStore;
use crate::error::{Attempt, Error};
use crate::platform::Platform;
use crate::policy::price::Cost;

/// The routes that cache, and where their answers are kept.
pub struct ResponseCache {
    policies: BTreeMap<String, CachePolicy>,
    store: Rc<dyn AnswerStore>,
}

/// An answer, and what the cache did for it.
#[derive(Debug)]
pub struct Cached {
    /// The answer (a stored one has no attempts).
    pub reply: Reply,
    /// Where it came from.
    pub outcome: CacheOutcome,
    /// What a stored answer cost when it was asked, in USD, where it was
    /// priced: what giving it again saved (hits and stale answers).
    pub saved_usd: Option<f64>,
}

/// What the cache did for a request.
#[derive(Debug)]
pub enum CacheOutcome {
    /// A fresh stored answer, this many seconds old.
    Hit {
        /// Its age.
        age_secs: u64,
    },
    /// Asked of the route (and stored, if it may be).
    Miss,
    /// Every entry failed with `error`; a stored answer past its TTL,
    /// this many seconds old, was given instead.
    Stale {
        /// Its age.
        age_secs: u64,
        /// Why the route could not answer.
        error: Box<Error>,
    },
    /// Not looked up: the caller said `no_cache` (the answer is still
    /// stored unless it said `no_store`), or the request's body cannot be
    /// canonicalised (an integer beyond 2⁵³: asked, not stored).
    Bypass,
    /// Its route does not cache.
    Uncached,
}

impl ResponseCache {
    /// A cache of the routes `policies` names, in memory within `bounds`.
    pub fn new(policies: BTreeMap<String, CachePolicy>, bounds: CacheBounds) -> Self {
        let store = MemoryCache::new(bounds.max_entries, bounds.max_bytes);
        Self::with_store(policies, Rc::new(store))
    }

    /// A cache of the routes `policies` names, kept in `store`.
    pub fn with_store(policies: BTreeMap<String, CachePolicy>, store: Rc<dyn AnswerStore>) -> Self {
        ResponseCache { policies, store }
    }

    /// The answer to `request`: stored, asked, or (every entry failing)
    /// stale. `tenant` names the caller on a route of scope `client` (its
    /// answers are never given to another; `None` is one caller).
    pub async fn chat<P: Platform, S: BreakerStore>(
        &self,
        client: &Client<P, S>,
        request: ChatRequest,
        opts: CallOptions,
        tenant: Option<&[u8]>,
    ) -> Result<Cached, Error> {
        let controls = Controls::default();
        self.chat_controlled(client, request, opts, tenant, controls)
            .await
    }

    /// As [`ResponseCache::chat`], with the caller's `controls`, as an HTTP
    /// client's `cache-control` and `x-cache-ttl` give them: `no_cache`
    /// asks the route whatever is stored (and never gives a stale answer),
    /// `no_store` keeps the answer out of the store, `ttl` shortens the
    /// route's.
    pub async fn chat_controlled<P: Platform, S: BreakerStore>(
        &self,
        client: &Client<P, S>,
        request: ChatRequest,
        opts: CallOptions,
        tenant: Option<&[u8]>,
        controls: Controls,
    ) -> Result<Cached, Error> {
        let policy = client
            .route_name(&request, &opts)
            .and_then(|r| Some((r.to_string(), *self.policies.get(r)?)));
        let Some((route, policy)) = policy else {
            let reply = client.chat_with(request, opts).await?;
            return Ok(Cached {
                reply,
                outcome: CacheOutcome::Uncached,
                saved_usd: None,
            });
        };
        let Some(key) = key_of(&route, policy.scope, tenant, &request) else {
            let reply = client.chat_with(request, opts).await?;
            return Ok(Cached {
                reply,
                outcome: CacheOutcome::Bypass,
                saved_usd: None,
            });
        };
        let now = client.platform().now();
        if controls.no_cache {
            let reply = client.chat_with(request, opts).await?;
            self.keep(client, &key, policy, controls, &reply);
            return Ok(Cached {
                reply,
                outcome: CacheOutcome::Bypass,
                saved_usd: None,
            });
        }
        let found = self.store.get(&key, now).await;
        let found = found.and_then(|bytes| Stored::from_bytes(&bytes));
        let stale = match found {
            Some(s) => match s.freshness(now) {
                Freshness::Fresh => {
                    let age_secs = s.age_secs(now);
                    let saved_usd = saved(&s);
                    return Ok(Cached {
                        reply: reply_of(s),
                        outcome: CacheOutcome::Hit { age_secs },
                        saved_usd,
                    });
                }
                Freshness::Stale => Some(s),
                Freshness::Expired => None,
            },
            None => None,
        };
        match client.chat_with(request, opts).await {
            Ok(reply) => {
                self.keep(client, &key, policy, controls, &reply);
                Ok(Cached {
                    reply,
                    outcome: CacheOutcome::Miss,
                    saved_usd: None,
                })
            }
            Err(error @ Error::AllProvidersFailed(_)) => match stale {
                Some(s) => {
                    let age_secs = s.age_secs(client.platform().now());
                    let saved_usd = saved(&s);
                    Ok(Cached {
                        reply: reply_of(s),
                        outcome: CacheOutcome::Stale {
                            age_secs,
                            error: Box::new(error),
                        },
                        saved_usd,
                    })
                }
                None => Err(error),
            },
            Err(error) => Err(error),
        }
    }
}

impl ResponseCache {
    /// Stores `reply` under `key`, if it ended well and the caller did not
    /// say `no_store`, fresh for the route's TTL or the shorter one asked.
    fn keep<P: Platform, S: BreakerStore>(
        &self,
        client: &Client<P, S>,
        key: &str,
        policy: CachePolicy,
        controls: Controls,
        reply: &Reply,
    ) {
        let ttl = policy.ttl_for(controls.ttl);
        if controls.no_store || ttl.is_zero() || !storable(&reply.response) {
            return;
        }
        let now = client.platform().now();
        let keep = policy.keep_for(ttl);
        let by = (
            reply.served_by.provider.as_str(),
            reply.served_by.model.as_str(),
        );
        let cost = answer_cost(client, &reply.attempts);
        let stored = Stored::new(reply.response.clone(), by, cost, now, (ttl, keep));
        self.store.put(key, stored.to_bytes(), now, keep);
    }
}

/// What `stored` cost when it was asked, in USD.
fn saved(stored: &Stored) -> Option<f64> {
    stored.cost_pico.map(|p| Cost::from_picodollars(p).usd())
}

/// What the answer of `attempts` cost at `client`'s prices, in
/// picodollars, where they are known: what a hit on it saves.
pub(crate) fn answer_cost<P: Platform, S: BreakerStore>(
    client: &Client<P, S>,
    attempts: &[Attempt],
) -> Option<u64> {
    let prices = &client.cost_policy().prices;
    Some(prices)
        .filter(|p| !p.is_empty())
        .and_then(|p| p.bill(attempts).answer)
        .map(Cost::picodollars)
}

/// The key of a request made in code: its client body when it came in a
/// client format, else the neutral request as JSON.
fn key_of(
    route: &str,
    scope: Scope,
    tenant: Option<&[u8]>,
    request: &ChatRequest,
) -> Option<String> {
    let tenant = match scope {
        Scope::Client => Some(tenant_of(tenant.unwrap_or_default())),
        Scope::Shared => None,
    };
    let parts = |format, headers| KeyParts {
        route,
        format,
        tenant: tenant.as_ref().map(|t| &t[..]),
        headers,
    };
    match request.native.as_deref() {
        Some(n) => {
            let format = match n.dialect {
                Dialect::OpenAi => "openai",
                Dialect::Anthropic => "anthropic",
                Dialect::Responses => "responses",
            };
            cache_key(parts(format, &n.headers), &n.body)
        }
        None => {
            let Ok(Value::Object(body)) = serde_json::to_value(request) else {
                return None;
            };
            let body: Map<String, Value> = body;
            cache_key(parts("neutral", &[]), &body)
        }
    }
}

/// A stored answer as the client gives one (no attempts: none were made).
pub(crate) fn reply_of(stored: Stored) -> Reply {
    let mut response = stored.response;
    response.dialect = stored.dialect;
    Reply {
        response,
        served_by: ServedBy {
            provider: stored.provider,
            model: stored.model,
            label: None,
        },
        attempts: Vec::new(),
    }
}
