//! The status page on the fake platform: the sign-in form and its cookie,
//! the page and its data showing a breaker open on a dead provider and close
//! after it heals, and the cookie spending nothing on the chat routes.

use std::time::Duration;

use resilient_llm::gateway::{Gateway, Inbound, Outbound, Setup};
use resilient_llm::testing::{block_on, reply, FakePlatform};
use resilient_llm::{Body, Headers, MemoryStore, Platform};
use serde_json::{json, Value};

#[path = "common/trickle.rs"]
mod trickle;
use trickle::trickle;

const KEY: &str = "client key;123";

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
        "retry": { "maxAttempts": 1 },
        "breaker": { "failureThreshold": 1, "cooldownMs": 5000 },
        "gateway": { "clientKeysEnv": ["GATEWAY_KEY"] }
    });
    let secret = |n: &str| (n == "GATEWAY_KEY").then(|| KEY.to_string());
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

fn html(out: &Outbound) -> String {
    assert_eq!(
        out.headers.get("content-type"),
        Some("text/html; charset=utf-8")
    );
    String::from_utf8(out.body.clone()).unwrap()
}

fn anthropic_ok() -> String {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-small",
        "content": [{ "type": "text", "text": "ok" }], "stop_reason": "end_turn",
        "usage": { "input_tokens": 3, "output_tokens": 2 }
    })
    .to_string()
}

fn openai_ok() -> String {
    json!({
        "id": "c", "object": "chat.completion", "created": 1, "model": "gpt-big",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "ok" }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 }
    })
    .to_string()
}

/// Signs in through the form; the cookie header to send back.
fn sign_in(p: &FakePlatform, g: &Gateway<FakePlatform, MemoryStore>) -> String {
    let form = format!("key={}", "client%20key%3B123");
    let out = block_on(
        p,
        g.handle(req(
            "POST",
            "/status/login",
            &[("content-type", "application/x-www-form-urlencoded")],
            &form,
        )),
    );
    assert_eq!(out.status, 303);
    assert_eq!(
        out.headers.get("location"),
        Some("/status"),
        "no key in the URL"
    );
    let set = out.headers.get("set-cookie").expect("a cookie").to_string();
    for attr in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/status"] {
        assert!(set.contains(attr), "{attr} missing from {set}");
    }
    set.split(';').next().unwrap().to_string()
}

#[test]
fn the_page_asks_a_browser_to_sign_in_and_refuses_a_wrong_key() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    let g = gateway(&p);
    let out = block_on(&p, g.handle(req("GET", "/status", &[], "")));
    assert_eq!(out.status, 401);
    let page = html(&out);
    assert!(
        page.contains("<form method=\"post\" action=\"/status/login\">"),
        "{page}"
    );
    assert!(
        page.contains("<label for=\"key\">Gateway key</label>")
            && page.contains("type=\"password\"")
    );
    let out = block_on(&p, g.handle(req("POST", "/status/login", &[], "key=nope")));
    assert_eq!(out.status, 401);
    assert!(html(&out).contains("that key is not accepted"));
    assert!(out.headers.get("set-cookie").is_none());
    let out = block_on(
        &p,
        g.handle(req(
            "GET",
            "/status/data",
            &[("cookie", "rl_status_key=nope")],
            "",
        )),
    );
    assert_eq!(out.status, 401);
}

