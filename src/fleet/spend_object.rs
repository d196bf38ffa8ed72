//! A spend object's state and its steps, sans-IO: what a spend cap's
//! Durable Object keeps (the day's booked spending and the holds of the
//! requests in flight) and the three calls that change it.
//!
//! - `POST /hold` ([`HoldCall`]): hold what a request may cost, if what is
//!   booked and held leaves room for it under the budget. Each hold lapses
//!   at its expiry (a request whose isolate died cannot pin the budget for
//!   longer), and at most [`MAX_HOLDS`] are kept: past that, a hold is
//!   refused, so the object's state stays bounded whatever the load.
//! - `POST /settle` ([`SettleCall`]): a request's end: its holds released
//!   and its cost, from the usage reported, booked, in one step (no moment
//!   when neither counts).
//! - A hold that carries a [`SliceAsk`] is a data centre's relay renewing
//!   its **slice** of the budget ([`super::spend_relay`]): its previous
//!   slice released and its isolates' spending booked, then a new slice
//!   held, in one step: at least what its isolates hold in flight, at most
//!   what it asked and its fair share of the room left (the room divided
//!   among the relays holding slices).
//! - `POST /spend` ([`SpendCall`]): booking only. The protocol of isolates
//!   from before holds, kept so that a gradual deployment's old isolates
//!   keep counting; new isolates use it for amounts whose settle failed.
//!
//! Every answer is a [`Standing`], which reads as a [`Tally`] (the old
//! answer) to an old isolate. The state stored is a [`SpendBook`], which
//! reads the old stored `Tally` as a book with no holds.

use serde::{Deserialize, Serialize};

use crate::platform::UnixMillis;
use crate::policy::spend::{utc_day, Tally};

/// Holds an object keeps at most: past this many requests in flight on one
/// cap, a new one is refused (its hold could not be kept).
pub(crate) const MAX_HOLDS: usize = 1000;

/// Relays' slices an object keeps at most (one per data centre serving the
/// cap, besides [`MAX_HOLDS`]).
pub(crate) const MAX_SLICES: usize = 400;

/// The longest hold id kept (ids come from isolates: `isolate-…-<n>`).
const MAX_ID: usize = 64;

/// One request's hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hold {
    /// Names the hold in its settle.
    pub id: String,
    /// Picodollars held.
    pub amount: u64,
    /// When it lapses (the object's clock).
    pub expires_at: UnixMillis,
    /// A relay's slice, not one request's hold.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slice: bool,
}

/// What a spend object persists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendBook {
    /// The UTC day of `spent`.
    pub day: u64,
    /// Picodollars booked on it.
    pub spent: u64,
    /// Holds of requests in flight (none: written as the old tally).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<Hold>,
}

/// What the object answers every call with: the day's booked spending
/// (an old isolate reads this much, as a [`Tally`]) and what is held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Standing {
    /// The UTC day.
    pub day: u64,
    /// Picodollars booked on it.
    pub spent: u64,
    /// Picodollars held by requests in flight.
    #[serde(default)]
    pub held: u64,
}

impl Standing {
    /// The booked part, as a tally.
    pub fn tally(&self) -> Tally {
        Tally {
            day: self.day,
            spent: self.spent,
        }
    }
}

/// `POST /hold`: hold `amount` picodollars for request `id`, if the budget
/// leaves room for it. Unknown fields are ignored, so a later isolate may
/// add some.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldCall {
    /// The cap (its route's name).
    pub route: String,
    /// Names the hold.
    pub id: String,
    /// Picodollars to hold: what the request may cost.
    pub amount: u64,
    /// The cap's daily budget, in picodollars.
    pub budget: u64,
    /// How long the hold lasts unless settled.
    pub ttl_ms: u64,
    /// A relay renewing its slice (absent: one request's hold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<SliceAsk>,
}

/// What a relay's renewal adds to its [`HoldCall`]: `amount` is then the
/// slice it would like.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SliceAsk {
    /// Its previous slices, released in the same step.
    #[serde(default)]
    pub release: Vec<String>,
    /// Picodollars its isolates spent since, booked in the same step.
    #[serde(default)]
    pub add: u64,
    /// What its isolates hold in flight: admitted already, so granted
    /// whatever the room.
    #[serde(default)]
    pub at_least: u64,
}

