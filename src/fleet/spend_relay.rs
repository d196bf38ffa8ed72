//! A spend cap's relay in one data centre, sans-IO: the rule of
//! [`Relay`](super::Relay) for spend caps, so that a cap's object hears from
//! each data centre once a heartbeat, not from each capped request twice.
//!
//! A hold must be answered before its request runs, so it cannot wait for a
//! heartbeat. Instead the relay holds a **slice** of the budget at the cap's
//! object (a hold of its own, with a [`SliceAsk`]) and grants its isolates'
//! holds from it here. Their settles and bookings are counted here too. Once
//! a heartbeat the relay renews the slice in one call: the old slice
//! released, what its isolates spent booked, a new slice held, sized to
//! what they held in flight and twice what they asked for in the last
//! heartbeat, and at most the object's fair share of the room left. A hold
//! the slice cannot take, or made while the relay has none, goes to the
//! object as it would without a relay ([`HoldStep::Ask`]).
//!
//! Every picodollar granted here is inside a slice the object granted under
//! the budget, so the relay adds no overshoot; what it costs is budget idle
//! in one data centre's slice while another asks, returned within a
//! heartbeat. A slice lapses at the object [`SLICE_TTL`] after its renewal,
//! and the relay grants from it only until then: when the object cannot be
//! reached the isolates' holds go to it, fail, and each isolate counts on
//! its own, as without a relay.

use std::time::Duration;

use super::spend_object::{HoldAnswer, HoldCall, SettleCall, SliceAsk, Standing, MAX_HOLDS};
use super::{SpendCall, HEARTBEAT, IDLE};
use crate::platform::{millis, UnixMillis};

/// How long a slice lasts at the object unless renewed: a relay that dies
/// pins its slice no longer.
pub const SLICE_TTL: Duration = Duration::from_secs(10);

/// How soon after a renewal the relay renews again when its slice ran
/// short (a hold had to be asked of the object): demand that grew is met
/// within this, and the object hears from a relay at most four times a
/// second.
pub(crate) const EARLY: Duration = Duration::from_millis(250);

/// What the relay does with an isolate's hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldStep {
    /// Answered here: granted from the slice, or refused because the
    /// object's standing, fresh within [`EARLY`], leaves no room for it.
    Answer(HoldAnswer),
    /// Ask the object, as the isolate would, and tell the relay its
    /// standing ([`SpendRelay::saw`]).
    Ask,
}

/// One isolate's hold granted from the slice.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    id: String,
    amount: u64,
    expires_at: UnixMillis,
}

/// The slice the object granted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slice {
    id: String,
    amount: u64,
    /// When it lapses at the object (by this relay's clock, from when the
    /// renewal was sent).
    until: UnixMillis,
}

/// One cap's relay in one data centre: what its object keeps in memory.
#[derive(Debug, Clone)]
pub struct SpendRelay {
    /// Names the slices (`<name>-<n>`).
    name: String,
    next: u64,
    /// The cap (set by the first call).
    route: Option<String>,
    /// The cap's budget, as the isolates last said.
    budget: u64,
    /// The object's newest answer, and when it came.
    standing: Option<Standing>,
    seen_at: UnixMillis,
    slice: Option<Slice>,
    /// Isolates' holds granted from the slice.
    holds: Vec<Held>,
    /// Picodollars booked here and not sent yet.
    booked: u64,
    /// The renewal in flight, or the one whose answer was lost (sent
    /// again as it was, so nothing is booked twice).
    renewal: Option<HoldCall>,
    in_flight: bool,
    /// When the last renewal went.
    renewed_at: Option<UnixMillis>,
    /// Picodollars the isolates asked to hold since `asked_since`.
    asked: u64,
    asked_since: Option<UnixMillis>,
    /// A hold was asked of the object since the last renewal because the
    /// slice could not take it.
    short: bool,
    /// When an isolate last called.
    last_call: Option<UnixMillis>,
}

