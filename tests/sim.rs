//! The outage simulator: figures against small cases worked out by hand,
//! determinism, the report's structure, and the bundled scenarios.

#![cfg(feature = "simulate")]

use resilient_llm::sim::{simulate, svg, Percentiles, PoolModel, Report, Scenario};
use serde_json::{json, Value};

/// Two providers with fixed latencies (median = p95), one request a second
/// for 10 s, one attempt per entry, a breaker that opens on one failure.
fn two_providers(primary_faults: Value, breaker: Value) -> Scenario {
    let doc = json!({
        "name": "hand", "durationMs": 10000, "bucketMs": 1000,
        "config": {
            "providers": { "primary": { "kind": "anthropic" }, "backup": { "kind": "openai" } },
            "routes": { "default": [ { "provider": "primary", "model": "p" }, { "provider": "backup", "model": "b" } ] },
            "retry": { "maxAttempts": 1 },
            "breaker": breaker
        },
        "providers": {
            "primary": { "medianMs": 100, "p95Ms": 100, "inputPerMtok": 3, "outputPerMtok": 15,
                         "faults": primary_faults },
            "backup": { "medianMs": 200, "p95Ms": 200, "inputPerMtok": 1, "outputPerMtok": 2 }
        },
        "traffic": { "ratePerSec": 1, "spacing": "even", "inputTokens": 1000, "outputTokens": 500 },
        "policies": [ { "name": "defaults" } ]
    });
    Scenario::parse(&doc.to_string()).expect("scenario")
}

const OPENS_ON_ONE: &str =
    r#"{ "failureThreshold": 1, "cooldownMs": 60000, "maxCooldownMs": 60000 }"#;

fn p(p50: u32, p95: u32, p99: u32) -> Percentiles {
    Percentiles {
        p50: Some(p50),
        p95: Some(p95),
        p99: Some(p99),
    }
}

#[test]
fn a_healthy_provider_answers_every_request_at_its_latency_and_price() {
    let s = two_providers(json!([]), serde_json::from_str(OPENS_ON_ONE).unwrap());
    let f = &simulate(&s).unwrap().runs[0].figures;
    assert_eq!((f.requests, f.answered, f.availability), (10, 10, 1.0));
    assert_eq!(f.latency_ms, p(100, 100, 100));
    assert_eq!(
        (f.calls, f.failing_calls, f.retries, f.failovers),
        (10, 0, 0, 0)
    );
    // 10 × (1000 × $3 + 500 × $15) per million tokens.
    assert!((f.cost_usd - 0.105).abs() < 1e-12, "{}", f.cost_usd);
    assert!(
        f.recovery_ms.is_empty(),
        "no failing window, nothing to recover from"
    );
}

#[test]
fn a_dead_primary_costs_one_call_then_its_open_breaker_sends_everyone_to_the_backup() {
    let dead =
        json!([{ "fromMs": 0, "toMs": 10000, "effect": { "kind": "status", "status": 503 } }]);
    let s = two_providers(dead, serde_json::from_str(OPENS_ON_ONE).unwrap());
    let report = simulate(&s).unwrap();
    let run = &report.runs[0];
    let f = &run.figures;
    // Request 0: 100 ms of 503, then 200 ms at the backup. Requests 1–9 skip
    // the open primary: 200 ms each.
    assert_eq!((f.requests, f.answered), (10, 10));
    assert_eq!(f.latency_ms, p(200, 300, 300));
    assert_eq!((f.calls, f.failing_calls, f.retries), (11, 1, 0));
    assert_eq!(
        f.failovers, 10,
        "the first after its failure, the others past the open breaker"
    );
    assert!((f.cost_usd - 10.0 * (1000.0 + 500.0 * 2.0) / 1e6).abs() < 1e-12);
    assert_eq!(
        f.recovery_ms.get("primary"),
        Some(&None),
        "it never answers again"
    );
    assert_eq!(
        run.series.breaker[report
            .providers
            .iter()
            .position(|p| p == "primary")
            .unwrap()][0],
        2
    );
    assert_eq!(
        run.series.served[0].iter().sum::<u64>(),
        10,
        "backup (ids in order) served all"
    );
}

