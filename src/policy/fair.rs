//! Fair shares within a priority class, sans-IO: while a route admits only
//! part of a class ([`super::shed`]), its callers share what is admitted in
//! proportion to their weights, not to how much each sends. A caller
//! sending ten times more than another gets no more than its weighted
//! share while the other asks for its own.
//!
//! Once a tick, what each caller asked in the tick before is water-filled:
//! the class's admitted part of all that was asked is given out by weight,
//! a caller that asked for less than its share keeps only what it asked
//! and the rest goes to the others. Each caller's requests are then
//! admitted at its own fraction, evenly, by a credit. A caller not seen in
//! the last tick is admitted at the class's fraction until the next.

/// Who a call belongs to, for fair shares within its class: a caller's key
/// (the gateway's client index) and its weight (default 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// The caller.
    pub key: u32,
    /// Its weight among the callers of its class, at least 1.
    pub weight: u32,
}

/// The most callers one class keeps shares for; calls of others are
/// admitted at the class's fraction.
const MAX_MEMBERS: usize = 64;

/// A whole, in the millionths fractions and credits are counted in (whole
/// numbers: a fraction admits exactly its share, with no rounding drift).
pub(crate) const WHOLE: u32 = 1_000_000;

/// `fraction` in millionths.
pub(crate) fn ppm(fraction: f64) -> u32 {
    (fraction.clamp(0.0, 1.0) * f64::from(WHOLE)).round() as u32
}

/// One caller of a class.
#[derive(Debug, Clone, PartialEq)]
struct Member {
    share: Share,
    /// Requests it asked in this tick and the last one.
    asked: u32,
    asked_last: u32,
    /// The fraction of its requests admitted in this tick, in millionths.
    fraction: Option<u32>,
    credit: u32,
}

/// The callers of one class on one route.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Fair {
    members: Vec<Member>,
}

impl Fair {
    /// Starts a tick in which the class admits `fraction` of what it is
    /// asked: each caller's fraction from what it asked in the last.
    pub(crate) fn tick(&mut self, fraction: u32) {
        for m in &mut self.members {
            m.asked_last = std::mem::take(&mut m.asked);
            m.fraction = None;
        }
        self.members.retain(|m| m.asked_last > 0);
        if fraction >= WHOLE {
            return;
        }
        let mut order: Vec<usize> = (0..self.members.len()).collect();
        // Lowest demand per weight first: those asking less than their
        // share are filled, and leave the rest to the others.
        order.sort_by(|&a, &b| {
            let per = |m: &Member| f64::from(m.asked_last) / f64::from(m.share.weight.max(1));
            per(&self.members[a]).total_cmp(&per(&self.members[b]))
        });
        let asked: u32 = self.members.iter().map(|m| m.asked_last).sum();
        let mut left = f64::from(fraction) / f64::from(WHOLE) * f64::from(asked);
        let mut weights: f64 = self
            .members
            .iter()
            .map(|m| f64::from(m.share.weight.max(1)))
            .sum();
        for i in order {
            let m = &mut self.members[i];
            let w = f64::from(m.share.weight.max(1));
            let given = (left * w / weights).min(f64::from(m.asked_last));
            m.fraction = Some(ppm(given / f64::from(m.asked_last)));
            left -= given;
            weights -= w;
        }
    }

    /// Whether a request of `share` is admitted while the class admits
    /// `fraction`; `None` when this class keeps no share for it (too many
    /// callers), for the class's own credit to decide.
    pub(crate) fn admits(&mut self, share: Share, fraction: u32) -> Option<bool> {
        let at = match self.members.iter().position(|m| m.share.key == share.key) {
            Some(at) => at,
            None if self.members.len() < MAX_MEMBERS => {
                self.members.push(Member {
                    share,
                    asked: 0,
                    asked_last: 0,
                    fraction: None,
                    credit: 0,
                });
                self.members.len() - 1
            }
            None => return None,
        };
        let m = &mut self.members[at];
        m.share.weight = share.weight;
        m.asked = m.asked.saturating_add(1);
        let fraction = m.fraction.unwrap_or(fraction);
        if fraction >= WHOLE {
            m.credit = 0;
            return Some(true);
        }
        m.credit += fraction;
        Some(if m.credit >= WHOLE {
            m.credit -= WHOLE;
            true
        } else {
            false
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(key: u32, weight: u32) -> Share {
        Share { key, weight }
    }

    /// What each of `asks` (a share and its requests in a tick) got
    /// admitted in the tick after one of the same asking, the class at
    /// `fraction`.
    fn admitted(asks: &[(Share, u32)], fraction: f64) -> Vec<u32> {
        let mut f = Fair::default();
        for &(s, n) in asks {
            for _ in 0..n {
                f.admits(s, WHOLE);
            }
        }
        let fraction = ppm(fraction);
        f.tick(fraction);
        asks.iter()
            .map(|&(s, n)| {
                (0..n)
                    .filter(|_| f.admits(s, fraction) == Some(true))
                    .count() as u32
            })
            .collect()
    }

    #[test]
    fn a_caller_sending_ten_times_more_gets_its_share_not_ten_times_it() {
        // Half of 110 is 55: the light caller's 10 in full, the heavy one
        // the other 45 (a share by arrival would give them 5 and 50).
        assert_eq!(
            admitted(&[(share(1, 1), 100), (share(2, 1), 10)], 0.5),
            [45, 10]
        );
        // A fifth of 110 is 22: the light caller's 10 (under its 11), the
        // heavy one the 12 left; a tenth, 11: five and a half each, whole
        // requests admitted of it.
        assert_eq!(
            admitted(&[(share(1, 1), 100), (share(2, 1), 10)], 0.2),
            [12, 10]
        );
        assert_eq!(
            admitted(&[(share(1, 1), 100), (share(2, 1), 10)], 0.1),
            [5, 5]
        );
        // Weights 3 and 1 of 40: 30 and 10.
        assert_eq!(
            admitted(&[(share(1, 3), 100), (share(2, 1), 100)], 0.2),
            [30, 10]
        );
        assert_eq!(admitted(&[(share(1, 1), 7)], 0.0), [0]);
    }

    #[test]
    fn a_new_caller_gets_the_class_fraction_and_quiet_ones_are_forgotten() {
        let mut f = Fair::default();
        let half = WHOLE / 2;
        for _ in 0..10 {
            f.admits(share(1, 1), WHOLE);
        }
        f.tick(half);
        let new: Vec<bool> = (0..4).filter_map(|_| f.admits(share(9, 1), half)).collect();
        assert_eq!(new, [false, true, false, true]);
        f.tick(half);
        f.tick(half);
        assert!(f.members.iter().all(|m| m.share.key != 1), "{f:?}");
        for key in 0..(MAX_MEMBERS as u32 + 5) {
            f.admits(share(100 + key, 1), WHOLE);
        }
        assert_eq!(f.members.len(), MAX_MEMBERS);
        assert_eq!(f.admits(share(999, 1), half), None);
    }
}
