//! Property: the chain never calls a provider whose breaker has not granted
//! it a permit, whatever the providers do and whenever requests come.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use proptest::prelude::*;
use resilient_llm::testing::{block_on, FakePlatform, ScriptedProvider, Step};
use resilient_llm::{
    BreakerPolicy, BreakerStore, ChatRequest, ChatResponse, CircuitOpen, Client, CustomProvider,
    Entry, ErrorKind, MemoryStore, Message, Outcome, Permit, ProviderError, UnixMillis, Upstream,
};
use resilient_llm::{LocalFuture, Snapshot};

/// Permits granted and not yet handed back, per provider.
type Live = Rc<RefCell<BTreeMap<String, i64>>>;

/// A store that counts live permits around a memory store.
struct Watching {
    inner: MemoryStore,
    live: Live,
}

impl Watching {
    fn bump(&self, key: &str, by: i64) {
        // Breakers are per (provider, model); the provider holds the permit.
        let provider = resilient_llm::provider_of(key).to_string();
        *self.live.borrow_mut().entry(provider).or_default() += by;
    }
}

impl BreakerStore for Watching {
    async fn try_acquire(&self, key: &str, now: UnixMillis) -> Result<Permit, CircuitOpen> {
        let r = self.inner.try_acquire(key, now).await;
        if r.is_ok() {
            self.bump(key, 1);
        }
        r
    }
    fn force(&self, key: &str, now: UnixMillis) -> Permit {
        self.bump(key, 1);
        self.inner.force(key, now)
    }
    fn may_retry(&self, key: &str, now: UnixMillis, permit: &mut Permit, failed: bool) -> bool {
        self.inner.may_retry(key, now, permit, failed)
    }
    fn record(&self, key: &str, now: UnixMillis, permit: Permit, outcome: Outcome) {
        self.bump(key, -1);
        self.inner.record(key, now, permit, outcome)
    }
    fn release(&self, key: &str, permit: Permit) {
        self.bump(key, -1);
        self.inner.release(key, permit)
    }
    fn note_failure(&self, key: &str, now: UnixMillis) {
        self.inner.note_failure(key, now)
    }
    fn snapshot(&self, key: &str) -> Option<Snapshot> {
        self.inner.snapshot(key)
    }
}

/// A provider that checks it holds a permit whenever it is called.
struct Checked {
    id: String,
    inner: ScriptedProvider,
    live: Live,
    violations: Rc<RefCell<Vec<String>>>,
}

impl CustomProvider for Checked {
    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        model: &'a str,
    ) -> LocalFuture<'a, Result<ChatResponse, ProviderError>> {
        let held = self.live.borrow().get(&self.id).copied().unwrap_or(0);
        if held <= 0 {
            self.violations
                .borrow_mut()
                .push(format!("{} called without a permit", self.id));
        }
        self.inner.chat(req, model)
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Ok("ok".into())),
        2 => Just(Step::Fail(ProviderError::new(ErrorKind::Server, "").with_status(503))),
        1 => Just(Step::Fail(ProviderError::new(ErrorKind::Auth, "").with_status(401))),
        1 => Just(Step::Fail(ProviderError::new(ErrorKind::ContextLength, "").with_status(400))),
        1 => (1u64..3000).prop_map(|ms| Step::After(Duration::from_millis(ms), Box::new(Step::Ok("slow".into())))),
        1 => Just(Step::Hang),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn the_chain_never_calls_a_provider_whose_breaker_rejects(
        scripts in proptest::collection::vec(proptest::collection::vec(step(), 1..40), 3),
        gaps in proptest::collection::vec(0u64..8000, 1..40),
    ) {
        let p = FakePlatform::new().random([0.3, 0.9, 0.1]);
        let live: Live = Rc::default();
        let violations = Rc::new(RefCell::new(Vec::new()));
        let mut builder = Client::builder(p.clone());
        let mut route = Vec::new();
        for (i, script) in scripts.into_iter().enumerate() {
            let id = format!("p{i}");
            let inner = ScriptedProvider::new(&p, &id, script);
            let checked = Checked { id: id.clone(), inner, live: live.clone(), violations: violations.clone() };
            builder = builder.upstream(id.clone(), Upstream::Custom(Box::new(checked)));
            route.push(Entry::new(id, "m").timeout(Duration::from_secs(2)));
        }
        let policy = BreakerPolicy { failure_threshold: 2, cooldown: Duration::from_secs(5), ..BreakerPolicy::default() };
        let store = Watching { inner: MemoryStore::new(policy), live: live.clone() };
        let client = builder.route("default", route).build_with_store(store);
        for gap in gaps {
            p.advance(Duration::from_millis(gap));
            let _ = block_on(&p, client.chat(ChatRequest::new(vec![Message::user("x")])));
            // Every permit is handed back by the end of each request.
            prop_assert!(live.borrow().values().all(|n| *n == 0), "{:?}", live.borrow());
        }
        prop_assert!(violations.borrow().is_empty(), "{:?}", violations.borrow());
    }
}
