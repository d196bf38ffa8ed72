//! Inputs the fuzz targets (fuzz/) crashed on, replayed as the targets read
//! them: each was a failure once and must stay fixed. A new crash goes into
//! tests/fixtures/fuzz/<target>/ as libFuzzer wrote it.

use std::path::Path;

use resilient_llm::{
    Anthropic, BufferedResponse, Headers, OpenAi, PresetName, Provider, Secret, SseEvent,
};

/// The key the fuzz targets give every provider (fuzz/fuzz_targets/common).
const KEY: &str = "sk-fuzz-0123456789abcdefKEYZ";

fn provider(which: u8) -> Box<dyn Provider> {
    const PRESETS: [PresetName; 13] = [
        PresetName::OpenAi,
        PresetName::DeepSeek,
        PresetName::Groq,
        PresetName::Mistral,
        PresetName::Together,
        PresetName::Fireworks,
        PresetName::OpenRouter,
        PresetName::Gemini,
        PresetName::Azure,
        PresetName::Vllm,
        PresetName::Ollama,
        PresetName::LlamaCpp,
        PresetName::Custom,
    ];
    match usize::from(which) % (PRESETS.len() + 1) {
        0 => Box::new(Anthropic::new("anthropic").api_key(Secret::new(KEY))),
        n => Box::new(
            OpenAi::new(PRESETS[n - 1].as_str(), PRESETS[n - 1])
                .base_url("http://127.0.0.1:9")
                .api_key(Secret::new(KEY)),
        ),
    }
}

fn split_line(bytes: &[u8]) -> (&[u8], &[u8]) {
    match bytes.iter().position(|b| *b == b'\n') {
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (&[], bytes),
    }
}

fn assert_no_key(message: &str) {
    assert!(!message.contains(KEY), "the key in an error: {message}");
    assert!(
        !message.contains(&KEY[KEY.len() - 12..]),
        "the key's tail in an error: {message}"
    );
}

/// Every input saved for `target`, at least one.
fn inputs(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no inputs in {}", dir.display());
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// Found by `provider_answer`: an error body quoting the key's tail (no
/// `sk-` before it) was shown whole in the error's message.
#[test]
fn provider_answers_never_show_a_piece_of_the_key() {
    for input in inputs("provider_answer") {
        let [which, hi, lo, rest @ ..] = &input[..] else {
            panic!("short input")
        };
        let (retry_after, body) = split_line(rest);
        let mut headers = Headers::new();
        if !retry_after.is_empty() {
            headers.insert("retry-after", String::from_utf8_lossy(retry_after));
        }
        let resp = BufferedResponse {
            status: u16::from_be_bytes([*hi, *lo]) % 1000,
            headers,
            body: body.to_vec(),
        };
        let e = provider(*which)
            .decode(&resp, 1_700_000_000_000)
            .expect_err("an error body");
        assert_no_key(&e.message);
    }
}

/// Found by `provider_answer`: an answer whose `created` is a number past
/// f64's range (`17e777…`) decodes, and keeps the provider's body as it
/// came: valid JSON text, though `serde_json::Value` refuses the number.
#[test]
fn an_answer_with_a_number_past_f64_keeps_its_body_as_valid_json_text() {
    for input in inputs("provider_answer_raw") {
        let [which, hi, lo, rest @ ..] = &input[..] else {
            panic!("short input")
        };
        let (_, body) = split_line(rest);
        let resp = BufferedResponse {
            status: u16::from_be_bytes([*hi, *lo]) % 1000,
            headers: Headers::new(),
            body: body.to_vec(),
        };
        let answer = provider(*which)
            .decode(&resp, 1_700_000_000_000)
            .expect("an answer");
        let raw = answer.raw.expect("the body kept");
        assert!(serde_json::from_str::<&serde_json::value::RawValue>(raw.get()).is_ok());
        assert_eq!(raw.get().as_bytes(), body, "as the provider sent it");
    }
}

/// Found by `provider_stream`: an error event quoting the key split by
/// other bytes kept the key's tail.
#[test]
fn stream_error_events_never_show_a_piece_of_the_key() {
    for input in inputs("provider_stream") {
        let (which, rest) = input.split_first().expect("an input");
        let (name, data) = split_line(rest);
        let ev = SseEvent {
            event: (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned()),
            data: String::from_utf8_lossy(data).into_owned(),
            id: None,
            retry: None,
        };
        let e = provider(*which)
            .decode_event(&ev)
            .expect_err("an error event");
        assert_no_key(&e.message);
    }
}

/// Found by `fleet`: a lease answer whose view's `failureRate` read back one
/// unit in the last place off (serde_json without `float_roundtrip`). The
/// object's state must still read back exactly, and views within a few
/// units; every call of the input still folds, leases and views.
#[test]
fn fleet_messages_read_back_as_themselves_floats_within_a_unit() {
    use resilient_llm::fleet::{Call, LeaseAnswer, View};
    use resilient_llm::{BreakerPolicy, Fleet};

    fn close(a: f64, b: f64) -> bool {
        a == b || (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs())
    }
    fn view_back(v: &View) {
        let back: View = serde_json::from_str(&serde_json::to_string(v).unwrap()).unwrap();
        assert!(close(v.failure_rate, back.failure_rate), "{v:?} / {back:?}");
        assert_eq!(
            (v.state, v.generation, v.as_of),
            (back.state, back.generation, back.as_of)
        );
    }
    for input in inputs("fleet") {
        let (stored, calls) = split_line(&input);
        let mut fleet: Fleet = serde_json::from_slice(stored).unwrap_or_default();
        let policy = BreakerPolicy::default();
        let mut now = 1_700_000_000_000u64;
        for line in calls.split(|b| *b == b'\n') {
            let [op, step, json @ ..] = line else {
                continue;
            };
            now += u64::from(*step) * 997;
            if let Ok(a) = serde_json::from_slice::<LeaseAnswer>(json) {
                let view = match a {
                    LeaseAnswer::Granted { view, .. }
                    | LeaseAnswer::Busy { view, .. }
                    | LeaseAnswer::Closed { view } => view,
                };
                view_back(&view);
            }
            let Ok(call) = serde_json::from_slice::<Call>(json) else {
                continue;
            };
            let view = match op % 3 {
                0 => fleet.fold(&policy, now, &call.reports),
                1 => match fleet.lease(&policy, std::time::Duration::from_secs(30), now, "h") {
                    LeaseAnswer::Granted { view, .. }
                    | LeaseAnswer::Busy { view, .. }
                    | LeaseAnswer::Closed { view } => view,
                },
                _ => fleet.view(&policy, now),
            };
            view_back(&view);
            let text = serde_json::to_string(&fleet).unwrap();
            let back: Fleet = serde_json::from_str(&text).unwrap();
            assert_eq!(
                serde_json::to_string(&back).unwrap(),
                text,
                "the stored state"
            );
        }
    }
}
