use super::*;
use proptest::prelude::*;

/// 2024-05-14T10:00:00Z.
const NOW: UnixMillis = 1_715_680_800_000;

/// An OpenAI chat completion's headers, as api.openai.com sends them.
const OPENAI_OK: &[(&str, &str)] = &[
    ("date", "Tue, 14 May 2024 10:00:00 GMT"),
    ("content-type", "application/json"),
    ("access-control-expose-headers", "X-Request-ID"),
    ("openai-organization", "user-abc123"),
    ("openai-processing-ms", "412"),
    ("openai-version", "2020-10-01"),
    (
        "strict-transport-security",
        "max-age=31536000; includeSubDomains",
    ),
    ("x-ratelimit-limit-requests", "10000"),
    ("x-ratelimit-limit-tokens", "30000000"),
    ("x-ratelimit-remaining-requests", "9999"),
    ("x-ratelimit-remaining-tokens", "29999947"),
    ("x-ratelimit-reset-requests", "6ms"),
    ("x-ratelimit-reset-tokens", "0s"),
    ("x-request-id", "req_5c2ee3f5d1b64c3e9e6d5c0ab3b1a0c2"),
    ("cf-cache-status", "DYNAMIC"),
    ("server", "cloudflare"),
];

/// An OpenAI 429: the requests pool empty for a minute and a half.
const OPENAI_429: &[(&str, &str)] = &[
    ("content-type", "application/json; charset=utf-8"),
    ("retry-after", "20"),
    ("x-ratelimit-limit-requests", "500"),
    ("x-ratelimit-limit-tokens", "200000"),
    ("x-ratelimit-remaining-requests", "0"),
    ("x-ratelimit-remaining-tokens", "199870"),
    ("x-ratelimit-reset-requests", "1m30.5s"),
    ("x-ratelimit-reset-tokens", "39ms"),
    ("x-request-id", "req_0b1c"),
];

/// Groq's, with longer resets.
const GROQ_OK: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("x-groq-region", "us-east-1"),
    ("x-ratelimit-limit-requests", "14400"),
    ("x-ratelimit-limit-tokens", "18000"),
    ("x-ratelimit-remaining-requests", "14370"),
    ("x-ratelimit-remaining-tokens", "17997"),
    ("x-ratelimit-reset-requests", "2m59.56s"),
    ("x-ratelimit-reset-tokens", "7.66s"),
    ("x-request-id", "req_01hxyz"),
];

/// Azure OpenAI's: remaining counts, no limits or resets.
const AZURE_OK: &[(&str, &str)] = &[
    ("apim-request-id", "4f1f3c1e"),
    ("azureml-model-session", "d007-20240501"),
    ("x-ratelimit-remaining-requests", "119"),
    ("x-ratelimit-remaining-tokens", "119700"),
    ("x-ms-region", "East US"),
];

/// An Anthropic message's headers.
const ANTHROPIC_OK: &[(&str, &str)] = &[
    ("date", "Tue, 14 May 2024 10:00:00 GMT"),
    ("content-type", "application/json"),
    ("anthropic-ratelimit-requests-limit", "4000"),
    ("anthropic-ratelimit-requests-remaining", "3999"),
    (
        "anthropic-ratelimit-requests-reset",
        "2024-05-14T10:00:01.5Z",
    ),
    ("anthropic-ratelimit-tokens-limit", "480000"),
    ("anthropic-ratelimit-tokens-remaining", "479000"),
    ("anthropic-ratelimit-tokens-reset", "2024-05-14T10:00:00Z"),
    ("anthropic-ratelimit-input-tokens-limit", "400000"),
    ("anthropic-ratelimit-input-tokens-remaining", "399000"),
    (
        "anthropic-ratelimit-input-tokens-reset",
        "2024-05-14T10:00:00Z",
    ),
    ("anthropic-ratelimit-output-tokens-limit", "80000"),
    ("anthropic-ratelimit-output-tokens-remaining", "80000"),
    (
        "anthropic-ratelimit-output-tokens-reset",
        "2024-05-14T12:00:07+02:00",
    ),
    ("request-id", "req_011CQ7iLnK8cGsD4f3mSEdVV"),
    (
        "anthropic-organization-id",
        "0f1e2d3c-aaaa-bbbb-cccc-123456789abc",
    ),
    ("via", "1.1 google"),
    ("cf-cache-status", "DYNAMIC"),
    ("x-robots-tag", "none"),
    ("server", "cloudflare"),
];

