//! The behaviours the failover design promises, and every row of the failure table of
//! docs/design.md, on the fake platform: deterministic, no real sleeps, no ports.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::join_all;
use resilient_llm::testing::{block_on, err, ok, FakePlatform, ScriptedProvider, Step};
use resilient_llm::{
    BreakerPolicy, CallOptions, ChatRequest, Client, Entry, Error, ErrorKind, Message, Platform,
    Policy, ProviderError, RetryPolicy, StateName, Upstream,
};

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hello")])
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn rate_limited(after: Option<Duration>) -> Step {
    Step::Fail(
        ProviderError::new(ErrorKind::RateLimited, "slow down")
            .with_status(429)
            .with_retry_after(after),
    )
}

/// A two-entry client (`primary` then `backup`) with the given scripts.
fn pair(
    p: &FakePlatform,
    primary: Vec<Step>,
    backup: Vec<Step>,
) -> (Client<FakePlatform>, [Rc<std::cell::Cell<usize>>; 2]) {
    pair_with(p, primary, backup, |b| b)
}

fn pair_with(
    p: &FakePlatform,
    primary: Vec<Step>,
    backup: Vec<Step>,
    configure: impl FnOnce(
        resilient_llm::ClientBuilder<FakePlatform>,
    ) -> resilient_llm::ClientBuilder<FakePlatform>,
) -> (Client<FakePlatform>, [Rc<std::cell::Cell<usize>>; 2]) {
    let a = ScriptedProvider::new(p, "primary", primary);
    let b = ScriptedProvider::new(p, "backup", backup);
    let calls = [a.calls(), b.calls()];
    let builder = Client::builder(p.clone())
        .upstream("primary", Upstream::Custom(Box::new(a)))
        .upstream("backup", Upstream::Custom(Box::new(b)))
        .route(
            "default",
            vec![
                Entry::new("primary", "model-a"),
                Entry::new("backup", "model-b"),
            ],
        );
    (configure(builder).build(), calls)
}

#[test]
fn full_jitter_figures_from_the_article() {
    // random fixed at 0.5, base 200 ms: 100 ms, then 200 ms.
    let p = FakePlatform::new().random([0.5]);
    let (client, calls) = pair(
        &p,
        vec![
            err(ErrorKind::Server, 503),
            err(ErrorKind::Server, 503),
            ok("recovered"),
        ],
        vec![],
    );
    let reply = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(reply.response.text, "recovered");
    assert_eq!(p.sleeps(), [ms(100), ms(200)]);
    assert_eq!(calls[0].get(), 3);
    assert_eq!(reply.attempts.len(), 3);
    assert_eq!(reply.served_by.provider, "primary");
}

#[test]
fn retry_after_beats_the_computed_backoff() {
    let p = FakePlatform::new().random([0.5]);
    // 800 ms: longer than the computed 100 ms, within the 1 s a 429 is
    // waited for while the backup could serve (`rateLimitWaitMs`).
    let (client, _) = pair(
        &p,
        vec![rate_limited(Some(Duration::from_millis(800))), ok("fine")],
        vec![],
    );
    let reply = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(p.sleeps(), [Duration::from_millis(800)]);
    assert_eq!(reply.response.text, "fine");
    assert_eq!(p.now(), 800);
}

#[test]
fn a_400_fails_on_the_first_attempt_without_failover() {
    let p = FakePlatform::new();
    let (client, calls) = pair(
        &p,
        vec![err(ErrorKind::InvalidRequest, 400)],
        vec![ok("never")],
    );
    let e = block_on(&p, client.chat(req())).unwrap_err();
    assert!(
        matches!(&e, Error::Rejected { provider, .. } if provider == "primary"),
        "{e:?}"
    );
    assert_eq!(e.status(), 400);
    assert_eq!(calls.each(), [1, 0]);
    assert!(p.sleeps().is_empty());
}

