//! The gateway's request parsing in both client formats, and the request
//! as it would go to a provider of either dialect: any body is a request
//! or a clear error, and every body written is JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resilient_llm::format::{anthropic, openai};

fuzz_target!(|input: &[u8]| {
    // [format] body
    let Some((&which, body)) = input.split_first() else {
        return;
    };
    let parsed = if which % 2 == 0 {
        openai::parse_request(body)
    } else {
        anthropic::parse_request(body)
    };
    let req = match parsed {
        Ok(r) => r,
        Err(e) => {
            assert!(matches!(e.status(), 400 | 413), "status {}", e.status());
            return;
        }
    };
    if let Ok(b) = openai::encode_request(&req, "m", openai::EncodeOptions::default()) {
        serde_json::to_vec(&b).expect("an OpenAI body that does not serialize");
    }
    let opts = anthropic::EncodeOptions {
        default_max_tokens: 1024,
        structured_output: anthropic::StructuredOutput::default(),
    };
    if let Ok(b) = anthropic::encode_request(&req, "m", opts) {
        serde_json::to_vec(&b).expect("an Anthropic body that does not serialize");
    }
});
