//! wasm-bindgen tests in Node: `wasm-pack test --node -- --features js --test web_node`.
//! Besides the shared suites, a local 127.0.0.1 server checks that dropping
//! a fetch or its body really closes the connection.
#![cfg(all(target_arch = "wasm32", feature = "js"))]

use std::time::Duration;

use js_sys::Reflect;
use resilient_llm::timeout;
use resilient_llm::web::{sleep, WebPlatform};
use resilient_llm::{HttpRequest, Platform, TransportErrorKind};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_node_experimental);

#[path = "wasm/facade.rs"]
mod facade;
#[path = "wasm/platform.rs"]
mod platform;

#[wasm_bindgen(inline_js = r#"
import http from "node:http";
export function startServer() {
  return new Promise((resolve) => {
    const state = { requests: 0, cut: 0 };
    const server = http.createServer((req, res) => {
      state.requests++;
      res.on("close", () => { if (!res.writableFinished) state.cut++; });
      let body = "";
      req.on("data", (c) => { body += c; });
      req.on("end", () => {
        if (req.url === "/hang") return;
        if (req.url === "/stall") { res.writeHead(200); res.write("first"); return; }
        if (req.url === "/stall-sized") { res.writeHead(200, { "content-length": "100" }); res.write("first"); return; }
        if (req.url === "/sized") {
          res.writeHead(200, { "content-type": "text/plain", "content-length": "26", "x-multi": "a, b" });
          res.end("abcdefghijklmnopqrstuvwxyz");
          return;
        }
        if (req.url === "/chunks") {
          res.writeHead(200, { "content-type": "text/plain", "x-test": "yes" });
          res.write("one,");
          setTimeout(() => res.write("two,"), 20);
          setTimeout(() => res.end("three"), 40);
          return;
        }
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ method: req.method, auth: req.headers["authorization"], body }));
      });
    });
    server.listen(0, "127.0.0.1", () => resolve({
      port: server.address().port,
      state,
      close() { server.closeAllConnections(); server.close(); },
    }));
  });
}
export function pendingTimers() {
  return process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
}
"#)]
extern "C" {
    #[wasm_bindgen(js_name = startServer)]
    fn start_server() -> js_sys::Promise;
    /// Node's timers still pending (each would keep the process alive).
    #[wasm_bindgen(js_name = pendingTimers)]
    fn pending_timers() -> u32;
}

struct Server(JsValue);

impl Server {
    async fn start() -> Server {
        Server(JsFuture::from(start_server()).await.unwrap())
    }
    fn url(&self, path: &str) -> String {
        let port = Reflect::get(&self.0, &"port".into())
            .unwrap()
            .as_f64()
            .unwrap();
        format!("http://127.0.0.1:{port}{path}")
    }
    fn count(&self, key: &str) -> f64 {
        let state = Reflect::get(&self.0, &"state".into()).unwrap();
        Reflect::get(&state, &key.into()).unwrap().as_f64().unwrap()
    }
    /// Waits (bounded) until `key` reaches `n`.
    async fn wait_for(&self, key: &str, n: f64) -> f64 {
        for _ in 0..100 {
            if self.count(key) >= n {
                break;
            }
            sleep(Duration::from_millis(10)).await;
        }
        self.count(key)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let close = Reflect::get(&self.0, &"close".into()).unwrap();
        let _ = js_sys::Function::from(close).call0(&self.0);
    }
}

