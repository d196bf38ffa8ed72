//! Breakers per (provider, model): one model's rate limit leaves the
//! provider's other models in service; a provider-wide failure (its key
//! refused, its host unreachable) takes them all out; models no route lists
//! share one breaker. On the fake clock, in memory and through the fleet.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use resilient_llm::fleet::fake::{FakeLink, FakeObject};
use resilient_llm::testing::{block_on, err, ok, FakePlatform, ScriptedProvider, Step};
use resilient_llm::{
    breaker_key, BreakerPolicy, BreakerStore, CallOptions, ChatRequest, ChatResponse, Client,
    CustomProvider, Entry, ErrorKind, Event, FleetStore, LocalFuture, Message, Platform, Policy,
    ProviderError, RetryPolicy, StateName, Upstream,
};

/// One provider serving several models, each with its own script.
struct ByModel(Vec<(String, ScriptedProvider)>);

impl CustomProvider for ByModel {
    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        model: &'a str,
    ) -> LocalFuture<'a, Result<ChatResponse, ProviderError>> {
        match self.0.iter().find(|(m, _)| m == model) {
            Some((_, p)) => p.chat(req, model),
            None => Box::pin(async move {
                Err(ProviderError::new(ErrorKind::NotFound, "no such model").with_status(404))
            }),
        }
    }
}

fn breaker() -> BreakerPolicy {
    BreakerPolicy {
        failure_threshold: 3,
        cooldown: Duration::from_secs(10),
        max_cooldown: Duration::from_secs(20),
        ..BreakerPolicy::default()
    }
}

fn policy() -> Policy {
    Policy {
        retry: RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        },
        any_model: true,
        ..Policy::default()
    }
}

struct World {
    p: FakePlatform,
    flaky_calls: Rc<Cell<usize>>,
    steady_calls: Rc<Cell<usize>>,
    transitions: Rc<RefCell<Vec<String>>>,
}

/// Provider `shared` serves `flaky` (failing with `flaky`) and `steady`
/// (failing with `steady`); routes `a` = [shared/flaky, backup/m] and
/// `b` = [shared/steady, backup/m].
fn world(flaky: Step, steady: Step) -> (World, resilient_llm::ClientBuilder<FakePlatform>) {
    let p = FakePlatform::new().at(1_000);
    let flaky = ScriptedProvider::new(&p, "shared", [flaky]);
    let steady = ScriptedProvider::new(&p, "shared", [steady]);
    let (flaky_calls, steady_calls) = (flaky.calls(), steady.calls());
    let shared = ByModel(vec![
        ("flaky".into(), flaky),
        ("steady".into(), steady),
        (
            "unlisted".into(),
            ScriptedProvider::new(&p, "shared", [err(ErrorKind::Server, 503)]),
        ),
    ]);
    let transitions: Rc<RefCell<Vec<String>>> = Rc::default();
    let seen = transitions.clone();
    let builder = Client::builder(p.clone())
        .policy(policy())
        .breaker(breaker())
        .upstream("shared", Upstream::Custom(Box::new(shared)))
        .upstream(
            "backup",
            Upstream::Custom(Box::new(ScriptedProvider::new(&p, "backup", [ok("b")]))),
        )
        .route(
            "a",
            vec![
                Entry::new("shared", "flaky").label("fast"),
                Entry::new("backup", "m"),
            ],
        )
        .route(
            "b",
            vec![Entry::new("shared", "steady"), Entry::new("backup", "m")],
        )
        .observer(move |e| {
            if let Event::Breaker {
                provider,
                model,
                label,
                to,
                ..
            } = e
            {
                seen.borrow_mut()
                    .push(format!("{provider}/{model} {label:?} {to}"));
            }
        });
    let w = World {
        p,
        flaky_calls,
        steady_calls,
        transitions,
    };
    (w, builder)
}

fn ask<S: BreakerStore>(c: &Client<FakePlatform, S>, p: &FakePlatform, route: &str) -> String {
    let opts = CallOptions {
        route: Some(route.into()),
        ..CallOptions::default()
    };
    let req = ChatRequest::new(vec![Message::user("hi")]);
    let reply = block_on(p, c.chat_with(req, opts)).expect("an answer");
    format!("{}/{}", reply.served_by.provider, reply.served_by.model)
}

fn model_state<S: BreakerStore>(c: &Client<FakePlatform, S>, model: &str) -> StateName {
    let health = c.health();
    let shared = health
        .iter()
        .find(|h| h.provider == "shared")
        .expect("shared");
    shared
        .models
        .iter()
        .find(|m| m.model == model)
        .map(|m| m.state)
        .expect("the model is listed")
}

