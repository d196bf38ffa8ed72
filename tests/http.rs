//! The HTTP path through the platform: timeouts that drop (and so abort) the
//! request, stalled and cut bodies, refused connections, body limits.

use std::time::Duration;

use resilient_llm::testing::{block_on, fail, hang, reply, BodyEnd, FakePlatform};
use resilient_llm::SseEvent;
use resilient_llm::{
    BufferedResponse, Capabilities, ChatRequest, ChatResponse, Client, Delta, Entry, ErrorKind,
    HttpRequest, Message, Platform, Policy, Provider, ProviderError, TransportErrorKind,
    UnixMillis, Upstream,
};

/// A test double: POSTs to `https://<model>.test/v1`, reads a 200 body as
/// the answer and any other status as a server error.
struct Plain;

impl Provider for Plain {
    fn id(&self) -> &str {
        "plain"
    }

    fn encode(&self, req: &ChatRequest, model: &str) -> Result<HttpRequest, ProviderError> {
        let body = serde_json::to_vec(req)
            .map_err(|e| ProviderError::new(ErrorKind::Unsupported, e.to_string()))?;
        Ok(HttpRequest::post_json(
            format!("https://{model}.test/v1"),
            body,
        ))
    }

    fn decode(
        &self,
        resp: &BufferedResponse,
        _now: UnixMillis,
    ) -> Result<ChatResponse, ProviderError> {
        if resp.status != 200 {
            return Err(ProviderError::new(ErrorKind::Server, "").with_status(resp.status));
        }
        Ok(ChatResponse {
            text: String::from_utf8_lossy(&resp.body).into_owned(),
            tool_calls: vec![],
            thinking: vec![],
            model: "plain-model".into(),
            provider: String::new(),
            finish_reason: None,
            usage: None,
            raw: None,
            dialect: None,
        })
    }

    fn decode_event(&self, ev: &SseEvent) -> Result<Vec<Delta>, ProviderError> {
        Ok(vec![Delta::Text {
            text: ev.data.clone(),
        }])
    }

    fn capabilities(&self, _model: &str) -> Capabilities {
        Capabilities::default()
    }
}

fn client(p: &FakePlatform, policy: Policy) -> Client<FakePlatform> {
    Client::builder(p.clone())
        .upstream("one", Upstream::Http(Box::new(Plain)))
        .upstream("two", Upstream::Http(Box::new(Plain)))
        .route(
            "default",
            vec![Entry::new("one", "primary"), Entry::new("two", "backup")],
        )
        .policy(policy)
        .build()
}

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hi")])
}

fn policy() -> Policy {
    Policy {
        attempt_timeout: Duration::from_secs(2),
        ..Policy::default()
    }
}

#[test]
fn a_hung_request_is_aborted_at_its_deadline_and_the_chain_moves_on() {
    let p = FakePlatform::new();
    p.script("https://primary.test", [hang()]);
    p.script("https://backup.test", [reply(200).body("from backup")]);
    let r = block_on(&p, client(&p, policy()).chat(req())).unwrap();
    assert_eq!(r.response.text, "from backup");
    assert_eq!(p.now(), 2000);
    assert_eq!(
        p.aborted(),
        1,
        "the losing fetch was dropped, which aborts it"
    );
    assert_eq!(
        r.attempts[0].error().map(|e| e.kind),
        Some(ErrorKind::Timeout)
    );
    assert!(r.attempts[0].reached);
}

#[test]
fn a_fast_answer_leaves_no_timer_behind() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [reply(200).body("ok").delay(Duration::from_millis(30))],
    );
    let r = block_on(&p, client(&p, policy()).chat(req())).unwrap();
    assert_eq!(r.attempts[0].duration, Duration::from_millis(30));
    assert!(
        p.sleeps().is_empty(),
        "the attempt timer lost the race and was cancelled"
    );
    assert_eq!(p.aborted(), 0);
}

#[test]
fn a_stalled_body_is_a_retryable_stall() {
    let p = FakePlatform::new().random([0.5]);
    p.script(
        "https://primary.test",
        [
            reply(200)
                .chunks(["par", "tial"])
                .cut_after(1, BodyEnd::Stall),
            reply(200).body("whole"),
        ],
    );
    let r = block_on(&p, client(&p, policy()).chat(req())).unwrap();
    assert_eq!(r.response.text, "whole");
    assert_eq!(
        r.attempts[0].error().map(|e| e.kind),
        Some(ErrorKind::Stalled)
    );
    assert_eq!(p.now(), 2000 + 100);
    assert_eq!(p.aborted(), 1, "the stalled body was dropped");
}

