//! Every provider's stream-event decoder on any event name and data; no
//! error message ever holds the provider's key.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use resilient_llm::SseEvent;

fuzz_target!(|input: &[u8]| {
    // [provider] event-name "\n" data
    let Some((&which, rest)) = input.split_first() else {
        return;
    };
    let (name, data) = common::split_line(rest);
    let ev = SseEvent {
        event: (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned()),
        data: String::from_utf8_lossy(data).into_owned(),
        id: None,
        retry: None,
    };
    match common::provider(which).decode_event(&ev) {
        Ok(_) => {}
        Err(e) => common::assert_no_key(&e.message),
    }
});