/// An Anthropic 429, with its `retry-after`.
const ANTHROPIC_429: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("retry-after", "12"),
    ("anthropic-ratelimit-requests-limit", "50"),
    ("anthropic-ratelimit-requests-remaining", "0"),
    ("anthropic-ratelimit-requests-reset", "2024-05-14T10:00:12Z"),
    ("x-should-retry", "true"),
];

/// A Bedrock answer's headers: no pool.
const BEDROCK_OK: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("x-amzn-requestid", "0b9c1d2e-3f40-5a6b-7c8d-9e0f1a2b3c4d"),
    ("x-amzn-bedrock-invocation-latency", "812"),
    ("x-amzn-bedrock-input-token-count", "25"),
    ("x-amzn-bedrock-output-token-count", "30"),
];

fn headers(pairs: &[(&str, &str)]) -> Headers {
    pairs.iter().copied().collect()
}

fn quota(limit: Option<u64>, remaining: Option<u64>, reset_at: Option<u64>) -> Quota {
    Quota {
        limit,
        remaining,
        reset_at,
    }
}

#[test]
fn can_take_reads_each_quota_until_its_reset() {
    let quota = |remaining, reset_at| Quota {
        limit: Some(1000),
        remaining: Some(remaining),
        reset_at,
    };
    let r = PoolReading {
        said_at: NOW,
        requests: quota(500, Some(NOW + 1000)),
        tokens: quota(300, Some(NOW + 5000)),
        ..PoolReading::default()
    };
    assert!(r.can_take(100, 200, 0, NOW), "300 tokens for 300");
    assert!(!r.can_take(100, 201, 0, NOW));
    assert!(
        r.can_take(100, 201, 0, NOW + 5000),
        "full again at the reset"
    );
    let low = PoolReading {
        requests: quota(10, Some(NOW + 1000)),
        ..r
    };
    assert!(
        !low.can_take(1, 1, 0, NOW),
        "10 left: below 1 % of 1,000 + 1"
    );
    let untimed = PoolReading {
        tokens: quota(0, None),
        ..PoolReading::default()
    };
    assert!(!untimed.can_take(0, 1, 0, 59_999), "believed for a minute");
    assert!(untimed.can_take(0, 1, 0, 60_000));
    let waiting = PoolReading {
        retry_after_until: Some(NOW + 10),
        ..r
    };
    assert!(!waiting.can_take(1, 1, 0, NOW));
    assert!(waiting.can_take(1, 1, 0, NOW + 10));
}

#[test]
fn calls_in_flight_are_taken_out_of_what_is_left() {
    let r = PoolReading {
        said_at: NOW,
        requests: quota(Some(1000), Some(30), Some(NOW + 60_000)),
        tokens: quota(Some(100_000), Some(1000), Some(NOW + 60_000)),
        ..PoolReading::default()
    };
    // Reserve 11: 30 left less 19 in flight is 11.
    assert!(r.can_take(10, 10, 19, NOW));
    assert!(!r.can_take(10, 10, 20, NOW));
    // 1,000 tokens less 4 calls of 200 leave 200: one more of 200.
    assert!(r.can_take(100, 100, 4, NOW));
    assert!(!r.can_take(100, 101, 4, NOW));
    assert_eq!(r.share_left(10, NOW), 0.01, "tokens 1 %, requests 2 %");
    assert_eq!(r.share_left(29, NOW), 0.001);
    assert_eq!(r.share_left(40, NOW), 0.0);
}

