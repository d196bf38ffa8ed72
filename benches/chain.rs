//! One request through the chain on the fake platform, with a 1 KB OpenAI
//! response decoded by the real adapter: prints nanoseconds per request.
//! Target: ≤ 20 µs. Not a timed test: it prints figures and asserts nothing.
//!
//! `cargo bench --bench chain --features testing` (add `-- --quick` for a short run).

#![allow(clippy::disallowed_methods)] // a benchmark measures wall time on purpose

use std::hint::black_box;
use std::time::Instant;

use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::Config;
use resilient_llm::{ChatRequest, Client, Message};
use serde_json::json;

fn one_kb_answer() -> Vec<u8> {
    let text = "resilient ".repeat(80); // 800 bytes of content, ~1 KB of JSON
    serde_json::to_vec(&json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1741570283, "model": "gpt-4o-2024-08-06",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 19, "completion_tokens": 160, "total_tokens": 179 }
    }))
    .expect("json")
}

fn client(p: &FakePlatform) -> Client<FakePlatform> {
    let cfg = Config::parse(
        &json!({
            "providers": {
                "dead": { "kind": "openai", "baseUrl": "https://dead.test" },
                "live": { "kind": "openai", "baseUrl": "https://live.test" }
            },
            "routes": {
                "healthy": [ { "provider": "live", "model": "gpt-4o" } ],
                "failover": [ { "provider": "dead", "model": "gpt-4o" }, { "provider": "live", "model": "gpt-4o" } ]
            },
            "breaker": { "failureThreshold": 1, "cooldownMs": 86400000, "maxCooldownMs": 86400000 }
        })
        .to_string(),
    )
    .expect("config");
    cfg.client(p.clone(), vec![], &|_| Some("sk-bench".into()))
        .expect("client")
}

fn measure(name: &str, route: &str, batches: usize, per_batch: usize) {
    let p = FakePlatform::new();
    let c = client(&p);
    let body = one_kb_answer();
    let mut req = ChatRequest::new(vec![Message::user("How resilient is this?")]);
    req.model = Some(route.into());
    // Open the dead provider's breaker once: later requests skip it.
    p.script("https://dead.test", [reply(503)]);
    let run = |n: usize| {
        for _ in 0..n {
            p.script("https://live.test", [reply(200).body(body.clone())]);
            black_box(block_on(&p, c.chat(req.clone())).expect("answer"));
        }
    };
    run(per_batch / 10 + 1); // warm-up
    let mut ns: Vec<f64> = (0..batches)
        .map(|_| {
            let t = Instant::now();
            run(per_batch);
            t.elapsed().as_nanos() as f64 / per_batch as f64
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    println!(
        "{name:<40} median {:>8.0} ns/request   best {:>8.0} ns/request   ({batches} batches × {per_batch})",
        ns[ns.len() / 2],
        ns[0]
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (batches, per_batch) = if quick { (3, 2_000) } else { (7, 20_000) };
    println!(
        "one request through the chain, fake platform, 1 KB OpenAI response (target ≤ 20000 ns)"
    );
    measure("healthy: one provider", "healthy", batches, per_batch);
    measure(
        "primary breaker open: skip + fallback",
        "failover",
        batches,
        per_batch,
    );
}
