//! Retry-After in every form (`retry-after-ms`, seconds, HTTP-date) at any
//! clock, and the backoff it competes with, at any attempt and random draw.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use resilient_llm::{parse_retry_after, Headers, RetryPolicy};

fuzz_target!(|input: &[u8]| {
    // [now: 8 bytes][attempt: 4 bytes][random: 8 bytes] retry-after-ms "\n" retry-after
    if input.len() < 20 {
        return;
    }
    let now = u64::from_le_bytes(input[..8].try_into().unwrap());
    let attempt = u32::from_le_bytes(input[8..12].try_into().unwrap());
    let random = f64::from_le_bytes(input[12..20].try_into().unwrap());
    let (ms, value) = common::split_line(&input[20..]);
    let mut headers = Headers::new();
    if !ms.is_empty() {
        headers.insert("retry-after-ms", String::from_utf8_lossy(ms));
    }
    headers.insert("retry-after", String::from_utf8_lossy(value));
    let _ = parse_retry_after(&headers, now);
    let policy = RetryPolicy::default();
    if (0.0..1.0).contains(&random) {
        let d = policy.jittered(attempt, random);
        assert!(d <= policy.cap(attempt), "jitter past its cap");
    }
});