/// The answer to a [`HoldCall`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldAnswer {
    /// Whether the hold was granted.
    pub granted: bool,
    /// The cap after it.
    #[serde(flatten)]
    pub standing: Standing,
    /// A slice's amount, as granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<u64>,
}

/// `POST /settle`: a request's end: its holds released, its cost booked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettleCall {
    /// The cap (its route's name).
    pub route: String,
    /// The holds to release.
    #[serde(default)]
    pub holds: Vec<String>,
    /// Picodollars to book.
    #[serde(default)]
    pub add: u64,
}

impl SpendBook {
    /// The book as stored (none yet: nothing spent), as of `now`: lapsed
    /// holds dropped, a new UTC day's spending started from nothing.
    pub fn load(stored: Option<SpendBook>, now: UnixMillis) -> SpendBook {
        let mut book = stored.unwrap_or_default();
        book.holds.retain(|h| h.expires_at > now);
        let day = utc_day(now);
        if book.day != day {
            book.day = day;
            book.spent = 0;
        }
        book
    }

    /// What is held.
    pub fn held(&self) -> u64 {
        self.holds
            .iter()
            .fold(0u64, |sum, h| sum.saturating_add(h.amount))
    }

    /// The answer to every call.
    pub fn standing(&self) -> Standing {
        Standing {
            day: self.day,
            spent: self.spent,
            held: self.held(),
        }
    }

    /// Books `add` picodollars (`POST /spend`).
    pub fn add(&mut self, add: u64) {
        self.spent = self.spent.saturating_add(add);
    }

    /// Holds `call.amount` if what is booked and held leaves room for it
    /// under `call.budget`, and fewer than `MAX_HOLDS` are kept. A hold
    /// asked again (the same id) is granted as it stands.
    pub fn hold(&mut self, now: UnixMillis, call: &HoldCall) -> HoldAnswer {
        let id: String = call.id.chars().take(MAX_ID).collect();
        if let Some(ask) = &call.slice {
            return self.renew(now, id, call, ask);
        }
        let granted = if self.holds.iter().any(|h| h.id == id) {
            true
        } else {
            let committed = self.spent.saturating_add(self.held());
            let fits = committed.saturating_add(call.amount) <= call.budget;
            let requests = self.holds.iter().filter(|h| !h.slice).count();
            if fits && requests < MAX_HOLDS {
                self.holds.push(Hold {
                    id,
                    amount: call.amount,
                    expires_at: now.saturating_add(call.ttl_ms),
                    slice: false,
                });
                true
            } else {
                false
            }
        };
        HoldAnswer {
            granted,
            standing: self.standing(),
            slice: None,
        }
    }

    /// A relay's renewal: `ask.release` released and `ask.add` booked, then
    /// a slice held of at least `ask.at_least` and at most `call.amount`
    /// and the room left divided among the relays holding slices; refused,
    /// with nothing changed, past [`MAX_SLICES`] other slices. Asked
    /// again (the same id: its answer was lost), it is answered as it
    /// stands, and nothing is booked twice.
    fn renew(
        &mut self,
        now: UnixMillis,
        id: String,
        call: &HoldCall,
        ask: &SliceAsk,
    ) -> HoldAnswer {
        if let Some(h) = self.holds.iter().find(|h| h.id == id) {
            let amount = h.amount;
            return HoldAnswer {
                granted: true,
                standing: self.standing(),
                slice: Some(amount),
            };
        }
        let others = |h: &Hold| h.slice && !ask.release.contains(&h.id);
        let slices = self.holds.iter().filter(|h| others(h)).count();
        if slices >= MAX_SLICES {
            // Refused before anything changed: the relay keeps its slice
            // until it lapses, and books its spending with the next try.
            return HoldAnswer {
                granted: false,
                standing: self.standing(),
                slice: Some(0),
            };
        }
        self.holds.retain(|h| !ask.release.contains(&h.id));
        self.add(ask.add);
        let room = call
            .budget
            .saturating_sub(self.spent.saturating_add(self.held()));
        let share = room / (slices as u64 + 1);
        let amount = call.amount.min(share).max(ask.at_least);
        self.holds.push(Hold {
            id,
            amount,
            expires_at: now.saturating_add(call.ttl_ms),
            slice: true,
        });
        HoldAnswer {
            granted: true,
            standing: self.standing(),
            slice: Some(amount),
        }
    }

