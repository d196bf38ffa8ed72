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