#[test]
fn a_recovered_primary_serves_again_after_the_probe_that_follows_its_cooldowns() {
    // Down for [0, 5 s). Cooldown 2 s, doubling. Request 0 (t=0) fails there
    // at 100 ms: open until 2.1 s. Requests at 1 s and 2 s skip it. The one at
    // 3 s probes, fails at 3.1 s: open 4 s more, until 7.1 s. Requests at 4–7 s
    // skip it; the one at 8 s probes a healthy primary, answered at 8.1 s:
    // 3.1 s after the outage ended.
    let down =
        json!([{ "fromMs": 0, "toMs": 5000, "effect": { "kind": "status", "status": 529 } }]);
    let breaker = json!({ "failureThreshold": 1, "cooldownMs": 2000, "maxCooldownMs": 8000 });
    let report = simulate(&two_providers(down, breaker)).unwrap();
    let f = &report.runs[0].figures;
    assert_eq!(f.recovery_ms.get("primary"), Some(&Some(3100)));
    assert_eq!((f.calls, f.failing_calls), (12, 2));
    // Latencies: 300 (t=0), 300 (the failed probe at 3 s), 100 (t=8, 9), 200 × 6.
    assert_eq!(f.latency_ms, p(200, 300, 300));
    let primary = report
        .providers
        .iter()
        .position(|p| p == "primary")
        .unwrap();
    assert_eq!(
        report.runs[0].series.served[primary],
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 1]
    );
}

#[test]
fn retries_honour_retry_after_and_count_as_retries() {
    // Every call to the only provider in [0, 1 s) gets a 429 asking for 1.5 s.
    // Request 0 is rate limited at 100 ms, waits exactly 1.5 s, and is
    // answered at 1.7 s; the requests at 1 s and 2 s take 100 ms.
    let doc = json!({
        "name": "rl", "durationMs": 3000,
        "config": {
            "providers": { "only": { "kind": "openai" } },
            "routes": { "default": [ { "provider": "only", "model": "m" } ] }
        },
        "providers": { "only": { "medianMs": 100, "p95Ms": 100, "faults": [
            { "fromMs": 0, "toMs": 1000, "effect": { "kind": "status", "status": 429, "retryAfterMs": 1500 } }
        ] } },
        "traffic": { "ratePerSec": 1, "spacing": "even" },
        "policies": [ { "name": "defaults" } ]
    });
    let report = simulate(&Scenario::parse(&doc.to_string()).unwrap()).unwrap();
    let f = &report.runs[0].figures;
    assert_eq!(
        (f.requests, f.answered, f.calls, f.failing_calls, f.retries),
        (3, 3, 4, 1, 1)
    );
    assert_eq!(f.latency_ms, p(100, 1700, 1700));
}

/// The text of every `<text>` element of an SVG.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            Some(
                t.split_once('>')?
                    .1
                    .split_once("</text>")?
                    .0
                    .trim()
                    .to_string(),
            )
        })
        .collect()
}

fn storm() -> Scenario {
    let text = std::fs::read_to_string("docs/scenarios/storm-529.json").unwrap();
    let mut s = Scenario::parse(&text).unwrap();
    s.duration_ms = 60_000; // enough for the storm's start, short for a test
    for p in s.providers.values_mut() {
        for f in &mut p.faults {
            f.from_ms = 10_000;
            f.to_ms = 40_000;
        }
    }
    s
}

#[test]
fn the_same_seed_gives_the_same_report_and_charts_byte_for_byte() {
    let render = |s: &Scenario| {
        let r = simulate(s).unwrap();
        let charts: Vec<String> = r.runs.iter().map(|run| svg(&r, run).unwrap()).collect();
        (serde_json::to_string(&r).unwrap(), charts, r.table())
    };
    let s = storm();
    let first = render(&s);
    assert_eq!(first, render(&s));
    let mut other = s.clone();
    other.seed += 1;
    assert_ne!(first.0, render(&other).0, "another seed, other draws");
}