#[test]
fn the_page_shows_a_breaker_opening_on_a_dead_provider_and_closing_after_it_heals() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    let g = gateway(&p);
    let cookie = sign_in(&p, &g);
    let chat = json!({ "model": "default", "messages": [{ "role": "user", "content": "hi" }] })
        .to_string();
    let bearer = format!("Bearer {KEY}");

    // The cookie is for the status pages only: it spends nothing.
    let out = block_on(
        &p,
        g.handle(req(
            "POST",
            "/v1/chat/completions",
            &[("cookie", &cookie)],
            &chat,
        )),
    );
    assert_eq!(out.status, 401);

    p.script("https://primary.test", [reply(503)]);
    p.script("https://backup.test", [reply(200).body(anthropic_ok())]);
    let out = block_on(
        &p,
        g.handle(req(
            "POST",
            "/v1/chat/completions",
            &[("authorization", &bearer)],
            &chat,
        )),
    );
    assert_eq!(out.status, 200);

    let out = block_on(
        &p,
        g.handle(req("GET", "/status", &[("cookie", &cookie)], "")),
    );
    assert_eq!(out.status, 200);
    let page = html(&out);
    assert!(
        page.contains("<tr data-provider=\"primary\"><td>primary</td>"),
        "{page}"
    );
    assert!(
        page.contains("<span class=\"state open\">"),
        "the primary's breaker is open"
    );
    assert!(page.contains("in 5.0 s"), "time until the next probe");
    let model_row = page
        .split("<tr class=\"model\" data-provider=\"primary\" data-model=\"gpt-big\">")
        .nth(1)
        .and_then(|rest| rest.split("</tr>").next())
        .expect("a row for the primary's model");
    assert!(
        model_row.contains("<span class=\"state open\">"),
        "{model_row}"
    );
    assert!(model_row.contains("in 5.0 s") && model_row.contains("<td>100.0 %</td>"));
    assert!(page.contains("breaker of primary: closed → open"));
    assert!(page.contains("failover primary/gpt-big → backup/claude-small (server)"));
    assert!(page.contains("id=\"overall\" class=\"pill degraded\""));
    assert!(
        !page.contains(KEY) && !page.contains("sk-p"),
        "no key on the page"
    );
    let csp = out.headers.get("content-security-policy").unwrap();
    assert!(
        csp.starts_with("default-src 'none'"),
        "nothing loads from elsewhere"
    );

    // Healed: after the cooldown the probe succeeds and the breaker closes.
    p.advance(std::time::Duration::from_secs(6));
    p.script("https://primary.test", [reply(200).body(openai_ok())]);
    let out = block_on(
        &p,
        g.handle(req(
            "POST",
            "/v1/chat/completions",
            &[("authorization", &bearer)],
            &chat,
        )),
    );
    assert_eq!(out.headers.get("x-served-by"), Some("primary/gpt-big"));
    let out = block_on(
        &p,
        g.handle(req("GET", "/status/data", &[("cookie", &cookie)], "")),
    );
    assert_eq!(out.status, 200);
    let data: Value = serde_json::from_slice(&out.body).unwrap();
    assert_eq!(data["status"], "ok");
    let primary = data["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "primary")
        .unwrap();
    assert_eq!(primary["state"], "closed");
    let moves: Vec<(String, String)> = data["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "breaker")
        .map(|c| {
            (
                c["from"].as_str().unwrap().into(),
                c["to"].as_str().unwrap().into(),
            )
        })
        .collect();
    // Breakers are looked at after each request: the probe's half-open
    // state began and ended inside one.
    assert_eq!(
        moves,
        [
            ("open".into(), "closed".into()),
            ("closed".into(), "open".into())
        ],
        "newest first"
    );
    let page = html(&block_on(
        &p,
        g.handle(req("GET", "/status", &[("authorization", &bearer)], "")),
    ));
    assert!(
        page.contains("<span class=\"state closed\">"),
        "a header key works too"
    );
}

#[test]
fn with_fleet_breakers_the_page_and_metrics_show_what_every_isolate_did() {
    use resilient_llm::fleet::fake::{FakeLink, FakeObject};
    use resilient_llm::FleetStore;
    let p = FakePlatform::new().at(1_700_000_000_000);
    let config = json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKey": "sk-p" },
            "backup": { "kind": "anthropic", "baseUrl": "https://backup.test", "apiKey": "sk-b" }
        },
        "routes": { "default": [
            { "provider": "primary", "model": "gpt-big" },
            { "provider": "backup", "model": "claude-small" }
        ] },
        "retry": { "maxAttempts": 1 },
        "breaker": { "failureThreshold": 1, "cooldownMs": 5000 },
        "gateway": { "clientKeysEnv": ["GATEWAY_KEY"] }
    })
    .to_string();
    let secret = |n: &str| (n == "GATEWAY_KEY").then(|| KEY.to_string());
    let setup = || Setup::load(Some(&config), &secret).expect("valid config");
    let obj = FakeObject::new(&p, setup().breaker());
    let isolate = |name: &str| {
        let s = setup();
        let store = FleetStore::new(FakeLink::new(&obj), name, s.breaker());
        s.journals(std::rc::Rc::new(FakeLink::new(&obj)))
            .into_gateway(p.clone(), store)
    };
    let (a, b) = (isolate("a"), isolate("b"));
    let bearer = format!("Bearer {KEY}");
    let auth = [("authorization", bearer.as_str())];
    let chat = json!({ "model": "default", "messages": [{ "role": "user", "content": "hi" }] })
        .to_string();

    // Isolate a meets the dead primary; b has served nothing.
    p.script("https://primary.test", [reply(503)]);
    p.script("https://backup.test", [reply(200).body(anthropic_ok())]);
    let out = block_on(
        &p,
        a.handle(req("POST", "/v1/chat/completions", &auth, &chat)),
    );
    assert_eq!(out.headers.get("x-served-by"), Some("backup/claude-small"));
    a.client().store().flush_due(p.now());
    a.client().store().link().pump();

    let out = block_on(&p, b.handle(req("GET", "/status/data", &auth, "")));
    let data: Value = serde_json::from_slice(&out.body).unwrap();
    let fleet = data["fleet"].as_array().expect("fleet rows");
    let primary = fleet.iter().find(|r| r["provider"] == "primary").unwrap();
    assert_eq!(
        (
            primary["failures"].as_u64(),
            primary["transitions"].as_u64()
        ),
        (Some(1), Some(1))
    );
    let fleet_moves: Vec<_> = data["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "breaker" && c["fleet"] == true)
        .map(|c| (c["provider"].clone(), c["from"].clone(), c["to"].clone()))
        .collect();
    assert_eq!(
        fleet_moves,
        [(json!("primary/gpt-big"), json!("closed"), json!("open"))]
    );
    let out = block_on(&p, b.handle(req("GET", "/status", &auth, "")));
    let page = String::from_utf8(out.body).unwrap();
    assert!(
        page.contains("fleet breaker of primary/gpt-big: closed → open"),
        "{page}"
    );
    assert!(page.contains("<td>primary</td><td>gpt-big</td><td>0</td><td>1</td>"));

    let out = block_on(&p, b.handle(req("GET", "/metrics", &auth, "")));
    let text = String::from_utf8(out.body).unwrap();
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("parses");
    let sample = |verdict: &str| {
        scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == "llm_gateway_fleet_calls_total"
                    && s.labels.get("provider") == Some("primary")
                    && s.labels.get("model") == Some("gpt-big")
                    && s.labels.get("verdict") == Some(verdict)
            })
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            })
    };
    assert_eq!(sample("failure"), Some(1.0), "{text}");
    assert_eq!(sample("success"), Some(0.0));
}

