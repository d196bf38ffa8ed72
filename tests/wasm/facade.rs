//! The npm facade from Rust: JS providers scripted to fail or succeed,
//! events, error classes, abort, config paths. Included by `web_node.rs`
//! and `web_browser.rs`.

use js_sys::{Array, Function, Object, Promise, Reflect};
use resilient_llm::{error_classes, ResilientClient};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::wasm_bindgen_test;

#[wasm_bindgen(inline_js = r#"
export function scripted(name, steps) {
  const p = {
    name,
    calls: 0,
    aborted: 0,
    requests: [],
    chat(request, signal) {
      const step = steps[Math.min(p.calls, steps.length - 1)];
      p.calls++;
      p.requests.push(request);
      if (step === "hang") {
        return new Promise((_, reject) => {
          signal.addEventListener("abort", () => { p.aborted++; reject(new Error("aborted")); });
        });
      }
      if (typeof step === "string") return Promise.resolve({ text: step, model: request.model });
      const e = new Error(step.message || "failed");
      Object.assign(e, step);
      return Promise.reject(e);
    },
  };
  return p;
}
export function isA(value, ctor) { return value instanceof ctor; }
export function collector() { const events = []; const f = (e) => events.push(e); f.events = events; return f; }
export function abortAfter(ms) { const c = new AbortController(); setTimeout(() => c.abort(), ms); return c.signal; }
"#)]
extern "C" {
    fn scripted(name: &str, steps: JsValue) -> JsValue;
    #[wasm_bindgen(js_name = isA)]
    fn is_a(value: &JsValue, ctor: &JsValue) -> bool;
    fn collector() -> Function;
    #[wasm_bindgen(js_name = abortAfter)]
    fn abort_after(ms: u32) -> JsValue;
}

fn json(s: &str) -> JsValue {
    js_sys::JSON::parse(s).unwrap()
}

fn get(v: &JsValue, key: &str) -> JsValue {
    Reflect::get(v, &key.into()).unwrap()
}

fn class(name: &str) -> JsValue {
    get(&error_classes(), name)
}

fn options(providers: &[&JsValue], extra: &[(&str, &JsValue)]) -> Object {
    let o = Object::new();
    let list: Array = providers.iter().map(|p| (*p).clone()).collect();
    Reflect::set(&o, &"providers".into(), &list).unwrap();
    for (k, v) in extra {
        Reflect::set(&o, &(*k).into(), v).unwrap();
    }
    o
}