impl SpendRelay {
    /// A relay whose slices are named after `name` (unique to this relay
    /// instance: the object tells slices apart by it).
    pub fn new(name: impl Into<String>) -> Self {
        SpendRelay {
            name: name.into(),
            next: 1,
            route: None,
            budget: 0,
            standing: None,
            seen_at: 0,
            slice: None,
            holds: Vec::new(),
            booked: 0,
            renewal: None,
            in_flight: false,
            renewed_at: None,
            asked: 0,
            asked_since: None,
            short: false,
            last_call: None,
        }
    }

    fn touch(&mut self, route: &str, now: UnixMillis) {
        self.last_call = Some(self.last_call.map_or(now, |t| t.max(now)));
        if self.route.is_none() {
            self.route = Some(route.to_owned());
        }
    }

    /// The cap as the isolates should see it: the object's standing and
    /// what was booked here since.
    fn view(&self) -> Option<Standing> {
        let mut s = self.standing?;
        s.spent = s
            .spent
            .saturating_add(self.booked)
            .saturating_add(self.sending());
        Some(s)
    }

    fn sending(&self) -> u64 {
        self.renewal
            .as_ref()
            .and_then(|c| c.slice.as_ref())
            .map_or(0, |a| a.add)
    }

    /// Picodollars of the slice not granted.
    fn free(&self, now: UnixMillis) -> u64 {
        match &self.slice {
            Some(s) if now < s.until => s.amount.saturating_sub(self.in_holds()),
            _ => 0,
        }
    }

    fn in_holds(&self) -> u64 {
        self.holds
            .iter()
            .fold(0u64, |sum, h| sum.saturating_add(h.amount))
    }

    /// An isolate's hold.
    pub fn hold(&mut self, now: UnixMillis, call: &HoldCall) -> HoldStep {
        self.touch(&call.route, now);
        self.holds.retain(|h| h.expires_at > now);
        self.budget = call.budget;
        let answer = |relay: &Self, granted: bool| {
            HoldStep::Answer(HoldAnswer {
                granted,
                standing: relay.view().unwrap_or_default(),
                slice: None,
            })
        };
        if self.holds.iter().any(|h| h.id == call.id) {
            return answer(self, true);
        }
        self.asked = self.asked.saturating_add(call.amount);
        self.asked_since.get_or_insert(now);
        if self.standing.is_none() || call.slice.is_some() || self.holds.len() >= MAX_HOLDS {
            return HoldStep::Ask;
        }
        if self.free(now) < call.amount {
            if self.no_room(now, call.amount) {
                return answer(self, false);
            }
            self.short = true;
            return HoldStep::Ask;
        }
        self.holds.push(Held {
            id: call.id.clone(),
            amount: call.amount,
            expires_at: now.saturating_add(call.ttl_ms),
        });
        answer(self, true)
    }

    /// Whether the object's standing, fresh within [`EARLY`], leaves no room
    /// for `amount` outside this relay's slice: the object would refuse it.
    fn no_room(&self, now: UnixMillis, amount: u64) -> bool {
        let (Some(view), true) = (
            self.view(),
            now < self.seen_at.saturating_add(millis(EARLY)),
        ) else {
            return false;
        };
        let committed = view.spent.saturating_add(view.held);
        committed.saturating_add(amount) > self.budget
    }

    /// An isolate's settle: its holds granted here released and its cost
    /// booked here, answered with the relay's view; `Err` with the call to
    /// pass on to the object when none of its holds were granted here (or
    /// before the object first answered).
    pub fn settle(&mut self, now: UnixMillis, call: SettleCall) -> Result<Standing, SettleCall> {
        self.touch(&call.route, now);
        let before = self.holds.len();
        self.holds.retain(|h| !call.holds.contains(&h.id));
        match self.view() {
            Some(_) if self.holds.len() < before => {
                self.booked = self.booked.saturating_add(call.add);
                Ok(self.view().unwrap_or_default())
            }
            _ => Err(call),
        }
    }

    /// An isolate's booking (or a question, with nothing to add): booked
    /// here, answered with the relay's view; `Err` with the call to pass on
    /// before the object first answered.
    pub fn spend(&mut self, now: UnixMillis, call: SpendCall) -> Result<Standing, SpendCall> {
        self.touch(&call.route, now);
        if self.view().is_none() {
            return Err(call);
        }
        self.booked = self.booked.saturating_add(call.add);
        Ok(self.view().unwrap_or_default())
    }

