//! Fleet-wide breaker state, sans-IO.
//!
//! Many isolates serve one gateway. Each keeps a local breaker per provider
//! and a cached copy of the fleet's breaker, which lives in one Durable
//! Object per provider. This module is the protocol between them, as pure
//! logic; the Worker host only moves its messages.
//!
//! - **The object side**, [`Fleet`] (`object.rs`): folds batches of [`Report`]s from every
//!   isolate into one [`Breaker`](crate::policy::breaker::Breaker) (the same state machine), grants the
//!   half-open **probe lease** (one probe fleet-wide per cooldown, with an
//!   expiry so a dead prober cannot pin the state; the holder's verdict
//!   closes or re-opens it), and answers state queries with a [`View`]. It is
//!   plain serde data: the object loads it, calls one method and stores it
//!   back, with no `.await` in between.
//! - **The isolate side**, [`FleetStore`] (`store.rs`): a [`BreakerStore`](crate::engine::store::BreakerStore) that decides
//!   from memory (local breaker + cached [`View`], fresh for
//!   [`FleetPolicy::ttl`]). Verdicts are queued and sent in the background in
//!   batches, at once on a local transition; a stale view is refreshed in the
//!   background while the stale one keeps answering. The only awaited call
//!   is [`FleetLink::lease`], made when a fleet cooldown has ended and a
//!   probe must be asked for.
//!
//! When the object cannot be reached (it throws, times out, or its
//! namespace is missing), an isolate falls back to its local breaker:
//! losing the fleet's memory must not stop traffic. The host logs the
//! outage once per [`OUTAGE_LOG_INTERVAL`] ([`Outage`]), and once when the
//! object answers again; the next refresh and report share state again.
//!
//! A limited client of the gateway has an object of its own the same way
//! ([`ClientBook`], `client:<name>`): each isolate's last report of what
//! the client used, answered with what the others used, which the
//! isolate's [`FleetClients`] adds to its own count (`clients.rs`).
//!
//! This file holds what crosses between the two: the wire types and the
//! [`FleetLink`] an isolate reaches the objects through; [`fake`] stands
//! both in for tests.

mod client_object;
mod clients;
mod journal;
mod object;
mod outage;
mod relay;
mod spend;
mod spend_object;
mod spend_relay;
mod store;

#[cfg(any(test, feature = "testing"))]
pub mod fake;
#[cfg(any(test, feature = "testing"))]
pub mod fake_clients;
#[cfg(any(test, feature = "testing"))]
pub mod fake_spend;
#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::platform::UnixMillis;
use crate::policy::breaker::State;
pub use crate::policy::latency::{Figure, Figures, Latencies, Sample};
use crate::policy::pool::{newest, PoolReading};

pub use crate::policy::tenant::{Minutes, Used};
pub use client_object::{ClientBook, ClientReport, LAPSE, MAX_HOLDERS};
pub use clients::{client_key, ClientInbox, ClientLedger, ClientLink, FleetClients};
pub use journal::{Counts, Journal, JournalSource, Transition};
pub use object::{Fleet, Lease};
pub use outage::{Outage, OUTAGE_LOG_INTERVAL};
pub use relay::{
    LeaseStep, Relay, HEARTBEAT, IDLE, MAX_GATHERED, MAX_STAGGER, RELAYED_TTL, STAGGER_PER_RELAY,
};
pub use spend::{spend_key, FleetSpend, SpendCall, SpendInbox, SpendLink};
pub use spend_object::{HoldAnswer, HoldCall, SettleCall, SliceAsk, SpendBook, Standing};
pub use spend_relay::{HoldStep, Kept, Retired, SpendRelay, SLICE_TTL};
pub use store::{FleetStore, Inbox};

/// How long a call to an object may take (the lease is awaited by a
/// request: past this, the isolate decides locally).
pub const CALL_TIMEOUT: Duration = Duration::from_millis(1500);

/// How an isolate shares its breakers with the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetPolicy {
    /// How long a cached fleet view is fresh (default 1 s). A stale one still
    /// answers while a refresh runs in the background.
    pub ttl: Duration,
    /// How long a probe lease lasts before the object gives the probe to
    /// someone else (default 30 s): a prober that died cannot pin the
    /// breaker half-open for longer.
    pub lease_ttl: Duration,
    /// Queued verdicts that make a batch worth sending at once (default
    /// 256). Only a cap on a batch's size: `max_delay` bounds how late the
    /// fleet hears of a verdict, and a local transition is sent at once. A
    /// call to the object costs far more than a verdict in it (at the edge
    /// benchmark's rate, batches of 32 cost 4 % of the Worker's CPU).
    pub max_batch: usize,
    /// How long a verdict may wait in the queue (default 1 s).
    pub max_delay: Duration,
}

impl FleetPolicy {
    /// The policy of an isolate whose calls go to its data centre's relays:
    /// a call that stays in the data centre can be made twice as often, so
    /// views are fresh for [`RELAYED_TTL`] and a transition reaches every
    /// isolate within a second.
    pub fn relayed() -> Self {
        FleetPolicy {
            ttl: RELAYED_TTL,
            ..FleetPolicy::default()
        }
    }
}

impl Default for FleetPolicy {
    fn default() -> Self {
        FleetPolicy {
            ttl: Duration::from_secs(1),
            lease_ttl: Duration::from_secs(30),
            max_batch: 256,
            max_delay: Duration::from_secs(1),
        }
    }
}

// ------------------------------------------------------------------ wire