#[test]
fn fails_over_to_the_secondary_and_skips_the_primary_once_open() {
    let p = FakePlatform::new();
    let (client, calls) = pair_with(
        &p,
        vec![err(ErrorKind::Server, 503)],
        vec![ok("from backup")],
        |b| {
            b.breaker(BreakerPolicy {
                failure_threshold: 2,
                ..BreakerPolicy::default()
            })
        },
    );
    for _ in 0..2 {
        let r = block_on(&p, client.chat(req())).unwrap();
        assert_eq!(r.response.provider, "backup");
        assert_eq!(r.response.model, "model-b");
    }
    assert_eq!(calls[0].get(), 6, "two requests × three attempts");
    assert_eq!(client.health()[1].state, StateName::Open);
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(r.response.provider, "backup");
    assert_eq!(calls[0].get(), 6, "primary skipped: breaker open");
    assert_eq!(r.attempts[0].outcome_kind(), Some(ErrorKind::CircuitOpen));
    assert!(!r.attempts[0].reached);
}

#[test]
fn concurrent_requests_stop_calling_a_dead_provider_before_their_verdicts_are_in() {
    // Eight requests at once (one Worker isolate's worth) meet a dead
    // primary. Each verdict comes after its retries, so without counting
    // the requests failing now they would all retry: 8 × 3 calls.
    let p = FakePlatform::new();
    let dead = Step::After(ms(10), Box::new(err(ErrorKind::Server, 503)));
    let (client, calls) = pair_with(&p, vec![dead], vec![ok("from backup")], |b| {
        b.breaker(BreakerPolicy {
            failure_threshold: 3,
            ..BreakerPolicy::default()
        })
    });
    let replies = block_on(&p, join_all((0..8).map(|_| client.chat(req()))));
    for r in &replies {
        assert_eq!(r.as_ref().unwrap().response.provider, "backup");
    }
    assert_eq!(
        calls[0].get(),
        8,
        "one attempt each: no retry while 3 are failing"
    );
    assert_eq!(client.health()[1].state, StateName::Open);
    let retried = replies
        .iter()
        .filter(|r| r.as_ref().unwrap().attempts.len() > 2)
        .count();
    assert_eq!(retried, 0);
    block_on(&p, join_all((0..8).map(|_| client.chat(req()))));
    assert_eq!(calls[0].get(), 8, "open: skipped");
}

#[test]
fn concurrent_transient_failures_below_the_threshold_are_still_retried() {
    let p = FakePlatform::new();
    let blip = Step::After(ms(10), Box::new(err(ErrorKind::Server, 500)));
    let fine = Step::After(ms(10), Box::new(ok("from primary")));
    let (client, calls) = pair(&p, vec![blip.clone(), blip, fine], vec![ok("from backup")]);
    let replies = block_on(&p, join_all((0..2).map(|_| client.chat(req()))));
    for r in &replies {
        let r = r.as_ref().unwrap();
        assert_eq!(r.response.provider, "primary");
        assert_eq!(r.attempts.len(), 2);
    }
    assert_eq!(calls[0].get(), 4);
    assert_eq!(client.health()[1].state, StateName::Closed);
}

#[test]
fn a_retry_is_asked_of_the_breaker_again_after_its_backoff() {
    // Threshold 2. A fails at 10 ms and backs off 200 ms; B and C fail at
    // 15 ms. A and B may retry (one other failing each), C may not, and its
    // verdict plus A's, when A's wait ends, open the breaker before B's
    // wait ends: no retry ever goes out.
    let p = FakePlatform::new().random([1.0]);
    let dead = Step::After(ms(10), Box::new(err(ErrorKind::Server, 503)));
    let (client, calls) = pair_with(&p, vec![dead], vec![ok("from backup")], |b| {
        b.breaker(BreakerPolicy {
            failure_threshold: 2,
            ..BreakerPolicy::default()
        })
    });
    let at = |start: u64| {
        let (p, client) = (&p, &client);
        async move {
            resilient_llm::testing::sleep(p, ms(start)).await;
            client.chat(req()).await
        }
    };
    let replies = block_on(&p, join_all(vec![at(0), at(5), at(5)]));
    for r in &replies {
        let r = r.as_ref().unwrap();
        assert_eq!(r.response.provider, "backup");
        assert_eq!(r.attempts.len(), 2, "one primary attempt, then backup");
    }
    assert_eq!(calls[0].get(), 3);
    assert_eq!(client.health()[1].state, StateName::Open);
}

