//! The object side: one provider's fleet breaker, as its Durable Object
//! persists it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::platform::{millis, UnixMillis};
use crate::policy::breaker::{
    Breaker, BreakerPolicy, CircuitOpen, Outcome, Permit, PermitKind, Snapshot, State,
};

use crate::policy::latency::{DemotionPolicy, Figures, Sample};
use crate::policy::pool::{newest, PoolReading};

use super::journal::{Journal, Transition};
use super::{Batch, LeaseAnswer, Report, Verdict, View};

/// A granted probe lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// The lease's name.
    pub token: u64,
    /// The fleet breaker's permit behind it.
    pub permit: Permit,
    /// Who holds it (an isolate id, for diagnostics).
    pub holder: String,
    /// When it lapses.
    pub expires_at: UnixMillis,
}

/// One provider's fleet breaker: what its Durable Object persists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fleet {
    /// The fleet breaker.
    pub breaker: Snapshot,
    /// Probe leases granted and not yet answered.
    #[serde(default)]
    pub leases: Vec<Lease>,
    /// The next lease token.
    #[serde(default)]
    pub next_token: u64,
    /// When the breaker last changed state: verdicts of calls that ended
    /// before it describe an older state and are ignored.
    #[serde(default)]
    pub changed_at: UnixMillis,
    /// Counts and recent transitions, for the status page and metrics.
    #[serde(default, skip_serializing_if = "Journal::is_empty")]
    pub journal: Journal,
    /// Every isolate's latency samples of the model, and its standing.
    #[serde(default, skip_serializing_if = "Figures::is_empty")]
    pub figures: Figures,
    /// What the provider last said of the model's rate-limit pool, to any
    /// isolate (the newest reading reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolReading>,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet::new()
    }
}

impl Fleet {
    /// A closed fleet breaker.
    pub fn new() -> Self {
        Fleet {
            breaker: Breaker::new(BreakerPolicy::default()).snapshot(),
            leases: Vec::new(),
            next_token: 1,
            changed_at: 0,
            journal: Journal::default(),
            figures: Figures::default(),
            pool: None,
        }
    }

    /// Folds a batch of verdicts into the fleet breaker and answers with the
    /// view after it.
    ///
    /// A verdict under a live lease is the probe's: it closes or re-opens
    /// the breaker (an abandoned probe gives its permit back). Other
    /// verdicts count only while the breaker is closed and only if they
    /// ended after its last transition; calls let through by a stale cache
    /// while it was open say nothing new.
    pub fn fold(&mut self, policy: &BreakerPolicy, now: UnixMillis, reports: &[Report]) -> View {
        let mut b = self.restore(policy, now);
        for r in reports {
            self.journal.verdict(r.verdict);
            match r.lease {
                Some(token) => {
                    let Some(i) = self.leases.iter().position(|l| l.token == token) else {
                        continue; // lapsed or unknown: another probe took over
                    };
                    let lease = self.leases.remove(i);
                    match r.verdict {
                        Verdict::Success => b.record(now, lease.permit, Outcome::Success),
                        Verdict::Failure => b.record(now, lease.permit, Outcome::Failure),
                        Verdict::Abandoned => b.release(lease.permit),
                    }
                }
                None => {
                    let counts = matches!(b.state(), State::Closed) && r.at >= self.changed_at;
                    let outcome = match r.verdict {
                        Verdict::Success => Outcome::Success,
                        Verdict::Failure => Outcome::Failure,
                        Verdict::Abandoned => continue,
                    };
                    if counts {
                        if let Ok(permit) = b.try_acquire(now) {
                            b.record(now, permit, outcome);
                        }
                    }
                }
            }
            self.save(&b, now);
        }
        self.save(&b, now);
        self.view_of(&b, now)
    }

    /// Folds latency samples into the model's figures (before the verdicts
    /// they came with: the view [`fold`](Fleet::fold) answers shows them).
    pub fn sample(&mut self, policy: &DemotionPolicy, samples: &[Sample]) {
        self.figures.record(samples, policy);
    }

    /// Takes one isolate's report: its latency samples and pool reading,
    /// then its verdicts ([`fold`](Fleet::fold)); answers the view after.
    pub fn report(
        &mut self,
        breaker: &BreakerPolicy,
        demotion: &DemotionPolicy,
        now: UnixMillis,
        batch: &Batch,
    ) -> View {
        self.sample(demotion, &batch.samples);
        self.note_pool(batch.pool);
        self.fold(breaker, now, &batch.reports)
    }

