//! The status page's sign-in session: any `Cookie` header on the status
//! data route, and any sign-in form. A cookie no key signed never signs in;
//! no input panics; no answer or log line holds the gateway key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resilient_llm::gateway::limits::MAX_HEADER_BYTES;
use resilient_llm::gateway::{Gateway, Inbound, Setup};
use resilient_llm::testing::{block_on, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore};

const KEY: &str = "gateway-fuzz-key-0123456789";

const CONFIG: &str = r#"{
  "providers": { "oa": { "kind": "openai", "baseUrl": "https://oa.test", "apiKey": "k" } },
  "routes": { "default": [ { "provider": "oa", "model": "gpt" } ] },
  "gateway": { "clientKeysEnv": ["G"] }
}"#;

thread_local! {
    static GATEWAY: (FakePlatform, Gateway<FakePlatform, MemoryStore>) = {
        let p = FakePlatform::new().at(1_700_000_000_000);
        let secret = |n: &str| (n == "G").then(|| KEY.to_string());
        let setup = Setup::load(Some(CONFIG), &secret).expect("valid config");
        let store = MemoryStore::new(setup.breaker());
        let g = setup.into_gateway(p.clone(), store);
        (p, g)
    };
}

fuzz_target!(|input: &[u8]| {
    // [0: cookie on /status/data | 1: form to /status/login] text
    let Some((&which, rest)) = input.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    GATEWAY.with(|(p, g)| {
        let req = if which % 2 == 0 {
            Inbound {
                method: "GET".into(),
                path: "/status/data".into(),
                headers: [("cookie", text.as_ref())].into_iter().collect::<Headers>(),
                body: Body::full(Vec::new()),
            }
        } else {
            Inbound {
                method: "POST".into(),
                path: "/status/login".into(),
                headers: Headers::new(),
                body: Body::full(rest.to_vec()),
            }
        };
        let out = block_on(p, g.handle(req));
        if which % 2 == 0 {
            // A cookie header over the limit is refused before it is read.
            let over = text.len() > MAX_HEADER_BYTES;
            let want = if over { 400 } else { 401 };
            assert_eq!(out.status, want, "a cookie no key signed signed in");
        } else {
            assert!(matches!(out.status, 303 | 401 | 429), "{}", out.status);
        }
        let answer = String::from_utf8_lossy(&out.body);
        if !text.contains(KEY) {
            assert!(!answer.contains(KEY) && !out.log.contains(KEY));
            for (_, v) in out.headers.iter() {
                assert!(!v.contains(KEY));
            }
        }
    });
});
