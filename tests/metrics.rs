//! `GET /metrics` on the fake platform, read back with a Prometheus
//! text-format parser (prometheus-parse): requests, attempts by outcome,
//! retries, failovers, breaker state and latency histograms.

use prometheus_parse::{Scrape, Value as Sample};
use resilient_llm::gateway::{Gateway, Inbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore};
use serde_json::json;

const BEARER: (&str, &str) = ("authorization", "Bearer client-key-123");

fn gateway(p: &FakePlatform) -> Gateway<FakePlatform, MemoryStore> {
    let config = json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKey": "sk-p" },
            "backup": { "kind": "anthropic", "baseUrl": "https://backup.test", "apiKey": "sk-b" }
        },
        "routes": { "default": [
            { "provider": "primary", "model": "gpt-big" },
            { "provider": "backup", "model": "claude-small" }
        ] },
        "retry": { "maxAttempts": 2, "baseDelayMs": 10, "maxDelayMs": 100 },
        "breaker": { "failureThreshold": 2, "cooldownMs": 10000 },
        "gateway": { "clientKeysEnv": ["GATEWAY_KEY"] }
    });
    let secret = |n: &str| (n == "GATEWAY_KEY").then(|| "client-key-123".to_string());
    let setup = Setup::load(Some(&config.to_string()), &secret).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    setup.into_gateway(p.clone(), store)
}

fn req(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Inbound {
    Inbound {
        method: method.into(),
        path: path.into(),
        headers: headers.iter().copied().collect::<Headers>(),
        body: Body::full(body.as_bytes().to_vec()),
    }
}

fn anthropic_ok() -> String {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-small",
        "content": [{ "type": "text", "text": "ok" }], "stop_reason": "end_turn",
        "usage": { "input_tokens": 3, "output_tokens": 2 }
    })
    .to_string()
}

