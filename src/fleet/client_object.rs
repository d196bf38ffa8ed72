//! A named client's fleet-wide counts, the object's side: one Durable
//! Object per limited client (named `client:<name>`), holding each
//! isolate's last report of what it used. An isolate's report replaces its
//! earlier one (a report is what the isolate used, not what it used since
//! the last), so a lost or repeated report counts nothing twice; the answer
//! is what every other isolate used, which the isolate adds to its own.
//!
//! It holds at most [`MAX_HOLDERS`] isolates' reports, each for
//! [`LAPSE`] after it came: by then its minutes have slid out, and an
//! isolate that sent nothing for that long has nothing in flight it still
//! counts. The isolate side is [`FleetClients`](super::clients::FleetClients).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::platform::UnixMillis;
use crate::policy::tenant::{Used, MINUTE_MS};

/// How long an isolate's report counts after it came: two minutes, the
/// longest a sliding minute's count lives.
pub const LAPSE: u64 = 2 * MINUTE_MS;

/// The most isolates whose reports one client's object holds; a report
/// from one more displaces the oldest.
pub const MAX_HOLDERS: usize = 2048;

/// The longest holder name kept; a longer one is cut (names are the
/// gateway's own, `isolate-<hex>`).
const MAX_HOLDER_LEN: usize = 64;

/// What an isolate sends a client's object (`POST http://do/client`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientReport {
    /// The client's name.
    pub client: String,
    /// The isolate reporting.
    pub holder: String,
    /// What the client used through that isolate.
    pub used: Used,
}

/// One isolate's last report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Held {
    /// When it came.
    at: UnixMillis,
    used: Used,
}

/// A client's object: its isolates' last reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientBook {
    holders: BTreeMap<String, Held>,
}

impl ClientBook {
    /// Takes `report` at `now` and answers what every other isolate used,
    /// as of `now`.
    pub fn report(&mut self, now: UnixMillis, report: &ClientReport) -> Used {
        self.holders.retain(|_, h| now.saturating_sub(h.at) < LAPSE);
        let holder = clip(&report.holder);
        if !self.holders.contains_key(holder) && self.holders.len() >= MAX_HOLDERS {
            let oldest = self
                .holders
                .iter()
                .min_by_key(|(_, h)| h.at)
                .map(|(name, _)| name.clone());
            if let Some(name) = oldest {
                self.holders.remove(&name);
            }
        }
        self.holders.insert(
            holder.to_owned(),
            Held {
                at: now,
                used: report.used,
            },
        );
        self.holders
            .iter()
            .filter(|(name, _)| name.as_str() != holder)
            .fold(Used::default(), |sum, (_, h)| sum.plus(&h.used, now))
    }

    /// What every isolate used, as of `now`.
    pub fn total(&self, now: UnixMillis) -> Used {
        self.holders
            .values()
            .filter(|h| now.saturating_sub(h.at) < LAPSE)
            .fold(Used::default(), |sum, h| sum.plus(&h.used, now))
    }

    /// The isolates whose reports it holds.
    pub fn holders(&self) -> usize {
        self.holders.len()
    }
}

/// `name` cut to [`MAX_HOLDER_LEN`] bytes, on a character boundary.
fn clip(name: &str) -> &str {
    let mut end = name.len().min(MAX_HOLDER_LEN);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minute's start, 2024-05-14T10:00:00Z.
    const T0: UnixMillis = 1_715_680_800_000;

    fn report(holder: &str, at: UnixMillis, requests: u64, in_flight: u64) -> ClientReport {
        let mut used = Used::default();
        used.requests.add(at, requests);
        used.in_flight = in_flight;
        ClientReport {
            client: "batch".into(),
            holder: holder.into(),
            used,
        }
    }

    #[test]
    fn an_isolate_is_answered_what_the_others_used_and_its_report_replaces_its_last() {
        let mut book = ClientBook::default();
        assert_eq!(book.report(T0, &report("a", T0, 3, 1)), Used::default());
        let others = book.report(T0 + 10, &report("b", T0 + 10, 5, 2));
        assert_eq!(
            (others.requests.estimate(T0 + 10), others.in_flight),
            (3, 1)
        );
        // A's second report is what it used in all, not since the last.
        let others = book.report(T0 + 20, &report("a", T0 + 20, 4, 0));
        assert_eq!(
            (others.requests.estimate(T0 + 20), others.in_flight),
            (5, 2)
        );
        let total = book.total(T0 + 20);
        assert_eq!((total.requests.estimate(T0 + 20), total.in_flight), (9, 2));
        // Sent twice, counted once.
        book.report(T0 + 30, &report("a", T0 + 20, 4, 0));
        assert_eq!(book.total(T0 + 30).requests.estimate(T0 + 30), 9);
    }

    #[test]
    fn reports_lapse_and_the_holders_are_bounded() {
        let mut book = ClientBook::default();
        book.report(T0, &report("a", T0, 3, 1));
        let others = book.report(T0 + LAPSE, &report("b", T0 + LAPSE, 1, 0));
        assert_eq!(others, Used::default(), "a's report lapsed");
        assert_eq!(book.holders(), 1);
        for i in 0..MAX_HOLDERS + 10 {
            let at = T0 + LAPSE + 1 + i as u64;
            book.report(at, &report(&format!("isolate-{i}"), at, 1, 0));
        }
        assert_eq!(book.holders(), MAX_HOLDERS);
        let long = "x".repeat(1000);
        book.report(T0 + LAPSE + 5000, &report(&long, T0 + LAPSE + 5000, 1, 0));
        assert!(book.holders.keys().all(|k| k.len() <= MAX_HOLDER_LEN));
        assert_eq!(book.holders(), MAX_HOLDERS);
    }
}