#[test]
fn pools_count_calls_in_flight_per_key() {
    let mut pools = Pools::default();
    pools.sent("a/m");
    pools.sent("a/m");
    pools.sent("b/m");
    pools.answered("a/m");
    assert_eq!((pools.in_flight("a/m"), pools.in_flight("b/m")), (1, 1));
    pools.answered("a/m");
    pools.answered("a/m");
    pools.answered("c/m");
    assert_eq!(pools.in_flight("a/m"), 0, "never below none");
    assert_eq!(pools.in_flight("c/m"), 0);
    assert_eq!(pools.get("a/m"), None, "no reading yet");
}

#[test]
fn share_left_is_the_tightest_quota_until_its_reset() {
    let r = PoolReading {
        said_at: NOW,
        requests: quota(Some(100), Some(80), Some(NOW + 1000)),
        tokens: quota(Some(1000), Some(250), Some(NOW + 5000)),
        // No limit said: says nothing of a share.
        output_tokens: quota(None, Some(1), None),
        ..PoolReading::default()
    };
    assert_eq!(r.share_left(0, NOW), 0.25);
    assert_eq!(
        r.share_left(0, NOW + 1000),
        0.25,
        "requests reset: tokens still"
    );
    assert_eq!(r.share_left(0, NOW + 5000), 1.0, "all full again");
    assert_eq!(PoolReading::default().share_left(0, NOW), 1.0);
    let waiting = PoolReading {
        retry_after_until: Some(NOW + 10),
        ..r
    };
    assert_eq!(waiting.share_left(0, NOW), 0.0);
    let zero_limit = PoolReading {
        requests: quota(Some(0), Some(0), None),
        ..PoolReading::default()
    };
    assert_eq!(
        zero_limit.share_left(0, NOW),
        1.0,
        "a zero limit is no share"
    );
}

#[test]
fn what_was_left_stands_until_the_reset() {
    let q = quota(Some(600), Some(0), Some(NOW + 60_000));
    assert_eq!(q.left(NOW, NOW), Some(0));
    assert_eq!(q.left(NOW, NOW + 59_999), Some(0));
    assert_eq!(q.left(NOW, NOW + 60_000), None, "full");
    assert_eq!(
        quota(Some(9), Some(5), None).left(NOW, NOW + 59_999),
        Some(5)
    );
    assert_eq!(quota(Some(9), Some(5), None).left(NOW, NOW + 60_000), None);
}

#[test]
fn a_hold_keeps_the_reading_and_waits_the_longest() {
    let mut pools = Pools::default();
    let held = pools.hold("a/m", NOW, NOW + 5000);
    assert_eq!(held.said_at, NOW, "a 429 is a reading of its own");
    assert_eq!(held.retry_after_until, Some(NOW + 5000));
    let said = PoolReading {
        said_at: NOW + 1,
        requests: quota(Some(50), Some(0), Some(NOW + 9000)),
        ..PoolReading::default()
    };
    pools.note("a/m", said);
    let held = pools.hold("a/m", NOW + 1, NOW + 2000);
    assert_eq!(held.requests, said.requests, "the headers stay");
    assert_eq!(held.retry_after_until, Some(NOW + 2000));
    let longer = pools.hold("a/m", NOW + 2, NOW + 1000);
    assert_eq!(
        longer.retry_after_until,
        Some(NOW + 2000),
        "the longer wait"
    );
    assert_eq!(pools.get("a/m"), Some(longer));
}

#[test]
fn the_newest_reading_wins() {
    let at = |said_at| PoolReading {
        said_at,
        ..PoolReading::default()
    };
    assert_eq!(newest(Some(at(1)), Some(at(2))), Some(at(2)));
    assert_eq!(newest(Some(at(2)), Some(at(1))), Some(at(2)));
    assert_eq!(newest(None, Some(at(1))), Some(at(1)));
    assert_eq!(newest(Some(at(1)), None), Some(at(1)));
    assert_eq!(newest(None, None), None);
}

