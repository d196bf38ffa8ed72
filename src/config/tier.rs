//! Checks of a route's tiers (`priority`, `weight`; the ordering itself is
//! `engine/order.rs`).

use super::{EntryConfig, Issues};

/// The largest weight: finer shares than 1 in 10,000 mean nothing at any
/// request rate a tier sees, and a bound keeps sums far from overflow.
pub(super) const MAX_WEIGHT: u32 = 10_000;

/// Reports every problem with the tiers of route `path`: priorities given
/// to some entries only (where the others would go is a guess), a weight
/// without a priority (it shares nothing), a weight of 0 or above
/// [`MAX_WEIGHT`].
pub(super) fn check(path: &str, entries: &[EntryConfig], issues: &mut Issues) {
    let with = entries.iter().filter(|e| e.priority.is_some()).count();
    if with > 0 && with < entries.len() {
        for (i, e) in entries.iter().enumerate() {
            if e.priority.is_none() {
                issues.add_at(
                    &format!("{path}[{i}]"),
                    "priority",
                    "missing: give every entry of a route a priority, or none",
                );
            }
        }
    }
    for (i, e) in entries.iter().enumerate() {
        let Some(weight) = e.weight else { continue };
        let at = format!("{path}[{i}]");
        if e.priority.is_none() {
            issues.add_at(
                &at,
                "weight",
                "needs a priority: entries sharing one split load by weight",
            );
        }
        if weight == 0 || weight > MAX_WEIGHT {
            issues.add_at(
                &at,
                "weight",
                &format!("must be 1 to {MAX_WEIGHT} (leave an entry out to send it nothing)"),
            );
        }
    }
}
