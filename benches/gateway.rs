//! One request through the edge gateway (`Gateway::handle`) on the fake
//! platform, as the Worker serves it under `scripts/bench-worker.sh`: an
//! OpenAI chat request in, the mock provider's answer back, the log line
//! built; and the same request streamed, 100 chunks relayed as the client's
//! chunks. Prints nanoseconds and heap allocations per request: the Rust
//! share of the Worker's CPU, without workerd's noise (allocation is much of
//! it in wasm, where dlmalloc runs in a baseline-compiled tier at first).
//! A third case asks a tier of two providers whose answers carry OpenAI's
//! rate-limit headers: what reading them and steering by them cost (the
//! first two cases' routes have one entry and no headers). Two more ask a
//! route with a response cache (in memory): the same question every time
//! (a hit) and a new one every time (a miss: the lookup, the provider, the
//! write, and the LRU's eviction once it is full), and two a streamed hit
//! of 100 chunks: the provider's own events replayed, or the answer
//! encoded as chunks. The last pair asks the first case's route with the
//! key of a named client that has limits (requests and tokens per minute,
//! in flight) and with the unlimited key, batches interleaved, and prints
//! the ratio: what admission and settling cost a request.
//! Not a timed test: it prints figures and asserts nothing.
//!
//! `cargo bench --bench gateway --features testing` (add `-- --quick` for a short run;
//! `BENCH_ONLY=tier` runs the one case whose name has that in it).

