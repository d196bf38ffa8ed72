//! The fleet protocol's JSON (what isolates send the breaker Durable Object,
//! what it answers and what it stores), written and read by hand in the
//! shapes the derived serde impls give: stored state stays readable both
//! ways. Compiled for the Worker and for the tests that hold these to the
//! derived impls.

use super::Json;
use crate::breaker::{Permit, PermitKind, Snapshot, State};
use crate::config::read::{read_json, Node, Shape, R};
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

    fn read(n: &Node<'_>) -> R<Self> {
        const OPEN: Shape = Shape {
            name: "struct variant State::Open",
            fields: &["until"],
            required: 1,
            defaulted: 0,
            deny_unknown: false,
            skip: Some("state"),
        };
        const HALF_OPEN: Shape = Shape {
            name: "struct variant State::HalfOpen",
            fields: &["in_flight", "successes"],
            required: 0b11,
            defaulted: 0,
            deny_unknown: false,
            skip: Some("state"),
        };
        let variant = n.tag(
            "state",
            &["closed", "open", "half_open"],
            "internally tagged enum State",
        )?;
        Ok(match variant {
            0 => State::Closed,
            1 => {
                let mut until = 0;
                n.fields(&OPEN, &mut |_, v| {
                    until = v.u64()?;
                    Ok(())
                })?;
                State::Open { until }
            }
            _ => {
                let (mut in_flight, mut successes) = (0, 0);
                n.fields(&HALF_OPEN, &mut |i, v| {
                    *[&mut in_flight, &mut successes][i] = v.u32()?;
                    Ok(())
                })?;
                State::HalfOpen {
                    in_flight,
                    successes,
                }
            }
        })
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

    fn read(n: &Node<'_>) -> R<Self> {
        const SHAPE: Shape = Shape {
            name: "struct Permit",
            fields: &["kind", "generation"],
            required: 0b11,
            defaulted: 0,
            deny_unknown: false,
            skip: None,
        };
        let mut p = Permit {
            kind: PermitKind::Normal,
            generation: 0,
            failing: false,
        };
        n.fields(&SHAPE, &mut |i, v| {
            match i {
                0 => {
                    const KINDS: [PermitKind; 3] =
                        [PermitKind::Normal, PermitKind::Probe, PermitKind::Forced];
                    p.kind = KINDS[v.variant(&["normal", "probe", "forced"])?];
                }
                _ => p.generation = v.u64()?,
            }
            Ok(())
        })?;
        Ok(p)
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

    fn read(n: &Node<'_>) -> R<Self> {
        const SHAPE: Shape = Shape {
            name: "struct Snapshot",
            fields: &[
                "state",
                "consecutiveFailures",
                "window",
                "trips",
                "generation",
            ],
            required: 0b11111,
            defaulted: 0,
            deny_unknown: false,
            skip: None,
        };
        let mut s = Snapshot {
            state: State::Closed,
            consecutive_failures: 0,
            window: Vec::new(),
            trips: 0,
            generation: 0,
        };
        n.fields(&SHAPE, &mut |i, v| {
            match i {
                0 => s.state = State::read(v)?,
                1 => s.consecutive_failures = v.u32()?,
                2 => v.seq(&mut |_, b| {
                    s.window.push(b.bool()?);
                    Ok(())
                })?,
                3 => s.trips = v.u32()?,
                _ => s.generation = v.u64()?,
            }
            Ok(())
        })?;
        Ok(s)
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

    fn read(n: &Node<'_>) -> R<Self> {
        const SHAPE: Shape = Shape {
            name: "struct Lease",
            fields: &["token", "permit", "holder", "expiresAt"],
            required: 0b1111,
            defaulted: 0,
            deny_unknown: false,
            skip: None,
        };
        let mut l = Lease {
            token: 0,
            permit: Permit {
                kind: PermitKind::Normal,
                generation: 0,
                failing: false,
            },
            holder: String::new(),
            expires_at: 0,
        };
        n.fields(&SHAPE, &mut |i, v| {
            match i {
                0 => l.token = v.u64()?,
                1 => l.permit = Permit::read(v)?,
                2 => l.holder = v.string()?,
                _ => l.expires_at = v.u64()?,
            }
            Ok(())
        })?;
        Ok(l)
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
        read_json(json, Fleet::read).ok()
    }

    fn read(n: &Node<'_>) -> R<Self> {
        const SHAPE: Shape = Shape {
            name: "struct Fleet",
            fields: &["breaker", "leases", "nextToken", "changedAt"],
            required: 1,
            defaulted: 0b1110,
            deny_unknown: false,
            skip: None,
        };
        let mut f = Fleet::new();
        f.next_token = 0;
        n.fields(&SHAPE, &mut |i, v| {
            match i {
                0 => f.breaker = Snapshot::read(v)?,
                1 => v.seq(&mut |_, l| {
                    f.leases.push(Lease::read(l)?);
                    Ok(())
                })?,
                2 => f.next_token = v.u64()?,
                _ => f.changed_at = v.u64()?,
            }
            Ok(())
        })?;
        Ok(f)
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
        read_json(json, View::read).ok()
    }

    fn read(n: &Node<'_>) -> R<Self> {
        const SHAPE: Shape = Shape {
            name: "struct View",
            fields: &[
                "state",
                "generation",
                "consecutiveFailures",
                "failureRate",
                "asOf",
            ],
            required: 0b11111,
            defaulted: 0,
            deny_unknown: false,
            skip: None,
        };
        let mut w = View {
            state: State::Closed,
            generation: 0,
            consecutive_failures: 0,
            failure_rate: 0.0,
            as_of: 0,
        };
        n.fields(&SHAPE, &mut |i, v| {
            match i {
                0 => w.state = State::read(v)?,
                1 => w.generation = v.u64()?,
                2 => w.consecutive_failures = v.u32()?,
                3 => w.failure_rate = v.f64()?,
                _ => w.as_of = v.u64()?,
            }
            Ok(())
        })?;
        Ok(w)
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

    fn read(n: &Node<'_>) -> R<Self> {
        const SHAPE: Shape = Shape {
            name: "struct Report",
            fields: &["at", "verdict", "lease"],
            required: 0b11,
            defaulted: 0b100,
            deny_unknown: false,
            skip: None,
        };
        let mut r = Report {
            at: 0,
            verdict: Verdict::Success,
            lease: None,
        };
        n.fields(&SHAPE, &mut |i, v| {
            match i {
                0 => r.at = v.u64()?,
                1 => {
                    const VERDICTS: [Verdict; 3] =
                        [Verdict::Success, Verdict::Failure, Verdict::Abandoned];
                    r.verdict = VERDICTS[v.variant(&["success", "failure", "abandoned"])?];
                }
                _ => r.lease = v.opt(Node::u64)?,
            }
            Ok(())
        })?;
        Ok(r)
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
        read_json(json, LeaseAnswer::read).ok()
    }

    fn read(n: &Node<'_>) -> R<Self> {
        const GRANTED: Shape = Shape {
            name: "struct variant LeaseAnswer::Granted",
            fields: &["token", "expires_at", "view"],
            required: 0b111,
            defaulted: 0,
            deny_unknown: false,
            skip: Some("answer"),
        };
        const BUSY: Shape = Shape {
            name: "struct variant LeaseAnswer::Busy",
            fields: &["until", "view"],
            required: 0b11,
            defaulted: 0,
            deny_unknown: false,
            skip: Some("answer"),
        };
        const CLOSED: Shape = Shape {
            name: "struct variant LeaseAnswer::Closed",
            fields: &["view"],
            required: 1,
            defaulted: 0,
            deny_unknown: false,
            skip: Some("answer"),
        };
        let variant = n.tag(
            "answer",
            &["granted", "busy", "closed"],
            "internally tagged enum LeaseAnswer",
        )?;
        let shape = [&GRANTED, &BUSY, &CLOSED][variant];
        let (mut a, mut b) = (0, 0);
        let mut view = None;
        n.fields(shape, &mut |i, v| {
            match shape.fields[i] {
                "view" => view = Some(View::read(v)?),
                _ if i == 0 => a = v.u64()?,
                _ => b = v.u64()?,
            }
            Ok(())
        })?;
        let view = view.unwrap_or(View {
            state: State::Closed,
            generation: 0,
            consecutive_failures: 0,
            failure_rate: 0.0,
            as_of: 0,
        });
        Ok(match variant {
            0 => LeaseAnswer::Granted {
                token: a,
                expires_at: b,
                view,
            },
            1 => LeaseAnswer::Busy { until: a, view },
            _ => LeaseAnswer::Closed { view },
        })
    }
}

/// What an isolate asks the object: `{"key", "holder"?, "reports"?}`.
pub(crate) struct Call {
    pub key: String,
    pub holder: Option<String>,
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
        read_json(json, Call::read).ok()
    }

    fn read(n: &Node<'_>) -> R<Self> {
        const SHAPE: Shape = Shape {
            name: "struct Call",
            fields: &["key", "holder", "reports"],
            required: 1,
            defaulted: 0b110,
            deny_unknown: false,
            skip: None,
        };
        let mut c = Call {
            key: String::new(),
            holder: None,
            reports: Vec::new(),
        };
        n.fields(&SHAPE, &mut |i, v| {
            match i {
                0 => c.key = v.string()?,
                1 => c.holder = v.opt_string()?,
                _ => v.seq(&mut |_, r| {
                    c.reports.push(Report::read(r)?);
                    Ok(())
                })?,
            }
            Ok(())
        })?;
        Ok(c)
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

    /// Writes `tests/fixtures/fleet/` with the hand codec: the bytes the
    /// deployed Worker sends and stores. Run once, by hand:
    /// `cargo test --lib --all-features json::fleet::tests::write_fixtures -- --ignored`.
    #[test]
    #[ignore = "writes the fleet fixtures; run once by hand"]
    fn write_fixtures() {
        let policy = BreakerPolicy {
            failure_threshold: 2,
            window: 4,
            minimum_calls: 2,
            failure_rate: 0.5,
            ..BreakerPolicy::default()
        };
        let ttl = Duration::from_secs(5);
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fleet");
        std::fs::create_dir_all(&dir).unwrap();
        let put = |name: &str, text: String| {
            std::fs::write(dir.join(format!("{name}.json")), text + "\n").unwrap();
        };
        let report = |at, verdict, lease| Report { at, verdict, lease };
        let mut f = Fleet::new();
        put("stored-new", f.json());
        let v = f.fold(
            &policy,
            1,
            &[
                report(1, Verdict::Success, None),
                report(1, Verdict::Success, None),
                report(1, Verdict::Failure, None),
            ],
        );
        put("view-closed", v.json());
        put(
            "lease-closed",
            f.lease(&policy, ttl, 1, "isolate-\"1\"").json(),
        );
        put("stored-closed", f.json());
        let v = f.fold(
            &policy,
            2,
            &[
                report(2, Verdict::Failure, None),
                report(2, Verdict::Failure, None),
                report(2, Verdict::Abandoned, None),
            ],
        );
        put("view-open", v.json());
        put("lease-busy", f.lease(&policy, ttl, 3, "isolate-2").json());
        put("stored-open", f.json());
        let answer = f.lease(&policy, ttl, 20_000, "isolate-2");
        let LeaseAnswer::Granted { token, .. } = answer else {
            panic!("no lease: {answer:?}");
        };
        put("lease-granted", answer.json());
        put("view-half-open", f.view(&policy, 20_000).json());
        put("stored-leased", f.json());
        let v = f.fold(
            &policy,
            20_001,
            &[report(20_000, Verdict::Failure, Some(token))],
        );
        put("view-reopened", v.json());
        put("stored-reopened", f.json());
        put(
            "call-lease",
            Call::to_json("openai", Some("isolate-2"), None),
        );
        put("call-view", Call::to_json("openai", None, None));
        put(
            "call-report",
            Call::to_json(
                "openai",
                None,
                Some(&[
                    report(1, Verdict::Success, None),
                    report(2, Verdict::Failure, None),
                    report(3, Verdict::Abandoned, Some(7)),
                ]),
            ),
        );
    }
}
