//! The fleet protocol: the Durable Object's stored state and the calls it
//! is sent, folded, leased and viewed at any clock; the isolate's answers
//! (views, lease answers) read back. Every state written reads back as
//! itself.
#![no_main]

mod common;

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use resilient_llm::fleet::{Call, LeaseAnswer, View};
use resilient_llm::{BreakerPolicy, DemotionPolicy, Fleet};

/// Whether two JSON values are equal, numbers with a fraction to within a
/// few units in the last place: serde_json (without its `float_roundtrip`
/// feature, which the crate does not take) may read a float back one unit
/// off. Found by this target (a view's `failureRate`, which is only shown).
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value::{Array, Number, Object};
    match (a, b) {
        (Number(x), Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x == y || (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs())
        }
        (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Object(x), Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn roundtrip<T: serde::Serialize + serde::de::DeserializeOwned>(v: &T) -> String {
    let text = serde_json::to_string(v).expect("state that does not serialize");
    let back: T = serde_json::from_str(&text).expect("state that does not read back");
    let again = serde_json::to_string(&back).expect("state that does not serialize");
    if text != again {
        let (a, b): (serde_json::Value, serde_json::Value) = (
            serde_json::from_str(&text).expect("JSON"),
            serde_json::from_str(&again).expect("JSON"),
        );
        assert!(
            same(&a, &b),
            "state that reads back as something else: {text} / {again}"
        );
    }
    text
}

fuzz_target!(|input: &[u8]| {
    // stored state "\n" then lines: [op] [clock step] call JSON
    let (stored, calls) = common::split_line(input);
    let mut fleet: Fleet = serde_json::from_slice(stored).unwrap_or_default();
    let policies = [
        BreakerPolicy::default(),
        BreakerPolicy {
            failure_threshold: 1,
            minimum_calls: 1,
            window: 2,
            half_open_permits: 2,
            success_threshold: 2,
            ..BreakerPolicy::default()
        },
    ];
    let mut now: u64 = 1_700_000_000_000;
    for line in calls.split(|b| *b == b'\n').take(64) {
        let [op, step, json @ ..] = line else {
            continue;
        };
        now = now.saturating_add(u64::from(*step) * 997);
        let policy = &policies[usize::from(op & 1)];
        if let Ok(v) = serde_json::from_slice::<View>(json) {
            roundtrip(&v);
        }
        if let Ok(a) = serde_json::from_slice::<LeaseAnswer>(json) {
            roundtrip(&a);
        }
        let Ok(call) = serde_json::from_slice::<Call>(json) else {
            continue;
        };
        roundtrip(&call);
        match op % 3 {
            0 => {
                let batch = call.into_batch();
                roundtrip(&fleet.report(policy, &DemotionPolicy::default(), now, &batch));
            }
            1 => {
                let holder = call.holder.as_deref().unwrap_or("unknown");
                roundtrip(&fleet.lease(policy, Duration::from_secs(30), now, holder));
            }
            _ => {
                roundtrip(&fleet.view(policy, now));
            }
        }
        roundtrip(&fleet);
    }
});
