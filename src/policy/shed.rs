//! Load shed by priority when a route's capacity falls below its demand,
//! sans-IO.
//!
//! A route's capacity is judged by what becomes of the requests it admits:
//! a request every entry of the route failed (rate limits, overload,
//! outages, open breakers, a spent cap, deadlines) is demand the route
//! could not carry. Once a [`TICK`], the share of such failures among the
//! requests that ended in it moves the route's shed depth: up by
//! [`RAISE`] while it is over [`HIGH`], down by [`LOWER`] while it is under
//! [`LOW`], held between them. The depth admits each class a fraction of
//! its requests: `sheddable` loses its share first (depth 0 to 100
//! hundredths), then `standard` (100 to 200), but only while `critical`
//! requests ask (in the last [`CRITICAL_WINDOW`]): shedding `standard`
//! serves only to keep capacity for them, so a route without them never
//! does. `critical` is never shed here. The dead band and
//! the slow way down are the hysteresis: a class is not switched on and
//! off per request, and the depth settles where the failures of what is
//! admitted stay inside the band. A fraction is admitted evenly, by a
//! credit per class (each request adds the fraction; one is spent when it
//! is admitted), not by chance; a call that names its caller ([`Share`])
//! is admitted at its caller's fair share of its class ([`super::fair`]).

use super::fair::{ppm, Fair, Share, WHOLE};
use crate::platform::UnixMillis;

/// How often a route's depth moves, in milliseconds.
pub(crate) const TICK: u64 = 1000;
/// The share of failed requests in a tick above which the depth rises.
pub(crate) const HIGH: f64 = 0.10;
/// The share below which it falls.
pub(crate) const LOW: f64 = 0.02;
/// How far one tick over [`HIGH`] raises the depth, in hundredths of a
/// class.
pub(crate) const RAISE: u32 = 25;
/// How far one tick under [`LOW`] (or without requests) lowers it.
pub(crate) const LOWER: u32 = 10;
/// The fewest requests in a tick whose failures move the depth up.
pub(crate) const MIN_SAMPLES: u32 = 5;
/// The deepest a route sheds: every `sheddable` and `standard` request.
const MAX_DEPTH: u32 = 200;
/// The deepest without `critical` requests: every `sheddable` one.
const MAX_DEPTH_UNCRITICAL: u32 = 100;
/// How long after a `critical` request a route may shed `standard` ones,
/// in milliseconds.
pub(crate) const CRITICAL_WINDOW: u64 = 10_000;

/// A request's priority class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Priority {
    /// Shed first.
    Sheddable,
    /// Shed once no `sheddable` request is admitted.
    #[default]
    Standard,
    /// Never shed by the gateway.
    Critical,
}

impl Priority {
    /// Every class, lowest first.
    pub const ALL: [Priority; 3] = [Priority::Sheddable, Priority::Standard, Priority::Critical];