#[test]
fn breaker_closes_again_through_one_half_open_probe() {
    let p = FakePlatform::new();
    let policy = BreakerPolicy {
        failure_threshold: 1,
        cooldown: Duration::from_secs(10),
        ..BreakerPolicy::default()
    };
    let (client, calls) = pair_with(
        &p,
        vec![
            err(ErrorKind::Server, 503),
            err(ErrorKind::Server, 503),
            err(ErrorKind::Server, 503),
            ok("back"),
        ],
        vec![ok("backup")],
        |b| b.breaker(policy),
    );
    block_on(&p, client.chat(req())).unwrap();
    assert_eq!(calls[0].get(), 3);
    p.advance(Duration::from_secs(5));
    block_on(&p, client.chat(req())).unwrap();
    assert_eq!(calls[0].get(), 3, "still cooling down");
    p.advance(Duration::from_secs(6));
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(calls[0].get(), 4, "exactly one probe");
    assert_eq!(r.response.provider, "primary");
    assert_eq!(client.health()[1].state, StateName::Closed);
}

#[test]
fn a_failed_probe_is_not_retried_and_reopens() {
    let p = FakePlatform::new();
    let policy = BreakerPolicy {
        failure_threshold: 1,
        cooldown: Duration::from_secs(10),
        ..BreakerPolicy::default()
    };
    let (client, calls) = pair_with(
        &p,
        vec![err(ErrorKind::Server, 503)],
        vec![ok("backup")],
        |b| b.breaker(policy),
    );
    block_on(&p, client.chat(req())).unwrap();
    assert_eq!(calls[0].get(), 3);
    p.advance(Duration::from_secs(10));
    block_on(&p, client.chat(req())).unwrap();
    assert_eq!(calls[0].get(), 4, "one probe, no retries");
    // Opened at 300 ms (after two backoffs); probed at 10.3 s; cooldown doubled.
    assert_eq!(client.health()[1].open_until, Some(10_300 + 20_000));
}

#[test]
fn rate_limit_with_short_retry_after_retries_then_fails_over_with_one_breaker_failure() {
    let p = FakePlatform::new();
    let (client, calls) = pair(
        &p,
        vec![rate_limited(Some(Duration::from_secs(1)))],
        vec![ok("backup")],
    );
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(p.sleeps(), [Duration::from_secs(1), Duration::from_secs(1)]);
    assert_eq!(calls.each(), [3, 1]);
    assert_eq!(r.served_by.provider, "backup");
    assert_eq!(
        client.health()[1].consecutive_failures,
        1,
        "one verdict per provider per request"
    );
}

#[test]
fn retry_after_beyond_the_cap_fails_over_at_once() {
    let p = FakePlatform::new();
    let (client, calls) = pair(
        &p,
        vec![rate_limited(Some(Duration::from_secs(60)))],
        vec![ok("backup")],
    );
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(calls.each(), [1, 1]);
    assert!(p.sleeps().is_empty());
    assert_eq!(r.served_by.provider, "backup");
    assert_eq!(client.health()[1].consecutive_failures, 1);
}

#[test]
fn retry_after_beyond_the_deadline_fails_over_at_once() {
    let p = FakePlatform::new();
    let (client, calls) = pair(
        &p,
        vec![rate_limited(Some(Duration::from_secs(5)))],
        vec![ok("backup")],
    );
    let opts = CallOptions {
        deadline: Some(Duration::from_secs(3)),
        ..CallOptions::default()
    };
    block_on(&p, client.chat_with(req(), opts)).unwrap();
    assert_eq!(calls.each(), [1, 1]);
    assert!(p.sleeps().is_empty());
}

#[test]
fn rate_limit_without_retry_after_uses_backoff() {
    let p = FakePlatform::new().random([0.25]);
    let (client, _) = pair(
        &p,
        vec![rate_limited(None), rate_limited(None), ok("ok")],
        vec![],
    );
    block_on(&p, client.chat(req())).unwrap();
    assert_eq!(p.sleeps(), [ms(50), ms(100)]);
}

