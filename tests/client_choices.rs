//! Failures a client causes by its own choices (a model name it made up, its own shortened
//! deadline, going away) are neutral: no breaker or health figure of the provider counts them,
//! so no client can degrade the service other clients get. On the fake platform.

use std::time::Duration;

use resilient_llm::testing::{block_on, err, ok, FakePlatform, ScriptedProvider, Step};
use resilient_llm::{
    BreakerPolicy, BreakerStore, CallOptions, ChatRequest, Client, Entry, Error, ErrorKind,
    Message, Platform, Policy, StateName, Upstream,
};

fn req(model: &str) -> ChatRequest {
    let mut r = ChatRequest::new(vec![Message::user("hello")]);
    r.model = Some(model.into());
    r
}

/// `shared` (the route `main`'s first entry, `fallback`'s fallback) and `other`, one failure
/// opening a breaker.
fn client(p: &FakePlatform, shared: Vec<Step>, any_model: bool) -> Client<FakePlatform> {
    let a = ScriptedProvider::new(p, "shared", shared);
    let b = ScriptedProvider::new(p, "other", vec![err(ErrorKind::Server, 503)]);
    Client::builder(p.clone())
        .upstream("shared", Upstream::Custom(Box::new(a)))
        .upstream("other", Upstream::Custom(Box::new(b)))
        .route("main", vec![Entry::new("shared", "listed")])
        .route(
            "fallback",
            vec![Entry::new("other", "o"), Entry::new("shared", "listed")],
        )
        .breaker(BreakerPolicy {
            failure_threshold: 1,
            ..BreakerPolicy::default()
        })
        .policy(Policy {
            any_model,
            ..Policy::default()
        })
        .build()
}

/// `shared`'s breaker state, consecutive failures, and failures in its health figures.
fn shared_health(c: &Client<FakePlatform>) -> (StateName, u32, u64) {
    let h = c
        .health()
        .into_iter()
        .find(|h| h.provider == "shared")
        .unwrap();
    (h.state, h.consecutive_failures, h.failures)
}

#[test]
fn provider_slash_model_reaches_only_listed_models_by_default() {
    let p = FakePlatform::new();
    let c = client(&p, vec![ok("listed answer")], false);
    for _ in 0..5 {
        let e = block_on(&p, c.chat(req("shared/does-not-exist"))).unwrap_err();
        assert!(matches!(e, Error::UnknownRoute(_)), "{e:?}");
        assert_eq!(e.status(), 404);
    }
    assert_eq!(shared_health(&c), (StateName::Closed, 0, 0));
    let r = block_on(&p, c.chat(req("shared/listed"))).unwrap();
    assert_eq!(r.response.text, "listed answer");
}

#[test]
fn a_made_up_model_the_provider_does_not_know_is_a_404_that_trips_nothing() {
    let p = FakePlatform::new();
    let mut script: Vec<Step> = (0..5).map(|_| err(ErrorKind::NotFound, 404)).collect();
    script.push(ok("fallback served"));
    let c = client(&p, script, true);
    for _ in 0..5 {
        let e = block_on(&p, c.chat(req("shared/does-not-exist"))).unwrap_err();
        assert_eq!(e.status(), 404, "{e:?}");
    }
    assert_eq!(shared_health(&c), (StateName::Closed, 0, 0));
    // The route using `shared` as its fallback still reaches it.
    let r = block_on(&p, c.chat(req("fallback"))).unwrap();
    assert_eq!(r.served_by.provider, "shared");
}

#[test]
fn a_callers_own_short_deadline_is_a_504_that_trips_nothing() {
    let p = FakePlatform::new();
    let slow = || Step::After(Duration::from_millis(50), Box::new(ok("slow but fine")));
    let c = client(&p, (0..6).map(|_| slow()).collect(), false);
    let opts = CallOptions {
        deadline: Some(Duration::from_millis(1)),
        ..CallOptions::default()
    };
    for _ in 0..5 {
        let e = block_on(&p, c.chat_with(req("main"), opts.clone())).unwrap_err();
        assert_eq!(e.status(), 504, "{e:?}");
        let kinds: Vec<_> = e
            .attempts()
            .iter()
            .filter_map(|a| a.error())
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, [ErrorKind::DeadlineExceeded]);
    }
    assert_eq!(shared_health(&c), (StateName::Closed, 0, 0));
    let r = block_on(&p, c.chat(req("fallback"))).unwrap();
    assert_eq!(r.served_by.provider, "shared");
}

#[test]
fn a_timeout_within_the_callers_deadline_still_counts() {
    // The entry's own timeout fired first: the provider was too slow. (A
    // timeout counts once witnessed, src/policy/timeouts.rs: with
    // `minimum_calls` 1, a provider that finished none of its last one
    // request is witness enough.)
    let p = FakePlatform::new();
    let c = Client::builder(p.clone())
        .upstream(
            "shared",
            Upstream::Custom(Box::new(ScriptedProvider::new(
                &p,
                "shared",
                vec![Step::Hang],
            ))),
        )
        .route(
            "main",
            vec![Entry::new("shared", "listed").timeout(Duration::from_millis(100))],
        )
        .breaker(BreakerPolicy {
            failure_threshold: 1,
            minimum_calls: 1,
            ..BreakerPolicy::default()
        })
        .build();
    let opts = CallOptions {
        deadline: Some(Duration::from_secs(5)),
        ..CallOptions::default()
    };
    let e = block_on(&p, c.chat_with(req("main"), opts)).unwrap_err();
    assert_eq!(e.status(), 503, "{e:?}");
    assert_eq!(shared_health(&c).0, StateName::Open);
}

#[test]
fn a_client_that_goes_away_mid_attempt_trips_nothing() {
    let p = FakePlatform::new();
    let mut script: Vec<Step> = (0..5).map(|_| Step::Hang).collect();
    script.push(ok("still healthy"));
    let c = client(&p, script, false);
    for _ in 0..5 {
        let gone = block_on(&p, async {
            resilient_llm::timeout(p.sleep(Duration::from_millis(200)), c.chat(req("main"))).await
        });
        assert!(gone.is_err(), "the caller gave up first");
    }
    assert_eq!(shared_health(&c), (StateName::Closed, 0, 0));
    let r = block_on(&p, c.chat(req("fallback"))).unwrap();
    assert_eq!(r.response.text, "still healthy");
}

#[test]
fn names_a_client_chooses_add_no_state() {
    // Breakers and statistics are per configured provider: a thousand made-up
    // model names leave exactly the state two providers had.
    let p = FakePlatform::new();
    let c = client(
        &p,
        (0..1000).map(|_| err(ErrorKind::NotFound, 404)).collect(),
        true,
    );
    for i in 0..1000 {
        let _ = block_on(&p, c.chat(req(&format!("shared/made-up-{i}"))));
    }
    let health = c.health();
    assert_eq!(health.len(), 2);
    assert!(c.store().snapshot("shared/made-up-1").is_none());
    assert_eq!(shared_health(&c), (StateName::Closed, 0, 0));
}