#![allow(clippy::disallowed_methods)] // a benchmark measures wall time on purpose

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::poll_fn;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use resilient_llm::gateway::{Gateway, Inbound, Piece, Setup};
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
        "providers": {
            "healthy": { "kind": "openai", "baseUrl": "https://healthy.test", "apiKeyEnv": "MOCK_API_KEY" },
            "second": { "kind": "openai", "baseUrl": "https://second.test", "apiKeyEnv": "MOCK_API_KEY" }
        },
        "routes": {
            "healthy": [ { "provider": "healthy", "model": "bench-model" } ],
            "cached": [ { "provider": "healthy", "model": "bench-model" } ],
            "pools": [ { "provider": "healthy", "model": "bench-model", "priority": 1, "weight": 3 },
                       { "provider": "second", "model": "bench-model", "priority": 1, "weight": 1 } ]
        },
        "retry": { "maxAttempts": 2, "baseDelayMs": 50, "maxDelayMs": 2000 },
        "breaker": { "failureThreshold": 3, "cooldownMs": 5000, "maxCooldownMs": 5000 },
        "cache": { "cached": { "ttlSeconds": 3600 } },
        "gateway": {
            "clientKeysEnv": ["GATEWAY_KEY"],
            // Limits this run never reaches (the fake clock stands still):
            // every request is admitted, its tokens estimated and settled.
            "clients": [ { "name": "limited", "keysEnv": ["LIMITED_KEY"],
                           "limits": { "requestsPerMinute": 1_000_000_000u64, "tokensPerMinute": 1_000_000_000_000u64,
                                       "maxInFlight": 64 } } ]
        }
    });
    let secret = |name: &str| match name {
        "MOCK_API_KEY" => Some("mock-key".to_string()),
        "GATEWAY_KEY" => Some(GATEWAY_KEY.to_string()),
        "LIMITED_KEY" => Some(LIMITED_KEY.to_string()),
        _ => None,
    };
    let setup = Setup::load(Some(&config.to_string()), &secret).expect("config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

/// The key of `gateway.clientKeysEnv`: the unlimited client.
const GATEWAY_KEY: &str = "gateway-key-for-bench";
/// The key of the named client with limits.
const LIMITED_KEY: &str = "limited-client-key-for-bench";

fn inbound(body: &[u8]) -> Inbound {
    inbound_as(GATEWAY_KEY, body)
}

fn inbound_as(key: &str, body: &[u8]) -> Inbound {
    let mut headers = Headers::new();
    headers.append("authorization", format!("Bearer {key}"));
    headers.append("content-length", body.len().to_string());
    Inbound {
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers,
        body: Body::full(body.to_vec()),
    }
}

/// The mock provider's streamed answer: ~1,000 tokens in 100 chunks of
/// ten words, the finish reason, the usage chunk and `[DONE]`.
fn mock_stream() -> Vec<String> {
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        let c = json!({ "id": "chatcmpl-mock-healthy-1", "object": "chat.completion.chunk", "created": 1741570283,
                        "model": "bench-model", "system_fingerprint": "fp_mock",
                        "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }] });
        format!("data: {c}\n\n")
    };
    let mut out = vec![chunk(
        json!({ "role": "assistant", "content": "", "refusal": null }),
        json!(null),
    )];
    for i in 0..100 {
        let words = format!("word{i} ").repeat(10);
        out.push(chunk(json!({ "content": words }), json!(null)));
    }
    out.push(chunk(json!({}), json!("stop")));
    let usage = json!({ "id": "chatcmpl-mock-healthy-1", "object": "chat.completion.chunk", "created": 1741570283,
                        "model": "bench-model", "choices": [],
                        "usage": { "prompt_tokens": 9, "completion_tokens": 1000, "total_tokens": 1009 } });
    out.push(format!("data: {usage}\n\n"));
    out.push("data: [DONE]\n\n".into());
    out
}

/// Runs `one` (a request, scripted reply and all) in `batches` of
/// `per_batch` and prints its median and best ns/request and its
/// allocations/request less `harness`'s (the scripted reply and the inbound
/// request alone).
fn measure(name: &str, (batches, per_batch): (usize, usize), one: &dyn Fn(), harness: &dyn Fn()) {
    // `BENCH_ONLY=<part of a name>` runs that case alone (under callgrind, say).
    if std::env::var("BENCH_ONLY").is_ok_and(|only| !name.contains(&only)) {
        return;
    }
    let run = |n: usize| {
        for _ in 0..n {
            one();
        }
    };
    run(per_batch / 10 + 1); // warm-up
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..100 {
        harness();
    }
    let harness = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 100.0;
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    run(100);
    let allocations = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 100.0 - harness;
    let mut ns: Vec<f64> = (0..batches)
        .map(|_| {
            let t = Instant::now();
            run(per_batch);
            t.elapsed().as_nanos() as f64 / per_batch as f64
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    println!(
        "gateway, {name}: median {:>6.0} ns/request, best {:>6.0} ns/request, \
         ~{allocations:.0} heap allocations/request ({batches} batches x {per_batch})",
        ns[ns.len() / 2],
        ns[0]
    );
}

/// Runs `a` and `b` in alternate batches (so the machine's noise hits both
/// alike) and prints each one's median ns/request and allocations/request,
/// and the ratio of `b` to `a`.
fn measure_ab(name: &str, (batches, per_batch): (usize, usize), a: &dyn Fn(), b: &dyn Fn()) {
    if std::env::var("BENCH_ONLY").is_ok_and(|only| !name.contains(&only)) {
        return;
    }
    let run = |one: &dyn Fn(), n: usize| {
        for _ in 0..n {
            one();
        }
    };
    let allocations = |one: &dyn Fn()| {
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        run(one, 100);
        (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 100.0
    };
    run(a, per_batch / 10 + 1);
    run(b, per_batch / 10 + 1);
    let (alloc_a, alloc_b) = (allocations(a), allocations(b));
    let timed = |one: &dyn Fn()| {
        let t = Instant::now();
        run(one, per_batch);
        t.elapsed().as_nanos() as f64 / per_batch as f64
    };
    let (mut ns_a, mut ns_b) = (Vec::new(), Vec::new());
    for _ in 0..batches {
        ns_a.push(timed(a));
        ns_b.push(timed(b));
    }
    let median = |ns: &mut Vec<f64>| {
        ns.sort_by(f64::total_cmp);
        ns[ns.len() / 2]
    };
    let (ma, mb) = (median(&mut ns_a), median(&mut ns_b));
    println!(
        "gateway, {name}: without {ma:>6.0} ns/request (~{alloc_a:.0} allocations), \
         with {mb:>6.0} ns/request (~{alloc_b:.0} allocations): {:.3}x ({batches} batches x {per_batch} each, interleaved)",
        mb / ma
    );
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
    // One request with `key`, answered by the mock.
    let ask_with = |key: &str| {
        p.script("https://healthy.test", [reply(200).body(answer.clone())]);
        let out = block_on(&p, gw.handle(inbound_as(key, &body)));
        assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
        out
    };
    measure(
        "healthy route, mock answer",
        (batches, per_batch),
        &|| {
            black_box(ask_with(GATEWAY_KEY));
        },
        &|| {
            p.script("https://unused.test", [reply(200).body(answer.clone())]);
            black_box(inbound(&body));
        },
    );

    measure_ab(
        "healthy route, a limited client against the unlimited key",
        (batches, per_batch),
        &|| {
            black_box(ask_with(GATEWAY_KEY));
        },
        &|| {
            let out = ask_with(LIMITED_KEY);
            assert!(out.headers.get("x-ratelimit-remaining-requests").is_some());
            black_box(out);
        },
    );

    // A tier of two whose answers say what is left of their pools, as
    // api.openai.com's do: the draw (randomness 0.5: the first, of weights
    // 3 and 1) and the pool steering run on every request.
    let limited = |r: resilient_llm::testing::Reply| {
        r.header("x-ratelimit-limit-requests", "10000")
            .header("x-ratelimit-limit-tokens", "30000000")
            .header("x-ratelimit-remaining-requests", "9999")
            .header("x-ratelimit-remaining-tokens", "29999947")
            .header("x-ratelimit-reset-requests", "6ms")
            .header("x-ratelimit-reset-tokens", "0s")
            .body(answer.clone())
    };
    let pooled = serde_json::to_vec(
        &json!({ "model": "pools", "messages": [{ "role": "user", "content": "benchmark: say something short" }] }),
    )
    .expect("json");
    measure(
        "tier of two with rate-limit headers",
        (batches, per_batch),
        &|| {
            p.script("https://healthy.test", [limited(reply(200))]);
            let out = block_on(&p, gw.handle(inbound(&pooled)));
            assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
            black_box(out);
        },
        &|| {
            p.script("https://unused.test", [limited(reply(200))]);
            black_box(inbound(&pooled));
        },
    );

    let ask = |content: &str| {
        serde_json::to_vec(
            &json!({ "model": "cached", "messages": [{ "role": "user", "content": content }] }),
        )
        .expect("json")
    };
    let same = ask("benchmark: say something short");
    p.script("https://healthy.test", [reply(200).body(answer.clone())]);
    block_on(&p, gw.handle(inbound(&same)));
    measure(
        "cached route, a hit",
        (batches, per_batch),
        &|| {
            let out = block_on(&p, gw.handle(inbound(&same)));
            assert_eq!(out.headers.get("x-cache"), Some("hit"));
            black_box(out);
        },
        &|| {
            black_box(inbound(&same));
        },
    );
    let asked = std::cell::Cell::new(0u64);
    let next = || {
        asked.set(asked.get() + 1);
        ask(&format!("benchmark: question {}", asked.get()))
    };
    measure(
        "cached route, a miss",
        (batches, per_batch),
        &|| {
            p.script("https://healthy.test", [reply(200).body(answer.clone())]);
            let out = block_on(&p, gw.handle(inbound(&next())));
            assert_eq!(out.headers.get("x-cache"), Some("miss"));
            black_box(out);
        },
        &|| {
            p.script("https://unused.test", [reply(200).body(answer.clone())]);
            black_box(inbound(&next()));
        },
    );

    let chunks = mock_stream();
    let body = serde_json::to_vec(
        &json!({ "model": "healthy", "stream": true, "stream_options": { "include_usage": true },
        "messages": [{ "role": "user", "content": "benchmark: say something long" }] }),
    )
    .expect("json");
    let streamed = || {
        reply(200)
            .header("content-type", "text/event-stream")
            .chunks(chunks.clone())
    };
    // A streamed hit, served two ways: the provider's own events kept from
    // a streamed answer, written again as they came; and an answer kept
    // from a whole request of the same text, encoded as the client's chunks.
    let cached_stream = |content: &str| {
        serde_json::to_vec(&json!({ "model": "cached", "stream": true,
            "stream_options": { "include_usage": true },
            "messages": [{ "role": "user", "content": content }] }))
        .expect("json")
    };
    let drain = |out: &mut resilient_llm::gateway::Outbound| {
        let mut bytes = out.body.len();
        if let Some(mut stream) = out.stream.take() {
            block_on(&p, async {
                while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
                    if let Piece::Bytes(b) = piece {
                        bytes += b.len();
                    }
                }
            });
        }
        bytes
    };
    let own = cached_stream("benchmark: a streamed answer, kept as its events");
    p.script("https://healthy.test", [streamed()]);
    drain(&mut block_on(&p, gw.handle(inbound(&own))));
    let text: String = (0..100).map(|i| format!("word{i} ").repeat(10)).collect();
    let whole = serde_json::to_vec(&json!({
        "id": "chatcmpl-mock-healthy-1", "object": "chat.completion", "created": 1741570283, "model": "bench-model",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 9, "completion_tokens": 1000, "total_tokens": 1009 } }))
    .expect("json");
    let encoded = cached_stream("benchmark: a whole answer, kept as its text");
    let mut as_whole: serde_json::Value = serde_json::from_slice(&encoded).expect("json");
    as_whole["stream"] = json!(false);
    as_whole
        .as_object_mut()
        .expect("object")
        .remove("stream_options");
    p.script("https://healthy.test", [reply(200).body(whole)]);
    let out = block_on(
        &p,
        gw.handle(inbound(&serde_json::to_vec(&as_whole).expect("json"))),
    );
    assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
    for (name, asked) in [
        ("cached route, a streamed hit replaying its events", &own),
        (
            "cached route, a streamed hit encoded from its answer",
            &encoded,
        ),
    ] {
        measure(
            name,
            (batches, per_batch / 50),
            &|| {
                let mut out = block_on(&p, gw.handle(inbound(asked)));
                assert_eq!(out.headers.get("x-cache"), Some("hit"));
                assert!(drain(&mut out) > 7_000, "the text is some 7,900 bytes");
                black_box(out);
            },
            &|| {
                black_box(inbound(asked));
            },
        );
    }

    measure(
        "healthy route, mock stream of 100 chunks",
        // A streamed request costs some fifty whole ones.
        (batches, per_batch / 50),
        &|| {
            p.script("https://healthy.test", [streamed()]);
            let mut out = block_on(&p, gw.handle(inbound(&body)));
            assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
            let mut stream = out.stream.take().expect("a stream");
            let mut bytes = 0;
            block_on(&p, async {
                while let Some(piece) = poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
                    if let Piece::Bytes(b) = piece {
                        bytes += b.len();
                    }
                }
            });
            assert!(bytes > 10_000, "{bytes} bytes streamed");
            black_box(out);
        },
        &|| {
            p.script("https://unused.test", [streamed()]);
            black_box(inbound(&body));
        },
    );
}