#[test]
fn a_rate_limited_model_leaves_its_providers_other_models_in_service() {
    let (w, b) = world(err(ErrorKind::RateLimited, 429), ok("steady answer"));
    let c = b.build();
    for _ in 0..3 {
        assert_eq!(ask(&c, &w.p, "a"), "backup/m");
        assert_eq!(ask(&c, &w.p, "b"), "shared/steady");
    }
    assert_eq!(model_state(&c, "flaky"), StateName::Open);
    assert_eq!(model_state(&c, "steady"), StateName::Closed);
    // Open: route a skips the flaky model without a call; route b still
    // reaches the same provider's healthy model.
    assert_eq!(ask(&c, &w.p, "a"), "backup/m");
    assert_eq!(ask(&c, &w.p, "b"), "shared/steady");
    assert_eq!(w.flaky_calls.get(), 3);
    assert_eq!(w.steady_calls.get(), 4);
    // The provider's summary is its worst model's; its models say which.
    let health = c.health();
    let shared = health
        .iter()
        .find(|h| h.provider == "shared")
        .expect("shared");
    assert_eq!(shared.state, StateName::Open);
    let fast = shared
        .models
        .iter()
        .find(|m| m.model == "flaky")
        .expect("flaky");
    assert_eq!(fast.label.as_deref(), Some("fast"));
    assert_eq!(fast.open_until, Some(1_000 + 10_000));
    // Each model's own figures beside the provider's over both.
    let steady = shared.models.iter().find(|m| m.model == "steady").unwrap();
    assert_eq!((fast.requests, fast.failures), (3, 3));
    assert_eq!((steady.requests, steady.failures), (4, 0));
    assert_eq!((fast.error_rate, steady.error_rate), (1.0, 0.0));
    assert!(steady.latency_ms.p50.is_some());
    assert_eq!((shared.requests, shared.failures), (7, 3));
    // The event names provider, model and label.
    assert_eq!(
        *w.transitions.borrow(),
        ["shared/flaky Some(\"fast\") open"]
    );
}

#[test]
fn a_refused_key_opens_every_model_of_the_provider() {
    let (w, b) = world(err(ErrorKind::Auth, 401), err(ErrorKind::Auth, 401));
    let c = b.build();
    // Three 401s, all on the flaky model: the steady model counts them too.
    for _ in 0..3 {
        assert_eq!(ask(&c, &w.p, "a"), "backup/m");
    }
    assert_eq!(model_state(&c, "flaky"), StateName::Open);
    assert_eq!(model_state(&c, "steady"), StateName::Open);
    assert_eq!(ask(&c, &w.p, "b"), "backup/m");
    assert_eq!(w.steady_calls.get(), 0, "never called: its provider is out");
    let t = w.transitions.borrow();
    assert!(t.contains(&"shared/steady None open".to_string()), "{t:?}");
}

#[test]
fn an_unreachable_host_opens_every_model_but_a_reset_does_not() {
    let refused = Step::Fail(ProviderError::new(
        ErrorKind::Transport,
        "connection refused: ECONNREFUSED 127.0.0.1:9",
    ));
    let (w, b) = world(refused, ok("steady answer"));
    let c = b.build();
    for _ in 0..3 {
        assert_eq!(ask(&c, &w.p, "a"), "backup/m");
    }
    assert_eq!(model_state(&c, "steady"), StateName::Open);

    let reset = Step::Fail(ProviderError::new(
        ErrorKind::Transport,
        "connection reset: other side closed",
    ));
    let (w, b) = world(reset, ok("steady answer"));
    let c = b.build();
    for _ in 0..3 {
        assert_eq!(ask(&c, &w.p, "a"), "backup/m");
    }
    assert_eq!(model_state(&c, "flaky"), StateName::Open);
    assert_eq!(model_state(&c, "steady"), StateName::Closed);
    assert_eq!(ask(&c, &w.p, "b"), "shared/steady");
}

#[test]
fn a_success_of_one_model_does_not_close_anothers_count() {
    // A provider-wide failure counts against the sibling; the sibling's own
    // success resets its count as usual.
    let (w, b) = world(err(ErrorKind::Auth, 401), ok("steady answer"));
    let c = b.build();
    assert_eq!(ask(&c, &w.p, "a"), "backup/m");
    assert_eq!(ask(&c, &w.p, "a"), "backup/m");
    let key = breaker_key("shared", "steady");
    assert_eq!(
        c.store().snapshot(&key).map(|s| s.consecutive_failures),
        Some(2)
    );
    assert_eq!(ask(&c, &w.p, "b"), "shared/steady");
    assert_eq!(
        c.store().snapshot(&key).map(|s| s.consecutive_failures),
        Some(0)
    );
}