/// The fleet breaker as isolates see it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct View {
    /// Where the fleet breaker stands. An `Open` whose `until` has passed
    /// means a probe may be asked for.
    pub state: State,
    /// Bumped on every fleet transition; orders views.
    pub generation: u64,
    /// Failures since the last success, fleet-wide.
    pub consecutive_failures: u32,
    /// The fleet failure rate over the breaker's window.
    pub failure_rate: f64,
    /// Probe leases out. An isolate turned away because the probe was
    /// taken asks again as soon as a view shows none (its holder gave it
    /// back), not when the lease would have lapsed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub probes: u32,
    /// The model's latency figures fleet-wide and what they demote it on.
    /// Isolates order their routes by them.
    #[serde(default, skip_serializing_if = "Latencies::is_none")]
    pub latencies: Latencies,
    /// What the provider last said of the model's rate-limit pool, to any
    /// isolate: an isolate that never saw the headers steers by them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolReading>,
    /// When the object answered (its clock).
    pub as_of: UnixMillis,
}

/// Written only when not zero, so a view without probes out is the bytes it
/// always was.
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A verdict an isolate sends to the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The provider answered.
    Success,
    /// The provider failed (after its retries).
    Failure,
    /// A probe ended without a verdict (abandoned, or the request itself was
    /// bad): its lease is given back.
    Abandoned,
}

/// One verdict, as an isolate reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// When the call ended (the isolate's clock).
    pub at: UnixMillis,
    /// How it went.
    pub verdict: Verdict,
    /// The probe lease the call was made under, if it was the fleet's probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<u64>,
}

/// The object's answer to a probe-lease request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum LeaseAnswer {
    /// The caller holds the fleet's probe until `expires_at`; its verdict
    /// closes or re-opens the fleet breaker.
    Granted {
        /// Names the lease in the verdict's [`Report`].
        token: u64,
        /// When the object gives the probe to someone else.
        expires_at: UnixMillis,
        /// The fleet after granting it.
        view: View,
    },
    /// No probe now: the cooldown has not ended, or another isolate holds
    /// the lease. Ask again at `until` at the earliest.
    Busy {
        /// When asking again may succeed.
        until: UnixMillis,
        /// The fleet as it stands.
        view: View,
    },
    /// The fleet breaker is closed: no probe is needed.
    Closed {
        /// The fleet as it stands.
        view: View,
    },
}

/// What an isolate asks its provider's object (`POST http://do/<op>`): the
/// provider, and what the operation needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// The provider whose fleet breaker the object keeps.
    pub key: String,
    /// Who asks for the probe lease (`/lease`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Verdicts to fold (`/report`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reports: Vec<Report>,
    /// Latency samples to fold (`/report`), sent with the verdicts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<Sample>,
    /// The newest rate-limit pool reading this isolate saw since its last
    /// report (`/report`), sent with the verdicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolReading>,
    /// The batch could change the fleet breaker (a local transition, a
    /// failure that reaches the threshold, a probe's verdict): a relay
    /// passes it on at once rather than with its next exchange.
    #[serde(default, skip_serializing_if = "is_false")]
    pub urgent: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What an isolate sends its provider's object in one report: verdicts,
/// latency samples and its newest pool reading, together, so sharing them
/// costs no call of its own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// Verdicts to fold.
    pub reports: Vec<Report>,
    /// Latency samples to fold.
    pub samples: Vec<Sample>,
    /// The newest pool reading seen since the last batch.
    pub pool: Option<PoolReading>,
    /// Sent at once because it could change the fleet breaker.
    pub urgent: bool,
}

impl Call {
    /// The batch a `/report` call carries.
    pub fn into_batch(self) -> Batch {
        Batch {
            reports: self.reports,
            samples: self.samples,
            pool: self.pool,
            urgent: self.urgent,
        }
    }
}

impl Batch {
    /// The call that carries it to `key`'s object.
    pub fn into_call(self, key: &str) -> Call {
        Call {
            key: key.to_owned(),
            holder: None,
            reports: self.reports,
            samples: self.samples,
            pool: self.pool,
            urgent: self.urgent,
        }
    }

    /// Adds `other` after what this batch holds: verdicts and samples in
    /// order, the newer pool reading, urgent if either is.
    pub fn merge(&mut self, other: Batch) {
        self.reports.extend(other.reports);
        self.samples.extend(other.samples);
        self.pool = newest(self.pool, other.pool);
        self.urgent |= other.urgent;
    }

    /// Nothing to send.
    pub fn is_empty(&self) -> bool {
        self.reports.is_empty() && self.samples.is_empty() && self.pool.is_none()
    }
}

/// The fleet object could not be reached or answered nonsense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fleet breaker unreachable: {0}")]
pub struct LinkError(pub String);

/// How an isolate reaches the fleet's objects: one per provider `key`.
#[allow(async_fn_in_trait)] // single-threaded by design; futures are !Send on wasm
pub trait FleetLink {
    /// Asks for the probe lease and waits for the answer: the one awaited
    /// call, made only when a fleet cooldown has ended.
    async fn lease(&self, key: &str, holder: &str) -> Result<LeaseAnswer, LinkError>;

    /// Sends a batch (verdicts, latency samples, a pool reading) in the
    /// background; the object's view after folding it goes to `inbox`. A
    /// failed call delivers nothing: the view goes stale and the next
    /// request past its TTL refreshes it again.
    fn report(&self, key: &str, batch: Batch, inbox: Inbox);

    /// Fetches the fleet's view in the background into `inbox`.
    fn refresh(&self, key: &str, inbox: Inbox);

    /// The object's counters and recent transitions (awaited: asked only
    /// by the status page and `/metrics`).
    async fn journal(&self, key: &str) -> Result<Journal, LinkError>;
}