    /// The class named `name` (`critical`, `standard`, `sheddable`).
    pub fn parse(name: &str) -> Option<Priority> {
        Priority::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Its name, as configuration, headers and metrics write it.
    pub fn name(self) -> &'static str {
        match self {
            Priority::Sheddable => "sheddable",
            Priority::Standard => "standard",
            Priority::Critical => "critical",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One route's shedding ([module docs](self)).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Shed {
    /// In hundredths of a class, from 0 (nothing shed) to 200 (every
    /// `sheddable` and `standard` request).
    depth: u32,
    /// The start of the tick being counted.
    tick: UnixMillis,
    /// Requests that ended in it, and of them those every entry failed.
    ended: u32,
    failed: u32,
    /// Each class's credit toward its next admitted request, in
    /// millionths.
    credit: [u32; 3],
    /// Each class's callers' fair shares.
    fair: [Fair; 3],
    /// Requests shed, by class.
    shed: [u64; 3],
    /// When a `critical` request last asked.
    critical_at: Option<UnixMillis>,
}

impl Shed {
    /// The depth as of `now`: each tick that ended since moves it.
    fn roll(&mut self, now: UnixMillis) {
        if self.tick == 0 {
            self.tick = now;
            return;
        }
        let deepest = match self.critical_at {
            Some(at) if now.saturating_sub(at) < CRITICAL_WINDOW => MAX_DEPTH,
            _ => MAX_DEPTH_UNCRITICAL,
        };
        self.depth = self.depth.min(deepest);
        while now.saturating_sub(self.tick) >= TICK {
            let share = match self.ended {
                0 => 0.0,
                n => f64::from(self.failed) / f64::from(n),
            };
            if share > HIGH && self.ended >= MIN_SAMPLES {
                self.depth = (self.depth + RAISE).min(deepest);
            } else if share < LOW {
                self.depth = self.depth.saturating_sub(LOWER);
            }
            self.ended = 0;
            self.failed = 0;
            self.tick += TICK;
            for p in [Priority::Sheddable, Priority::Standard] {
                let fraction = self.fraction(p);
                self.fair[p.index()].tick(fraction);
            }
            if self.depth == 0 {
                // Nothing more to lower: start counting now.
                self.tick = self.tick.max(now - (now - self.tick) % TICK);
            }
        }
    }

    /// The fraction of `priority`'s requests admitted as of `now`.
    pub(crate) fn allowed(&mut self, now: UnixMillis, priority: Priority) -> f64 {
        self.roll(now);
        f64::from(self.fraction(priority)) / f64::from(WHOLE)
    }

    /// The fraction of `priority`'s requests admitted, in millionths.
    fn fraction(&self, priority: Priority) -> u32 {
        let floor = match priority {
            Priority::Sheddable => 0,
            Priority::Standard => 100,
            Priority::Critical => return WHOLE,
        };
        ppm(f64::from(100 - self.depth.saturating_sub(floor).min(100)) / 100.0)
    }

    /// Whether a request of `priority`, of the caller `share` names if it
    /// names one, is admitted at `now`.
    pub(crate) fn admits(
        &mut self,
        now: UnixMillis,
        priority: Priority,
        share: Option<Share>,
    ) -> bool {
        if priority == Priority::Critical {
            self.critical_at = Some(now);
        }
        self.roll(now);
        let fraction = self.fraction(priority);
        let i = priority.index();
        let fair = share.and_then(|s| self.fair[i].admits(s, fraction));
        let admitted = fair.unwrap_or_else(|| {
            if fraction >= WHOLE {
                self.credit[i] = 0;
                return true;
            }
            self.credit[i] += fraction;
            let admitted = self.credit[i] >= WHOLE;
            if admitted {
                self.credit[i] -= WHOLE;
            }
            admitted
        });
        if !admitted {
            self.shed[i] += 1;
        }
        admitted
    }

    /// Counts an admitted request that ended at `now`: `failed` when every
    /// entry of the route failed it.
    pub(crate) fn ended(&mut self, now: UnixMillis, failed: bool) {
        self.roll(now);
        self.ended = self.ended.saturating_add(1);
        self.failed = self.failed.saturating_add(u32::from(failed));
    }

    /// The depth now, in hundredths of a class (0 to 200).
    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    /// The requests of `priority` shed so far.
    pub(crate) fn shed(&self, priority: Priority) -> u64 {
        self.shed[priority.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: UnixMillis = 1_715_680_800_000;

    /// A tick at `t` of `ended` requests, `failed` of them failed, the
    /// depth read at the next tick's start.
    fn tick(s: &mut Shed, t: UnixMillis, ended: u32, failed: u32) -> u32 {
        // A critical request asks each tick.
        assert!(s.admits(t, Priority::Critical, None));
        for i in 0..ended {
            s.ended(t + u64::from(i), i < failed);
        }
        s.roll(t + TICK);
        s.depth()
    }

    #[test]
    fn classes_are_shed_lowest_first_and_critical_never() {
        let mut s = Shed::default();
        s.roll(T0);
        let mut t = T0;
        let mut depths = Vec::new();
        for _ in 0..10 {
            depths.push(tick(&mut s, t, 10, 5));
            t += TICK;
        }
        assert_eq!(depths, [25, 50, 75, 100, 125, 150, 175, 200, 200, 200]);
        assert_eq!(s.allowed(t, Priority::Sheddable), 0.0);
        assert_eq!(s.allowed(t, Priority::Standard), 0.0);
        assert_eq!(s.allowed(t, Priority::Critical), 1.0);
        let mut s = Shed {
            depth: 50,
            tick: T0,
            ..Shed::default()
        };
        assert_eq!(s.allowed(T0, Priority::Sheddable), 0.5);
        assert_eq!(
            s.allowed(T0, Priority::Standard),
            1.0,
            "standard is whole while sheddable is still admitted"
        );
        // Half of sheddable's requests, evenly.
        let admitted: Vec<bool> = (0..6)
            .map(|_| s.admits(T0, Priority::Sheddable, None))
            .collect();
        assert_eq!(admitted, [false, true, false, true, false, true]);
        assert_eq!(s.shed(Priority::Sheddable), 3);
        assert!((0..6).all(|_| s.admits(T0, Priority::Standard, None)));
    }

    #[test]
    fn without_critical_requests_standard_is_never_shed() {
        let mut s = Shed::default();
        s.roll(T0);
        for i in 0..8 {
            for j in 0..10 {
                s.ended(T0 + i * TICK + j, true);
            }
        }
        s.roll(T0 + 8 * TICK);
        assert_eq!(s.depth(), 100);
        assert_eq!(s.allowed(T0 + 8 * TICK, Priority::Standard), 1.0);
        // A critical request comes: deeper from the next tick on; once
        // none asked for a while, back to sheddable alone.
        assert!(s.admits(T0 + 8 * TICK, Priority::Critical, None));
        for j in 0..10 {
            s.ended(T0 + 8 * TICK + j, true);
        }
        s.roll(T0 + 9 * TICK);
        assert_eq!(s.depth(), 125);
        for i in 9..20 {
            for j in 0..10 {
                s.ended(T0 + i * TICK + j, true);
            }
        }
        s.roll(T0 + 20 * TICK);
        assert_eq!(s.depth(), 100);
    }

    #[test]
    fn the_depth_holds_inside_the_band_and_comes_down_slowly() {
        let mut s = Shed {
            depth: 100,
            tick: T0,
            ..Shed::default()
        };
        // 5 % failed: inside the band, held.
        assert_eq!(tick(&mut s, T0, 20, 1), 100);
        // Too few requests to raise it, however many failed.
        assert_eq!(tick(&mut s, T0 + TICK, 4, 4), 100);
        // None failed: down a tenth a tick, ten ticks to open again.
        let mut t = T0 + 2 * TICK;
        for _ in 0..9 {
            tick(&mut s, t, 20, 0);
            t += TICK;
        }
        assert_eq!(s.depth(), 10);
        // A quiet route comes down too.
        s.roll(t + 5 * TICK);
        assert_eq!(s.depth(), 0);
        assert_eq!(s.allowed(t + 5 * TICK, Priority::Sheddable), 1.0);
    }

    #[test]
    fn priorities_parse_and_order() {
        assert_eq!(Priority::parse("critical"), Some(Priority::Critical));
        assert_eq!(Priority::parse("Critical"), None);
        assert!(Priority::Sheddable < Priority::Standard);
        assert!(Priority::Standard < Priority::Critical);
        assert_eq!(Priority::default(), Priority::Standard);
    }
}

#[cfg(test)]
mod fair_tests {
    use super::*;

    const T0: UnixMillis = 1_715_680_800_000;

    #[test]
    fn within_a_class_a_flood_gets_its_share_and_the_quiet_caller_its_requests() {
        let mut s = Shed {
            depth: 50,
            tick: T0,
            ..Shed::default()
        };
        let (heavy, light) = (Share { key: 1, weight: 1 }, Share { key: 2, weight: 1 });
        let mut got = [0; 2];
        for t in 0..4 {
            let now = T0 + t * TICK + 1;
            // 20 of one and 4 of the other each second.
            for i in 0..24 {
                let (who, n) = if i % 6 == 5 { (light, 1) } else { (heavy, 0) };
                if s.admits(now, Priority::Sheddable, Some(who)) && t == 3 {
                    got[n] += 1;
                }
            }
            for i in 0..20 {
                // One failure in twenty: inside the band, the depth holds.
                s.ended(now + i, i == 0);
            }
        }
        assert_eq!(s.depth(), 50);
        // Half of 24 is 12: the light caller's 4, the heavy one 8 (by
        // arrival it would be 2 and 10).
        assert_eq!(got, [8, 4]);
    }
}
