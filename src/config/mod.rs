//! Configuration: one JSON shape for the Worker (`[vars]`) and the npm
//! package, validated once into typed policies. Every problem is reported
//! at once, each with its path (`routes.default[1].provider: unknown
//! provider "x"`).
//!
//! ```json
//! {
//!   "providers": { "primary": { "kind": "anthropic" }, "backup": { "kind": "openai" } },
//!   "routes": { "default": [ { "provider": "primary", "model": "claude-sonnet-4-5" },
//!                            { "provider": "backup", "model": "gpt-4.1", "timeoutMs": 20000 } ] },
//!   "retry": { "maxAttempts": 3, "baseDelayMs": 200, "maxDelayMs": 10000 },
//!   "breaker": { "failureThreshold": 5, "cooldownMs": 10000 },
//!   "timeoutMs": 30000,
//!   "deadlineMs": 60000
//! }
//! ```

mod breaker;
mod cache;
pub(crate) mod clients;
mod cost;
pub(crate) mod embeddings;
mod hedge;
mod issues;
mod keys;
mod providers;
mod quality;
mod retry;
mod shape;
mod speed;
mod tier;
mod tracing;
mod validate;

pub(crate) use issues::Issues;
pub(crate) use keys::KeyEnv;
pub use providers::{build_provider, ProviderConfig};
pub use shape::Config;
pub(crate) use shape::EntryConfig;
pub use validate::{Policies, Validated};

pub(crate) use crate::issue::{ConfigError, ConfigIssue};
pub(crate) use crate::secret::Secret;