#[test]
fn a_body_cut_by_a_reset_is_retried() {
    let p = FakePlatform::new().random([0.0]);
    p.script(
        "https://primary.test",
        [
            reply(200)
                .chunks(["a", "b", "c"])
                .cut_after(2, BodyEnd::Reset),
            reply(200).chunks(["a", "b", "c"]),
        ],
    );
    let r = block_on(&p, client(&p, policy()).chat(req())).unwrap();
    assert_eq!(r.response.text, "abc");
    let first = r.attempts[0].error().unwrap();
    assert_eq!(first.kind, ErrorKind::Transport);
    assert!(first.message.contains("reset"), "{first}");
}

#[test]
fn refused_and_dns_failures_never_reached_the_provider() {
    let p = FakePlatform::new().random([0.0]);
    p.script(
        "https://primary.test",
        [
            fail(TransportErrorKind::Refused),
            fail(TransportErrorKind::Dns),
            fail(TransportErrorKind::Reset),
        ],
    );
    p.script("https://backup.test", [reply(200).body("b")]);
    let r = block_on(&p, client(&p, policy()).chat(req())).unwrap();
    let reached: Vec<bool> = r.attempts.iter().map(|a| a.reached).collect();
    assert_eq!(reached, [false, false, true, true]);
    assert_eq!(r.served_by.model, "backup");
}

#[test]
fn a_response_over_the_limit_is_not_read_into_memory() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [reply(200).chunks(vec![vec![b'x'; 600]; 4])],
    );
    p.script("https://backup.test", [reply(200).body("small")]);
    let policy = Policy {
        max_response_bytes: 1000,
        retry: resilient_llm::RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        },
        ..policy()
    };
    let r = block_on(&p, client(&p, policy).chat(req())).unwrap();
    assert_eq!(r.response.text, "small");
    assert_eq!(
        r.attempts[0].error().map(|e| e.kind),
        Some(ErrorKind::Decode)
    );
}

#[test]
fn every_attempt_is_recorded_with_its_timing() {
    let p = FakePlatform::new().random([0.5]).at(1_000_000);
    p.script(
        "https://primary.test",
        [
            reply(503).delay(Duration::from_millis(10)),
            reply(503).delay(Duration::from_millis(10)),
            reply(503).delay(Duration::from_millis(10)),
        ],
    );
    p.script(
        "https://backup.test",
        [reply(200).body("b").delay(Duration::from_millis(20))],
    );
    let r = block_on(&p, client(&p, policy()).chat(req())).unwrap();
    let timeline: Vec<(u64, u64, u32)> = r
        .attempts
        .iter()
        .map(|a| {
            (
                a.started_at - 1_000_000,
                a.duration.as_millis() as u64,
                a.number,
            )
        })
        .collect();
    // 10 ms, backoff 100, 10 ms, backoff 200, 10 ms, then the backup.
    assert_eq!(
        timeline,
        [(0, 10, 1), (110, 10, 2), (320, 10, 3), (330, 20, 1)]
    );
    assert_eq!(p.requests_to("https://primary.test"), 3);
    let json = serde_json::to_value(&r.attempts[0]).unwrap();
    assert_eq!(json["durationMs"], 10);
    assert_eq!(json["outcome"]["error"]["status"], 503);
}

#[test]
fn dropping_the_call_aborts_the_request_and_gives_the_probe_permit_back() {
    let p = FakePlatform::new();
    p.script(
        "https://primary.test",
        [reply(503), hang(), reply(200).body("probe ok")],
    );
    p.script("https://backup.test", [reply(200).body("b")]);
    let c = Client::builder(p.clone())
        .upstream("one", Upstream::Http(Box::new(Plain)))
        .upstream("two", Upstream::Http(Box::new(Plain)))
        .route(
            "default",
            vec![Entry::new("one", "primary"), Entry::new("two", "backup")],
        )
        .policy(Policy {
            retry: resilient_llm::RetryPolicy {
                max_attempts: 1,
                ..Default::default()
            },
            ..policy()
        })
        .breaker(resilient_llm::BreakerPolicy {
            failure_threshold: 1,
            ..Default::default()
        })
        .build();
    assert_eq!(
        block_on(&p, c.chat(req())).unwrap().served_by.model,
        "backup"
    );
    p.advance(Duration::from_secs(10));
    {
        // The caller gives up half a second into the half-open probe.
        let outer = p.sleep(Duration::from_millis(500));
        let r = block_on(&p, resilient_llm::timeout(outer, c.chat(req())));
        assert!(r.is_err(), "the caller's deadline won");
    }
    assert_eq!(p.aborted(), 1, "dropping the call aborted its request");
    let r = block_on(&p, c.chat(req())).unwrap();
    assert_eq!(
        r.response.text, "probe ok",
        "the abandoned probe's permit came back"
    );
    assert_eq!(p.requests_to("https://primary.test"), 3);
}
