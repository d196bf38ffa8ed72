//! What a fleet object remembers of its breaker's history, fleet-wide:
//! counts of every verdict it was sent and every probe it granted, and a
//! bounded log of its transitions. Isolates see only their own requests;
//! this is the one place that sees them all. Read by the status page and
//! `/metrics` through [`FleetLink::journal`](super::FleetLink::journal).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use super::{FleetLink, Verdict};
use crate::platform::UnixMillis;
use crate::policy::breaker::StateName;

/// How many transitions an object keeps: a day of a flapping provider
/// (one cycle a minute and more) would not fit, the last hours' do, and
/// the stored state stays a few kilobytes.
pub(crate) const KEPT: usize = 64;

/// A fleet object's counters and recent transitions (a fresh object's,
/// empty, is not written: its stored state stays as it was).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    /// Totals since the object was created.
    #[serde(default)]
    pub counts: Counts,
    /// The last [`KEPT`] transitions, oldest first.
    #[serde(default)]
    pub recent: VecDeque<Transition>,
}

/// Totals since the object was created (they survive restarts: stored
/// with the breaker).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Calls the provider answered, as isolates reported them.
    #[serde(default)]
    pub successes: u64,
    /// Calls the provider failed (after their retries): each one a request
    /// that failed over from this provider or ran out of entries.
    #[serde(default)]
    pub failures: u64,
    /// Probes given back without a verdict.
    #[serde(default)]
    pub abandoned: u64,
    /// Half-open probe leases granted.
    #[serde(default)]
    pub probes: u64,
    /// Breaker transitions.
    #[serde(default)]
    pub transitions: u64,
}

/// One transition of the fleet breaker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    /// When (the object's clock).
    pub at: UnixMillis,
    /// The state it left.
    pub from: StateName,
    /// The state it entered.
    pub to: StateName,
    /// For an opening: when its cooldown ends and a probe may go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<UnixMillis>,
    /// How many times in a row the breaker has opened (its cooldown grows
    /// with each).
    #[serde(default)]
    pub trips: u32,
}

impl Journal {
    /// Nothing counted or logged yet.
    pub fn is_empty(&self) -> bool {
        *self == Journal::default()
    }

    /// Counts one reported verdict.
    pub(super) fn verdict(&mut self, verdict: Verdict) {
        let n = match verdict {
            Verdict::Success => &mut self.counts.successes,
            Verdict::Failure => &mut self.counts.failures,
            Verdict::Abandoned => &mut self.counts.abandoned,
        };
        *n = n.saturating_add(1);
    }

    /// Counts one granted probe lease.
    pub(super) fn probe(&mut self) {
        self.counts.probes = self.counts.probes.saturating_add(1);
    }

    /// Logs a transition, dropping the oldest past [`KEPT`].
    pub(super) fn transition(&mut self, t: Transition) {
        self.counts.transitions = self.counts.transitions.saturating_add(1);
        while self.recent.len() >= KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(t);
    }
}

/// Where the status page and `/metrics` read what the fleet remembers: a
/// host whose breakers are shared fleet-wide hands the gateway one
/// (`Setup::journals`); without one they show this isolate alone.
pub trait JournalSource {
    /// `key`'s journal; `None` when its object cannot be reached.
    fn journal_of<'a>(
        &'a self,
        key: &'a str,
    ) -> Pin<Box<dyn Future<Output = Option<Journal>> + 'a>>;
}

/// Every link to the fleet's objects reads their journals.
impl<L: FleetLink> JournalSource for L {
    fn journal_of<'a>(
        &'a self,
        key: &'a str,
    ) -> Pin<Box<dyn Future<Output = Option<Journal>> + 'a>> {
        Box::pin(async move { self.journal(key).await.ok() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(at: UnixMillis) -> Transition {
        Transition {
            at,
            from: StateName::Closed,
            to: StateName::Open,
            until: Some(at + 1000),
            trips: 1,
        }
    }

    #[test]
    fn the_log_keeps_the_newest_transitions_and_counts_them_all() {
        let mut j = Journal::default();
        for t in 0..(KEPT as u64 + 10) {
            j.transition(at(t));
        }
        assert_eq!(j.recent.len(), KEPT);
        assert_eq!(j.recent.front().map(|t| t.at), Some(10));
        assert_eq!(j.recent.back().map(|t| t.at), Some(KEPT as u64 + 9));
        assert_eq!(j.counts.transitions, KEPT as u64 + 10);
    }

    #[test]
    fn verdicts_are_counted_by_kind() {
        let mut j = Journal::default();
        for v in [
            Verdict::Success,
            Verdict::Failure,
            Verdict::Failure,
            Verdict::Abandoned,
        ] {
            j.verdict(v);
        }
        j.probe();
        let c = j.counts;
        assert_eq!(
            (c.successes, c.failures, c.abandoned, c.probes),
            (1, 2, 1, 1)
        );
    }

    #[test]
    fn a_journal_stored_before_a_field_existed_still_reads() {
        let j: Journal = serde_json::from_str(r#"{"counts":{"successes":4}}"#).unwrap();
        assert_eq!(j.counts.successes, 4);
        assert!(j.recent.is_empty());
    }
}