#[test]
fn the_report_has_a_run_per_policy_a_point_per_bucket_and_three_labelled_charts() {
    let s = storm();
    let r: Report = simulate(&s).unwrap();
    assert_eq!(
        r.runs.iter().map(|r| r.policy.as_str()).collect::<Vec<_>>(),
        ["defaults", "no breaker", "retries only"]
    );
    let buckets = (s.duration_ms / s.bucket_ms) as usize;
    for run in &r.runs {
        let series = &run.series;
        assert_eq!(series.failed.len(), buckets);
        assert_eq!(series.latency_ms.len(), buckets);
        assert!(series
            .served
            .iter()
            .chain(std::slice::from_ref(&series.failed))
            .all(|v| v.len() == buckets));
        assert!(series.breaker.iter().all(|v| v.len() == buckets));
        let total: u64 = (0..buckets).map(|b| series.requests(b)).sum();
        assert_eq!(total, run.figures.requests, "every request in one bucket");
        let chart = svg(&r, run).unwrap();
        assert!(chart.starts_with("<svg"), "{}", &chart[..40]);
        let texts = texts(&chart);
        for label in [
            "Breaker state",
            "Latency of answered requests",
            "Share of requests served by each provider",
            "primary",
            "backup",
            "failed",
            "p95",
            "time (s)",
            "open",
            "half-open",
            "closed",
        ] {
            assert!(
                texts.iter().any(|t| t == label),
                "label {label:?} missing from {texts:?}"
            );
        }
        let title = format!("storm-529: {}", run.policy);
        assert!(texts.contains(&title), "the title names the policy");
    }
    let [defaults, no_breaker, retries_only] = &r.runs[..] else {
        panic!()
    };
    let primary = r.providers.iter().position(|p| p == "primary").unwrap();
    assert!(
        defaults.series.breaker[primary].contains(&2),
        "the defaults open the primary's breaker"
    );
    assert!(
        no_breaker.series.breaker[primary].iter().all(|&s| s == 0),
        "\"no breaker\" never opens"
    );
    assert!(defaults.figures.failing_calls * 10 < no_breaker.figures.failing_calls);
    assert_eq!(defaults.figures.availability, 1.0);
    assert!(
        retries_only.figures.availability < 0.8,
        "no failover: the storm's requests fail"
    );
    assert_eq!(retries_only.figures.failovers, 0);
    let table = r.table();
    for row in [
        "availability",
        "latency p50 / p95 / p99 ms",
        "calls to failing providers",
        "retries",
        "cost USD",
        "primary serves again after",
    ] {
        assert!(table.contains(row), "{row} missing from\n{table}");
    }
}

#[test]
fn every_bundled_scenario_parses_and_compares_its_policies() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir("docs/scenarios").unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".json") || name.ends_with(".report.json") {
            continue;
        }
        let s = Scenario::parse(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let policies: Vec<&str> = s.policies.iter().map(|p| p.name.as_str()).collect();
        // Repeated questions compare the response cache with none; pools,
        // capacity steering with the routing before it; outages, the breaker.
        let compared: &[&str] = if s.traffic.repeat.is_some() {
            &["no cache", "cache", "stale if error"]
        } else if s.providers.values().any(|p| p.pool.is_some()) {
            &["capacity-aware", "no steering", "reactive"]
        } else if s.fleet.is_some() {
            &["today", "relayed"]
        } else {
            &["defaults", "no breaker", "retries only"]
        };
        assert_eq!(policies, compared, "{name}");
        assert_eq!(format!("{}.json", s.name), name);
        names.push(s.name);
    }
    names.sort();
    assert_eq!(
        names,
        [
            "dark-region",
            "drifting-p95",
            "flapping",
            "fleet-storm-100",
            "fleet-storm-1000",
            "fleet-storm-10000",
            "key-rate-limited",
            "storm-529",
            "storm-529-cached",
            "three-resellers"
        ]
    );
}

#[test]
fn a_scenario_naming_a_provider_the_config_lacks_is_refused() {
    let mut s = two_providers(json!([]), json!({}));
    s.providers
        .insert("ghost".into(), s.providers["backup"].clone());
    assert_eq!(
        simulate(&s).unwrap_err(),
        "providers.ghost: modelled but not in config.providers"
    );
}

#[test]
fn isolates_sharing_a_fleet_object_learn_from_each_other() {
    // Threshold 3, a primary dead for the whole run, four isolates taking
    // requests in turn. Alone, each isolate would pay 3 failed calls to open
    // its own breaker (12); sharing verdicts through the fleet object, the
    // fleet opens after 3 failures in all and the isolates follow it.
    let dead =
        json!([{ "fromMs": 0, "toMs": 30000, "effect": { "kind": "status", "status": 503 } }]);
    let mut s = two_providers(
        dead,
        json!({ "failureThreshold": 3, "cooldownMs": 60000, "maxCooldownMs": 60000 }),
    );
    s.duration_ms = 30_000;
    s.traffic.rate_per_sec = 4.0;
    s.traffic.isolates = 4;
    let report = simulate(&s).unwrap();
    let f = &report.runs[0].figures;
    assert_eq!((f.requests, f.answered), (120, 120));
    assert!(f.failing_calls < 12, "{} failed calls", f.failing_calls);
    assert!(
        f.failing_calls >= 3,
        "the fleet needs three verdicts to open"
    );
    let primary = report
        .providers
        .iter()
        .position(|p| p == "primary")
        .unwrap();
    assert_eq!(*report.runs[0].series.breaker[primary].last().unwrap(), 2);
    assert_eq!(
        report,
        simulate(&s).unwrap(),
        "deterministic with a fleet too"
    );
    s.traffic.isolates = 1;
    let alone = simulate(&s).unwrap();
    assert_eq!(
        alone.runs[0].figures.failing_calls, 3,
        "one isolate: three calls open its breaker"
    );
}

