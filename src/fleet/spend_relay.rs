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
//! heartbeat. The relay grants from a slice for [`SLICE_TTL`] after its
//! renewal, and nothing while a renewal is out or its answer was lost (the
//! object may have released the slice). Then, or when the object cannot be
//! reached, the isolates' holds go to the object, or fail, and each isolate
//! counts on its own, as without a relay.
//!
//! A slice covers what was granted from it until the renewal that books
//! it, however long the relay and its object are cut off from each other:
//! it lasts at the object until the end of the UTC day it was asked on
//! (and as long again as the isolates' holds last), not merely as long as
//! the holds granted from it. Settled there, their cost reaches the object
//! only with the relay's next renewal; a slice that lapsed sooner would let
//! the object grant that budget again meanwhile. What this costs is the
//! slice pinned while its relay is out of reach; the relay's host wakes it
//! with an alarm while it keeps anything ([`SpendRelay::is_idle`]), so an
//! evicted or restarted relay releases it. A renewal that asks for nothing
//! (its isolates stopped asking) lasts as briefly as before: it covers
//! nothing.
//!
//! A relay restarted from what it kept ([`SpendRelay::restore`]) does not
//! know the holds its earlier instance granted, which are still in flight:
//! it grants nothing from that instance's slices, and **retires** them
//! ([`Retired`]), released only once those holds have lapsed.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::spend_object::{HoldAnswer, HoldCall, SettleCall, SliceAsk, Standing, MAX_HOLDS};
use super::{SpendCall, HEARTBEAT, IDLE};
use crate::platform::{millis, UnixMillis};
use crate::policy::spend::{day_end, utc_day};

/// How long a relay grants holds from a slice after its renewal; the slice
/// lasts at the object until the end of its day and as long again as the
/// isolates' holds last.
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
    /// Wait for the renewal in flight (or the first, due now) to be
    /// answered, then ask again with [`SpendRelay::hold_again`]: the
    /// object would refuse what this relay's own slice holds.
    Wait,
}

/// Retired slices a relay keeps at most: one restart retires two (its
/// slice and the one its lost renewal asked for), each released within the
/// isolates' hold time, so only restarts faster than that reach it; past
/// it, the oldest is forgotten (left pinned at the object until it lapses
/// there, at the end of its day: budget idle, never granted twice).
const MAX_RETIRED: usize = 16;

/// A slice of an earlier instance of this relay: nothing is granted from
/// it, and it is released at the object with the first renewal from
/// `until`, when the holds that instance granted from it have lapsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retired {
    /// The slice.
    pub id: String,
    /// When the holds granted from it have lapsed (the relay's clock).
    pub until: UnixMillis,
}