fn scrape(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>) -> (String, Scrape) {
    let out = block_on(p, g.handle(req("GET", "/metrics", &[BEARER], "")));
    assert_eq!(out.status, 200);
    assert_eq!(
        out.headers.get("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = String::from_utf8(out.body).expect("utf-8");
    let lines = text.lines().map(|l| Ok(l.to_string()));
    (text.clone(), Scrape::parse(lines).expect("parses"))
}

/// The value of the sample `name` whose labels include every pair of `labels`.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    s.samples
        .iter()
        .filter(|x| x.metric == name)
        .find(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match &x.value {
            Sample::Counter(v) | Sample::Gauge(v) | Sample::Untyped(v) => *v,
            Sample::Histogram(h) => h.last().map_or(0.0, |b| b.count),
            Sample::Summary(_) => f64::NAN,
        })
}

#[test]
fn metrics_count_requests_attempts_retries_failovers_and_breaker_state() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    let g = gateway(&p);
    let chat = json!({ "model": "default", "messages": [{ "role": "user", "content": "hi" }] })
        .to_string();
    // Twice: the primary fails both attempts (one retry each), the backup answers.
    for _ in 0..2 {
        p.script("https://primary.test", [reply(503), reply(503)]);
        p.script("https://backup.test", [reply(200).body(anthropic_ok())]);
        let out = block_on(
            &p,
            g.handle(req("POST", "/v1/chat/completions", &[BEARER], &chat)),
        );
        assert_eq!(out.status, 200);
    }
    // Unauthorized: counted by status, forwarded nowhere.
    let out = block_on(&p, g.handle(req("GET", "/metrics", &[], "")));
    assert_eq!(out.status, 401, "metrics need the gateway key");

    let (text, s) = scrape(&p, &g);
    let chat_path = [("path", "/v1/chat/completions"), ("status", "200")];
    assert_eq!(
        value(&s, "llm_gateway_requests_total", &chat_path),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        value(
            &s,
            "llm_gateway_requests_total",
            &[("path", "/metrics"), ("status", "401")]
        ),
        Some(1.0)
    );
    let primary = [("provider", "primary"), ("model", "gpt-big")];
    assert_eq!(
        value(
            &s,
            "llm_gateway_attempts_total",
            &[primary[0], primary[1], ("outcome", "server")]
        ),
        Some(4.0)
    );
    assert_eq!(
        value(
            &s,
            "llm_gateway_attempts_total",
            &[("provider", "backup"), ("outcome", "ok")]
        ),
        Some(2.0)
    );
    assert_eq!(value(&s, "llm_gateway_retries_total", &primary), Some(2.0));
    assert_eq!(
        value(
            &s,
            "llm_gateway_failovers_total",
            &[("provider", "primary")]
        ),
        Some(2.0)
    );
    assert_eq!(
        value(&s, "llm_gateway_failovers_total", &[("provider", "backup")]),
        None
    );
    // Two failed verdicts at threshold 2: the primary's breaker is open.
    for (state, v) in [("open", 1.0), ("closed", 0.0), ("half_open", 0.0)] {
        assert_eq!(
            value(
                &s,
                "llm_gateway_breaker_state",
                &[("provider", "primary"), ("state", state)]
            ),
            Some(v),
            "{state}"
        );
    }
    assert_eq!(
        value(
            &s,
            "llm_gateway_breaker_state",
            &[("provider", "backup"), ("state", "closed")]
        ),
        Some(1.0)
    );
    // Opening cleared the count: it counts failures in closed state.
    assert_eq!(
        value(
            &s,
            "llm_gateway_breaker_consecutive_failures",
            &[("provider", "primary")]
        ),
        Some(0.0)
    );
    // Histograms: one observation per call, and per answered request.
    assert_eq!(
        value(&s, "llm_gateway_attempt_seconds", &primary),
        Some(4.0)
    );
    assert_eq!(
        value(&s, "llm_gateway_request_seconds", &[("provider", "backup")]),
        Some(2.0)
    );
    assert!(text.contains("llm_gateway_attempt_seconds_bucket{le=\"60.0\",provider=\"primary\",model=\"gpt-big\"} 4")
        || text.contains("llm_gateway_attempt_seconds_bucket{provider=\"primary\",model=\"gpt-big\",le=\"60.0\"} 4"), "{text}");
    assert!(text.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
    assert!(
        !text.contains("sk-p") && !text.contains("client-key-123"),
        "no key in the metrics"
    );
}

#[test]
fn each_request_leaves_one_analytics_engine_data_point() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    let g = gateway(&p);
    p.script("https://primary.test", [reply(503), reply(503)]);
    p.script("https://backup.test", [reply(200).body(anthropic_ok())]);
    let chat = json!({ "model": "default", "messages": [{ "role": "user", "content": "hi" }] })
        .to_string();
    let out = block_on(
        &p,
        g.handle(req("POST", "/v1/chat/completions", &[BEARER], &chat)),
    );
    assert_eq!(out.status, 200);
    let point = g.take_point().expect("a data point");
    assert_eq!(point.index, "default");
    assert_eq!(
        point.blobs,
        [
            "/v1/chat/completions",
            "default",
            "backup",
            "claude-small",
            "200"
        ]
    );
    assert_eq!(point.doubles[0], 200.0);
    assert_eq!(
        point.doubles[2], 3.0,
        "two calls to the primary, one to the backup"
    );
    assert_eq!(g.take_point(), None, "taken once");
    let out = block_on(&p, g.handle(req("GET", "/nowhere", &[], "")));
    assert_eq!(out.status, 404);
    let point = g.take_point().unwrap();
    assert_eq!(
        (point.index.as_str(), point.doubles[0]),
        ("/nowhere", 404.0)
    );
}

/// The exposition's samples (lines not comments), and its size.
fn series(text: &str) -> (usize, usize) {
    let samples = text.lines().filter(|l| !l.starts_with('#')).count();
    (samples, text.len())
}