#[test]
fn a_reading_travels_as_json_and_missing_fields_are_unsaid() {
    let r = read(PoolHeaders::Anthropic, &headers(ANTHROPIC_429), NOW).expect("a reading");
    let json = serde_json::to_string(&r).expect("serialises");
    assert_eq!(serde_json::from_str::<PoolReading>(&json).ok(), Some(r));
    let sparse: PoolReading =
        serde_json::from_str(r#"{"saidAt":5,"requests":{"remaining":3}}"#).expect("reads");
    assert_eq!(sparse.said_at, 5);
    assert_eq!(sparse.requests, quota(None, Some(3), None));
    assert!(sparse.tokens.is_empty());
    assert_eq!(sparse.retry_after_until, None);
}

#[test]
fn openai_headers_read_whole() {
    let r = read(PoolHeaders::OpenAi, &headers(OPENAI_OK), NOW).expect("a reading");
    assert_eq!(
        r,
        PoolReading {
            said_at: NOW,
            requests: quota(Some(10_000), Some(9_999), Some(NOW + 6)),
            tokens: quota(Some(30_000_000), Some(29_999_947), Some(NOW)),
            ..PoolReading::default()
        }
    );
    let r = read(PoolHeaders::OpenAi, &headers(OPENAI_429), NOW).expect("a reading");
    assert_eq!(r.requests, quota(Some(500), Some(0), Some(NOW + 90_500)));
    assert_eq!(
        r.tokens,
        quota(Some(200_000), Some(199_870), Some(NOW + 39))
    );
    assert_eq!(r.retry_after_until, None, "the engine reads OpenAI's own");
    let r = read(PoolHeaders::OpenAi, &headers(GROQ_OK), NOW).expect("a reading");
    assert_eq!(
        r.requests,
        quota(Some(14_400), Some(14_370), Some(NOW + 179_560))
    );
    assert_eq!(
        r.tokens,
        quota(Some(18_000), Some(17_997), Some(NOW + 7_660))
    );
    let r = read(PoolHeaders::OpenAi, &headers(AZURE_OK), NOW).expect("a reading");
    assert_eq!(r.requests, quota(None, Some(119), None));
    assert_eq!(r.tokens, quota(None, Some(119_700), None));
}

#[test]
fn anthropic_headers_read_whole() {
    let r = read(PoolHeaders::Anthropic, &headers(ANTHROPIC_OK), NOW).expect("a reading");
    assert_eq!(
        r,
        PoolReading {
            said_at: NOW,
            requests: quota(Some(4_000), Some(3_999), Some(NOW + 1_500)),
            tokens: quota(Some(480_000), Some(479_000), Some(NOW)),
            input_tokens: quota(Some(400_000), Some(399_000), Some(NOW)),
            output_tokens: quota(Some(80_000), Some(80_000), Some(NOW + 7_000)),
            retry_after_until: None,
        }
    );
    let r = read(PoolHeaders::Anthropic, &headers(ANTHROPIC_429), NOW).expect("a reading");
    assert_eq!(r.requests, quota(Some(50), Some(0), Some(NOW + 12_000)));
    assert_eq!(r.retry_after_until, Some(NOW + 12_000));
    assert!(r.tokens.is_empty());
}

#[test]
fn no_pool_headers_no_reading() {
    for pairs in [BEDROCK_OK, &[], &[("retry-after", "5")]] {
        for family in [PoolHeaders::OpenAi, PoolHeaders::Anthropic] {
            assert_eq!(read(family, &headers(pairs), NOW), None, "{pairs:?}");
        }
    }
    // Each family reads only its own headers.
    assert_eq!(read(PoolHeaders::Anthropic, &headers(OPENAI_OK), NOW), None);
    assert_eq!(read(PoolHeaders::OpenAi, &headers(ANTHROPIC_OK), NOW), None);
}

#[test]
fn go_durations_are_written_as_go_writes_them() {
    let cases = [
        (0, "0s"),
        (20, "20ms"),
        (999, "999ms"),
        (1000, "1s"),
        (1500, "1.5s"),
        (1005, "1.005s"),
        (61_050, "1m1.05s"),
        (7660, "7.66s"),
        (360_000, "6m0s"),
        (90_500, "1m30.5s"),
        (3_723_500, "1h2m3.5s"),
    ];
    for (ms, text) in cases {
        assert_eq!(write_go_duration(ms), text, "{ms} ms");
    }
}

#[test]
fn go_durations_in_every_form_openai_sends() {
    let ms = |v: &str| go_duration(v).map(ceil_millis);
    assert_eq!(ms("6m0s"), Some(360_000));
    assert_eq!(ms("1.5s"), Some(1_500));
    assert_eq!(ms("20ms"), Some(20));
    assert_eq!(ms("1h2m3.5s"), Some(3_723_500));
    assert_eq!(ms("0s"), Some(0));
    assert_eq!(ms("0"), Some(0));
    assert_eq!(ms("2m59.56s"), Some(179_560));
    assert_eq!(ms("500us"), Some(1), "rounded up");
    assert_eq!(ms("1µs"), Some(1));
    assert_eq!(ms("10ns"), Some(1));
    assert_eq!(ms(" 7.66s "), Some(7_660));
    assert_eq!(ms("12"), Some(12_000), "a bare number is seconds");
    assert_eq!(ms("0.25"), Some(250));
    for junk in [
        "",
        " ",
        "s",
        "5x",
        "-1s",
        "-5",
        "+1s",
        "1d",
        "1.2.3s",
        "1s2",
        ".s",
        "ms",
        "1e3s",
        "inf",
        "NaN",
        "1e300",
        "99999999999h",
        "1 s",
        "5s-",
    ] {
        assert_eq!(go_duration(junk), None, "{junk:?}");
    }
}

#[test]
fn rfc3339_times() {
    assert_eq!(rfc3339_millis("2024-05-14T10:00:00Z"), Some(NOW));
    assert_eq!(rfc3339_millis("2024-05-14T10:00:01.5Z"), Some(NOW + 1_500));
    assert_eq!(
        rfc3339_millis("2024-05-14T12:00:07+02:00"),
        Some(NOW + 7_000)
    );
    assert_eq!(rfc3339_millis("2024-05-14t10:00:00z"), Some(NOW));
    assert_eq!(rfc3339_millis("1970-01-01T00:00:00Z"), Some(0));
    for junk in [
        "",
        "2024-05-14",
        "2024-05-14 10:00:00",
        "Tue, 14 May 2024 10:00:00 GMT",
        "2024-13-14T10:00:00Z",
        "1969-12-31T23:59:59Z",
        "1715680800",
        "2024-05-14T10:00:00",
    ] {
        assert_eq!(rfc3339_millis(junk), None, "{junk:?}");
    }
}

#[test]
fn malformed_negative_and_huge_values_leave_their_field_out() {
    let h = headers(&[
        ("x-ratelimit-limit-requests", "18446744073709551615"),
        ("x-ratelimit-remaining-requests", "18446744073709551616"),
        ("x-ratelimit-reset-requests", "-3s"),
        ("x-ratelimit-limit-tokens", "-1"),
        ("x-ratelimit-remaining-tokens", "12.5"),
        ("x-ratelimit-reset-tokens", "soon"),
        ("x-ratelimit-limit", "100"),
        ("x-ratelimit-reset", "1715680800"),
        ("x-ratelimit-remaining-widgets", "3"),
    ]);
    let r = read(PoolHeaders::OpenAi, &h, NOW).expect("one field read");
    assert_eq!(r.requests, quota(Some(u64::MAX), None, None));
    assert!(r.tokens.is_empty());
    let h = headers(&[
        ("anthropic-ratelimit-requests-limit", "lots"),
        ("anthropic-ratelimit-requests-remaining", "-7"),
        ("anthropic-ratelimit-requests-reset", "in a minute"),
        ("anthropic-ratelimit-tokens-remaining", " 42 "),
        ("anthropic-ratelimit-tokens-reset", "6m0s"),
        ("anthropic-ratelimit-widgets-limit", "1"),
        ("anthropic-ratelimit-", "1"),
        ("anthropic-ratelimit-requests", "1"),
        ("retry-after", "never"),
    ]);
    let r = read(PoolHeaders::Anthropic, &h, NOW).expect("one field read");
    assert!(r.requests.is_empty());
    assert_eq!(r.tokens, quota(None, Some(42), None));
    assert_eq!(r.retry_after_until, None);
    // Nothing legible at all: no reading.
    let h = headers(&[
        ("x-ratelimit-remaining-requests", ""),
        ("x-ratelimit-reset-tokens", "-1s"),
    ]);
    assert_eq!(read(PoolHeaders::OpenAi, &h, NOW), None);
    // A reset past the clock's end saturates.
    let h = headers(&[("x-ratelimit-reset-requests", "100h")]);
    let r = read(PoolHeaders::OpenAi, &h, u64::MAX - 5).expect("read");
    assert_eq!(r.requests.reset_at, Some(u64::MAX));
}

#[test]
fn a_later_repeat_of_a_header_that_does_not_read_keeps_the_first() {
    let h = headers(&[
        ("x-ratelimit-remaining-requests", "5"),
        ("x-ratelimit-remaining-requests", "junk"),
    ]);
    let r = read(PoolHeaders::OpenAi, &h, NOW).expect("read");
    assert_eq!(r.requests.remaining, Some(5));
}

#[test]
fn json_names_what_was_said_and_nothing_else() {
    let r = read(PoolHeaders::OpenAi, &headers(AZURE_OK), NOW).expect("read");
    assert_eq!(
        serde_json::to_value(r).expect("json"),
        serde_json::json!({
            "saidAt": NOW,
            "requests": { "remaining": 119 },
            "tokens": { "remaining": 119_700 }
        })
    );
}

#[test]
fn the_book_keeps_the_last_reading_of_each_key_and_nothing_else() {
    let mut pools = Pools::default();
    let first = read(PoolHeaders::OpenAi, &headers(OPENAI_OK), NOW).expect("read");
    let second = read(PoolHeaders::OpenAi, &headers(OPENAI_429), NOW + 1).expect("read");
    pools.note("oai/gpt", first);
    pools.note("oai/gpt", second);
    assert_eq!(pools.get("oai/gpt"), Some(second));
    assert_eq!(pools.get("oai/other"), None);
    assert_eq!(pools.0.len(), 1, "one entry per key");
}

proptest! {
    #[test]
    fn arbitrary_header_values_never_panic(
        value in ".*",
        suffix in "(limit|remaining|reset)-(requests|tokens)|(requests|tokens|input-tokens|output-tokens)-(limit|remaining|reset)|.*",
        now in any::<u64>(),
    ) {
        for family in [PoolHeaders::OpenAi, PoolHeaders::Anthropic] {
            let name = format!("{}{suffix}", family.prefix());
            let h: Headers = [(name.as_str(), value.as_str()), ("retry-after", value.as_str())]
                .into_iter()
                .collect();
            if let Some(r) = read(family, &h, now) {
                prop_assert_eq!(r.said_at, now);
            }
        }
    }

    #[test]
    fn durations_never_panic_and_are_never_negative(value in "[0-9.]{0,12}(ns|us|µs|ms|s|m|h)?[0-9.]{0,6}[a-zµ]{0,2}") {
        if let Some(d) = go_duration(&value) {
            prop_assert!(d.as_secs_f64() < MAX_SECS);
        }
    }
}
