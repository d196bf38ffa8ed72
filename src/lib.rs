//! # resilient-llm
//!
//! A resilient multi-provider LLM client: a per-attempt deadline, retries
//! with exponential backoff and full jitter that honour Retry-After, a
//! circuit breaker per provider, and an ordered failover chain across
//! providers, ending in one typed error that names every provider that
//! failed and why.
//!
//! The core is single-threaded and runtime-agnostic: it never touches a
//! clock, timer, random source or socket itself. A [`Platform`] is handed in.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod backoff;
pub mod breaker;
pub mod chain;
pub mod chat;
pub mod config;
pub mod error;
pub mod event;
#[cfg(all(target_arch = "wasm32", feature = "js"))]
pub mod js;
pub mod platform;
pub mod provider;
mod retry;
pub mod stats;
pub mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod timeout;
#[cfg(all(target_arch = "wasm32", feature = "web"))]
pub mod web;

pub use backoff::{BudgetPolicy, RetryBudget, RetryPolicy};
pub use breaker::{
    Breaker, BreakerPolicy, CircuitOpen, Outcome, Permit, Snapshot, State, StateName,
};
pub use chain::{CallOptions, Client, ClientBuilder, Entry, Policy, Reply, ServedBy};
pub use chat::{
    ChatRequest, ChatResponse, FinishReason, Message, Part, Role, Tool, ToolCall, ToolChoice, Usage,
};
pub use config::{ConfigError, ConfigIssue, Secret};
pub use error::{Attempt, AttemptOutcome, Error, ErrorKind, Exhausted, ProviderError};
pub use event::{Event, Observer};
pub use platform::{
    Body, BufferedResponse, Headers, HttpRequest, HttpResponse, Platform, TransportError,
    TransportErrorKind, UnixMillis,
};
pub use provider::{Capabilities, CustomProvider, Provider, Upstream};
pub use stats::Health;
pub use store::{BreakerStore, MemoryStore};
