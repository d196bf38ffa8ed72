//! Every provider's answer decoder (Anthropic, OpenAI and each preset) and
//! the shared classifier, on any status, Retry-After and body; no error
//! message ever holds the provider's key.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use resilient_llm::{classify, BufferedResponse, ErrorBody, Headers};

fuzz_target!(|input: &[u8]| {
    // [provider][status hi][status lo] retry-after "\n" body
    let [which, hi, lo, rest @ ..] = input else {
        return;
    };
    let status = u16::from_be_bytes([*hi, *lo]) % 1000;
    let (retry_after, body) = common::split_line(rest);
    let mut headers = Headers::new();
    if !retry_after.is_empty() {
        headers.insert("retry-after", String::from_utf8_lossy(retry_after));
    }
    let resp = BufferedResponse {
        status,
        headers: headers.clone(),
        body: body.to_vec(),
    };
    let provider = common::provider(*which);
    match provider.decode(&resp, 1_700_000_000_000) {
        Ok(answer) => {
            // The answer as kept is the provider's own body, valid JSON text
            // (a number past f64's range is valid JSON: `Value` refuses it,
            // the grammar and every client's parser do not).
            if let Some(raw) = &answer.raw {
                assert!(serde_json::from_str::<&serde_json::value::RawValue>(raw.get()).is_ok());
            }
        }
        Err(e) => common::assert_no_key(&e.message),
    }
    let e = classify(status, &headers, body, 1_700_000_000_000);
    let _ = e.kind.treatment();
    let _ = ErrorBody::parse(body);
});
