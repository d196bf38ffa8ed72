//! Bedrock's two protocols on their own: SigV4 against AWS's published
//! test vectors, and the event-stream decoder against recorded frames and
//! arbitrary bytes (tests/bedrock.rs has the adapter end to end).

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use resilient_llm::bedrock::eventstream::{encode_frame, EventStreamDecoder, EventStreamError};
use resilient_llm::bedrock::sigv4::{self, Credentials, Scope, SigningRequest};
use resilient_llm::bedrock::{frame_event, is_anthropic};
use resilient_llm::{ErrorKind, Secret};
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bedrock");

fn read(path: impl AsRef<Path>) -> String {
    fs::read_to_string(path.as_ref()).unwrap_or_else(|e| panic!("{:?}: {e}", path.as_ref()))
}

/// One case of the SigV4 suite: the request of `request.txt` signed with
/// the context's credentials at its time gives the published canonical
/// request, string to sign and signature.
fn check_vector(case: &str) {
    let dir = Path::new(FIXTURES).join("sigv4").join(case);
    let ctx: Value = serde_json::from_str(&read(dir.join("context.json"))).unwrap();
    let raw = read(dir.join("request.txt"));
    let (head, body) = raw.split_once("\n\n").unwrap_or((raw.as_str(), ""));
    let mut lines = head.lines();
    let request_line = lines.next().unwrap();
    let (method, rest) = request_line.split_once(' ').unwrap();
    let target = rest.strip_suffix(" HTTP/1.1").unwrap();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.to_string(), v.to_string())
        })
        .collect();
    let creds = &ctx["credentials"];
    headers.push(("X-Amz-Date".into(), "20150830T123600Z".into()));
    if let Some(token) = creds["token"].as_str() {
        headers.push(("X-Amz-Security-Token".into(), token.into()));
    }
    if ctx["sign_body"] == true {
        headers.push((
            "x-amz-content-sha256".into(),
            sigv4::sha256_hex(body.as_bytes()),
        ));
    }
    let refs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let req = SigningRequest {
        method,
        path,
        query,
        headers: &refs,
        payload: body.as_bytes(),
    };
    let scope = Scope {
        region: ctx["region"].as_str().unwrap(),
        service: ctx["service"].as_str().unwrap(),
        amz_date: sigv4::amz_date(1_440_938_160_000),
    };
    let canonical = sigv4::canonical_request(&req);
    assert_eq!(
        canonical,
        read(dir.join("header-canonical-request.txt")),
        "{case}"
    );
    let sts = sigv4::string_to_sign(&scope, &canonical);
    assert_eq!(sts, read(dir.join("header-string-to-sign.txt")), "{case}");
    let secret = creds["secret_access_key"].as_str().unwrap();
    let sig = sigv4::signature(secret, &scope, &sts);
    assert_eq!(sig, read(dir.join("header-signature.txt")).trim(), "{case}");
    let creds = Credentials {
        access_key_id: Secret::new(creds["access_key_id"].as_str().unwrap()),
        secret_access_key: Secret::new(secret),
        session_token: None,
    };
    let auth = sigv4::authorization(&creds, &scope, &req);
    assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders="), "{auth}");
    assert!(auth.ends_with(&format!(", Signature={sig}")), "{auth}");
}

#[test]
fn sigv4_matches_the_published_test_vectors() {
    for case in [
        "get-vanilla",
        "post-vanilla",
        "post-x-www-form-urlencoded",
        "get-vanilla-query-order-key-case",
        "get-vanilla-query-order-encoded",
        "get-vanilla-with-session-token",
        "get-utf8",
        "get-space-normalized",
        "get-header-value-trim",
    ] {
        check_vector(case);
    }
}

#[test]
fn model_ids_tell_anthropic_models_apart() {
    assert!(is_anthropic("anthropic.claude-sonnet-4-5-20250929-v1:0"));
    assert!(is_anthropic("us.anthropic.claude-sonnet-4-5-20250929-v1:0"));
    assert!(is_anthropic(
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/global.anthropic.claude-x"
    ));
    assert!(!is_anthropic("meta.llama3-70b-instruct-v1:0"));
    assert!(!is_anthropic("us.amazon.nova-pro-v1:0"));
    assert!(!is_anthropic("anthropicish.model"));
}