#[test]
fn a_configured_name_stays_inside_its_attribute_and_only_the_page_own_script_runs() {
    use base64::Engine as _;
    use sha2::Digest as _;
    let p = FakePlatform::new().at(1_700_000_000_000);
    let evil = "m\" onmouseover=\"alert(1)\"><script>alert(2)</script>";
    let config = json!({
        "providers": {
            "primary": { "kind": "openai", "baseUrl": "https://primary.test", "apiKey": "sk-p" }
        },
        "routes": { "default": [{ "provider": "primary", "model": evil }] },
        "gateway": { "clientKeysEnv": ["GATEWAY_KEY"] }
    });
    let secret = |n: &str| (n == "GATEWAY_KEY").then(|| KEY.to_string());
    let setup = Setup::load(Some(&config.to_string()), &secret).expect("valid config");
    let store = MemoryStore::new(setup.breaker());
    let g = setup.into_gateway(p.clone(), store);
    let bearer = format!("Bearer {KEY}");
    let out = block_on(
        &p,
        g.handle(req("GET", "/status", &[("authorization", &bearer)], "")),
    );
    assert_eq!(out.status, 200);
    let page = html(&out);
    // In text, a `"` is only a character; in an attribute, it is `&quot;`.
    assert!(!page.contains("data-model=\"m\" "), "{page}");
    assert!(!page.contains("<script>alert"), "{page}");
    assert!(
        page.contains("data-model=\"m&quot; onmouseover=&quot;alert(1)&quot;&gt;&lt;script&gt;"),
        "{page}"
    );
    assert_eq!(page.matches("<script>").count(), 1, "the page's own only");
    // Inline script and style run only when their hash is in the policy.
    let csp = out.headers.get("content-security-policy").unwrap();
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    let between = |open: &str, close: &str| {
        let from = page.find(open).unwrap() + open.len();
        page[from..from + page[from..].find(close).unwrap()].to_string()
    };
    for (directive, body) in [
        ("script-src", between("<script>", "</script>")),
        ("style-src", between("<style>", "</style>")),
    ] {
        let hash =
            base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(body.as_bytes()));
        assert!(
            csp.contains(&format!("{directive} 'sha256-{hash}'")),
            "{directive} {hash}: {csp}"
        );
    }
}

