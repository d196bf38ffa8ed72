//! The plain data of a walk: a route's entries, the client-wide policies,
//! a call's options, who answered and the reply, what became of one entry.

use std::ops::Deref;
use std::time::Duration;

use crate::chat::ChatResponse;
use crate::error::{Attempt, ProviderError};
use crate::policy::backoff::RetryPolicy;
use crate::policy::budget::BudgetPolicy;
use crate::policy::latency::Speed;

/// One step of a route: a provider, the model to ask it for, and optional
/// overrides of the client's timeout and retry policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The provider id.
    pub provider: String,
    /// The model sent to it.
    pub model: String,
    /// A name for logs and events.
    pub label: Option<String>,
    /// Per-attempt timeout for this entry.
    pub timeout: Option<Duration>,
    /// Retry policy for this entry.
    pub retry: Option<RetryPolicy>,
    /// Time-to-first-token deadline for streams at this entry.
    pub first_token_timeout: Option<Duration>,
    /// The embedding model it serves, on an embeddings route.
    pub embeddings: Option<EmbeddingModel>,
    /// The entry's tier: entries of a route sharing a priority split its
    /// load by weight, lower priorities first ([`crate::engine::order`]).
    /// `None`: the entry is tried at its place in the route.
    pub priority: Option<u32>,
    /// Its share of its tier's load (default 1).
    pub weight: u32,
    /// Latency objectives and a stream's pace (none by default).
    pub speed: Speed,
}

impl Entry {
    /// `model` at `provider`, with the client's policies.
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> Self {
        Entry {
            provider: provider.into(),
            model: model.into(),
            label: None,
            timeout: None,
            retry: None,
            first_token_timeout: None,
            embeddings: None,
            priority: None,
            weight: 1,
            speed: Speed::default(),
        }
    }

    /// Puts the entry in tier `priority`.
    pub fn priority(mut self, priority: u32) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Sets its share of its tier's load.
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// Sets the per-attempt timeout.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }

    /// Sets the retry policy.
    pub fn retry(mut self, r: RetryPolicy) -> Self {
        self.retry = Some(r);
        self
    }

    /// Sets the streams' time-to-first-token deadline.
    pub fn first_token_timeout(mut self, t: Duration) -> Self {
        self.first_token_timeout = Some(t);
        self
    }

    /// Sets the latency objectives and a stream's pace.
    pub fn speed(mut self, s: Speed) -> Self {
        self.speed = s;
        self
    }

    /// Sets the label.
    pub fn label(mut self, l: impl Into<String>) -> Self {
        self.label = Some(l.into());
        self
    }

    /// Declares the embedding model this entry serves.
    pub fn embeddings(mut self, m: EmbeddingModel) -> Self {
        self.embeddings = Some(m);
        self
    }
}

/// The client-wide policies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Retries per entry (default: 3 attempts, 200 ms base, 10 s cap).
    pub retry: RetryPolicy,
    /// Per-attempt timeout (default 30 s).
    pub attempt_timeout: Duration,
    /// End-to-end deadline over all retries and fallbacks (default 60 s).
    pub deadline: Duration,
    /// The retry budget (default: 20 % of first attempts, 1/s floor).
    pub budget: BudgetPolicy,
    /// The largest response body read (default 8 MiB).
    pub max_response_bytes: usize,
    /// The largest request body a gateway accepts (default 1 MiB).
    pub max_request_bytes: usize,
    /// Streams: how long the first token may take before the attempt is
    /// abandoned for the next (default 10 s: a provider 20 s late is
    /// abandoned for a healthy fallback).
    pub first_token_timeout: Duration,
    /// Streams: the longest silence between chunks after the first token
    /// (default 10 s: a 30 s stall is detected and finished by a fallback
    /// well inside 45 s).
    pub idle_timeout: Duration,
    /// Streams at a gateway: how long the wait for the first item may be
    /// before the response goes out and keepalives follow at this interval
    /// (default 15 s: under the idle timeouts of common proxies and
    /// clients, 30 s and up, and past the first-token deadline, so that a
    /// stream that fails over at once still gets its HTTP status).
    pub keepalive: Duration,
    /// Whether the `provider/model` form may name a model no route lists
    /// (default false: a client can neither reach nor get a provider blamed
    /// for a model name it made up).
    pub any_model: bool,
    /// Whether each request's walk is steered by the providers' rate-limit
    /// pools (default true): an entry whose pool cannot take the request
    /// goes behind those that can, and tier weights follow what is left.
    /// Off, only 429s move traffic (a member behind its tier mates for its
    /// Retry-After, the breaker).
    pub steer_by_capacity: bool,
    /// Whether a route sheds load by priority while its providers cannot
    /// carry it (default true): `sheddable` requests are refused first,
    /// then `standard` ones while `critical` ones ask
    /// ([`crate::Priority`]). Off, every request is sent.
    pub shed_by_priority: bool,
    /// Whether each attempt sends its provider a `traceparent` naming its
    /// own span under the request's trace, and the caller's `tracestate`
    /// (default true; a request without a trace sends none).
    pub propagate_trace: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            retry: RetryPolicy::default(),
            attempt_timeout: Duration::from_secs(30),
            deadline: Duration::from_secs(60),
            budget: BudgetPolicy::default(),
            max_response_bytes: 8 << 20,
            max_request_bytes: 1 << 20,
            first_token_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(10),
            keepalive: Duration::from_secs(15),
            any_model: false,
            steer_by_capacity: true,
            shed_by_priority: true,
            propagate_trace: true,
        }
    }
}