#[test]
fn a_pool_refuses_past_its_limit_and_its_headers_steer_before_the_429() {
    // The primary (Anthropic's headers) holds 6 requests a minute: full at
    // the start, one back every 10 s. Requests at 0 s, 1 s, … 9 s.
    let mut s = two_providers(json!([]), json!({}));
    s.providers.get_mut("primary").unwrap().pool = Some(PoolModel {
        requests_per_minute: Some(6),
        tokens_per_minute: None,
    });
    s.policies = serde_json::from_value(json!([
        { "name": "capacity-aware" },
        { "name": "reactive", "patch": { "steerByCapacity": false } }
    ]))
    .unwrap();
    let report = simulate(&s).unwrap();
    let (steered, reactive) = (&report.runs[0], &report.runs[1]);
    // The sixth answer (5 s) says 0 left, full at 65 s: the four requests
    // after it go to the backup without asking the primary.
    assert_eq!(steered.figures.provider_429s, 0);
    assert_eq!(served(steered), [4, 6]); // backup, primary
                                         // Without steering, the request at 6 s finds 0.6 of a request refilled:
                                         // a 429 at once, `retry-after: 4`, and (one attempt) the backup. So do
                                         // those at 7, 8 and 9 s (0.7, 0.8, 0.9 refilled; an ordered route holds
                                         // no entry back for its Retry-After).
    assert_eq!(reactive.figures.provider_429s, 4);
    assert_eq!(served(reactive), [4, 6]);
    assert_eq!(
        reactive.series.provider_429s[1],
        [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    );
    assert_eq!(reactive.figures.availability, 1.0);
}

fn served(run: &resilient_llm::sim::Run) -> Vec<u64> {
    run.series.served.iter().map(|s| s.iter().sum()).collect()
}

#[test]
fn three_resellers_capacity_steering_cuts_provider_429s_by_80_percent() {
    // Issue 30's must-show, on the bundled scenario: at least 80 % fewer
    // provider 429s than reactive routing, at equal or better availability and p95.
    let text = std::fs::read_to_string("docs/scenarios/three-resellers.json").unwrap();
    let report = simulate(&Scenario::parse(&text).unwrap()).unwrap();
    let run = |name: &str| {
        let r = report.runs.iter().find(|r| r.policy == name).unwrap();
        r.figures.clone()
    };
    let (steered, reactive) = (run("capacity-aware"), run("reactive"));
    assert!(
        steered.provider_429s * 5 <= reactive.provider_429s,
        "{} against {}",
        steered.provider_429s,
        reactive.provider_429s
    );
    assert!(steered.availability >= reactive.availability);
    assert!(steered.latency_ms.p95 <= reactive.latency_ms.p95);
}

/// The fleet-storm scenario shrunk for a test: 300 isolates in 30 data
/// centres, objects ten times slower than the real ones (100 calls a
/// second), so that today's protocol saturates its owner as 3,000 isolates
/// would saturate a real one.
fn fleet_storm_small() -> Scenario {
    let text = std::fs::read_to_string("docs/scenarios/fleet-storm-1000.json").unwrap();
    let mut s = Scenario::parse(&text).unwrap();
    s.duration_ms = 30_000;
    for f in &mut s.providers.get_mut("primary").unwrap().faults {
        f.from_ms = 5_000;
        f.to_ms = 20_000;
    }
    s.traffic.isolates = 300;
    s.traffic.rate_per_sec = 900.0;
    let fleet = s.fleet.as_mut().unwrap();
    fleet.service_ms = 10.0;
    fleet.data_centres = 30;
    s
}

#[test]
fn relays_keep_the_owner_below_its_service_rate_where_isolates_calling_it_swamp_it() {
    let r = simulate(&fleet_storm_small()).unwrap();
    let fleet = |i: usize| r.runs[i].figures.fleet.clone().unwrap();
    let (today, relayed) = (fleet(0), fleet(1));
    assert_eq!(today.service_rate, Some(100.0));

    // Today: some 600 calls a second at an object serving 100; calls wait
    // past the isolates' time limit, so the fleet's views stop arriving.
    let owner = today.owner.unwrap();
    assert!(owner.peak_per_sec > 300, "{owner:?}");
    assert!(owner.wait_ms[1] > 1_500.0, "{owner:?}");

    // Relayed: one watch per data centre and model, held open a heartbeat;
    // urgent batches one at a time; lease questions staggered.
    let owner = relayed.owner.unwrap();
    assert!(owner.peak_per_sec <= 50, "half the service rate: {owner:?}");
    assert_eq!(relayed.relays, 60, "30 data centres, two models");
    let relay = relayed.relay.unwrap();
    assert!(relay.peak_per_sec <= 50, "ten isolates each: {relay:?}");
    assert!(relayed.views_delivered > 50 * today.views_delivered);

    // Every transition reached 99 % of the isolates that went on calling
    // within a second, all of them within two; today's never reach most.
    let reached: Vec<_> = relayed
        .transitions
        .iter()
        .filter(|t| t.isolates > 0)
        .collect();
    assert!(reached.len() >= 2, "the storm opens and closes the breaker");
    for t in reached {
        assert_eq!(t.unreached, 0, "{t:?}");
        assert!(t.within_1s >= 0.99, "{t:?}");
        assert!(t.reach_ms[2].unwrap() <= 2_000, "{t:?}");
    }
    assert!(today
        .transitions
        .iter()
        .any(|t| t.unreached > t.isolates / 2));
    assert_eq!(relayed.second_probes, 0);
    assert_eq!(today.second_probes, 0);
    assert!(r.table().contains("busiest owner calls/s"));
    // Both protocols answer every request: the isolates decide locally when
    // the fleet cannot tell them.
    assert!(r.runs.iter().all(|run| run.figures.availability > 0.999));
}

/// One request a second asking the same question of the primary alone,
/// dead from 5 s on, through a cache whose answers are fresh for 1 s.
fn one_question(stale_if_error: u64) -> Scenario {
    let dead =
        json!([{ "fromMs": 5000, "toMs": 10000, "effect": { "kind": "status", "status": 503 } }]);
    let mut s = two_providers(dead, json!({}));
    s.traffic.repeat = Some(resilient_llm::sim::Repeat {
        share: 1.0,
        distinct: 1,
    });
    s.policies[0].patch = json!({
        "routes": { "default": [ { "provider": "primary", "model": "p" } ] },
        "cache": { "default": { "ttlSeconds": 1, "staleIfErrorSeconds": stale_if_error } }
    });
    s
}

#[test]
fn a_cached_answer_is_given_while_fresh_and_after_every_provider_fails_only_within_its_stale_window(
) {
    // Asked at 0 s and stored at 0.1 s, fresh until 1.1 s: the 1 s request
    // is a hit, the 2 s one asks again (stored at 2.1 s), and so on: misses
    // at 0, 2 and 4 s, hits at 1, 3 and 5 s. From 6 s the primary fails:
    // without a stale window those four requests fail…
    let r = simulate(&one_question(0)).unwrap();
    let f = &r.runs[0].figures;
    let c = f.cache.expect("cache figures");
    assert_eq!((c.hits, c.misses, c.stale), (3, 7, 0));
    assert_eq!((f.requests, f.answered, f.calls), (10, 6, 7));
    // …a hit costs no call and no time…
    assert_eq!(f.latency_ms.p50, Some(0));
    assert_eq!(r.runs[0].series.cached[..6], [0, 1, 0, 1, 0, 1]);
    // …and within one, they are given the answer stored at 4.1 s.
    let r = simulate(&one_question(60)).unwrap();
    let f = &r.runs[0].figures;
    let c = f.cache.expect("cache figures");
    assert_eq!((c.hits, c.misses, c.stale), (3, 3, 4));
    assert_eq!((f.requests, f.answered, f.availability), (10, 10, 1.0));
    assert_eq!(r.runs[0].series.cached, [0, 1, 0, 1, 0, 1, 1, 1, 1, 1]);
    assert!(r.table().contains("3 / 4"), "{}", r.table());
}

#[test]
fn repeated_questions_leave_the_arrivals_as_they_were() {
    let plain = simulate(&storm()).unwrap();
    let mut s = storm();
    s.traffic.repeat = Some(resilient_llm::sim::Repeat {
        share: 0.5,
        distinct: 10,
    });
    let asked = simulate(&s).unwrap();
    // No policy caches: the same arrivals, the same answers.
    assert_eq!(plain.runs, asked.runs);
    let bad = r#"{"share": 1.5, "distinct": 0}"#;
    s.traffic.repeat = Some(serde_json::from_str(bad).unwrap());
    let err = s.check().unwrap_err();
    assert!(
        err.contains("traffic.repeat.share: must be in [0, 1]"),
        "{err}"
    );
    assert!(
        err.contains("traffic.repeat.distinct: must be 1 to"),
        "{err}"
    );
}