#[test]
fn quota_exhausted_fails_over_at_once_and_counts() {
    let p = FakePlatform::new();
    let (client, calls) = pair(
        &p,
        vec![err(ErrorKind::QuotaExhausted, 429)],
        vec![ok("backup")],
    );
    block_on(&p, client.chat(req())).unwrap();
    assert_eq!(calls.each(), [1, 1]);
    assert_eq!(client.health()[1].consecutive_failures, 1);
}

#[test]
fn transient_server_errors_and_network_errors_are_retried() {
    for kind in [
        ErrorKind::Server,
        ErrorKind::Transport,
        ErrorKind::Stalled,
        ErrorKind::Decode,
    ] {
        let p = FakePlatform::new();
        let (client, calls) = pair(&p, vec![err(kind, 500), ok("second time")], vec![]);
        let r = block_on(&p, client.chat(req())).unwrap();
        assert_eq!(r.response.text, "second time", "{kind:?}");
        assert_eq!(calls[0].get(), 2, "{kind:?}");
        assert_eq!(
            client.health()[1].consecutive_failures,
            0,
            "{kind:?}: success wins the verdict"
        );
    }
}

#[test]
fn auth_fails_over_at_once_and_trips_the_breaker() {
    for status in [401, 403] {
        let p = FakePlatform::new();
        let (client, calls) = pair_with(
            &p,
            vec![err(ErrorKind::Auth, status)],
            vec![ok("backup")],
            |b| {
                b.breaker(BreakerPolicy {
                    failure_threshold: 1,
                    ..BreakerPolicy::default()
                })
            },
        );
        let r = block_on(&p, client.chat(req())).unwrap();
        assert_eq!(calls.each(), [1, 1], "{status}");
        assert_eq!(r.served_by.provider, "backup");
        assert_eq!(client.health()[1].state, StateName::Open, "{status}");
    }
}

#[test]
fn not_found_fails_over_at_once_without_touching_the_breaker() {
    // A missing model says nothing of the provider's other models.
    let p = FakePlatform::new();
    let (client, calls) = pair_with(
        &p,
        vec![err(ErrorKind::NotFound, 404)],
        vec![ok("backup")],
        |b| {
            b.breaker(BreakerPolicy {
                failure_threshold: 1,
                ..BreakerPolicy::default()
            })
        },
    );
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(calls.each(), [1, 1]);
    assert_eq!(r.served_by.provider, "backup");
    assert_eq!(client.health()[1].state, StateName::Closed);
    assert_eq!(client.health()[1].consecutive_failures, 0);
}

#[test]
fn context_length_fails_over_without_touching_the_breaker() {
    let p = FakePlatform::new();
    let (client, calls) = pair_with(
        &p,
        vec![err(ErrorKind::ContextLength, 400)],
        vec![ok("bigger window")],
        |b| {
            b.breaker(BreakerPolicy {
                failure_threshold: 1,
                ..BreakerPolicy::default()
            })
        },
    );
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(r.response.text, "bigger window");
    assert_eq!(calls.each(), [1, 1]);
    let h = &client.health()[1];
    assert_eq!((h.state, h.consecutive_failures), (StateName::Closed, 0));
}

#[test]
fn content_filter_is_returned_as_is() {
    let p = FakePlatform::new();
    let refusal =
        ProviderError::new(ErrorKind::ContentFilter, "flagged by policy").with_status(400);
    let (client, calls) = pair(&p, vec![Step::Fail(refusal.clone())], vec![ok("never")]);
    let e = block_on(&p, client.chat(req())).unwrap_err();
    assert_eq!(calls.each(), [1, 0]);
    match e {
        Error::Rejected { error, .. } => assert_eq!(error, refusal),
        other => panic!("{other:?}"),
    }
}

#[test]
fn request_errors_413_and_422_are_returned() {
    for status in [413, 422] {
        let p = FakePlatform::new();
        let (client, calls) = pair(
            &p,
            vec![err(ErrorKind::InvalidRequest, status)],
            vec![ok("never")],
        );
        let e = block_on(&p, client.chat(req())).unwrap_err();
        assert_eq!(e.status(), status);
        assert_eq!(calls.each(), [1, 0]);
    }
}