/// Per-call options.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallOptions {
    /// The route to use instead of the request's `model`.
    pub route: Option<String>,
    /// A tighter end-to-end deadline (a client's `x-request-timeout-ms`).
    pub deadline: Option<Duration>,
    /// No hedge for this call, whatever its route says (a request that
    /// must not run twice: `x-hedge: off`).
    pub no_hedge: bool,
    /// The call's priority class, for its route's load shedding (default
    /// `standard`).
    pub priority: crate::Priority,
    /// Whose call it is, for fair shares within its class while its route
    /// sheds part of it (the gateway's client and its weight).
    pub share: Option<crate::Share>,
}

/// Which entry answered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ServedBy {
    /// The provider id.
    pub provider: String,
    /// The model the entry asked for.
    pub model: String,
    /// The entry's label.
    pub label: Option<String>,
}

impl ServedBy {
    /// `entry`, as answers name it.
    pub(crate) fn of(entry: &Entry) -> Self {
        let (provider, model) = (entry.provider.clone(), entry.model.clone());
        let label = entry.label.clone();
        ServedBy {
            provider,
            model,
            label,
        }
    }
}

/// A successful call: the answer, who gave it, and every attempt on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The answer.
    pub response: ChatResponse,
    /// The entry that answered.
    pub served_by: ServedBy,
    /// Every attempt, in order, the successful one last.
    pub attempts: Vec<Attempt>,
}

/// What became of one entry.
pub(crate) enum Step {
    /// It answered.
    Answered(Box<ChatResponse>),
    /// It failed in a way that moves the chain on.
    Next(ProviderError),
    /// It failed in a way that ends the request.
    Stop(ProviderError),
}

/// The embedding model an entry of an embeddings route serves: entries
/// that agree on both fail over to each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingModel {
    /// The model family (the upstream model, whatever a provider names
    /// its deployment).
    pub family: String,
    /// The vectors' length.
    pub dimensions: u32,
}

/// An entry of a walk with the breaker key its calls count against,
/// resolved once when the walk reaches it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keyed<'a> {
    pub(crate) entry: &'a Entry,
    pub(crate) key: &'a str,
}

impl<'a> Keyed<'a> {
    pub(crate) fn new(entry: &'a Entry, key: &'a str) -> Self {
        Keyed { entry, key }
    }
}

impl Deref for Keyed<'_> {
    type Target = Entry;
    fn deref(&self) -> &Entry {
        self.entry
    }
}

impl Reply {
    /// `entry`'s answer `response`, after `attempts`.
    pub(crate) fn new(entry: &Entry, mut response: ChatResponse, attempts: Vec<Attempt>) -> Self {
        let served_by = ServedBy::of(entry);
        // Most adapters name themselves as the entry does: no copy then.
        if response.provider != served_by.provider {
            response.provider.clone_from(&served_by.provider);
        }
        Reply {
            response,
            served_by,
            attempts,
        }
    }
}
