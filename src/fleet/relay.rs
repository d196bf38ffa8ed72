//! The data centre's side: a relay between one data centre's isolates and a
//! model's fleet breaker, so that the breaker's owner hears from each data
//! centre, not from each isolate.
//!
//! Isolates talk to their data centre's relay exactly as they talked to the
//! owner ([`FleetLink`](super::FleetLink): refresh, report, lease); the
//! relay answers refreshes and reports from its copy of the owner's
//! [`View`], gathers the isolates' batches into one, and keeps one **watch**
//! open on the owner: a call that carries the gathered batch and that the
//! owner answers at once when the breaker's generation differs from the
//! copy's, else after [`HEARTBEAT`]. A transition thus reaches every relay
//! one trip after it happens, and every isolate within its view's TTL of
//! that ([`RELAYED_TTL`]). Batches that could change the breaker
//! ([`Batch::urgent`]) go to the owner at once, in a call of their own.
//!
//! The owner stays the one that grants the probe lease. A relay asks for it
//! on behalf of the first isolate that wants it and answers the others
//! `Busy` while the lease is out or the question is: a cooldown's end costs
//! the owner one question per data centre, not one per isolate.
//!
//! Like [`Fleet`](super::Fleet), this is plain logic: the host keeps the
//! watch running and moves the messages.

use std::time::Duration;

use crate::platform::{millis, UnixMillis};
use crate::policy::breaker::State;

use super::{Batch, LeaseAnswer, Verdict, View};

/// How long an owner holds a watch on which nothing changed.
pub const HEARTBEAT: Duration = Duration::from_secs(2);

/// How long a relay keeps watching after its isolates last called it.
pub const IDLE: Duration = Duration::from_secs(10);

/// The longest a relay waits after a cooldown ends before asking for the
/// probe ([`Relay::stagger`]).
pub const MAX_STAGGER: Duration = Duration::from_millis(500);

/// How much the stagger's window grows with each relay watching the owner,
/// up to [`MAX_STAGGER`] (at 250 relays): the relays' questions reach the
/// owner about this far apart, and a few relays wait next to nothing.
pub const STAGGER_PER_RELAY: Duration = Duration::from_millis(2);

/// How long an isolate's view, fetched from a relay, is fresh. A call to a
/// relay stays in the data centre, so it can be asked twice as often as the
/// owner was, for a transition to reach every isolate within a second.
pub const RELAYED_TTL: Duration = Duration::from_millis(500);

/// A copy is current for this long after a watch answered: the next watch
/// is then in flight, and the owner would have answered it on a change.
const CURRENT_FOR: Duration = Duration::from_secs(3);

/// The most verdicts, and the most latency samples, a relay gathers for its
/// next call to the owner. Past it the oldest go: a relay whose owner is
/// out of reach keeps a bounded memory, and the owner reads the newest.
pub const MAX_GATHERED: usize = 4096;

/// What a relay does with an isolate's lease question.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // returned once per question, never stored
pub enum LeaseStep {
    /// Answered from the relay's copy.
    Answer(LeaseAnswer),
    /// Ask the owner (for this isolate), then tell the relay with
    /// [`Relay::leased`].
    Ask,
}

/// One model's relay in one data centre: what its object keeps in memory.
#[derive(Debug, Clone, Default)]
pub struct Relay {
    /// The owner's newest view.
    view: Option<View>,
    /// Until when that view is known current (a watch is open on it).
    current_until: UnixMillis,
    /// The isolates' batches, gathered for the next call to the owner.
    pending: Batch,
    /// What is gathered holds something that could change the breaker.
    pending_urgent: bool,
    /// An urgent call to the owner is in flight: the next waits for it.
    passing: bool,
    /// When an isolate last called.
    last_call: Option<UnixMillis>,
    /// The probe lease granted through this relay: holder, expiry.
    granted: Option<(String, UnixMillis)>,
    /// A lease question to the owner in flight since.
    asking: Option<UnixMillis>,
    /// The owner said `Busy` until then.
    busy_until: Option<UnixMillis>,
    /// This relay's share of the stagger's window, in [0, 1).
    stagger: f64,
    /// Relays watching the owner, as it last said.
    relays: u32,
}