#[test]
fn should_retry_header_overrides_the_row() {
    let p = FakePlatform::new();
    let mut no = ProviderError::new(ErrorKind::Server, "").with_status(500);
    no.should_retry = Some(false);
    let (client, calls) = pair(&p, vec![Step::Fail(no)], vec![ok("backup")]);
    block_on(&p, client.chat(req())).unwrap();
    assert_eq!(
        calls.each(),
        [1, 1],
        "x-should-retry: false → no retry, still fail over"
    );

    let p = FakePlatform::new();
    let mut yes = ProviderError::new(ErrorKind::InvalidRequest, "").with_status(409);
    yes.should_retry = Some(true);
    let (client, calls) = pair(&p, vec![Step::Fail(yes), ok("second")], vec![]);
    block_on(&p, client.chat(req())).unwrap();
    assert_eq!(calls[0].get(), 2, "x-should-retry: true → retried");
}

#[test]
fn attempt_timeout_drops_the_call_and_fails_over_instead_of_retrying() {
    let p = FakePlatform::new();
    let (client, calls) = pair_with(&p, vec![Step::Hang], vec![ok("backup")], |b| {
        b.policy(Policy {
            attempt_timeout: Duration::from_secs(5),
            ..Policy::default()
        })
    });
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(calls.each(), [1, 1]);
    assert_eq!(p.now(), 5000);
    assert_eq!(r.attempts[0].outcome_kind(), Some(ErrorKind::Timeout));
    assert_eq!(r.attempts[0].duration, Duration::from_secs(5));
}

#[test]
fn per_entry_timeout_overrides_the_client_timeout() {
    let p = FakePlatform::new();
    let a = ScriptedProvider::new(&p, "slow", [Step::Hang]);
    let b = ScriptedProvider::new(&p, "fast", [ok("fast")]);
    let client = Client::builder(p.clone())
        .upstream("slow", Upstream::Custom(Box::new(a)))
        .upstream("fast", Upstream::Custom(Box::new(b)))
        .route(
            "default",
            vec![
                Entry::new("slow", "m").timeout(ms(750)),
                Entry::new("fast", "m"),
            ],
        )
        .build();
    block_on(&p, client.chat(req())).unwrap();
    assert_eq!(p.now(), 750);
}

#[test]
fn the_deadline_bounds_every_retry_and_fallback() {
    let p = FakePlatform::new().random([0.99]);
    let slow_fail = || {
        Step::After(
            Duration::from_secs(4),
            Box::new(err(ErrorKind::Server, 503)),
        )
    };
    let (client, _) = pair_with(&p, vec![slow_fail()], vec![slow_fail()], |b| {
        b.policy(Policy {
            deadline: Duration::from_secs(10),
            retry: RetryPolicy {
                max_attempts: 10,
                base_delay: Duration::from_secs(1),
                ..RetryPolicy::default()
            },
            ..Policy::default()
        })
    });
    let e = block_on(&p, client.chat(req())).unwrap_err();
    assert!(p.now() <= 10_000, "finished at {} ms", p.now());
    assert!(matches!(e, Error::AllProvidersFailed(_)), "{e:?}");
    // No sleep was started that could not finish before the deadline.
    let slept: Duration = p.sleeps().iter().sum();
    assert!(slept < Duration::from_secs(10));
}

#[test]
fn attempt_timeout_is_cut_to_what_is_left_of_the_deadline() {
    let p = FakePlatform::new();
    let (client, _) = pair(&p, vec![Step::Hang], vec![Step::Hang]);
    let opts = CallOptions {
        deadline: Some(Duration::from_secs(2)),
        ..CallOptions::default()
    };
    let e = block_on(&p, client.chat_with(req(), opts)).unwrap_err();
    assert_eq!(p.now(), 2000);
    // The caller's own deadline cut the attempt: that is no timeout of the
    // provider's, and it leaves no time for the next entry.
    let kinds: Vec<_> = e.attempts().iter().map(|a| a.outcome_kind()).collect();
    assert_eq!(kinds, [Some(ErrorKind::DeadlineExceeded)]);
    assert_eq!(e.status(), 504);
}

