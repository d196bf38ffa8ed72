//! Load shed by priority, per route, in this process (an isolate of the
//! Worker): each configured route's [`Shed`] judges what becomes of the
//! requests it admits and refuses the lowest classes first while its
//! providers cannot carry its load ([`crate::policy::shed`]). A call's
//! class is [`CallOptions::priority`](crate::CallOptions::priority).
//!
//! Only configured routes shed (a model named directly has no route to
//! judge), so the state is one [`Shed`] per route of the configuration,
//! whatever callers send.

use std::cell::RefCell;
use std::time::Duration;

use serde::Serialize;

use crate::error::Error;
use crate::platform::UnixMillis;
use crate::policy::fair::Share;
use crate::policy::shed::{Priority, Shed};

/// Every configured route's shedding, by name.
#[derive(Debug, Default)]
pub(crate) struct Shedding(Vec<(String, RefCell<Shed>)>);

impl Shedding {
    /// Shedding for `routes` (none: off).
    pub(crate) fn new<'a>(routes: impl Iterator<Item = &'a str>) -> Shedding {
        let mut all: Vec<(String, RefCell<Shed>)> =
            routes.map(|r| (r.to_owned(), RefCell::default())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.dedup_by(|a, b| a.0 == b.0);
        Shedding(all)
    }

    fn slot(&self, name: &str) -> Option<usize> {
        self.0.binary_search_by(|(r, _)| r.as_str().cmp(name)).ok()
    }

    /// Admits a call of `priority` (of the caller `share` names, if any)
    /// to the route named `route` at `now`:
    /// the slot its end is counted at (none for a name that is no
    /// configured route), or the refusal, whose `retry-after` `random`
    /// spreads over one to five seconds so that the refused do not all
    /// come back at once.
    pub(crate) fn admit(
        &self,
        route: Option<&str>,
        priority: Priority,
        share: Option<Share>,
        now: UnixMillis,
        random: impl FnOnce() -> f64,
    ) -> Result<Option<usize>, Error> {
        let Some(slot) = route.and_then(|r| self.slot(r)) else {
            return Ok(None);
        };
        if self.0[slot].1.borrow_mut().admits(now, priority, share) {
            return Ok(Some(slot));
        }
        let ms = 1000 + (random().clamp(0.0, 1.0) * 4000.0) as u64;
        Err(Error::Shed {
            route: self.0[slot].0.clone(),
            priority: priority.name(),
            retry_after: Duration::from_millis(ms),
        })
    }

    /// Counts the end of a call admitted at `slot`: `failed` when every
    /// entry of its route failed it.
    pub(crate) fn end(&self, slot: Option<usize>, now: UnixMillis, failed: bool) {
        if let Some((_, s)) = slot.and_then(|slot| self.0.get(slot)) {
            s.borrow_mut().ended(now, failed);
        }
    }

    /// Every route's row, as of `now`.
    pub(crate) fn rows(&self, now: UnixMillis) -> Vec<RouteShed> {
        self.0
            .iter()
            .map(|(route, s)| {
                let mut s = s.borrow_mut();
                let allowed = |s: &mut Shed, p| s.allowed(now, p);
                // Rolled to now before its depth is read.
                let sheddable = allowed(&mut s, Priority::Sheddable);
                RouteShed {
                    route: route.clone(),
                    depth: f64::from(s.depth()) / 100.0,
                    admitted: ByClass {
                        standard: allowed(&mut s, Priority::Standard),
                        sheddable,
                    },
                    shed: ShedCounts {
                        standard: s.shed(Priority::Standard),
                        sheddable: s.shed(Priority::Sheddable),
                    },
                }
            })
            .collect()
    }
}

/// One route's shedding, as `/health` and `/metrics` show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteShed {
    /// The route.
    pub route: String,
    /// From 0 (nothing shed) to 2 (every `sheddable` and `standard`
    /// request): the classes shed so far.
    pub depth: f64,
    /// The share of each class's requests admitted now.
    pub admitted: ByClass,
    /// Requests shed since the process started, by class.
    pub shed: ShedCounts,
}

/// The share of each class's requests a route admits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ByClass {
    /// Of `standard` requests.
    pub standard: f64,
    /// Of `sheddable` requests.
    pub sheddable: f64,
}

/// Requests a route shed, by class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShedCounts {
    /// `standard` ones.
    pub standard: u64,
    /// `sheddable` ones.
    pub sheddable: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_configured_routes_have_a_slot() {
        let s = Shedding::new(["b", "a", "b"].into_iter());
        assert_eq!(
            (s.slot("a"), s.slot("b"), s.slot("c")),
            (Some(0), Some(1), None)
        );
        assert_eq!(s.rows(0).len(), 2);
        let p = Priority::Sheddable;
        assert_eq!(s.admit(Some("c"), p, None, 1, || 0.5), Ok(None));
        assert_eq!(s.admit(None, p, None, 1, || 0.5), Ok(None));
        assert_eq!(s.admit(Some("b"), p, None, 1, || 0.5), Ok(Some(1)));
    }
}
