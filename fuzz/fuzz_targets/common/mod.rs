//! What the targets share: the providers under test and the key they hold.

#![allow(dead_code)] // each target uses its part

use resilient_llm::{Anthropic, OpenAi, PresetName, Provider, Secret};

/// The key every provider is given; no error message may hold it.
pub const KEY: &str = "sk-fuzz-0123456789abcdefKEYZ";

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

/// Anthropic for 0, else an OpenAI-compatible preset.
pub fn provider(which: u8) -> Box<dyn Provider> {
    let n = usize::from(which) % (PRESETS.len() + 1);
    if n == 0 {
        Box::new(Anthropic::new("anthropic").api_key(Secret::new(KEY)))
    } else {
        let preset = PRESETS[n - 1];
        Box::new(
            OpenAi::new(preset.as_str(), preset)
                .base_url("http://127.0.0.1:9")
                .api_key(Secret::new(KEY)),
        )
    }
}

/// The bytes before the first newline, and those after it (all of them and
/// nothing when there is none).
pub fn split_line(bytes: &[u8]) -> (&[u8], &[u8]) {
    match bytes.iter().position(|b| *b == b'\n') {
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (&[], bytes),
    }
}

/// Panics when `message` shows the key, whole or as its distinctive tail.
pub fn assert_no_key(message: &str) {
    assert!(!message.contains(KEY), "the key in an error: {message}");
    assert!(
        !message.contains(&KEY[KEY.len() - 12..]),
        "the key's tail in an error: {message}"
    );
}
