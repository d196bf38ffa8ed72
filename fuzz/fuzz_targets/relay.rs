//! A data centre's relay between isolates and a model's owner: isolates'
//! refreshes, batches and lease questions in any order and at any clock,
//! watches and urgent calls answered by a real owner ([`Fleet`]) or lost.
//! Whatever comes, the relay never grants a probe itself, never holds more
//! than it may gather, never goes back to an older view, and the owner
//! never has more probes out than its policy allows.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use resilient_llm::fleet::{Call, LeaseAnswer, LeaseStep, Relay, MAX_GATHERED};
use resilient_llm::{BreakerPolicy, DemotionPolicy, Fleet};

fuzz_target!(|input: &[u8]| {
    // lines: [op] [clock step] call JSON
    let policy = BreakerPolicy {
        failure_threshold: 2,
        minimum_calls: 2,
        window: 4,
        cooldown: Duration::from_secs(5),
        ..BreakerPolicy::default()
    };
    let demotion = DemotionPolicy::default();
    let ttl = Duration::from_secs(30);
    let mut fleet = Fleet::new();
    let mut relay = Relay::new().stagger(0.5);
    let mut now: u64 = 1_700_000_000_000;
    let mut newest = None;
    for line in input.split(|b| *b == b'\n').take(256) {
        let [op, step, json @ ..] = line else {
            continue;
        };
        now = now.saturating_add(u64::from(*step) * 97);
        let call = serde_json::from_slice::<Call>(json).unwrap_or_default();
        let lost = op & 0x80 != 0;
        match op % 6 {
            0 => {
                let _ = relay.view(now);
            }
            1 => {
                if relay.report(call.into_batch(), now) {
                    let batch = relay.take();
                    assert!(batch.reports.len() <= MAX_GATHERED + 1);
                    let view = (!lost).then(|| fleet.report(&policy, &demotion, now, &batch));
                    let _ = relay.passed(view, now);
                }
            }
            2 => {
                let holder = format!("isolate-{}", (op >> 3) & 3);
                match relay.lease(&holder, now) {
                    LeaseStep::Answer(LeaseAnswer::Granted { .. }) => {
                        panic!("a relay granted a probe itself")
                    }
                    LeaseStep::Answer(_) => {}
                    LeaseStep::Ask if lost => relay.lost(),
                    LeaseStep::Ask => {
                        let answer = fleet.lease(&policy, ttl, now, &holder);
                        relay.leased(&holder, &answer, now);
                    }
                }
            }
            3 => {
                // A watch: the gathered batch, folded, and the view back.
                let batch = relay.take();
                assert!(batch.reports.len() <= MAX_GATHERED + batch_leases(&batch));
                assert!(batch.samples.len() <= MAX_GATHERED);
                if lost {
                    relay.lost();
                } else {
                    let view = fleet.report(&policy, &demotion, now, &batch);
                    relay.apply(view, now, true);
                }
            }
            4 => {
                relay.lost();
                relay.watched_by(u32::from(*step));
            }
            _ => {
                // Many isolates' batches in one go, the owner out of reach.
                for i in 0..u64::from(*step) * 40 {
                    let mut c = call.clone();
                    c.reports.iter_mut().for_each(|r| r.at = now + i);
                    let _ = relay.report(c.into_batch(), now);
                }
            }
        }
        assert!(
            fleet.leases.len() <= policy.half_open_permits as usize,
            "the owner has more probes out than it may"
        );
        if let Some(v) = relay.current(now) {
            if let Some((generation, _)) = newest {
                assert!(
                    v.generation >= generation,
                    "the relay went back to an older view"
                );
            }
            newest = Some((v.generation, v.as_of));
        }
    }
});

fn batch_leases(batch: &resilient_llm::fleet::Batch) -> usize {
    batch.reports.iter().filter(|r| r.lease.is_some()).count()
}