#[test]
fn the_retry_budget_stops_a_retry_storm() {
    let p = FakePlatform::new();
    let (client, calls) = pair_with(
        &p,
        vec![err(ErrorKind::Server, 503)],
        vec![ok("backup")],
        |b| {
            b.policy(Policy {
                budget: resilient_llm::BudgetPolicy {
                    ratio: 0.2,
                    floor_per_sec: 0.0,
                    capacity: 4.0,
                },
                ..Policy::default()
            })
            .breaker(BreakerPolicy {
                failure_threshold: 1000,
                minimum_calls: 1000,
                ..BreakerPolicy::default()
            })
        },
    );
    for _ in 0..20 {
        block_on(&p, client.chat(req())).unwrap();
    }
    // A full bucket of 4 (the first deposit overflows it) plus 0.2 for each
    // of the other 19 requests: 7 whole retries, not 40.
    assert_eq!(calls[0].get(), 20 + 7);
}

#[test]
fn when_every_breaker_is_open_the_one_cooling_down_first_is_tried() {
    let p = FakePlatform::new();
    let a = ScriptedProvider::new(&p, "a", [err(ErrorKind::Server, 503)]);
    let b = ScriptedProvider::new(
        &p,
        "b",
        [
            err(ErrorKind::Server, 503),
            err(ErrorKind::Server, 503),
            err(ErrorKind::Server, 503),
            ok("b is back"),
        ],
    );
    let calls = [a.calls(), b.calls()];
    let client = Client::builder(p.clone())
        .upstream("a", Upstream::Custom(Box::new(a)))
        .upstream("b", Upstream::Custom(Box::new(b)))
        .route("default", vec![Entry::new("a", "m"), Entry::new("b", "m")])
        .breaker_for(
            "a",
            BreakerPolicy {
                failure_threshold: 1,
                cooldown: Duration::from_secs(60),
                max_cooldown: Duration::from_secs(60),
                ..BreakerPolicy::default()
            },
        )
        .breaker_for(
            "b",
            BreakerPolicy {
                failure_threshold: 1,
                cooldown: Duration::from_secs(30),
                ..BreakerPolicy::default()
            },
        )
        .build();
    assert!(block_on(&p, client.chat(req())).is_err());
    assert_eq!(calls.each(), [3, 3]);
    let r = block_on(&p, client.chat(req())).unwrap();
    assert_eq!(
        calls.each(),
        [3, 4],
        "b's cooldown ends first: one forced call"
    );
    assert_eq!(r.served_by.provider, "b");
    assert_eq!(client.health()[1].state, StateName::Closed);
}

#[test]
fn a_half_open_provider_busy_with_its_probe_still_serves_a_request_everything_else_failed() {
    // The primary heals; its one probe is out (100 ms) when a second
    // request finds the backup failing. Turning it away would answer 503
    // while the primary serves: it gets one forced call instead.
    let p = FakePlatform::new();
    let policy = BreakerPolicy {
        failure_threshold: 1,
        cooldown: Duration::from_secs(10),
        ..BreakerPolicy::default()
    };
    let slow_ok = Step::After(ms(100), Box::new(ok("primary is back")));
    let (client, calls) = pair_with(
        &p,
        vec![err(ErrorKind::Auth, 401), slow_ok.clone(), slow_ok],
        vec![ok("backup"), err(ErrorKind::Auth, 401)],
        |b| b.breaker(policy),
    );
    block_on(&p, client.chat(req())).unwrap();
    assert_eq!(client.health()[1].state, StateName::Open);
    p.advance(Duration::from_secs(11));
    let at = |start: u64| {
        let (p, client) = (&p, &client);
        async move {
            resilient_llm::testing::sleep(p, ms(start)).await;
            client.chat(req()).await
        }
    };
    let replies = block_on(&p, join_all(vec![at(0), at(10)]));
    for r in &replies {
        assert_eq!(r.as_ref().unwrap().served_by.provider, "primary");
    }
    let late = replies[1].as_ref().unwrap();
    assert_eq!(late.attempts.len(), 3, "skipped, backup failed, forced");
    assert!(!late.attempts[0].reached);
    assert_eq!(calls.each(), [3, 2]);
    assert_eq!(client.health()[1].state, StateName::Closed);
}