#[test]
fn sign_in_keeps_a_signed_session_not_the_key_and_refuses_other_sites_and_guessing() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    let g = gateway(&p);
    let cookie = sign_in(&p, &g);
    assert!(
        !cookie.contains("client") && !cookie.contains("123"),
        "no key in {cookie}"
    );
    let data = |cookie: &str| {
        block_on(
            &p,
            g.handle(req("GET", "/status/data", &[("cookie", cookie)], "")),
        )
        .status
    };
    assert_eq!(data(&cookie), 200);
    // The raw key in the cookie is no sign-in.
    assert_eq!(data("rl_status_session=client%20key%3B123"), 401);
    // A session ends after 12 hours.
    p.advance(std::time::Duration::from_secs(12 * 3600));
    assert_eq!(data(&cookie), 401);

    // A form posted from another site: refused, whatever its key.
    let form = "key=client%20key%3B123";
    for headers in [
        &[("origin", "https://evil.example"), ("host", "gw.example")][..],
        &[("sec-fetch-site", "cross-site")][..],
    ] {
        let out = block_on(&p, g.handle(req("POST", "/status/login", headers, form)));
        assert_eq!(out.status, 403);
        assert!(out.headers.get("set-cookie").is_none());
    }
    let same = [("origin", "https://gw.example"), ("host", "gw.example")];
    let out = block_on(&p, g.handle(req("POST", "/status/login", &same, form)));
    assert_eq!(out.status, 303);

    // A form sent a byte every 3 s: a 408 when the body deadline passes, no session.
    let started = p.now();
    let slow = Inbound {
        body: trickle(
            &p,
            form.len(),
            Duration::from_secs(3),
            form.as_bytes().to_vec(),
        ),
        ..req("POST", "/status/login", &same, "")
    };
    let out = block_on(&p, g.handle(slow));
    assert_eq!(out.status, 408);
    assert!(html(&out).contains("did not arrive in time"));
    assert!(out.headers.get("set-cookie").is_none());
    assert_eq!(p.now() - started, 60_000);

    // Guessing: ten refused keys a minute, then every sign-in waits.
    for i in 0..10 {
        let out = block_on(
            &p,
            g.handle(req(
                "POST",
                "/status/login",
                &same,
                &format!("key=guess{i}"),
            )),
        );
        assert_eq!(out.status, 401);
        let line: Value = serde_json::from_str(&out.log).unwrap();
        assert_eq!(line["error"], "unauthorized", "{line}");
        assert_eq!(line["status"], 401);
    }
    let out = block_on(&p, g.handle(req("POST", "/status/login", &same, form)));
    assert_eq!(out.status, 429, "even the right key waits");
    let wait: u64 = out.headers.get("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    p.advance(std::time::Duration::from_secs(wait));
    let out = block_on(&p, g.handle(req("POST", "/status/login", &same, form)));
    assert_eq!(out.status, 303);
}

#[test]
fn health_reads_a_breaker_past_its_open_period_as_half_open_and_not_degraded() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    let g = gateway(&p);
    let bearer = format!("Bearer {KEY}");
    let auth = [("authorization", bearer.as_str())];
    p.script("https://primary.test", [reply(503)]);
    p.script("https://backup.test", [reply(200).body(anthropic_ok())]);
    let chat = json!({ "model": "default", "messages": [{ "role": "user", "content": "hi" }] });
    let out = block_on(
        &p,
        g.handle(req(
            "POST",
            "/v1/chat/completions",
            &auth,
            &chat.to_string(),
        )),
    );
    assert_eq!(out.status, 200);
    let health = |p: &FakePlatform| {
        let out = block_on(p, g.handle(req("GET", "/health", &auth, "")));
        serde_json::from_slice::<Value>(&out.body).unwrap()
    };
    let h = health(&p);
    assert_eq!(h["status"], "degraded");
    assert_eq!(h["providers"][1]["provider"], "primary", "{h}");
    assert_eq!(h["providers"][1]["state"], "open");
    // The cooldown (5 s) passes with no traffic to the primary.
    p.advance(std::time::Duration::from_secs(6));
    let h = health(&p);
    let primary = &h["providers"][1];
    assert_eq!(primary["state"], "half_open", "{h}");
    assert_eq!(primary["openUntil"], Value::Null);
    assert_eq!(primary["models"][0]["state"], "half_open");
    assert_eq!(primary["models"][0]["openUntil"], Value::Null);
    assert_eq!(
        h["status"], "ok",
        "no traffic since is not degraded forever"
    );
    let data = block_on(&p, g.handle(req("GET", "/status/data", &auth, "")));
    let data: Value = serde_json::from_slice(&data.body).unwrap();
    assert_eq!(data["status"], "ok");
}