    /// The object's standing at `now`, from an answer passed on.
    pub fn saw(&mut self, now: UnixMillis, standing: Standing) {
        self.seen_at = self.seen_at.max(now);
        self.standing = Some(match self.standing {
            Some(s) if (s.day, s.spent) > (standing.day, standing.spent) => s,
            _ => standing,
        });
    }

    /// The renewal to send now, if one is due: the first as soon as an
    /// isolate asked for a hold, then one a heartbeat while isolates call
    /// or anything is held or booked here, and one after [`EARLY`] when the
    /// slice ran short. The slice asked for is what is held in flight and
    /// twice what the isolates would ask in a heartbeat at the rate they
    /// asked since the last renewal. The host sends it and tells the relay
    /// with [`SpendRelay::renewed`].
    pub fn renewal(&mut self, now: UnixMillis) -> Option<HoldCall> {
        if self.in_flight {
            return None;
        }
        let route = self.route.clone()?;
        let after = |wait: Duration| {
            self.renewed_at
                .is_none_or(|at| now >= at.saturating_add(millis(wait)))
        };
        let due = after(HEARTBEAT) || (self.short && after(EARLY));
        if !due {
            return None;
        }
        self.holds.retain(|h| h.expires_at > now);
        if let Some(lost) = &self.renewal {
            // Its answer was lost: asked again as it was.
            let call = lost.clone();
            self.in_flight = true;
            self.renewed_at = Some(now);
            return Some(call);
        }
        let active = self
            .last_call
            .is_some_and(|t| now < t.saturating_add(millis(IDLE)));
        let held = self.in_holds();
        if self.slice.is_none() && held == 0 && self.booked == 0 && (!active || self.asked == 0) {
            return None;
        }
        let want = if active {
            let since = self.asked_since.unwrap_or(now);
            let window = now.saturating_sub(since).max(millis(EARLY));
            let per_beat =
                u128::from(self.asked) * u128::from(millis(HEARTBEAT)) / u128::from(window);
            held.saturating_add(u64::try_from(per_beat.saturating_mul(2)).unwrap_or(u64::MAX))
        } else {
            held
        };
        let id = format!("{}-{}", self.name, self.next);
        self.next = self.next.wrapping_add(1);
        let call = HoldCall {
            route,
            id,
            amount: want,
            budget: self.budget,
            ttl_ms: millis(SLICE_TTL),
            slice: Some(SliceAsk {
                release: self.slice.iter().map(|s| s.id.clone()).collect(),
                add: std::mem::take(&mut self.booked),
                at_least: held,
            }),
        };
        self.asked = 0;
        self.asked_since = Some(now);
        self.short = false;
        self.in_flight = true;
        self.renewed_at = Some(now);
        self.renewal = Some(call.clone());
        Some(call)
    }

    /// The answer to the renewal sent, `None` when it was lost (it goes
    /// again as it was at the next heartbeat).
    pub fn renewed(&mut self, now: UnixMillis, answer: Option<HoldAnswer>) {
        self.in_flight = false;
        let Some(answer) = answer else {
            return;
        };
        let Some(call) = self.renewal.take() else {
            return;
        };
        self.saw(now, answer.standing);
        let amount = answer.slice.unwrap_or(0);
        let sent = self.renewed_at.unwrap_or_default();
        self.slice = (answer.granted && amount > 0).then(|| Slice {
            id: call.id,
            amount,
            until: sent.saturating_add(millis(SLICE_TTL)),
        });
    }

    /// Whether the relay has nothing left to do: no isolate called for
    /// [`IDLE`], and nothing held, booked or sliced here.
    pub fn is_idle(&self, now: UnixMillis) -> bool {
        let quiet = self
            .last_call
            .is_none_or(|t| now >= t.saturating_add(millis(IDLE)));
        quiet
            && self.slice.is_none()
            && self.holds.iter().all(|h| h.expires_at <= now)
            && self.booked == 0
            && self.renewal.is_none()
    }
}

#[cfg(test)]
mod tests;
