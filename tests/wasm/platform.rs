//! The web platform on real timers and the host's `fetch`, for every JS
//! runtime the suite runs in (included by `web_node.rs` and `web_browser.rs`).

use std::time::Duration;

use resilient_llm::timeout;
use resilient_llm::web::{sleep, AbortOnDrop, WebPlatform};
use resilient_llm::{HttpRequest, Platform};
use wasm_bindgen::JsCast;
use wasm_bindgen_test::wasm_bindgen_test;

fn get(url: &str) -> HttpRequest {
    HttpRequest {
        method: "GET".into(),
        url: url.into(),
        headers: Default::default(),
        body: Vec::new(),
        timeout: None,
        omitted: Vec::new(),
    }
}

#[wasm_bindgen_test]
async fn sleep_waits_on_a_real_timer() {
    let p = WebPlatform::new();
    let start = p.now();
    p.sleep(Duration::from_millis(30)).await;
    let waited = p.now() - start;
    assert!((25..2000).contains(&waited), "waited {waited} ms");
}

#[wasm_bindgen_test]
async fn the_shorter_timer_wins_and_the_other_is_cleared() {
    let p = WebPlatform::new();
    let start = p.now();
    let r = timeout(
        sleep(Duration::from_millis(20)),
        sleep(Duration::from_secs(60)),
    )
    .await;
    assert!(r.is_err(), "the 20 ms timer fires first");
    assert!(p.now() - start < 5000);
    // The 60 s timer was cleared on drop: in Node the runner would otherwise
    // stay alive for a minute after the suite.
}

#[wasm_bindgen_test]
async fn concurrent_sleeps_each_wait_their_own_time() {
    let p = WebPlatform::new();
    let start = p.now();
    let since = || p.now() - start;
    // The earliest is dropped before it ends: the others are unaffected.
    let early = sleep(Duration::from_millis(5));
    let (a, b, c) = (
        sleep(Duration::from_millis(45)),
        sleep(Duration::from_millis(15)),
        sleep(Duration::from_millis(30)),
    );
    drop(early);
    b.await;
    let tb = since();
    c.await;
    let tc = since();
    a.await;
    let ta = since();
    assert!(tb >= 12 && tc >= 27 && ta >= 42, "{tb} {tc} {ta} ms");
    assert!(ta < 5000, "{ta} ms");
    // A later sleep than the pending ones, and a zero one (over at once).
    let long = sleep(Duration::from_millis(20));
    let short = sleep(Duration::from_millis(1));
    sleep(Duration::ZERO).await;
    short.await;
    long.await;
    assert!(since() >= ta + 17, "{} ms", since());
}

#[wasm_bindgen_test]
fn header_lists_cross_to_js_and_back() {
    use resilient_llm::web::{headers_from_js, headers_to_js};
    use resilient_llm::Headers;
    let mut h = Headers::new();
    h.append("Content-Type", "application/json");
    h.append("x-quote", "say \"hi\"\\ \u{e9}");
    // A record when no name repeats, pairs when one does.
    let js = headers_to_js(&h);
    assert!(!js_sys::Array::is_array(&js));
    let back = web_sys::Headers::new_with_str_sequence_sequence(&js)
        .or_else(|_| web_sys::Headers::new_with_record_from_str_to_str(js.unchecked_ref()))
        .unwrap();
    let back = headers_from_js(&back);
    assert_eq!(back.get("content-type"), Some("application/json"));
    assert_eq!(back.get("x-quote"), Some("say \"hi\"\\ \u{e9}"));
    h.append("x-multi", "a");
    h.append("x-multi", "b");
    let js = headers_to_js(&h);
    assert!(js_sys::Array::is_array(&js));
    let back = headers_from_js(&web_sys::Headers::new_with_str_sequence_sequence(&js).unwrap());
    assert_eq!(back.get("x-multi"), Some("a, b"));
    assert_eq!(back.get("content-type"), Some("application/json"));
}

#[wasm_bindgen_test]
fn now_and_random_come_from_the_host() {
    let p = WebPlatform::new();
    let now = p.now();
    assert!(now > 1_600_000_000_000, "Date.now() in ms: {now}");
    let draws: Vec<f64> = (0..200).map(|_| p.random()).collect();
    assert!(draws.iter().all(|x| (0.0..1.0).contains(x)));
    let distinct = draws.iter().filter(|x| **x != draws[0]).count();
    assert!(distinct > 190, "random() varies");
}

#[wasm_bindgen_test]
fn dropping_the_guard_aborts_its_signal() {
    let guard = AbortOnDrop::new().unwrap();
    let signal = guard.signal().unwrap();
    assert!(!signal.aborted());
    drop(guard);
    assert!(signal.aborted());

    let mut done = AbortOnDrop::new().unwrap();
    let signal = done.signal().unwrap();
    done.disarm();
    drop(done);
    assert!(
        !signal.aborted(),
        "a disarmed guard leaves the signal alone"
    );
}

#[wasm_bindgen_test]
async fn fetches_a_data_url_and_streams_its_body() {
    let p = WebPlatform::new();
    let resp = p
        .fetch(get("data:application/json,%7B%22ok%22%3Atrue%7D"))
        .await
        .unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.headers.get("content-type"), Some("application/json"));
    let body = resp.body.read_to_end(1024).await.unwrap();
    assert_eq!(body, br#"{"ok":true}"#);
}

#[wasm_bindgen_test]
async fn a_time_limit_aborts_its_guard_unless_disarmed_first() {
    let mut guard = AbortOnDrop::new().unwrap();
    guard.abort_after(Duration::from_millis(10));
    let signal = guard.signal().unwrap();
    let mut done = AbortOnDrop::new().unwrap();
    done.abort_after(Duration::from_millis(10));
    let done_signal = done.signal().unwrap();
    done.disarm();
    sleep(Duration::from_millis(40)).await;
    assert!(signal.aborted(), "the host's timer aborted the controller");
    let err = guard.error(&"AbortError".into());
    assert_eq!(err.kind, resilient_llm::TransportErrorKind::TimedOut);
    assert!(!done_signal.aborted(), "disarming cleared the timer");
}

#[wasm_bindgen_test]
async fn a_request_within_its_time_limit_reads_whole() {
    let p = WebPlatform::new();
    let mut req = get("data:text/plain,0123456789");
    req.timeout = Some(Duration::from_secs(60));
    let resp = p.fetch(req).await.unwrap();
    assert_eq!(resp.body.read_to_end(1024).await.unwrap(), b"0123456789");
}

#[wasm_bindgen_test]
async fn a_body_over_the_limit_fails() {
    let p = WebPlatform::new();
    let resp = p.fetch(get("data:text/plain,0123456789")).await.unwrap();
    let err = resp.body.read_to_end(4).await.unwrap_err();
    assert_eq!(err.kind, resilient_llm::TransportErrorKind::BodyTooLarge);
}

#[wasm_bindgen_test]
async fn a_failed_fetch_is_a_transport_error() {
    let p = WebPlatform::new();
    // Port 9 (discard) on loopback: refused, or blocked by the browser.
    let err = p.fetch(get("http://127.0.0.1:9/")).await.unwrap_err();
    assert!(!err.message.is_empty());
}