/// The recorded stream: frames written by the mock provider's own
/// encoder (tests/e2e/mock-bedrock.mjs, node:zlib's CRC32), so the
/// decoder is checked against bytes it did not make itself.
fn recorded(name: &str) -> Vec<u8> {
    fs::read(Path::new(FIXTURES).join(name)).unwrap()
}

#[test]
fn recorded_invoke_stream_frames_decode_into_anthropic_events() {
    let bytes = recorded("invoke-stream.bin");
    let mut d = EventStreamDecoder::default();
    let mut frames = Vec::new();
    d.feed(&bytes, &mut frames).unwrap();
    d.finish().unwrap();
    let events: Vec<_> = frames
        .iter()
        .filter_map(|f| frame_event(f).unwrap())
        .collect();
    let names: Vec<_> = events.iter().map(|e| e.event.clone().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let start: Value = serde_json::from_str(&events[0].data).unwrap();
    assert_eq!(start["type"], "message_start");
}

#[test]
fn exception_frames_are_classified_errors() {
    let cases = [
        ("throttlingException", ErrorKind::RateLimited),
        ("modelStreamErrorException", ErrorKind::Server),
        ("serviceUnavailableException", ErrorKind::Server),
        ("internalServerException", ErrorKind::Server),
        ("validationException", ErrorKind::InvalidRequest),
    ];
    for (name, kind) in cases {
        let bytes = encode_frame(
            &[
                (":message-type", "exception"),
                (":exception-type", name),
                (":content-type", "application/json"),
            ],
            br#"{"message":"went wrong"}"#,
        );
        let mut frames = Vec::new();
        EventStreamDecoder::default()
            .feed(&bytes, &mut frames)
            .unwrap();
        let e = frame_event(&frames[0]).unwrap_err();
        assert_eq!(e.kind, kind, "{name}");
        assert_eq!(e.message, "went wrong");
    }
}

proptest! {
    #[test]
    fn the_decoder_never_panics_on_any_bytes(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..8)
    ) {
        let mut d = EventStreamDecoder::new(1 << 12);
        let mut out = Vec::new();
        for c in &chunks {
            if d.feed(c, &mut out).is_err() {
                break;
            }
        }
        let _ = d.finish();
        for f in &out {
            let _ = frame_event(f);
        }
    }

    #[test]
    fn valid_frames_survive_any_split_and_any_bit_flip_is_refused(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..5),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
    ) {
        let mut bytes = Vec::new();
        for p in &payloads {
            bytes.extend(encode_frame(&[(":event-type", "x")], p));
        }
        let at = cut.index(bytes.len() + 1);
        let mut d = EventStreamDecoder::default();
        let mut out = Vec::new();
        d.feed(&bytes[..at], &mut out).unwrap();
        d.feed(&bytes[at..], &mut out).unwrap();
        prop_assert!(d.finish().is_ok());
        let got: Vec<_> = out.iter().map(|f| f.payload.clone()).collect();
        prop_assert_eq!(&got, &payloads);
        // One flipped bit anywhere fails a CRC or a length check, or
        // leaves the stream short: never a wrong frame taken as good.
        let mut bad = bytes.clone();
        let i = flip.index(bad.len());
        bad[i] ^= 1;
        let mut d = EventStreamDecoder::default();
        let mut out = Vec::new();
        let fed = d.feed(&bad, &mut out).and_then(|()| d.finish());
        prop_assert!(fed.is_err());
        prop_assert!(out.len() < payloads.len());
    }
}

#[test]
fn a_frame_past_the_limit_is_refused_before_it_is_buffered() {
    let big = encode_frame(&[], &vec![b'x'; 5000]);
    let mut d = EventStreamDecoder::new(4096);
    let e = d.feed(&big[..12], &mut Vec::new()).unwrap_err();
    assert_eq!(
        e,
        EventStreamError::TooLong {
            length: big.len(),
            limit: 4096
        }
    );
}
