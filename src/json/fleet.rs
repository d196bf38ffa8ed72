//! The fleet protocol's JSON (what isolates send the breaker Durable Object,
//! what it answers and what it stores), written by hand in the shapes the
//! derived serde impls give and read by those impls: stored state stays
//! readable both ways. Compiled for the Worker and for the tests that hold
//! the writers to the derived impls.

use super::Json;
use crate::breaker::{Permit, PermitKind, Snapshot, State};
use crate::fleet::{Fleet, Lease, LeaseAnswer, Report, Verdict, View};

impl State {
    fn write_json(&self, j: &mut Json) {
        j.open();
        match self {
            State::Closed => j.s("state", "closed"),
            State::Open { until } => j.s("state", "open").n("until", *until),
            State::HalfOpen {
                in_flight,
                successes,
            } => j
                .s("state", "half_open")
                .n("in_flight", (*in_flight).into())
                .n("successes", (*successes).into()),
        };
        j.close();
    }
}

impl Permit {
    fn write_json(&self, j: &mut Json) {
        let kind = match self.kind {
            PermitKind::Normal => "normal",
            PermitKind::Probe => "probe",
            PermitKind::Forced => "forced",
        };
        j.open()
            .s("kind", kind)
            .n("generation", self.generation)
            .close();
    }
}

impl Snapshot {
    fn write_json(&self, j: &mut Json) {
        j.open().key("state");
        self.state.write_json(j);
        j.n("consecutiveFailures", self.consecutive_failures.into())
            .key("window")
            .open_array();
        for failed in &self.window {
            j.bool(*failed);
        }
        j.close_array()
            .n("trips", self.trips.into())
            .n("generation", self.generation)
            .close();
    }
}

impl Lease {
    fn write_json(&self, j: &mut Json) {
        j.open().n("token", self.token).key("permit");
        self.permit.write_json(j);
        j.s("holder", &self.holder)
            .n("expiresAt", self.expires_at)
            .close();
    }
}

impl Fleet {
    /// The stored form.
    pub(crate) fn json(&self) -> String {
        let mut j = Json::new();
        j.open().key("breaker");
        self.breaker.write_json(&mut j);
        j.key("leases").open_array();
        for l in &self.leases {
            l.write_json(&mut j);
        }
        j.close_array()
            .n("nextToken", self.next_token)
            .n("changedAt", self.changed_at)
            .close();
        j.finish()
    }

    /// Reads the stored form.
    pub(crate) fn from_json(json: &str) -> Option<Fleet> {
        serde_json::from_str(json).ok()
    }
}

impl View {
    fn write_json(&self, j: &mut Json) {
        j.open().key("state");
        self.state.write_json(j);
        j.n("generation", self.generation)
            .n("consecutiveFailures", self.consecutive_failures.into())
            .key("failureRate")
            .f64(self.failure_rate)
            .n("asOf", self.as_of)
            .close();
    }

    /// The object's answer.
    pub(crate) fn json(&self) -> String {
        Json::text(|j| self.write_json(j))
    }

    /// Reads the object's answer.
    pub(crate) fn from_json(json: &str) -> Option<View> {
        serde_json::from_str(json).ok()
    }
}

impl Report {
    fn write_json(&self, j: &mut Json) {
        let verdict = match self.verdict {
            Verdict::Success => "success",
            Verdict::Failure => "failure",
            Verdict::Abandoned => "abandoned",
        };
        j.open()
            .n("at", self.at)
            .s("verdict", verdict)
            .some_n("lease", self.lease)
            .close();
    }
}

impl LeaseAnswer {
    /// The object's answer.
    pub(crate) fn json(&self) -> String {
        let mut j = Json::new();
        j.open();
        let view = match self {
            LeaseAnswer::Granted {
                token,
                expires_at,
                view,
            } => {
                j.s("answer", "granted")
                    .n("token", *token)
                    .n("expires_at", *expires_at);
                view
            }
            LeaseAnswer::Busy { until, view } => {
                j.s("answer", "busy").n("until", *until);
                view
            }
            LeaseAnswer::Closed { view } => {
                j.s("answer", "closed");
                view
            }
        };
        j.key("view");
        view.write_json(&mut j);
        j.close();
        j.finish()
    }

    /// Reads the object's answer.
    pub(crate) fn from_json(json: &str) -> Option<LeaseAnswer> {
        serde_json::from_str(json).ok()
    }
}

