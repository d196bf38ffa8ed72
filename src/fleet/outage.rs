//! Whether the fleet's objects are out of reach, and when to say so: once
//! per interval while they are, not once per failed call, and once when
//! they answer again. Pure: the host passes `now` and logs the lines.

use std::time::Duration;

use serde_json::json;

use crate::platform::{millis, UnixMillis};

/// How often an ongoing outage is logged (default 30 s).
pub const OUTAGE_LOG_INTERVAL: Duration = Duration::from_secs(30);

/// An isolate's record of failed calls to the fleet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outage {
    /// The first failed call of the outage in progress.
    since: Option<UnixMillis>,
    /// Failed calls since then.
    failed: u64,
    /// Failed calls already logged.
    logged: u64,
    /// When the outage was last logged.
    last_logged: Option<UnixMillis>,
    /// The model whose owner a relay calls, named in its lines (`relayOf`);
    /// `None` for an isolate's own calls.
    relay_of: Option<String>,
}

impl Outage {
    /// A relay's record of its calls to the owner of model `key`: its lines
    /// say which model (`relayOf`).
    pub fn of_relay(key: &str) -> Self {
        Outage {
            relay_of: Some(key.to_owned()),
            ..Outage::default()
        }
    }

    /// The line's JSON, naming the relay's model when there is one.
    fn line(&self, mut fields: serde_json::Value) -> String {
        if let Some(key) = &self.relay_of {
            fields["relayOf"] = key.as_str().into();
        }
        fields.to_string()
    }

    /// A call failed at `now` with `error`: the log line to write, when one
    /// is due (the first failure, then at most one per `interval`).
    pub fn failed(&mut self, now: UnixMillis, error: &str, interval: Duration) -> Option<String> {
        let since = *self.since.get_or_insert(now);
        self.failed = self.failed.saturating_add(1);
        let due = self
            .last_logged
            .is_none_or(|t| now >= t.saturating_add(millis(interval)));
        if !due {
            return None;
        }
        self.last_logged = Some(now);
        let new = self.failed - self.logged;
        self.logged = self.failed;
        Some(self.line(json!({
            "level": "warn",
            "msg": "fleet breaker unreachable: serving with isolate-local breakers",
            "error": error.chars().take(300).collect::<String>(),
            "failedCalls": new,
            "sinceMs": since,
        })))
    }

    /// A call succeeded at `now`: the log line saying the fleet is back,
    /// when it was out.
    pub fn answered(&mut self, now: UnixMillis) -> Option<String> {
        let since = self.since.take()?;
        let failed = self.failed;
        *self = Outage {
            relay_of: self.relay_of.take(),
            ..Outage::default()
        };
        Some(self.line(json!({
            "level": "info",
            "msg": "fleet breaker reachable again: sharing breaker state",
            "failedCalls": failed,
            "outageMs": now.saturating_sub(since),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Outage {
        /// Whether calls are failing.
        fn is_out(&self) -> bool {
            self.since.is_some()
        }
    }

    const I: Duration = OUTAGE_LOG_INTERVAL;

    #[test]
    fn an_outage_is_logged_once_per_interval_and_its_end_once() {
        let mut o = Outage::default();
        assert_eq!(o.answered(0), None, "nothing to say while all is well");
        let first = o.failed(1_000, "object timed out", I).unwrap();
        assert!(first.contains(r#""failedCalls":1"#), "{first}");
        let quiet = (0..1000)
            .filter_map(|i| o.failed(1_001 + i * 20, "x", I))
            .count();
        assert_eq!(quiet, 0, "1000 failures within the interval: no line");
        let second = o.failed(31_000, "object answered 500", I).unwrap();
        assert!(second.contains(r#""failedCalls":1001"#), "{second}");
        assert!(second.contains(r#""sinceMs":1000"#), "{second}");
        assert!(o.is_out());
        let back = o.answered(40_000).unwrap();
        assert!(back.contains(r#""outageMs":39000"#), "{back}");
        assert!(back.contains(r#""failedCalls":1002"#), "{back}");
        assert!(!o.is_out());
        assert_eq!(o.answered(40_001), None);
        assert!(
            o.failed(41_000, "again", I).is_some(),
            "a new outage is told at once"
        );
    }

    #[test]
    fn a_relays_lines_name_its_model_through_an_outage_and_its_end() {
        let mut o = Outage::of_relay("dead/dead-model");
        let first = o.failed(1_000, "object timed out", I).unwrap();
        assert!(first.contains(r#""relayOf":"dead/dead-model""#), "{first}");
        let back = o.answered(2_000).unwrap();
        assert!(back.contains(r#""relayOf":"dead/dead-model""#), "{back}");
        let again = o.failed(3_000, "object timed out", I).unwrap();
        assert!(again.contains(r#""relayOf":"dead/dead-model""#), "{again}");
        let isolate = Outage::default()
            .failed(1_000, "object timed out", I)
            .unwrap();
        assert!(!isolate.contains("relayOf"), "{isolate}");
    }
}
