//! A Vertex AI token revoked before it expires, on the fake platform: the model endpoint's
//! 401 drops the cached token, one new token is fetched (one for all the requests refused at
//! once, under the single-refresh lock) and the call is sent once more with it; only a second
//! 401 is the provider's auth failure.

#[path = "vertex/support.rs"]
mod support;

use std::time::Duration;

use futures_util::future::join_all;
use resilient_llm::testing::{block_on, reply, FakePlatform, Reply};
use resilient_llm::{CallOptions, Delta, ErrorKind};
use serde_json::json;
use support::*;

const RENEWED: &str = "ya29.renewed-access-token-9876543210";

fn gemini_url() -> String {
    format!("{VERTEX}/google/models/gemini-2.5-flash:generateContent")
}

fn renewed_token() -> Reply {
    reply(200).body(
        json!({"access_token": RENEWED, "expires_in": 3600, "token_type": "Bearer"}).to_string(),
    )
}

/// Google's answer to a revoked or otherwise invalid bearer token.
fn revoked() -> Reply {
    reply(401).body(
        json!({"error": {"code": 401, "status": "UNAUTHENTICATED",
               "message": "Request had invalid authentication credentials. Expected OAuth 2 access token."}})
        .to_string(),
    )
}

fn bearers(p: &FakePlatform, prefix: &str) -> Vec<String> {
    p.requests()
        .iter()
        .filter(|r| r.url.starts_with(prefix))
        .map(|r| {
            r.headers
                .get("authorization")
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn a_revoked_token_is_renewed_once_and_the_call_sent_again() {
    let p = FakePlatform::new().at(NOW);
    let c = client(&p);
    p.script(TOKEN_URI, [token_reply(3600), renewed_token()]);
    p.script(
        &gemini_url(),
        [gemini_ok("one"), revoked(), gemini_ok("two")],
    );
    assert_eq!(
        block_on(&p, c.chat(ask("gemini"))).unwrap().response.text,
        "one"
    );
    // Five minutes on, the token (good for 55 more) is revoked.
    p.advance(Duration::from_secs(300));
    let r = block_on(&p, c.chat(ask("gemini"))).unwrap();
    assert_eq!(r.response.text, "two");
    assert_eq!(p.requests_to(TOKEN_URI), 2, "one renewal");
    assert_eq!(
        bearers(&p, &gemini_url()),
        [
            format!("Bearer {TOKEN}"),
            format!("Bearer {TOKEN}"),
            format!("Bearer {RENEWED}")
        ]
    );
    // The new token serves what follows; nothing was counted against it.
    p.script(&gemini_url(), [gemini_ok("three")]);
    block_on(&p, c.chat(ask("gemini"))).unwrap();
    assert_eq!(p.requests_to(TOKEN_URI), 2);
    assert_eq!(
        c.health()
            .iter()
            .find(|h| h.provider == "gemini")
            .unwrap()
            .consecutive_failures,
        0
    );
}

#[test]
fn requests_refused_at_once_share_one_renewal() {
    let p = FakePlatform::new().at(NOW);
    let c = client(&p);
    p.script(TOKEN_URI, [token_reply(3600), renewed_token()]);
    p.script(&gemini_url(), [gemini_ok("warm")]);
    block_on(&p, c.chat(ask("gemini"))).unwrap();
    // The refusals take a while: all three are sent before any comes back.
    let slow = || revoked().delay(Duration::from_millis(20));
    p.script(
        &gemini_url(),
        [
            slow(),
            slow(),
            slow(),
            gemini_ok("a"),
            gemini_ok("b"),
            gemini_ok("c"),
        ],
    );
    let replies = block_on(&p, join_all((0..3).map(|_| c.chat(ask("gemini")))));
    for r in replies {
        r.unwrap();
    }
    assert_eq!(
        p.requests_to(TOKEN_URI),
        2,
        "one renewal for three refusals"
    );
    let sent = bearers(&p, &gemini_url());
    assert_eq!(sent.len(), 7);
    assert!(
        sent[4..].iter().all(|b| *b == format!("Bearer {RENEWED}")),
        "{sent:?}"
    );
}

#[test]
fn a_second_401_is_an_auth_failure() {
    let p = FakePlatform::new().at(NOW);
    let c = client(&p);
    p.script(TOKEN_URI, [token_reply(3600), renewed_token()]);
    p.script(&gemini_url(), [revoked(), revoked()]);
    let e = block_on(&p, c.chat(ask("gemini"))).unwrap_err();
    let kinds: Vec<ErrorKind> = e
        .attempts()
        .iter()
        .filter_map(|a| a.error().map(|e| e.kind))
        .collect();
    assert_eq!(kinds, [ErrorKind::Auth]);
    assert_eq!(p.requests_to(TOKEN_URI), 2, "renewed once, not again");
    assert_eq!(p.requests_to(&gemini_url()), 2);
}

#[test]
fn a_stream_refused_at_its_start_is_renewed_too() {
    let p = FakePlatform::new().at(NOW);
    let c = client(&p);
    p.script(TOKEN_URI, [token_reply(3600), renewed_token()]);
    let url = format!("{VERTEX}/google/models/gemini-2.5-flash:streamGenerateContent");
    let event = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]},
                       "finishReason": "STOP"}]});
    p.script(
        &url,
        [
            revoked(),
            reply(200)
                .header("content-type", "text/event-stream")
                .body(format!("data: {event}\n\n")),
        ],
    );
    let mut req = ask("gemini");
    req.stream = true;
    let mut text = String::new();
    block_on(&p, async {
        let mut s = c.stream(req, CallOptions::default()).unwrap();
        while let Some(d) = s.next().await {
            if let Delta::Text { text: t } = d.unwrap() {
                text.push_str(&t);
            }
        }
    });
    assert_eq!(text, "hi");
    assert_eq!(
        bearers(&p, &url),
        [format!("Bearer {TOKEN}"), format!("Bearer {RENEWED}")]
    );
}