#[test]
fn unique_paths_without_a_key_add_no_series() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    let g = gateway(&p);
    let long = "x".repeat(2_000);
    let kinds = |i: usize| -> Vec<Inbound> {
        vec![
            // 404: no such endpoint.
            req("GET", &format!("/{long}/{i}"), &[], ""),
            // 401: one route, unknown, no key.
            req("GET", &format!("/v1/models/{long}{i}"), &[], ""),
            // 404 under known prefixes, with a wrong method or key.
            req("PUT", &format!("/v1/chat/completions/{i}"), &[], ""),
            req(
                "POST",
                &format!("/v1/messages/{i}"),
                &[("x-api-key", "wrong")],
                "",
            ),
            // 400: an oversized header on a unique path, and on a known one.
            req(
                "GET",
                &format!("/health/{i}"),
                &[("anthropic-beta", &long.repeat(5))],
                "",
            ),
            req("GET", "/health", &[("anthropic-beta", &long.repeat(5))], ""),
            // 404 with the key.
            req("GET", &format!("/v1/{i}"), &[BEARER], ""),
        ]
    };
    let run = |from: usize, to: usize| {
        for i in from..to {
            for r in kinds(i) {
                let out = block_on(&p, g.handle(r));
                assert!((400..500).contains(&out.status), "{}", out.status);
            }
        }
    };
    // Every kind once, and enough of each that every count has four digits.
    run(0, 1_000);
    scrape(&p, &g); // the scrape itself is counted after it
    let (before_text, _) = scrape(&p, &g);
    let before = series(&before_text);
    run(1_000, 3_000);
    let (text, s) = scrape(&p, &g);
    let after = series(&text);
    assert_eq!(after.0, before.0, "no new series:\n{text}");
    assert!(
        after.1 <= before.1 + 16,
        "the exposition stays flat: {} -> {} bytes",
        before.1,
        after.1
    );
    assert!(!text.contains("xxxxxxxx"), "no path in the exposition");
    assert_eq!(
        value(
            &s,
            "llm_gateway_requests_total",
            &[("path", "other"), ("status", "404")]
        ),
        Some(15_000.0),
        "{text}"
    );
    assert_eq!(
        value(
            &s,
            "llm_gateway_requests_total",
            &[("path", "/v1/models/:id"), ("status", "401")]
        ),
        Some(3_000.0)
    );
    assert_eq!(
        value(
            &s,
            "llm_gateway_requests_total",
            &[("path", "/health"), ("status", "400")]
        ),
        Some(3_000.0)
    );
}

#[test]
fn model_names_write_no_series_of_their_own() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    let injected = "m\"} 1\nllm_gateway_injected_total{x=\"y\\";
    let config = json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKey": "sk-p" }
        },
        "routes": { "default": [{ "provider": "primary", "model": injected }] },
        "retry": { "maxAttempts": 1 },
        "allowAnyModel": true,
        "gateway": { "clientKeysEnv": ["GATEWAY_KEY"] }
    });
    let secret = |n: &str| (n == "GATEWAY_KEY").then(|| "client-key-123".to_string());
    let setup = Setup::load(Some(&config.to_string()), &secret).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    let g = setup.into_gateway(p.clone(), store);
    let ok = json!({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "ok" },
                      "finish_reason": "stop" }]
    })
    .to_string();
    // The configured name, and names no route lists (allowAnyModel).
    let models = [
        "default".to_string(),
        "primary/x\"} 1\nllm_gateway_injected_total{x=\"y".to_string(),
        "primary/made-up-1".to_string(),
        "primary/made-up-2".to_string(),
    ];
    for model in &models {
        p.script("https://primary.test", [reply(200).body(ok.clone())]);
        let chat = json!({ "model": model, "messages": [{ "role": "user", "content": "hi" }] });
        let out = block_on(
            &p,
            g.handle(req(
                "POST",
                "/v1/chat/completions",
                &[BEARER],
                &chat.to_string(),
            )),
        );
        assert_eq!(out.status, 200, "{model}");
    }
    let (text, s) = scrape(&p, &g);
    for line in text.lines() {
        assert!(
            line.starts_with("# ")
                || line.starts_with("llm_gateway_") && !line.starts_with("llm_gateway_injected"),
            "{line:?}"
        );
    }
    // The configured name, escaped as OpenMetrics has it: \\, \" and \n.
    let escaped = r#"model="m\"} 1\nllm_gateway_injected_total{x=\"y\\""#;
    assert!(
        text.contains(&format!(
            "llm_gateway_attempts_total{{provider=\"primary\",{escaped},outcome=\"ok\"}} 1"
        )),
        "{text}"
    );
    // The names no route lists: one `other`.
    assert_eq!(
        value(
            &s,
            "llm_gateway_attempts_total",
            &[
                ("provider", "primary"),
                ("model", "other"),
                ("outcome", "ok")
            ]
        ),
        Some(3.0),
        "{text}"
    );
    assert!(!text.contains("made-up"), "{text}");
}