#[wasm_bindgen_test]
async fn posts_headers_and_body_to_a_local_server() {
    let srv = Server::start().await;
    let mut req = HttpRequest::post_json(srv.url("/echo"), br#"{"q":1}"#.to_vec());
    req.headers.insert("authorization", "Bearer t");
    let resp = WebPlatform.fetch(req).await.unwrap();
    assert_eq!(resp.status, 200);
    let body = String::from_utf8(resp.body.read_to_end(4096).await.unwrap()).unwrap();
    assert_eq!(
        body,
        r#"{"method":"POST","auth":"Bearer t","body":"{\"q\":1}"}"#
    );
}

#[wasm_bindgen_test]
async fn streams_the_body_chunk_by_chunk() {
    let srv = Server::start().await;
    let mut resp = WebPlatform
        .fetch(HttpRequest::post_json(srv.url("/chunks"), vec![]))
        .await
        .unwrap();
    assert_eq!(resp.headers.get("x-test"), Some("yes"));
    let mut chunks = Vec::new();
    while let Some(c) = resp.body.chunk().await {
        chunks.push(String::from_utf8(c.unwrap()).unwrap());
    }
    assert_eq!(chunks.concat(), "one,two,three");
    assert!(chunks.len() >= 2, "arrived in pieces: {chunks:?}");
}

#[wasm_bindgen_test]
async fn dropping_a_pending_fetch_closes_the_connection() {
    let srv = Server::start().await;
    let call = WebPlatform.fetch(HttpRequest::post_json(srv.url("/hang"), vec![]));
    assert!(timeout(sleep(Duration::from_millis(50)), call)
        .await
        .is_err());
    assert_eq!(srv.wait_for("cut", 1.0).await, 1.0);
}

#[wasm_bindgen_test]
async fn dropping_the_body_closes_the_connection() {
    let srv = Server::start().await;
    let mut resp = WebPlatform
        .fetch(HttpRequest::post_json(srv.url("/stall"), vec![]))
        .await
        .unwrap();
    let first = resp.body.chunk().await.unwrap().unwrap();
    assert_eq!(first, b"first");
    drop(resp);
    assert_eq!(srv.wait_for("cut", 1.0).await, 1.0);
}

#[wasm_bindgen_test]
async fn a_sized_body_is_read_whole_within_the_limit_and_refused_over_it() {
    let srv = Server::start().await;
    let resp = WebPlatform
        .fetch(HttpRequest::post_json(srv.url("/sized"), vec![]))
        .await
        .unwrap();
    assert_eq!(resp.headers.get("content-type"), Some("text/plain"));
    assert_eq!(resp.headers.get("x-multi"), Some("a, b"));
    let body = resp.body.read_to_end(26).await.unwrap();
    assert_eq!(body, b"abcdefghijklmnopqrstuvwxyz");
    let resp = WebPlatform
        .fetch(HttpRequest::post_json(srv.url("/sized"), vec![]))
        .await
        .unwrap();
    let err = resp.body.read_to_end(25).await.unwrap_err();
    assert_eq!(
        err.kind,
        TransportErrorKind::BodyTooLarge,
        "{}",
        err.message
    );
}

#[wasm_bindgen_test]
async fn dropping_a_whole_read_closes_the_connection() {
    let srv = Server::start().await;
    let resp = WebPlatform
        .fetch(HttpRequest::post_json(srv.url("/stall-sized"), vec![]))
        .await
        .unwrap();
    // A declared length within the limit: read whole, which never ends.
    let read = resp.body.read_to_end(4096);
    assert!(timeout(sleep(Duration::from_millis(50)), read)
        .await
        .is_err());
    assert_eq!(srv.wait_for("cut", 1.0).await, 1.0);
}

#[wasm_bindgen_test]
async fn many_cleared_timers_leave_nothing_behind() {
    // Each timeout whose work wins clears its timer; none may keep its
    // callback alive (they used to, through a never-settled promise: two
    // externrefs a timer, held for good).
    sleep(Duration::from_millis(1)).await;
    let before = wasm_bindgen::externref_heap_live_count();
    for _ in 0..200 {
        let r = timeout(sleep(Duration::from_secs(60)), async {}).await;
        assert!(r.is_ok());
    }
    sleep(Duration::from_millis(1)).await;
    let after = wasm_bindgen::externref_heap_live_count();
    assert!(after <= before + 10, "live externrefs {before} -> {after}");
}

fn within(url: String, ms: u64) -> HttpRequest {
    let mut req = HttpRequest::post_json(url, vec![]);
    req.timeout = Some(Duration::from_millis(ms));
    req
}

#[wasm_bindgen_test]
async fn a_time_limit_ends_a_silent_request_and_closes_the_connection() {
    let srv = Server::start().await;
    let err = WebPlatform
        .fetch(within(srv.url("/hang"), 50))
        .await
        .unwrap_err();
    assert_eq!(err.kind, TransportErrorKind::TimedOut, "{}", err.message);
    assert_eq!(err.message, "no complete response within 50 ms");
    assert_eq!(srv.wait_for("cut", 1.0).await, 1.0);
}

#[wasm_bindgen_test]
async fn a_time_limit_ends_a_stalled_body_read_by_chunks_or_whole() {
    let srv = Server::start().await;
    // No declared length: the reader's loop; a declared one: `arrayBuffer()`.
    for (path, cut) in [("/stall", 1.0), ("/stall-sized", 2.0)] {
        let resp = WebPlatform.fetch(within(srv.url(path), 100)).await.unwrap();
        assert_eq!(resp.status, 200);
        let err = resp.body.read_to_end(4096).await.unwrap_err();
        assert_eq!(
            err.kind,
            TransportErrorKind::TimedOut,
            "{path}: {}",
            err.message
        );
        assert_eq!(srv.wait_for("cut", cut).await, cut, "{path}");
    }
}

#[wasm_bindgen_test]
async fn time_limits_of_requests_that_finish_leave_nothing_behind() {
    let srv = Server::start().await;
    let fetch_all = |path: &str| {
        let req = within(srv.url(path), 60_000);
        async move {
            let resp = WebPlatform.fetch(req).await.unwrap();
            resp.body.read_to_end(4096).await.unwrap()
        }
    };
    fetch_all("/sized").await;
    let (timers, refs) = (pending_timers(), wasm_bindgen::externref_heap_live_count());
    for _ in 0..20 {
        assert_eq!(fetch_all("/sized").await, b"abcdefghijklmnopqrstuvwxyz");
        assert_eq!(fetch_all("/chunks").await, b"one,two,three");
    }
    // Each 60 s timer was cleared once its body was in: a pending one would
    // keep Node alive for a minute.
    assert_eq!(pending_timers(), timers, "pending timers");
    let after = wasm_bindgen::externref_heap_live_count();
    assert!(after <= refs + 10, "live externrefs {refs} -> {after}");
}

#[wasm_bindgen_test]
async fn a_refused_connection_is_classified() {
    let srv = Server::start().await;
    let url = srv.url("/");
    drop(srv); // nothing listens on the port any more
    sleep(Duration::from_millis(20)).await;
    let err = WebPlatform
        .fetch(HttpRequest::post_json(url, vec![]))
        .await
        .unwrap_err();
    assert_eq!(err.kind, TransportErrorKind::Refused, "{}", err.message);
}
