//! One request through the edge gateway (`Gateway::handle`) on the fake
//! platform, as the Worker serves it under `scripts/bench-worker.sh`: an
//! OpenAI chat request in, the mock provider's answer back, the log line
//! built. Prints nanoseconds and heap allocations per request: the Rust
//! share of the Worker's CPU, without workerd's noise (allocation is much of
//! it in wasm, where dlmalloc runs in a baseline-compiled tier at first).
//! Not a timed test: it prints figures and asserts nothing.
//!
//! `cargo bench --bench gateway --features testing` (add `-- --quick` for a short run).

#![allow(clippy::disallowed_methods)] // a benchmark measures wall time on purpose

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use resilient_llm::gateway::{Gateway, Inbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::json;

/// The system allocator, counting allocations.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What the mock provider (tests/e2e/mock-provider.mjs) answers.
fn mock_answer() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": "chatcmpl-mock-healthy-1", "object": "chat.completion", "created": 1741570283, "model": "bench-model",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "Mock answer from healthy: benchmark: say something short", "refusal": null, "annotations": [] },
            "logprobs": null, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18,
            "prompt_tokens_details": { "cached_tokens": 0, "audio_tokens": 0 },
            "completion_tokens_details": { "reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0 } },
        "service_tier": "default", "system_fingerprint": "fp_mock"
    }))
    .expect("json")
}

fn gateway(p: &FakePlatform) -> Gateway<FakePlatform, MemoryStore> {
    let config = json!({
        "providers": { "healthy": { "kind": "openai", "baseUrl": "https://healthy.test", "apiKeyEnv": "MOCK_API_KEY" } },
        "routes": { "healthy": [ { "provider": "healthy", "model": "bench-model" } ] },
        "retry": { "maxAttempts": 2, "baseDelayMs": 50, "maxDelayMs": 2000 },
        "breaker": { "failureThreshold": 3, "cooldownMs": 5000, "maxCooldownMs": 5000 },
        "gateway": { "clientKeysEnv": ["GATEWAY_KEY"] }
    });
    let secret = |name: &str| match name {
        "MOCK_API_KEY" => Some("mock-key".to_string()),
        "GATEWAY_KEY" => Some("gateway-key-for-bench".to_string()),
        _ => None,
    };
    let setup = Setup::load(Some(&config.to_string()), &secret).expect("config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn inbound(body: &[u8]) -> Inbound {
    let mut headers = Headers::new();
    headers.append("authorization", "Bearer gateway-key-for-bench");
    headers.append("content-length", body.len().to_string());
    Inbound {
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers,
        body: Body::full(body.to_vec()),
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (batches, per_batch) = if quick { (3, 2_000) } else { (7, 20_000) };
    let p = FakePlatform::new();
    let gw = gateway(&p);
    let answer = mock_answer();
    let body = serde_json::to_vec(
        &json!({ "model": "healthy", "messages": [{ "role": "user", "content": "benchmark: say something short" }] }),
    )
    .expect("json");
    let run = |n: usize| {
        for _ in 0..n {
            p.script("https://healthy.test", [reply(200).body(answer.clone())]);
            let out = block_on(&p, gw.handle(inbound(&body)));
            assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
            black_box(out);
        }
    };
    run(per_batch / 10 + 1); // warm-up

    // The harness's own share (the scripted reply, the inbound request).
    let harness = {
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for _ in 0..1000 {
            p.script("https://unused.test", [reply(200).body(answer.clone())]);
            black_box(inbound(&body));
        }
        (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 1000.0
    };
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    run(1000);
    let allocations = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 1000.0 - harness;
    let mut ns: Vec<f64> = (0..batches)
        .map(|_| {
            let t = Instant::now();
            run(per_batch);
            t.elapsed().as_nanos() as f64 / per_batch as f64
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    println!(
        "gateway, healthy route, mock answer: median {:>6.0} ns/request, best {:>6.0} ns/request, \
         ~{allocations:.0} heap allocations/request ({batches} batches x {per_batch})",
        ns[ns.len() / 2],
        ns[0]
    );
}