    /// Releases `call.holds` and books `call.add`.
    pub fn settle(&mut self, call: &SettleCall) {
        self.holds.retain(|h| !call.holds.contains(&h.id));
        self.add(call.add);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Noon, 2026-12-01 UTC.
    const NOON: UnixMillis = 1_796_126_400_000;

    fn call(id: &str, amount: u64) -> HoldCall {
        HoldCall {
            route: "r".into(),
            id: id.into(),
            amount,
            budget: 100,
            ttl_ms: 1000,
            slice: None,
        }
    }

    #[test]
    fn holds_fit_under_the_budget_with_what_is_booked() {
        let mut book = SpendBook::load(None, NOON);
        book.add(30);
        assert!(book.hold(NOON, &call("a", 50)).granted);
        let refused = book.hold(NOON, &call("b", 21));
        assert!(!refused.granted);
        assert_eq!(
            refused.standing,
            Standing {
                day: 20_788,
                spent: 30,
                held: 50
            }
        );
        assert!(book.hold(NOON, &call("b", 20)).granted, "exactly full");
        assert!(book.hold(NOON, &call("a", 50)).granted, "asked again");
        assert_eq!(book.holds.len(), 2);
        // The end of "a": 60 booked for its 50 held.
        book.settle(&SettleCall {
            route: "r".into(),
            holds: vec!["a".into()],
            add: 60,
        });
        assert_eq!(book.standing().spent, 90);
        assert_eq!(book.standing().held, 20);
        assert!(!book.hold(NOON, &call("c", 1)).granted);
    }

    #[test]
    fn holds_lapse_and_are_bounded_in_count() {
        let mut book = SpendBook::load(None, NOON);
        assert!(book.hold(NOON, &call("a", 100)).granted);
        assert!(!book.hold(NOON + 999, &call("b", 1)).granted);
        let mut book = SpendBook::load(Some(book), NOON + 1000);
        assert!(book.holds.is_empty(), "lapsed: a dead isolate's hold");
        let mut free = call("x", 0);
        for i in 0..MAX_HOLDS {
            free.id = format!("h{i}");
            assert!(book.hold(NOON, &free).granted);
        }
        free.id = "one more".into();
        assert!(!book.hold(NOON, &free).granted, "bounded");
        assert_eq!(book.holds.len(), MAX_HOLDS);
        let long = call(&"x".repeat(500), 0);
        book.holds.clear();
        book.hold(NOON, &long);
        assert_eq!(book.holds[0].id.len(), MAX_ID);
    }

    #[test]
    fn old_state_and_old_answers_read_across_versions() {
        // A tally stored before holds reads as a book without any.
        let old: SpendBook = serde_json::from_str(r#"{"day":20788,"spent":5}"#).unwrap();
        let book = SpendBook::load(Some(old), NOON);
        assert_eq!(book.spent, 5);
        assert_eq!(
            serde_json::to_string(&book).unwrap(),
            r#"{"day":20788,"spent":5}"#,
            "without holds, the bytes it always was"
        );
        // A new day starts from nothing; holds stay until they lapse.
        let mut book = book;
        let day_long = HoldCall {
            ttl_ms: 86_400_000,
            ..call("a", 10)
        };
        book.hold(NOON, &day_long);
        let next = SpendBook::load(Some(book), NOON + 12 * 3600 * 1000 - 1);
        assert_eq!((next.spent, next.held()), (5, 10));
        // An old isolate reads every answer as its tally.
        let answer = serde_json::to_string(&HoldAnswer {
            granted: true,
            standing: next.standing(),
            slice: None,
        })
        .unwrap();
        assert_eq!(
            answer,
            r#"{"granted":true,"day":20788,"spent":5,"held":10}"#
        );
        let tally: Tally = serde_json::from_str(&answer).unwrap();
        assert_eq!(
            tally,
            Tally {
                day: 20788,
                spent: 5
            }
        );
        let standing: Standing = serde_json::from_str(r#"{"day":1,"spent":2}"#).unwrap();
        assert_eq!(standing.held, 0, "an old object's answer");
    }
}