/// What an isolate asks the object: `{"key", "holder"?, "reports"?}`.
#[derive(serde::Deserialize)]
pub(crate) struct Call {
    pub key: String,
    pub holder: Option<String>,
    #[serde(default)]
    pub reports: Vec<Report>,
}

impl Call {
    /// The request body.
    pub(crate) fn to_json(key: &str, holder: Option<&str>, reports: Option<&[Report]>) -> String {
        let mut j = Json::new();
        j.open().s("key", key).some_s("holder", holder);
        if let Some(reports) = reports {
            j.key("reports").open_array();
            for r in reports {
                r.write_json(&mut j);
            }
            j.close_array();
        }
        j.close();
        j.finish()
    }

    /// Reads a request body.
    pub(crate) fn from_json(json: &str) -> Option<Call> {
        serde_json::from_str(json).ok()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde::Serialize;

    use super::Call;
    use crate::breaker::BreakerPolicy;
    use crate::fleet::{Fleet, LeaseAnswer, Report, Verdict, View};

    /// Fleets in every state, through the object's own operations.
    fn fleets() -> Vec<(Fleet, Vec<View>, Vec<LeaseAnswer>)> {
        let policy = BreakerPolicy {
            failure_threshold: 2,
            window: 4,
            minimum_calls: 2,
            failure_rate: 0.5,
            ..BreakerPolicy::default()
        };
        let ttl = Duration::from_secs(5);
        let mut out = Vec::new();
        let mut f = Fleet::new();
        let mut views = Vec::new();
        let mut answers = Vec::new();
        let report = |at, verdict, lease| Report { at, verdict, lease };
        out.push((f.clone(), views.clone(), answers.clone()));
        for (now, verdicts) in [
            (1, vec![Verdict::Success, Verdict::Failure]),
            (
                2,
                vec![Verdict::Failure, Verdict::Failure, Verdict::Abandoned],
            ),
            (3, vec![]),
        ] {
            let reports: Vec<Report> = verdicts.into_iter().map(|v| report(now, v, None)).collect();
            views.push(f.fold(&policy, now, &reports));
            answers.push(f.lease(&policy, ttl, now, "isolate-\"1\""));
            out.push((f.clone(), views.clone(), answers.clone()));
        }
        for now in [20_000, 20_001, 40_000] {
            let answer = f.lease(&policy, ttl, now, "isolate-2");
            if let LeaseAnswer::Granted { token, .. } = answer {
                views.push(f.view(&policy, now));
                out.push((f.clone(), views.clone(), answers.clone()));
                views.push(f.fold(
                    &policy,
                    now + 1,
                    &[report(now, Verdict::Failure, Some(token))],
                ));
            }
            answers.push(answer);
            out.push((f.clone(), views.clone(), answers.clone()));
        }
        out
    }

    fn same<T: Serialize>(value: &T, text: &str) {
        assert_eq!(text, serde_json::to_string(value).unwrap());
    }

    #[test]
    fn the_protocol_is_written_and_read_as_derived() {
        let mut granted = false;
        for (fleet, views, answers) in fleets() {
            let text = fleet.json();
            same(&fleet, &text);
            assert_eq!(Fleet::from_json(&text), Some(fleet.clone()));
            for v in views {
                same(&v, &v.json());
                assert_eq!(View::from_json(&v.json()), Some(v));
            }
            for a in answers {
                granted |= matches!(a, LeaseAnswer::Granted { .. });
                same(&a, &a.json());
                assert_eq!(LeaseAnswer::from_json(&a.json()), Some(a));
            }
        }
        assert!(granted, "a lease was granted and written");

        // The isolate's calls, as the derived `{key, ..flattened body}` wrote them.
        #[derive(Serialize)]
        struct Derived<'a, T: Serialize> {
            key: &'a str,
            #[serde(flatten)]
            body: T,
        }
        #[derive(Serialize)]
        struct Holder<'a> {
            holder: &'a str,
        }
        #[derive(Serialize)]
        struct Reports {
            reports: Vec<Report>,
        }
        #[derive(Serialize)]
        struct Nothing {}
        let reports = vec![
            Report {
                at: 1,
                verdict: Verdict::Success,
                lease: None,
            },
            Report {
                at: 2,
                verdict: Verdict::Abandoned,
                lease: Some(7),
            },
        ];
        same(
            &Derived {
                key: "p",
                body: Holder { holder: "h" },
            },
            &Call::to_json("p", Some("h"), None),
        );
        same(
            &Derived {
                key: "p",
                body: Reports {
                    reports: reports.clone(),
                },
            },
            &Call::to_json("p", None, Some(&reports)),
        );
        same(
            &Derived {
                key: "p",
                body: Nothing {},
            },
            &Call::to_json("p", None, None),
        );
        let c = Call::from_json(&Call::to_json("p", Some("h"), Some(&reports))).unwrap();
        assert_eq!((c.key.as_str(), c.holder.as_deref()), ("p", Some("h")));
        assert_eq!(c.reports, reports);
    }

    #[test]
    fn stored_state_is_accepted_or_refused_as_derived() {
        let good = Fleet::new().json();
        for json in [
            good.as_str(),
            r#"{"breaker":{"state":{"state":"closed"},"consecutiveFailures":0,"window":[],"trips":0,"generation":0}}"#,
            r#"{"breaker":{"state":{"state":"open","until":5,"x":1},"consecutiveFailures":2,"window":[true,false],"trips":1,"generation":3},"leases":[{"token":1,"permit":{"kind":"probe","generation":3},"holder":"h","expiresAt":9}],"nextToken":2,"changedAt":4,"extra":null}"#,
            r#"{"breaker":{"state":{"state":"half_open","in_flight":1,"successes":0},"consecutiveFailures":0,"window":[],"trips":1,"generation":4}}"#,
            r#"{"breaker":{"state":["open",5],"consecutiveFailures":0,"window":[],"trips":0,"generation":0}}"#,
            r#"{"breaker":[{"state":"closed"},0,[],0,0]}"#,
            r#"{"breaker":{"state":{"state":"opened"},"consecutiveFailures":0,"window":[],"trips":0,"generation":0}}"#,
            r#"{"breaker":{"state":{"state":"open"},"consecutiveFailures":0,"window":[],"trips":0,"generation":0}}"#,
            r#"{"breaker":{"state":{"state":"closed"},"consecutiveFailures":-1,"window":[],"trips":0,"generation":0}}"#,
            r#"{"breaker":{"state":{"state":"closed"},"window":[],"trips":0,"generation":0}}"#,
            r#"{"breaker":{"state":{"state":"closed"},"consecutiveFailures":0,"window":[1],"trips":0,"generation":0}}"#,
            r#"{"breaker":{"state":{"state":"closed"},"consecutiveFailures":0,"window":[],"trips":0,"generation":0},"leases":[{"token":1}]}"#,
            r#"{"breaker":{"state":{"state":"closed"},"consecutiveFailures":0,"window":[],"trips":0,"generation":0},"leases":[{"token":1,"permit":{"kind":"other","generation":1},"holder":"h","expiresAt":1}]}"#,
            r#"{"leases":[]}"#,
            "[]",
            "null",
            "{",
            "",
        ] {
            let derived: Option<Fleet> = serde_json::from_str(json).ok();
            assert_eq!(Fleet::from_json(json), derived, "{json}");
        }
        for json in [
            r#"{"state":{"state":"closed"},"generation":1,"consecutiveFailures":0,"failureRate":0,"asOf":3}"#,
            r#"{"state":{"state":"closed"},"generation":1,"consecutiveFailures":0,"failureRate":0.25,"asOf":3}"#,
            r#"{"state":{"state":"closed"},"generation":1,"consecutiveFailures":0,"asOf":3}"#,
            r#"{"state":{"state":"closed"},"generation":1.5,"consecutiveFailures":0,"failureRate":0,"asOf":3}"#,
        ] {
            let derived: Option<View> = serde_json::from_str(json).ok();
            assert_eq!(View::from_json(json), derived, "{json}");
        }
        let view = r#"{"state":{"state":"closed"},"generation":1,"consecutiveFailures":0,"failureRate":0,"asOf":3}"#;
        for json in [
            format!(r#"{{"answer":"closed","view":{view}}}"#),
            format!(r#"{{"answer":"busy","until":5,"view":{view}}}"#),
            format!(r#"{{"view":{view},"expires_at":9,"answer":"granted","token":2}}"#),
            format!(r#"{{"answer":"granted","token":2,"view":{view}}}"#),
            format!(r#"{{"answer":"open","view":{view}}}"#),
            r#"{"answer":"closed"}"#.to_string(),
        ] {
            let derived: Option<LeaseAnswer> = serde_json::from_str(&json).ok();
            assert_eq!(LeaseAnswer::from_json(&json), derived, "{json}");
        }
    }
}
