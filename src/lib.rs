//! # resilient-llm
//!
//! A resilient multi-provider LLM client: a per-attempt deadline, retries
//! with exponential backoff and full jitter that honour Retry-After, a
//! circuit breaker per provider and model, and an ordered failover chain
//! across providers, ending in one typed error that names every provider
//! that failed and why.
//!
//! The core is single-threaded and runtime-agnostic: it never touches a
//! clock, timer, random source or socket itself. A [`Platform`] is handed in:
//! the web platform in the Worker and the npm package, the fake platform of
//! [`testing`] in tests.
//!
//! **In scope**: timeouts, deadlines, retries, retry budget, circuit
//! breakers (in memory or fleet-wide), failover chains, weighted tiers
//! (load split by `priority` and `weight`), latency demotion and hedged
//! requests, provider adapters and format translation, embeddings, token
//! counts (Anthropic's `count_tokens`, answered by the route's providers
//! that count) and token estimates (about four bytes of text a token, for
//! the `cheapest` ordering and a stream's pace), cost and spend caps,
//! quality escalation, health statistics, a response cache with
//! stale-if-error for the gateway's routes that opt in ([`cache`]).
//! **Out of scope**: prompt handling, tool execution, a tokenizer of its
//! own, a semantic cache.
//!
//! Layer order is fixed: timeout inside retry inside breaker inside chain.
//!
//! The modules read in layers, each importing only those below it:
//! hosts (`web`, `worker`, `js`) → `gateway`, `fleet`, `config` → `engine`
//! (the only async code: client, cursor, retry, stream, timeout, stores) →
//! `provider`, `format` (sans-IO adapters and client wire formats) → `policy`
//! (pure decisions: backoff, budget, breaker, statistics) → `chat`, `error`,
//! `platform`, `trace` (W3C trace context). What a user names is re-exported here: the client, requests,
//! answers and errors, the platform, providers, the policies a builder takes,
//! and the configuration's entry points ([`Config`], [`ProviderConfig`]); the
//! configuration's inner sections are read from JSON and stay crate-private.
//! `testing`, `format`, `gateway`, `fleet`, `cache`, `trace`, `sim` and
//! `web` are public namespaces of their own.
//!
//! ```
//! use resilient_llm::testing::{block_on, err, ok, FakePlatform, ScriptedProvider};
//! use resilient_llm::{ChatRequest, Client, Entry, ErrorKind, Message, Upstream};
//! use std::time::Duration;
//!
//! let p = FakePlatform::new().random([0.5]);
//! let primary = ScriptedProvider::new(&p, "primary", [err(ErrorKind::Server, 503)]);
//! let backup = ScriptedProvider::new(&p, "backup", [ok("hello")]);
//! let client = Client::builder(p.clone())
//!     .upstream("primary", Upstream::Custom(Box::new(primary)))
//!     .upstream("backup", Upstream::Custom(Box::new(backup)))
//!     .route("default", vec![Entry::new("primary", "big"), Entry::new("backup", "small")])
//!     .build();
//! let reply = block_on(&p, client.chat(ChatRequest::new(vec![Message::user("hi")]))).unwrap();
//! assert_eq!(reply.served_by.provider, "backup");
//! // Full jitter at random = 0.5 with a 200 ms base: 100 ms, then 200 ms.
//! assert_eq!(p.sleeps(), [Duration::from_millis(100), Duration::from_millis(200)]);
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod cache;
mod chat;
mod config;
mod engine;
mod error;
mod event;
pub mod fleet;
pub mod format;
pub mod gateway;
mod issue;
#[cfg(all(target_arch = "wasm32", feature = "js"))]
mod js;
mod json;
mod platform;
mod policy;
mod provider;
mod quality;
mod redact;
mod secret;
#[cfg(feature = "sim")]
pub mod sim;
mod sse;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod trace;
#[cfg(all(target_arch = "wasm32", feature = "web"))]
pub mod web;
#[cfg(all(target_arch = "wasm32", feature = "worker"))]
mod worker;

pub use chat::Endpoint;
pub use chat::{
    ChatRequest, ChatResponse, Delta, Dialect, FinishReason, Gap, Image, ImageSource, JsonSchema,
    Message, Native, Part, RawJson, Reasoning, ResponseFormat, Role, Thinking, Tool, ToolCall,
    ToolChoice, Untranslated, Usage,
};
pub use config::{build_provider, Config, Policies, ProviderConfig, Validated};
pub use engine::client::{CallOptions, Client, ClientBuilder, Entry, Policy, Reply, ServedBy};
pub use engine::cost::{CostPolicy, FleetHold, ModelCost, RouteCost, SpendHealth, SpendLedger};
pub use engine::endpoint::{EmbeddingModel, EndpointCall, EndpointReply};
pub use engine::hedge::{HedgeAfter, HedgePolicy};
pub use engine::key::{breaker_key, provider_of};
pub use engine::span_hook::LiveSpans;
pub use engine::store::{BreakerStore, MemoryStore};
pub use engine::stream::ChatStream;
pub use engine::timeout::timeout;
pub use error::{
    Attempt, AttemptBreaker, AttemptOutcome, Error, ErrorKind, Exhausted, ProviderError, Treatment,
};
pub use event::{Event, Observer, Standing};
pub use fleet::{Fleet, FleetLink, FleetStore};
pub use format::{FormatError, FormatErrorKind};
pub use issue::{ConfigError, ConfigIssue};
#[cfg(all(target_arch = "wasm32", feature = "js"))]
pub use js::{create_fetch, error_classes, ResilientClient};
pub use platform::{
    Body, BodySource, BufferedResponse, ChunkStream, Headers, HttpRequest, HttpResponse, Platform,
    TransportError, TransportErrorKind, UnixMillis, WholeRead,
};
pub use policy::backoff::{parse_retry_after, RetryPolicy};
pub use policy::breaker::{
    Breaker, BreakerPolicy, CircuitOpen, Outcome, Permit, PermitKind, Snapshot, State, StateName,
};
pub use policy::budget::BudgetPolicy;
pub use policy::cheapest::Strategy;
pub use policy::fair::Share;
pub use policy::latency::{Demotion, DemotionPolicy, Measure, RateFloor, Speed};
pub use policy::pool::{read as read_pool, PoolHeaders, PoolReading, Quota};
pub use policy::price::{Bill, Cost, Price, Prices};
pub use policy::shed::Priority;
pub use policy::spend::{OverBudget, SpendCap, Tally};
pub use policy::stats::{Health, Latency, ModelBreaker};
pub use provider::bedrock;
pub use provider::{
    classify, Anthropic, AuthStyle, Bedrock, Capabilities, Credential, CustomProvider, ErrorBody,
    LocalFuture, Models, OpenAi, Preset, PresetName, Provider, Publisher, Quirks, ServiceAccount,
    StreamDecoder, Upstream, Vertex,
};
pub use quality::{refusal, AnswerCheck, AttemptCost, OnExhausted, Quality, Rejection, Validator};
pub use secret::Secret;
pub use sse::{SseDecoder, SseEvent, SseLimit, MAX_STREAM_BYTES};