/// What a relay keeps in storage, so that a restart loses nothing booked:
/// its isolates' spending not yet at the object, the renewal it has had no
/// answer to (sent again as it was: the object books it once), and the
/// slices its renewals release. Holds in flight are not kept: their
/// settles go to the object, which books them, and the slices they were
/// granted from stay until they lapse ([`Retired`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    /// The cap.
    pub route: Option<String>,
    /// The cap's budget, as the isolates last said.
    pub budget: u64,
    /// How long the isolates' holds last.
    pub hold_ttl: u64,
    /// Picodollars booked and not sent.
    pub booked: u64,
    /// The renewal not answered.
    pub renewal: Option<HoldCall>,
    /// The slice held.
    pub slice: Option<String>,
    /// Slices of earlier instances, not released yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<Retired>,
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
    /// What is charged to it: every hold granted from it, settled or not
    /// (a settled hold's cost is booked at the object only with the next
    /// renewal, which releases this slice).
    used: u64,
    /// Until when holds are granted from it (by this relay's clock, from
    /// when its renewal was first sent).
    until: UnixMillis,
    /// The longest hold it may cover: it outlasts at the object one
    /// granted at `until` by that long.
    covers: u64,
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
    /// How long the isolates' holds last, the longest they said.
    hold_ttl: u64,
    /// The object's newest answer, and when it came.
    standing: Option<Standing>,
    seen_at: UnixMillis,
    slice: Option<Slice>,
    /// Slices of earlier instances, released once their holds lapsed.
    retired: Vec<Retired>,
    /// Isolates' holds granted from the slice.
    holds: Vec<Held>,
    /// Picodollars booked here and not sent yet.
    booked: u64,
    /// What the holds granted here and settled since the last renewal was
    /// sent had held: still inside the slice that renewal gets.
    settled: u64,
    /// The renewal in flight, or the one whose answer was lost (sent
    /// again as it was, so nothing is booked twice), and when it was
    /// first sent (its slice lapses at the object no sooner than its TTL
    /// after that).
    renewal: Option<(HoldCall, UnixMillis)>,
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
            hold_ttl: 0,
            standing: None,
            seen_at: 0,
            slice: None,
            retired: Vec::new(),
            holds: Vec::new(),
            booked: 0,
            settled: 0,
            renewal: None,
            in_flight: false,
            renewed_at: None,
            asked: 0,
            asked_since: None,
            short: false,
            last_call: None,
        }
    }

    /// Starts again at `now` from what an earlier instance of this relay
    /// kept, under this one's name: its renewal goes again as it was,
    /// first; its slice, and the one that renewal asks for, are retired
    /// (nothing is granted from them: the holds in flight are not known)
    /// and released once those holds have lapsed.
    pub fn restore(&mut self, kept: Kept, now: UnixMillis) {
        let mut relay = SpendRelay::new(std::mem::take(&mut self.name));
        relay.route = kept.route;
        relay.budget = kept.budget;
        relay.hold_ttl = kept.hold_ttl;
        relay.booked = kept.booked;
        relay.retired = kept.retired;
        let until = now.saturating_add(kept.hold_ttl);
        let asked = kept.renewal.as_ref().map(|call| call.id.clone());
        for id in kept.slice.into_iter().chain(asked) {
            relay.retire(id, until);
        }
        // Sent long ago, as far as its slice's time goes.
        relay.renewal = kept.renewal.map(|call| (call, 0));
        *self = relay;
    }

    fn retire(&mut self, id: String, until: UnixMillis) {
        match self.retired.iter_mut().find(|r| r.id == id) {
            Some(r) => r.until = r.until.max(until),
            None => self.retired.push(Retired { id, until }),
        }
        if self.retired.len() > MAX_RETIRED {
            self.retired.remove(0);
        }
    }

    /// What to keep in storage now ([`SpendRelay::restore`]).
    pub fn kept(&self) -> Kept {
        Kept {
            route: self.route.clone(),
            budget: self.budget,
            hold_ttl: self.hold_ttl,
            booked: self.booked,
            renewal: self.renewal.as_ref().map(|(call, _)| call.clone()),
            slice: self.slice.as_ref().map(|s| s.id.clone()),
            retired: self.retired.clone(),
        }
    }

    /// Whether this relay serves `route`'s cap: the one its first call
    /// named.
    pub fn serves(&self, route: &str) -> bool {
        self.route.as_deref().is_none_or(|r| r == route)
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
            .and_then(|(c, _)| c.slice.as_ref())
            .map_or(0, |a| a.add)
    }

    /// Picodollars of the slice not granted. Nothing while a renewal is
    /// out: the object may have released the slice already, and the one
    /// the renewal gets covers only the holds in flight when it was sent.
    fn free(&self, now: UnixMillis) -> u64 {
        match &self.slice {
            Some(s) if now < s.until && self.renewal.is_none() => s.amount.saturating_sub(s.used),
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
        self.step(now, call, true)
    }

    /// The hold that was told to [`HoldStep::Wait`], once the renewal was
    /// answered or the host stopped waiting: answered or asked of the
    /// object, never told to wait twice.
    pub fn hold_again(&mut self, now: UnixMillis, call: &HoldCall) -> HoldStep {
        self.step(now, call, false)
    }

    fn step(&mut self, now: UnixMillis, call: &HoldCall, first: bool) -> HoldStep {
        self.touch(&call.route, now);
        self.holds.retain(|h| h.expires_at > now);
        self.budget = call.budget;
        self.hold_ttl = self.hold_ttl.max(call.ttl_ms);
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
        if first {
            self.asked = self.asked.saturating_add(call.amount);
            self.asked_since.get_or_insert(now);
        }
        if call.slice.is_some() || self.holds.len() >= MAX_HOLDS {
            return HoldStep::Ask;
        }
        let covered = self.slice.as_ref().is_some_and(|s| call.ttl_ms <= s.covers);
        if !covered || self.free(now) < call.amount {
            // A hold longer than the slice covers: the next renewal covers
            // it, soon.
            let longer = !covered && self.slice.is_some();
            self.short = true;
            if first && (self.in_flight || self.renewed_at.is_none() || longer) {
                return HoldStep::Wait;
            }
            if self.standing.is_none() {
                return HoldStep::Ask;
            }
            // Refused here only when the object would refuse it too: the
            // slice's own free part is not what it lacks.
            if !longer && self.no_room(now, call.amount) {
                return answer(self, false);
            }
            return HoldStep::Ask;
        }
        if let Some(slice) = &mut self.slice {
            slice.used = slice.used.saturating_add(call.amount);
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
    /// booked here, answered with the relay's view, and the rest of its
    /// holds (granted by the object) to release there, with nothing to
    /// book; `Err` with the call to pass on whole when none of its holds
    /// were granted here.
    pub fn settle(
        &mut self,
        now: UnixMillis,
        call: SettleCall,
    ) -> Result<(Standing, Option<SettleCall>), SettleCall> {
        self.touch(&call.route, now);
        let ours = |id: &String| self.holds.iter().any(|h| h.id == *id);
        let (here, there): (Vec<String>, Vec<String>) = call.holds.iter().cloned().partition(ours);
        let Some(view) = self.view().filter(|_| !here.is_empty()) else {
            return Err(call);
        };
        let mut released = 0u64;
        self.holds.retain(|h| {
            let ends = here.contains(&h.id);
            if ends {
                released = released.saturating_add(h.amount);
            }
            !ends
        });
        self.settled = self.settled.saturating_add(released);
        self.booked = self.booked.saturating_add(call.add);
        let view = Standing {
            spent: view.spent.saturating_add(call.add),
            ..view
        };
        let rest = (!there.is_empty()).then_some(SettleCall {
            route: call.route,
            holds: there,
            add: 0,
        });
        Ok((view, rest))
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
    /// or anything is held, booked or retired here, and one after [`EARLY`]
    /// when the slice ran short. The slice asked for is what is held in
    /// flight and twice what the isolates would ask in a heartbeat at the
    /// rate they asked since the last renewal. The host sends it and tells
    /// the relay with [`SpendRelay::renewed`].
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
        if let Some((lost, _)) = &self.renewal {
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
        let lapsed = |r: &Retired| r.until <= now;
        let release: Vec<String> = self
            .slice
            .iter()
            .map(|s| s.id.clone())
            .chain(
                self.retired
                    .iter()
                    .filter(|r| lapsed(r))
                    .map(|r| r.id.clone()),
            )
            .collect();
        let asks = active && self.asked > 0;
        if release.is_empty() && held == 0 && self.booked == 0 && !asks {
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
        // Holds are granted from the slice for `SLICE_TTL`, and it lasts at
        // the object as long again as a hold granted at the last moment
        // (the isolates' holds last to their request's deadline: rounded
        // up, so that one asked a moment later is covered too), so that a
        // relay that dies leaves its requests in flight covered; and, when
        // it covers anything, until the end of the day besides, so that
        // what was granted from it stays covered until a renewal books it,
        // however late that comes. A slice of nothing covers nothing: it
        // marks the renewal done (asked again, it is answered as it
        // stands) and lapses soon.
        let step = millis(SLICE_TTL);
        let mut ttl = self
            .hold_ttl
            .div_ceil(step)
            .saturating_add(2)
            .saturating_mul(step);
        if want > 0 {
            ttl = ttl.saturating_add(day_end(utc_day(now)).saturating_sub(now));
        }
        let id = format!("{}-{}", self.name, self.next);
        self.next = self.next.wrapping_add(1);
        let call = HoldCall {
            route,
            id,
            amount: want,
            budget: self.budget,
            ttl_ms: ttl,
            slice: Some(SliceAsk {
                release,
                add: std::mem::take(&mut self.booked),
                at_least: held,
            }),
        };
        self.asked = 0;
        self.asked_since = Some(now);
        self.short = false;
        self.settled = 0;
        self.in_flight = true;
        self.renewed_at = Some(now);
        self.renewal = Some((call.clone(), now));
        Some(call)
    }

    /// The answer to the renewal sent, `None` when it was lost (it goes
    /// again as it was at the next heartbeat; until it is answered the
    /// relay grants nothing, not knowing which slice the object holds).
    pub fn renewed(&mut self, now: UnixMillis, answer: Option<HoldAnswer>) {
        self.in_flight = false;
        let Some(answer) = answer else {
            self.slice = None;
            return;
        };
        let Some((call, sent)) = self.renewal.take() else {
            return;
        };
        self.saw(now, answer.standing);
        let ask = call.slice.unwrap_or_default();
        if !answer.granted {
            // Refused with nothing changed: the old slice stands until it
            // lapses, and what was booked goes with the next renewal.
            self.booked = self.booked.saturating_add(ask.add);
            return;
        }
        self.retired.retain(|r| !ask.release.contains(&r.id));
        if self.retired.iter().any(|r| r.id == call.id) {
            // An earlier instance's renewal, sent again: booked, and its
            // slice retired.
            return;
        }
        let amount = answer.slice.unwrap_or(0);
        // The holds in flight when it was sent, settled since or not, are
        // what its `at_least` covered. A slice of nothing asked for is not
        // kept (it lapses soon); one asked for and granted empty is, to be
        // released by the next renewal.
        let used = self.in_holds().saturating_add(self.settled);
        self.slice = (call.amount > 0).then(|| Slice {
            id: call.id,
            amount,
            used,
            until: sent.saturating_add(millis(SLICE_TTL)),
            covers: call.ttl_ms.saturating_sub(millis(SLICE_TTL)),
        });
    }

    /// Whether the relay has nothing left to do: no isolate called for
    /// [`IDLE`], and nothing held, booked, sliced or retired here. Until
    /// it is, its host keeps renewing, and wakes it to (an alarm) after an
    /// eviction or a restart.
    pub fn is_idle(&self, now: UnixMillis) -> bool {
        let quiet = self
            .last_call
            .is_none_or(|t| now >= t.saturating_add(millis(IDLE)));
        quiet
            && self.slice.is_none()
            && self.holds.iter().all(|h| h.expires_at <= now)
            && self.booked == 0
            && self.renewal.is_none()
            && self.retired.is_empty()
    }
}

#[cfg(test)]
mod tests;