    /// Keeps `reading` if it was said after the one kept (before the
    /// verdicts it came with: the view [`fold`](Fleet::fold) answers shows
    /// it). Isolates' clocks differ by little next to a pool's resets.
    pub fn note_pool(&mut self, reading: Option<PoolReading>) {
        self.pool = newest(self.pool, reading);
    }

    /// Asks for the probe lease on behalf of `holder`.
    pub fn lease(
        &mut self,
        policy: &BreakerPolicy,
        lease_ttl: Duration,
        now: UnixMillis,
        holder: &str,
    ) -> LeaseAnswer {
        let mut b = self.restore(policy, now);
        let holder: String = holder.chars().take(64).collect();
        // An isolate asks only while it holds no lease: one it still holds
        // here lost its verdict on the way (the object was out of reach).
        // Kept, it would pin the breaker half-open until it lapsed; its probe
        // is given back instead.
        self.leases.retain(|l| {
            if l.holder == holder {
                b.release(l.permit);
                return false;
            }
            true
        });
        let answer = match b.state() {
            State::Closed => LeaseAnswer::Closed {
                view: self.view_of(&b, now),
            },
            State::Open { until } if now < until => LeaseAnswer::Busy {
                until,
                view: self.view_of(&b, now),
            },
            State::Open { .. } | State::HalfOpen { .. } => match b.try_acquire(now) {
                Ok(permit) if permit.kind == PermitKind::Probe => {
                    let token = self.next_token.max(1);
                    self.next_token = token + 1;
                    let expires_at = now.saturating_add(millis(lease_ttl));
                    self.leases.push(Lease {
                        token,
                        permit,
                        holder,
                        expires_at,
                    });
                    self.journal.probe();
                    self.save(&b, now);
                    LeaseAnswer::Granted {
                        token,
                        expires_at,
                        view: self.view_of(&b, now),
                    }
                }
                // Not a probe: the breaker cannot be half-open here; treat
                // it as closed without keeping the permit.
                Ok(_) => LeaseAnswer::Closed {
                    view: self.view_of(&b, now),
                },
                Err(CircuitOpen { .. }) => LeaseAnswer::Busy {
                    until: self
                        .leases
                        .iter()
                        .map(|l| l.expires_at)
                        .min()
                        .unwrap_or(now)
                        .max(now),
                    view: self.view_of(&b, now),
                },
            },
        };
        self.save(&b, now);
        answer
    }

    /// The fleet as it stands (lapsed leases are given back first).
    pub fn view(&mut self, policy: &BreakerPolicy, now: UnixMillis) -> View {
        let b = self.restore(policy, now);
        self.save(&b, now);
        self.view_of(&b, now)
    }

    /// The breaker, with lapsed leases' permits given back.
    fn restore(&mut self, policy: &BreakerPolicy, now: UnixMillis) -> Breaker {
        let mut b = Breaker::restore(*policy, self.breaker.clone());
        let generation = b.snapshot().generation;
        self.leases.retain(|l| {
            // A lease from an older generation is void; a lapsed one gives
            // its probe back so someone else may probe.
            if l.permit.generation != generation {
                return false;
            }
            if now >= l.expires_at {
                b.release(l.permit);
                return false;
            }
            true
        });
        b
    }

    /// The journal as it stands.
    pub fn journal(&mut self, policy: &BreakerPolicy, now: UnixMillis) -> Journal {
        let b = self.restore(policy, now);
        self.save(&b, now);
        self.journal.clone()
    }

    fn save(&mut self, b: &Breaker, now: UnixMillis) {
        let snap = b.snapshot();
        if snap.generation != self.breaker.generation {
            self.changed_at = now;
            let (from, to) = (self.breaker.state.name(), snap.state.name());
            if from != to {
                self.journal.transition(Transition {
                    at: now,
                    from,
                    to,
                    until: match snap.state {
                        State::Open { until } => Some(until),
                        _ => None,
                    },
                    trips: snap.trips,
                });
            }
            self.leases
                .retain(|l| l.permit.generation == snap.generation);
        }
        self.breaker = snap;
    }

    fn view_of(&self, b: &Breaker, now: UnixMillis) -> View {
        View {
            state: b.state(),
            generation: b.snapshot().generation,
            consecutive_failures: b.consecutive_failures(),
            failure_rate: b.failure_rate(),
            probes: u32::try_from(self.leases.len()).unwrap_or(u32::MAX),
            latencies: self.figures.latencies(),
            pool: self.pool,
            as_of: now,
        }
    }
}
