//! wasm-bindgen tests in headless Chromium:
//! `wasm-pack test --headless --chrome -- --features js --test web_browser`.
//! The page is served by the test runner on 127.0.0.1, which doubles as the
//! local server for a same-origin fetch.
#![cfg(all(target_arch = "wasm32", feature = "js"))]

use resilient_llm::web::WebPlatform;
use resilient_llm::{HttpRequest, Platform};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[path = "wasm/facade.rs"]
mod facade;
#[path = "wasm/platform.rs"]
mod platform;

#[wasm_bindgen_test]
async fn fetches_from_the_local_test_server() {
    let location = js_sys::Reflect::get(&js_sys::global(), &"location".into()).unwrap();
    let origin = js_sys::Reflect::get(&location, &"origin".into())
        .unwrap()
        .as_string()
        .unwrap();
    assert!(origin.starts_with("http://127.0.0.1"), "{origin}");
    let req = HttpRequest {
        method: "GET".into(),
        url: format!("{origin}/"),
        headers: Default::default(),
        body: Vec::new(),
        timeout: None,
        omitted: Vec::new(),
    };
    let resp = WebPlatform.fetch(req).await.unwrap();
    assert_eq!(resp.status, 200);
    let body = resp.body.read_to_end(1 << 20).await.unwrap();
    assert!(!body.is_empty());
}