/// Found by the `status_session` fuzz target (its check, not the gateway,
/// was wrong): a session cookie over the header limit is a 400 naming the
/// header, never a sign-in and never an echo of what it held.
#[test]
fn a_session_cookie_over_the_header_limit_is_refused_before_it_is_read() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    let g = gateway(&p);
    let long = format!("rl_status_session=1700000001{}", "\u{fffd}".repeat(3000));
    assert!(long.len() > resilient_llm::gateway::limits::MAX_HEADER_BYTES);
    let out = block_on(
        &p,
        g.handle(req("GET", "/status/data", &[("cookie", &long)], "")),
    );
    assert_eq!(out.status, 400);
    let body = String::from_utf8_lossy(&out.body);
    assert!(
        body.contains("cookie") && !body.contains("1700000001"),
        "{body}"
    );
}

#[test]
fn the_page_shows_each_models_rate_limit_pool() {
    let p = FakePlatform::new().at(1_700_000_000_000);
    let g = gateway(&p);
    let bearer = format!("Bearer {KEY}");
    let chat = json!({ "model": "default", "messages": [{ "role": "user", "content": "hi" }] })
        .to_string();
    p.script(
        "https://primary.test",
        [reply(200)
            .header("x-ratelimit-limit-requests", "500")
            .header("x-ratelimit-remaining-requests", "499")
            .header("x-ratelimit-reset-requests", "120ms")
            .header("x-ratelimit-limit-tokens", "30000")
            .header("x-ratelimit-remaining-tokens", "29000")
            .header("x-ratelimit-reset-tokens", "2.5s")
            .body(openai_ok())],
    );
    let out = block_on(
        &p,
        g.handle(req(
            "POST",
            "/v1/chat/completions",
            &[("authorization", &bearer)],
            &chat,
        )),
    );
    assert_eq!(out.status, 200);
    let row = |page: &str, model: &str| -> String {
        page.split(&format!("data-model=\"{model}\">"))
            .nth(1)
            .and_then(|rest| rest.split("</tr>").next())
            .expect("a row for the model")
            .to_string()
    };
    let page = html(&block_on(
        &p,
        g.handle(req("GET", "/status", &[("authorization", &bearer)], "")),
    ));
    assert!(page.contains("<th scope=\"col\">Rate-limit pool</th>"));
    assert!(
        row(&page, "gpt-big")
            .ends_with("<td>requests 499 / 500 · tokens 29000 / 30000 · full in 2.5 s</td>"),
        "{}",
        row(&page, "gpt-big")
    );
    assert!(
        row(&page, "claude-small").ends_with("<td>–</td>"),
        "nothing said"
    );

    // A second on, the requests quota has reset: its limit is what is left.
    p.advance(Duration::from_secs(1));
    let page = html(&block_on(
        &p,
        g.handle(req("GET", "/status", &[("authorization", &bearer)], "")),
    ));
    assert!(
        row(&page, "gpt-big")
            .ends_with("<td>requests 500 / 500 · tokens 29000 / 30000 · full in 1.5 s</td>"),
        "{}",
        row(&page, "gpt-big")
    );
    let data: Value = serde_json::from_slice(
        &block_on(
            &p,
            g.handle(req(
                "GET",
                "/status/data",
                &[("authorization", &bearer)],
                "",
            )),
        )
        .body,
    )
    .unwrap();
    let model = &data["providers"][1]["models"][0];
    assert_eq!(model["model"], "gpt-big", "{data}");
    assert_eq!(model["pool"]["tokens"]["remaining"], 29000);
}