fn hello() -> JsValue {
    json(r#"{"messages":[{"role":"user","content":"hello"}]}"#)
}

async fn settle(p: Promise) -> Result<JsValue, JsValue> {
    JsFuture::from(p).await
}

#[wasm_bindgen_test]
async fn fails_over_across_js_providers_with_events() {
    let flaky = scripted("flaky", json(r#"[{"status":503},{"status":503}]"#));
    let backup = scripted("backup", json(r#"["hi from backup"]"#));
    let events = collector();
    let client = ResilientClient::new(
        json(r#"{"retry":{"maxAttempts":2,"baseDelayMs":5,"maxDelayMs":10}}"#),
        Some(options(&[&flaky, &backup], &[("onEvent", &events)])),
    )
    .unwrap();
    let res = settle(client.chat(hello(), None)).await.unwrap();
    assert_eq!(get(&res, "text").as_string().unwrap(), "hi from backup");
    assert_eq!(get(&res, "provider").as_string().unwrap(), "backup");
    assert_eq!(Array::from(&get(&res, "attempts")).length(), 3);
    assert_eq!(get(&flaky, "calls").as_f64(), Some(2.0));
    let types: Vec<String> = Array::from(&get(&events, "events"))
        .iter()
        .map(|e| get(&e, "type").as_string().unwrap())
        .collect();
    assert_eq!(types, ["retry", "provider_failed", "failover"]);
    let retry = Array::from(&get(&events, "events")).get(0);
    assert!(is_a(&get(&retry, "error"), &class("ServerError")));
    // The provider got the text as a string and the entry's model.
    let req = Array::from(&get(&backup, "requests")).get(0);
    assert_eq!(get(&req, "model").as_string().unwrap(), "backup");
    let msg = Array::from(&get(&req, "messages")).get(0);
    assert_eq!(get(&msg, "content").as_string().unwrap(), "hello");
}

#[wasm_bindgen_test]
async fn all_failing_rejects_with_every_attempt() {
    let a = scripted("a", json(r#"[{"status":401,"message":"bad key"}]"#));
    let b = scripted("b", json(r#"[{"status":429,"retryAfterMs":99999}]"#));
    let client = ResilientClient::new(JsValue::UNDEFINED, Some(options(&[&a, &b], &[]))).unwrap();
    let err = settle(client.chat(hello(), None)).await.unwrap_err();
    assert!(is_a(&err, &class("AllProvidersFailedError")));
    assert!(is_a(&err, &class("LLMError")));
    assert!(is_a(&err, &js_sys::Error::new("").constructor().into()));
    assert_eq!(get(&err, "status").as_f64(), Some(503.0));
    let failures = Array::from(&get(&err, "failures"));
    assert_eq!(
        failures.length(),
        2,
        "401 fails over at once; a Retry-After beyond maxDelay too"
    );
    assert_eq!(get(&failures.get(0), "kind").as_string().unwrap(), "auth");
    assert_eq!(
        get(&failures.get(1), "kind").as_string().unwrap(),
        "rate_limited"
    );
    assert_eq!(
        get(&failures.get(1), "retryAfterMs").as_f64(),
        Some(99999.0)
    );
    assert_eq!(get(&failures.get(0), "reached"), JsValue::TRUE);
}

#[wasm_bindgen_test]
async fn a_bad_request_is_rejected_without_failover() {
    let a = scripted(
        "a",
        json(r#"[{"status":400,"message":"prompt is malformed"}]"#),
    );
    let b = scripted("b", json(r#"["unreachable"]"#));
    let client = ResilientClient::new(JsValue::UNDEFINED, Some(options(&[&a, &b], &[]))).unwrap();
    let err = settle(client.chat(hello(), None)).await.unwrap_err();
    assert!(is_a(&err, &class("ClientRequestError")));
    assert_eq!(get(&err, "retryable"), JsValue::FALSE);
    assert_eq!(get(&err, "provider").as_string().unwrap(), "a");
    assert_eq!(get(&b, "calls").as_f64(), Some(0.0));
}

#[wasm_bindgen_test]
async fn an_attempt_timeout_aborts_the_providers_signal() {
    let slow = scripted("slow", json(r#"["hang"]"#));
    let fast = scripted("fast", json(r#"["fast answer"]"#));
    let client = ResilientClient::new(
        json(r#"{"routes":{"default":[{"provider":"slow","model":"s","timeoutMs":30},{"provider":"fast","model":"f"}]}}"#),
        Some(options(&[&slow, &fast], &[])),
    )
    .unwrap();
    let res = settle(client.chat(hello(), None)).await.unwrap();
    assert_eq!(get(&res, "text").as_string().unwrap(), "fast answer");
    assert_eq!(get(&slow, "aborted").as_f64(), Some(1.0));
    let first = Array::from(&get(&res, "attempts")).get(0);
    assert_eq!(get(&first, "kind").as_string().unwrap(), "timeout");
}

#[wasm_bindgen_test]
async fn the_callers_signal_aborts_the_call_and_the_provider() {
    let slow = scripted("slow", json(r#"["hang"]"#));
    let client = ResilientClient::new(JsValue::UNDEFINED, Some(options(&[&slow], &[]))).unwrap();
    let opts = Object::new();
    Reflect::set(&opts, &"signal".into(), &abort_after(30)).unwrap();
    let err = settle(client.chat(hello(), Some(opts))).await.unwrap_err();
    assert!(is_a(&err, &class("AbortError")));
    assert_eq!(get(&err, "name").as_string().unwrap(), "AbortError");
    assert_eq!(get(&slow, "aborted").as_f64(), Some(1.0));
}

#[wasm_bindgen_test]
fn config_mistakes_name_their_path() {
    let p = scripted("p", json(r#"["ok"]"#));
    let err = ResilientClient::new(
        json(r#"{"routes":{"default":[{"provider":"p","model":"m","timeoutMs":"5"}]}}"#),
        Some(options(&[&p], &[])),
    )
    .err()
    .unwrap();
    assert!(is_a(&err, &class("ConfigError")));
    let issue = Array::from(&get(&err, "issues")).get(0);
    assert_eq!(
        get(&issue, "path").as_string().unwrap(),
        "routes.default[0].timeoutMs"
    );
    let err = ResilientClient::new(
        json(r#"{"routes":{"default":[{"provider":"nope","model":"m"}]},"breaker":{"failureRate":2}}"#),
        Some(options(&[&p], &[])),
    )
    .err()
    .unwrap();
    let paths: Vec<String> = Array::from(&get(&err, "issues"))
        .iter()
        .map(|i| get(&i, "path").as_string().unwrap())
        .collect();
    assert_eq!(paths, ["breaker.failureRate", "routes.default[0].provider"]);
}

#[wasm_bindgen_test]
async fn a_malformed_request_names_its_path() {
    let p = scripted("p", json(r#"["ok"]"#));
    let client = ResilientClient::new(JsValue::UNDEFINED, Some(options(&[&p], &[]))).unwrap();
    let err = settle(client.chat(
        json(r#"{"messages":[{"role":"admin","content":"x"}]}"#),
        None,
    ))
    .await
    .unwrap_err();
    assert!(is_a(&err, &class("ClientRequestError")));
    let message = get(&err, "message").as_string().unwrap();
    assert!(message.contains("messages[0].role"), "{message}");
}

#[wasm_bindgen_test]
async fn calls_with_a_signal_that_never_aborts_leave_nothing_behind() {
    // Each call listens on the caller's signal until it ends; none may keep
    // its listener (or a promise's callbacks) alive after it.
    let p = scripted("p", json(r#"["ok"]"#));
    let client = ResilientClient::new(JsValue::UNDEFINED, Some(options(&[&p], &[]))).unwrap();
    let controller = web_sys::AbortController::new().unwrap();
    let call = || {
        let opts = Object::new();
        Reflect::set(&opts, &"signal".into(), &controller.signal()).unwrap();
        settle(client.chat(hello(), Some(opts)))
    };
    call().await.unwrap();
    let before = wasm_bindgen::externref_heap_live_count();
    for _ in 0..100 {
        call().await.unwrap();
    }
    let after = wasm_bindgen::externref_heap_live_count();
    assert!(after <= before + 10, "live externrefs {before} -> {after}");
}
