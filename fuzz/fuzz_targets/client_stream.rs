//! The client-format stream decoders (OpenAI chunks, Anthropic events) on
//! any data, and the encoders given what they decode: every event an
//! encoder writes is SSE whose data is JSON (or OpenAI's `[DONE]`).
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use resilient_llm::format::anthropic::stream::AnthropicStreamEncoder;
use resilient_llm::format::openai::stream::OpenAiStreamEncoder;
use resilient_llm::format::Read;
use resilient_llm::format::{anthropic, openai};
use resilient_llm::{Delta, ErrorKind, ProviderError, SseDecoder};

fn check_sse(bytes: &[u8]) {
    let mut d = SseDecoder::default();
    let mut events = Vec::new();
    d.feed(bytes, &mut events)
        .expect("an encoder wrote past the decoder's limits");
    events.extend(d.finish());
    for ev in events {
        if ev.data != "[DONE]" {
            serde_json::from_str::<serde_json::Value>(&ev.data)
                .unwrap_or_else(|e| panic!("an encoder wrote data that is not JSON: {e}"));
        }
    }
}

fuzz_target!(|input: &[u8]| {
    // [format] event-name "\n" data, several events apart by a NUL byte
    let Some((&which, rest)) = input.split_first() else {
        return;
    };
    let mut deltas: Vec<Delta> = Vec::new();
    for one in rest.split(|b| *b == 0) {
        let (name, data) = common::split_line(one);
        let read = if which % 2 == 0 {
            openai::stream::decode_chunk(data)
        } else {
            let name = std::str::from_utf8(name).ok().filter(|n| !n.is_empty());
            anthropic::stream::decode_event(name, data)
        };
        if let Ok(Read::Answer(d)) = read {
            deltas.extend(d);
        }
    }
    let mut openai = OpenAiStreamEncoder::new("id".into(), 1, "m".into(), which & 2 != 0);
    let mut anthropic = AnthropicStreamEncoder::new("id".into(), "m".into());
    let mut out_o = Vec::new();
    let mut out_a = Vec::new();
    for d in &deltas {
        out_o.extend(openai.delta(d));
        out_a.extend(anthropic.delta(d));
    }
    if which & 4 != 0 {
        let e = ProviderError::new(ErrorKind::Server, "upstream failed");
        out_o.extend(openai.error(&e));
        out_a.extend(anthropic.error(&e));
    } else {
        out_o.extend(openai.finish());
        out_a.extend(anthropic.finish());
    }
    check_sse(&out_o);
    check_sse(&out_a);
});