#[test]
fn all_providers_failed_names_every_attempt_in_order() {
    let p = FakePlatform::new();
    let (client, _) = pair(
        &p,
        vec![rate_limited(None)],
        vec![err(ErrorKind::Auth, 401)],
    );
    let e = block_on(&p, client.chat(req())).unwrap_err();
    let Error::AllProvidersFailed(ex) = &e else {
        panic!("{e:?}")
    };
    let seen: Vec<(&str, u32)> = ex
        .attempts
        .iter()
        .map(|a| (a.provider.as_str(), a.number))
        .collect();
    assert_eq!(
        seen,
        [
            ("primary", 1),
            ("primary", 2),
            ("primary", 3),
            ("backup", 1)
        ]
    );
    assert_eq!(e.status(), 503);
    let msg = e.to_string();
    assert!(
        msg.contains("primary: rate limited") && msg.contains("backup: authentication failed"),
        "{msg}"
    );
}

#[test]
fn events_report_retries_failures_failovers_and_transitions() {
    let p = FakePlatform::new();
    let log = Rc::new(RefCell::new(Vec::<String>::new()));
    let sink = log.clone();
    let (client, _) = pair_with(&p, vec![err(ErrorKind::Server, 503)], vec![ok("b")], |b| {
        b.breaker(BreakerPolicy {
            failure_threshold: 1,
            ..BreakerPolicy::default()
        })
        .observer(move |e| {
            sink.borrow_mut().push(
                serde_json::to_value(e).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
    });
    block_on(&p, client.chat(req())).unwrap();
    assert_eq!(
        *log.borrow(),
        ["retry", "retry", "provider_failed", "breaker", "failover"]
    );
}

#[test]
fn unknown_route_and_empty_messages_are_refused_before_any_call() {
    let p = FakePlatform::new();
    let (client, calls) = pair(&p, vec![ok("x")], vec![]);
    let mut r = req();
    r.model = Some("nope".into());
    assert_eq!(block_on(&p, client.chat(r)).unwrap_err().status(), 404);
    assert_eq!(
        block_on(&p, client.chat(ChatRequest::default()))
            .unwrap_err()
            .status(),
        400
    );
    assert_eq!(calls[0].get(), 0);
}

#[test]
fn defaults_survive_a_sixty_second_outage_and_recover_within_thirty() {
    // One request every 4 s; the primary is dead from t=0 to t=60 s.
    let p = FakePlatform::new();
    let dead_until = 60_000;
    let outage = Step::Until {
        at: dead_until,
        before: Box::new(err(ErrorKind::Server, 503)),
        after: Box::new(ok("primary")),
    };
    let (client, calls) = pair(&p, vec![outage], vec![ok("backup")]);
    let mut first_primary_answer = None;
    let mut calls_during_outage = 0;
    for i in 0..40u64 {
        let at = i * 4000;
        if p.now() < at {
            p.advance(Duration::from_millis(at - p.now()));
        }
        let r = block_on(&p, client.chat(req())).expect("every request is answered");
        if at < dead_until {
            assert_eq!(r.served_by.provider, "backup", "t={at}");
            calls_during_outage = calls[0].get();
        } else if r.served_by.provider == "primary" && first_primary_answer.is_none() {
            first_primary_answer = Some(at);
        }
    }
    let back = first_primary_answer.expect("primary used again");
    assert!(back - dead_until <= 30_000, "primary back at {back} ms");
    // Without a breaker: 15 requests × 3 attempts = 45 calls.
    assert!(
        calls_during_outage <= 5 * 3 + 3,
        "the dead primary was not hammered: {calls_during_outage} calls"
    );
}

trait OutcomeKind {
    fn outcome_kind(&self) -> Option<ErrorKind>;
}

impl OutcomeKind for resilient_llm::Attempt {
    fn outcome_kind(&self) -> Option<ErrorKind> {
        self.error().map(|e| e.kind)
    }
}

trait Counts {
    fn each(&self) -> [usize; 2];
}

impl Counts for [Rc<std::cell::Cell<usize>>; 2] {
    fn each(&self) -> [usize; 2] {
        [self[0].get(), self[1].get()]
    }
}