impl Relay {
    /// A relay that has not heard from the owner yet.
    pub fn new() -> Self {
        Relay::default()
    }

    /// Waits `share` (in [0, 1)) of the stagger's window after a cooldown
    /// ends before asking for the probe. The window is
    /// [`STAGGER_PER_RELAY`] for each relay watching the owner, up to
    /// [`MAX_STAGGER`]. Given each relay its own share at random, the first
    /// to ask is granted the probe and the view it opens reaches the others
    /// before most of them ask: a cooldown's end costs the owner a few
    /// questions, not one per data centre, and where few relays watch, the
    /// probe is asked for about when the cooldown ends.
    pub fn stagger(mut self, share: f64) -> Self {
        self.stagger = if share.is_finite() {
            share.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self
    }

    /// The owner says how many relays watch it (with each watch's answer).
    pub fn watched_by(&mut self, relays: u32) {
        self.relays = relays;
    }

    /// How long after a cooldown ends this relay waits (ms).
    fn wait(&self) -> u64 {
        let window = millis(STAGGER_PER_RELAY)
            .saturating_mul(u64::from(self.relays))
            .min(millis(MAX_STAGGER));
        (self.stagger * window as f64) as u64
    }

    /// The view an isolate's refresh gets, `None` before the owner first
    /// answered (the host answers the isolate then). While a watch is open
    /// the copy is stamped `now`: a change would have reached it.
    pub fn view(&mut self, now: UnixMillis) -> Option<View> {
        self.touch(now);
        self.copy(now)
    }

    /// The view the relay would answer now, without counting a call (for
    /// the host answering the isolates that waited for the first view).
    pub fn current(&self, now: UnixMillis) -> Option<View> {
        self.copy(now)
    }

    /// A lease question is in flight, and not so long that its answer must
    /// have been lost.
    fn asks_since(&self, now: UnixMillis) -> bool {
        self.asking
            .is_some_and(|t| now < t.saturating_add(millis(HEARTBEAT)))
    }

    fn touch(&mut self, now: UnixMillis) {
        self.last_call = Some(self.last_call.map_or(now, |t| t.max(now)));
    }

    fn copy(&self, now: UnixMillis) -> Option<View> {
        let mut v = self.view?;
        if now < self.current_until {
            v.as_of = v.as_of.max(now);
        }
        if self.asks_since(now) || self.granted.is_some() {
            // Isolates wait for the probe this relay knows is out.
            v.probes = v.probes.max(1);
        }
        Some(v)
    }

    /// Takes an isolate's batch; `true` when the host must send what is
    /// gathered ([`Relay::take`]) to the owner now, in a call of its own,
    /// and tell the relay its answer ([`Relay::passed`]). Else it waits
    /// for the watch, or for the urgent call in flight to come back.
    ///
    /// A batch is urgent when it holds a probe's verdict, or when an
    /// isolate sent it at once and it holds a failure while the breaker is
    /// closed as far as the relay knows: once the breaker is open, the
    /// isolates' own transitions say nothing the owner would act on.
    pub fn report(&mut self, batch: Batch, now: UnixMillis) -> bool {
        self.touch(now);
        let closed = self.view.is_none_or(|v| v.state == State::Closed);
        let failed = batch.reports.iter().any(|r| r.verdict == Verdict::Failure);
        let urgent =
            batch.reports.iter().any(|r| r.lease.is_some()) || (batch.urgent && closed && failed);
        self.pending.merge(batch);
        bound(&mut self.pending.reports, |r| r.lease.is_some());
        bound(&mut self.pending.samples, |_| false);
        self.pending_urgent |= urgent;
        self.start_passing()
    }

    fn start_passing(&mut self) -> bool {
        if self.pending_urgent && !self.passing {
            self.passing = true;
            return true;
        }
        false
    }

    /// The owner's answer to an urgent call (`None`: it failed); `true`
    /// when what was gathered meanwhile is urgent too and must go now.
    pub fn passed(&mut self, view: Option<View>, now: UnixMillis) -> bool {
        self.passing = false;
        match view {
            Some(v) => self.apply(v, now, false),
            None => self.lost(),
        }
        self.start_passing()
    }

    /// What to send the owner now: everything gathered.
    pub fn take(&mut self) -> Batch {
        self.pending_urgent = false;
        let mut batch = std::mem::take(&mut self.pending);
        batch.urgent = false;
        batch
    }

    /// The generation the copy is at, which a watch tells the owner.
    pub fn generation(&self) -> Option<u64> {
        self.view.map(|v| v.generation)
    }

    /// Whether the relay should keep a watch open: an isolate called within
    /// [`IDLE`].
    pub fn wants_watch(&self, now: UnixMillis) -> bool {
        self.last_call
            .is_some_and(|t| now < t.saturating_add(millis(IDLE)))
    }

    /// Takes the owner's answer; `watched` when it answered a watch (the
    /// next one keeps the copy current).
    pub fn apply(&mut self, view: View, now: UnixMillis, watched: bool) {
        if let Some(old) = &self.view {
            let older = view.generation < old.generation
                || (view.generation == old.generation && view.as_of < old.as_of);
            if older {
                return; // overtaken by a newer answer
            }
            if view.generation != old.generation {
                // The breaker moved on: a lease or busy answer of the old
                // generation is void.
                self.granted = None;
                self.busy_until = None;
            }
        }
        if view.probes == 0 {
            self.granted = None; // given back, or lapsed
        }
        if watched {
            self.current_until = now.saturating_add(millis(CURRENT_FOR));
        }
        self.view = Some(view);
    }

    /// The owner is out of reach: the copy is no longer known current.
    pub fn lost(&mut self) {
        self.current_until = 0;
        self.asking = None;
    }

    /// What `holder`'s lease question gets.
    pub fn lease(&mut self, holder: &str, now: UnixMillis) -> LeaseStep {
        self.touch(now);
        let Some(view) = self.copy(now) else {
            return self.ask(now);
        };
        if let Some((h, expires_at)) = &self.granted {
            if now < *expires_at {
                if h == holder {
                    // It asks again: its verdict was lost. The owner gives
                    // its old lease back when it asks.
                    return self.ask(now);
                }
                return LeaseStep::Answer(LeaseAnswer::Busy {
                    until: *expires_at,
                    view,
                });
            }
            self.granted = None;
        }
        if let Some(since) = self.asking {
            if self.asks_since(now) {
                return LeaseStep::Answer(LeaseAnswer::Busy {
                    until: since.saturating_add(millis(HEARTBEAT)),
                    view,
                });
            }
            self.asking = None; // its answer was lost: ask again
        }
        if let Some(until) = self.busy_until.filter(|u| now < *u) {
            return LeaseStep::Answer(LeaseAnswer::Busy { until, view });
        }
        let busy = |until| LeaseStep::Answer(LeaseAnswer::Busy { until, view });
        match view.state {
            State::Closed => LeaseStep::Answer(LeaseAnswer::Closed { view }),
            State::Open { until } if now < until => busy(until),
            // Another data centre holds the probe: ask this relay again
            // within a heartbeat (its verdict's transition arrives sooner,
            // and a view without probes sends the isolates back at once).
            _ if view.probes > 0 => busy(now.saturating_add(millis(HEARTBEAT))),
            State::Open { until } if now < until.saturating_add(self.wait()) => {
                busy(until.saturating_add(self.wait()))
            }
            State::Open { .. } | State::HalfOpen { .. } => self.ask(now),
        }
    }

    fn ask(&mut self, now: UnixMillis) -> LeaseStep {
        self.asking = Some(now);
        LeaseStep::Ask
    }

    /// The owner's answer to the question [`Relay::lease`] sent for
    /// `holder`.
    pub fn leased(&mut self, holder: &str, answer: &LeaseAnswer, now: UnixMillis) {
        self.asking = None;
        match answer {
            LeaseAnswer::Granted {
                expires_at, view, ..
            } => {
                self.apply(*view, now, false);
                self.granted = Some((holder.to_owned(), *expires_at));
            }
            LeaseAnswer::Busy { until, view } => {
                self.apply(*view, now, false);
                self.busy_until = Some(*until);
            }
            LeaseAnswer::Closed { view } => self.apply(*view, now, false),
        }
    }
}

/// Keeps the newest [`MAX_GATHERED`] of `items`, and every one `keep` says
/// must reach the owner (a probe's verdict).
fn bound<T>(items: &mut Vec<T>, keep: impl Fn(&T) -> bool) {
    let mut over = items.len().saturating_sub(MAX_GATHERED);
    if over == 0 {
        return;
    }
    items.retain(|item| {
        if over > 0 && !keep(item) {
            over -= 1;
            return false;
        }
        true
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::Report;
    use crate::policy::latency::{Measure, Sample};

    fn view(state: State, generation: u64, probes: u32, as_of: UnixMillis) -> View {
        View {
            state,
            generation,
            consecutive_failures: 0,
            failure_rate: 0.0,
            probes,
            latencies: Default::default(),
            pool: None,
            as_of,
        }
    }

    fn failure(at: UnixMillis, lease: Option<u64>) -> Batch {
        Batch {
            reports: vec![Report {
                at,
                verdict: Verdict::Failure,
                lease,
            }],
            ..Batch::default()
        }
    }

    #[test]
    fn answers_from_its_copy_stamped_while_watched() {
        let mut r = Relay::new();
        assert_eq!(r.view(0), None, "nothing before the owner answered");
        r.apply(view(State::Closed, 1, 0, 100), 100, true);
        assert_eq!(
            r.view(2_500).map(|v| v.as_of),
            Some(2_500),
            "watched: current"
        );
        assert_eq!(
            r.view(3_100).map(|v| v.as_of),
            Some(100),
            "watch gone quiet: as the owner said"
        );
        r.apply(view(State::Closed, 1, 0, 3_200), 3_200, false);
        assert_eq!(
            r.view(3_300).map(|v| v.as_of),
            Some(3_200),
            "an exchange is no watch"
        );
    }

    #[test]
    fn keeps_the_newest_view() {
        let mut r = Relay::new();
        r.apply(view(State::Closed, 3, 0, 500), 500, false);
        r.apply(view(State::Open { until: 9_000 }, 2, 0, 600), 600, false);
        assert_eq!(r.generation(), Some(3));
        r.apply(view(State::Closed, 3, 0, 400), 700, false);
        assert_eq!(r.view(700).map(|v| v.as_of), Some(500));
    }

    fn urgent(at: UnixMillis) -> Batch {
        Batch {
            urgent: true,
            ..failure(at, None)
        }
    }

    #[test]
    fn gathers_batches_and_passes_urgent_ones_on_one_at_a_time() {
        let mut r = Relay::new();
        assert!(!r.report(failure(1, None), 1), "waits for the watch");
        assert!(r.report(urgent(2), 2), "could open the breaker");
        let sent = r.take();
        assert_eq!(sent.reports.len(), 2);
        assert!(!sent.urgent, "the relay's own call decides its urgency");
        assert!(
            !r.report(failure(3, Some(7)), 3),
            "a probe's verdict waits for the call in flight"
        );
        assert!(!r.report(urgent(4), 4));
        assert!(r.passed(Some(view(State::Closed, 1, 0, 5)), 5), "then goes");
        assert_eq!(r.take().reports.len(), 2);
        assert!(!r.passed(None, 9), "nothing more to pass on");
        assert!(r.take().is_empty());
    }

    #[test]
    fn an_open_breaker_makes_isolates_transitions_wait() {
        let mut r = Relay::new();
        r.apply(view(State::Open { until: 9_000 }, 2, 0, 0), 0, true);
        assert!(!r.report(urgent(1), 1), "the owner would not act on it");
        assert!(
            r.report(failure(2, Some(3)), 2),
            "a probe's verdict still goes at once"
        );
    }

    #[test]
    fn watches_while_called() {
        let mut r = Relay::new();
        assert!(!r.wants_watch(0));
        r.view(1_000);
        assert!(r.wants_watch(10_999));
        assert!(!r.wants_watch(11_000));
    }

    #[test]
    fn asks_the_owner_once_for_the_probe() {
        let mut r = Relay::new();
        r.apply(view(State::Open { until: 5_000 }, 2, 0, 0), 0, true);
        let busy = r.lease("a", 1_000);
        assert!(matches!(
            busy,
            LeaseStep::Answer(LeaseAnswer::Busy { until: 5_000, .. })
        ));
        assert_eq!(r.lease("a", 5_000), LeaseStep::Ask);
        match r.lease("b", 5_001) {
            LeaseStep::Answer(LeaseAnswer::Busy { until, view }) => {
                assert_eq!(
                    until, 7_000,
                    "until the question is answered, at most a heartbeat"
                );
                assert_eq!(view.probes, 1, "so isolates wait for the probe");
            }
            other => panic!("{other:?}"),
        }
        let granted = LeaseAnswer::Granted {
            token: 9,
            expires_at: 35_000,
            view: view(
                State::HalfOpen {
                    in_flight: 1,
                    successes: 0,
                },
                2,
                1,
                5_003,
            ),
        };
        r.leased("a", &granted, 5_003);
        assert!(matches!(
            r.lease("b", 5_010),
            LeaseStep::Answer(LeaseAnswer::Busy { until: 35_000, .. })
        ));
        assert_eq!(
            r.lease("a", 5_020),
            LeaseStep::Ask,
            "the holder lost its verdict"
        );
    }

    #[test]
    fn waits_its_stagger_and_for_a_probe_out_elsewhere() {
        let mut r = Relay::new().stagger(0.4);
        r.apply(view(State::Open { until: 5_000 }, 2, 0, 0), 0, true);
        // Alone, it waits its share of one relay's window: under a
        // millisecond, so it asks when the cooldown ends.
        r.watched_by(1);
        assert_eq!(r.lease("a", 5_000), LeaseStep::Ask);
        let mut r = Relay::new().stagger(0.4);
        r.apply(view(State::Open { until: 5_000 }, 2, 0, 0), 0, true);
        // Among 400 relays: its share of the whole window.
        r.watched_by(400);
        assert!(matches!(
            r.lease("a", 5_100),
            LeaseStep::Answer(LeaseAnswer::Busy { until: 5_200, .. })
        ));
        // Another relay's isolate got the probe first: the view says so.
        r.apply(
            view(
                State::HalfOpen {
                    in_flight: 1,
                    successes: 0,
                },
                3,
                1,
                5_150,
            ),
            5_150,
            true,
        );
        assert!(matches!(
            r.lease("a", 5_200),
            LeaseStep::Answer(LeaseAnswer::Busy { until: 7_200, .. })
        ));
        // It came back without a verdict: ask.
        r.apply(
            view(
                State::HalfOpen {
                    in_flight: 0,
                    successes: 0,
                },
                3,
                0,
                5_300,
            ),
            5_300,
            true,
        );
        assert_eq!(r.lease("a", 5_300), LeaseStep::Ask);
    }

    #[test]
    fn a_question_never_answered_is_asked_again_after_a_heartbeat() {
        let mut r = Relay::new();
        r.apply(view(State::Open { until: 0 }, 2, 0, 0), 0, true);
        assert_eq!(r.lease("a", 10), LeaseStep::Ask);
        assert_eq!(r.view(500).map(|v| v.probes), Some(1));
        // The host never told the relay how it went.
        assert_eq!(r.view(2_010).map(|v| v.probes), Some(0));
        assert_eq!(r.lease("b", 2_010), LeaseStep::Ask);
    }

    #[test]
    fn a_new_generation_voids_the_lease() {
        let mut r = Relay::new();
        r.apply(view(State::Open { until: 0 }, 2, 0, 0), 0, true);
        assert_eq!(r.lease("a", 10), LeaseStep::Ask);
        let granted = LeaseAnswer::Granted {
            token: 1,
            expires_at: 30_000,
            view: view(
                State::HalfOpen {
                    in_flight: 1,
                    successes: 0,
                },
                2,
                1,
                12,
            ),
        };
        r.leased("a", &granted, 12);
        r.apply(view(State::Closed, 3, 0, 50), 50, true);
        assert!(matches!(
            r.lease("b", 60),
            LeaseStep::Answer(LeaseAnswer::Closed { .. })
        ));
        assert_eq!(r.view(60).map(|v| v.probes), Some(0));
    }

    #[test]
    fn a_busy_owner_is_remembered() {
        let mut r = Relay::new();
        r.apply(view(State::Open { until: 0 }, 2, 0, 0), 0, true);
        assert_eq!(r.lease("a", 10), LeaseStep::Ask);
        let busy = LeaseAnswer::Busy {
            until: 4_000,
            view: view(
                State::HalfOpen {
                    in_flight: 1,
                    successes: 0,
                },
                2,
                1,
                12,
            ),
        };
        r.leased("a", &busy, 12);
        assert!(matches!(
            r.lease("b", 100),
            LeaseStep::Answer(LeaseAnswer::Busy { until: 4_000, .. })
        ));
        r.lost();
        assert!(
            matches!(
                r.lease("b", 4_000),
                LeaseStep::Answer(LeaseAnswer::Busy { until: 6_000, .. })
            ),
            "the view still shows the probe out"
        );
        r.apply(
            view(
                State::HalfOpen {
                    in_flight: 0,
                    successes: 0,
                },
                2,
                0,
                4_100,
            ),
            4_100,
            true,
        );
        assert_eq!(r.lease("b", 4_100), LeaseStep::Ask);
    }

    #[test]
    fn what_it_gathers_stays_bounded_while_the_owner_is_out_of_reach() {
        let mut r = Relay::new();
        r.apply(view(State::Closed, 1, 0, 0), 0, true);
        let mut lease_verdict = failure(5, Some(7));
        lease_verdict.reports[0].verdict = Verdict::Success;
        assert!(r.report(lease_verdict, 5), "a probe's verdict goes at once");
        // Its call never comes back; a long storm of isolates' batches
        // gathers meanwhile.
        for i in 0..(MAX_GATHERED as u64 * 4) {
            let mut b = failure(10 + i, None);
            b.reports[0].verdict = Verdict::Success;
            let sample = Sample {
                measure: Measure::Latency,
                ms: 100,
                slo_ms: 0,
            };
            b.samples = vec![sample; 2];
            assert!(!r.report(b, 10 + i));
        }
        let taken = r.take();
        assert_eq!(taken.reports.len(), MAX_GATHERED);
        assert_eq!(taken.samples.len(), MAX_GATHERED);
        assert!(taken.reports.iter().any(|x| x.lease == Some(7)), "kept");
        let last = taken.reports.last().map(|x| x.at);
        assert_eq!(last, Some(10 + MAX_GATHERED as u64 * 4 - 1), "the newest");
    }
}
