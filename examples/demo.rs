//! A failover demo on the fake platform: no network, no keys, virtual time.
//!
//! The primary returns 503s for its first 60 seconds; one request arrives
//! every 4 seconds. Watch the retries, the failover to the backup, the
//! breaker opening so the dead primary stops costing latency, and the
//! half-open probe that brings the primary back.
//!
//! Run: `cargo run --example demo --features testing`

use std::time::Duration;

use resilient_llm::testing::{block_on, err, ok, FakePlatform, ScriptedProvider, Step};
use resilient_llm::{ChatRequest, Client, Entry, ErrorKind, Event, Message, Platform, Upstream};

fn main() {
    let p = FakePlatform::new().random([0.5]);
    // 503s until t = 60 s, then healthy; each answer takes a little time.
    let slow = |s: Step, ms| Step::After(Duration::from_millis(ms), Box::new(s));
    let outage = Step::Until {
        at: 60_000,
        before: Box::new(slow(err(ErrorKind::Server, 503), 20)),
        after: Box::new(slow(ok("answered by the primary"), 350)),
    };
    let primary = ScriptedProvider::new(&p, "primary", [outage]);
    let backup = ScriptedProvider::new(&p, "backup", [slow(ok("answered by the backup"), 500)]);
    let clock = p.clone();
    let client = Client::builder(p.clone())
        .upstream("primary", Upstream::Custom(Box::new(primary)))
        .upstream("backup", Upstream::Custom(Box::new(backup)))
        .route(
            "default",
            vec![
                Entry::new("primary", "big-model"),
                Entry::new("backup", "small-model"),
            ],
        )
        .observer(move |e| match e {
            Event::Retry {
                provider,
                attempt,
                delay,
                error,
                ..
            } => {
                println!(
                    "  t={:>6} ms  retry {provider} #{attempt} in {} ms after {error}",
                    clock.now(),
                    delay.as_millis()
                )
            }
            Event::Failover {
                from, to, error, ..
            } => {
                println!(
                    "  t={:>6} ms  failover {from} -> {to}: {error}",
                    clock.now()
                )
            }
            Event::Breaker {
                provider,
                model,
                from,
                to,
                ..
            } => {
                println!(
                    "  t={:>6} ms  breaker {provider}/{model}: {from} -> {to}",
                    clock.now()
                )
            }
            _ => {}
        })
        .build();

    for i in 0..25u64 {
        let at = i * 4000;
        if p.now() < at {
            p.advance(Duration::from_millis(at - p.now()));
        }
        let started = p.now();
        match block_on(
            &p,
            client.chat(ChatRequest::new(vec![Message::user("hello")])),
        ) {
            Ok(r) => println!(
                "t={:>6} ms  {:<24} via {}/{} in {} ms, {} attempt(s)",
                started,
                r.response.text,
                r.served_by.provider,
                r.served_by.model,
                p.now() - started,
                r.attempts.len()
            ),
            Err(e) => println!("t={started:>6} ms  failed: {e}"),
        }
    }
    println!("\nhealth:");
    for h in client.health() {
        println!(
            "  {:<8} {:<9} requests={} failures={} p50={:?} ms",
            h.provider,
            h.state.to_string(),
            h.requests,
            h.failures,
            h.latency_ms.p50
        );
    }
}