#[test]
fn models_no_route_lists_share_one_breaker_per_provider() {
    let (w, b) = world(ok("flaky answer"), ok("steady answer"));
    let c = b.build();
    let direct = |model: &str| {
        let mut req = ChatRequest::new(vec![Message::user("hi")]);
        req.model = Some(format!("shared/{model}"));
        block_on(&w.p, c.chat(req)).map(|r| r.served_by.model)
    };
    for i in 0..3 {
        assert!(direct("unlisted").is_err());
        // Made-up names add no state: a 404 trips nothing, and every
        // unlisted name lands on the same key.
        assert!(direct(&format!("made-up-{i}")).is_err());
    }
    assert_eq!(model_state(&c, "*"), StateName::Open);
    assert!(c.store().snapshot("shared/unlisted").is_none());
    assert!(c.store().snapshot("shared/made-up-0").is_none());
    // The listed models are untouched.
    assert_eq!(ask(&c, &w.p, "a"), "shared/flaky");
    assert_eq!(ask(&c, &w.p, "b"), "shared/steady");
}

#[test]
fn per_model_breakers_are_shared_fleet_wide_each_under_its_own_key() {
    let (w, b) = world(err(ErrorKind::Server, 503), ok("steady answer"));
    let obj = FakeObject::new(&w.p, breaker());
    let c = b.build_with_store(FleetStore::new(FakeLink::new(&obj), "a", breaker()));
    for _ in 0..3 {
        assert_eq!(ask(&c, &w.p, "a"), "backup/m");
        assert_eq!(ask(&c, &w.p, "b"), "shared/steady");
        c.store().flush_all();
        c.store().link().pump();
    }
    let flaky = obj.fleet("shared/flaky").expect("the flaky model's object");
    assert!(matches!(
        flaky.breaker.state,
        resilient_llm::State::Open { .. }
    ));
    let steady = obj
        .fleet("shared/steady")
        .expect("the steady model's object");
    assert_eq!(steady.breaker.state, resilient_llm::State::Closed);
    assert!(obj.fleet("shared").is_none(), "no provider-wide object");
}

#[test]
fn a_provider_wide_failure_reaches_the_siblings_fleet_object() {
    let (w, b) = world(err(ErrorKind::Auth, 403), ok("steady answer"));
    let obj = FakeObject::new(&w.p, breaker());
    let c = b.build_with_store(FleetStore::new(FakeLink::new(&obj), "a", breaker()));
    for _ in 0..3 {
        assert_eq!(ask(&c, &w.p, "a"), "backup/m");
        c.store().flush_all();
        c.store().link().pump();
    }
    let steady = obj
        .fleet("shared/steady")
        .expect("the steady model's object");
    assert!(matches!(
        steady.breaker.state,
        resilient_llm::State::Open { .. }
    ));
    assert_eq!(w.steady_calls.get(), 0);
}

#[test]
fn a_client_that_goes_away_gives_its_probe_lease_back_at_once_and_counts_nothing() {
    let three_then_hang = Step::Until {
        at: 5_000,
        before: Box::new(err(ErrorKind::Server, 503)),
        after: Box::new(Step::Hang),
    };
    let (w, b) = world(three_then_hang, ok("steady answer"));
    let obj = FakeObject::new(&w.p, breaker());
    let c = b.build_with_store(FleetStore::new(FakeLink::new(&obj), "a", breaker()));
    for _ in 0..3 {
        assert_eq!(ask(&c, &w.p, "a"), "backup/m");
    }
    c.store().flush_all();
    c.store().link().pump();
    w.p.advance(Duration::from_secs(10));
    // Past the cooldown this request holds the fleet's probe lease; its
    // client goes away after 100 ms, mid-attempt.
    let opts = CallOptions {
        route: Some("a".into()),
        ..CallOptions::default()
    };
    let req = ChatRequest::new(vec![Message::user("hi")]);
    let gone = block_on(
        &w.p,
        resilient_llm::timeout(
            w.p.sleep(Duration::from_millis(100)),
            c.chat_with(req, opts),
        ),
    );
    assert!(gone.is_err(), "the caller went away first");
    assert_eq!(w.flaky_calls.get(), 4, "the probe was under way");
    c.store().link().pump();
    let fleet = obj.fleet("shared/flaky").expect("stored");
    assert!(fleet.leases.is_empty(), "the lease came back at once");
    assert_eq!(
        fleet.breaker.state.name(),
        StateName::HalfOpen,
        "neutral: neither a failure that re-opens nor a success that closes"
    );
}
