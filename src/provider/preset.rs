//! OpenAI-compatible providers as data: where each one listens, how it
//! takes its key, and the few ways its body differs. The one OpenAI
//! adapter ([`super::openai::OpenAi`]) is parameterised by a [`Preset`].

use crate::format::openai::MaxTokensField;

/// How a provider takes its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthStyle {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// The key as the value of this header (Azure's `api-key`).
    ApiKeyHeader(&'static str),
    /// No key is sent.
    None,
}

/// The ways a provider's request differs from OpenAI's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quirks {
    /// Which field carries the output token limit.
    pub max_tokens_field: MaxTokensField,
    /// Asks for usage on streamed requests by default
    /// (`stream_options.include_usage`). A request whose client asked for
    /// usage ([`crate::ChatRequest::wants_usage`]), and every request sent
    /// in the client's own body, asks regardless, where `stream_options`
    /// is taken at all.
    pub stream_usage: bool,
    /// Takes a `stream_options` field at all. Mistral refuses it (422,
    /// "extra inputs are not permitted") and reports usage in its last
    /// chunk unasked: it is never sent there, not even from a client's
    /// own body.
    pub stream_options: bool,
    /// Needs an `api-version` query parameter; this is its default.
    pub api_version: Option<&'static str>,
}

/// The names of the presets, as written in configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PresetName {
    /// OpenAI itself (what `"kind": "openai"` uses).
    #[serde(rename = "openai")]
    OpenAi,
    /// DeepSeek.
    DeepSeek,
    /// Groq.
    Groq,
    /// Mistral La Plateforme.
    Mistral,
    /// Together AI.
    Together,
    /// Fireworks AI.
    Fireworks,
    /// OpenRouter.
    OpenRouter,
    /// Google Gemini's OpenAI-compatible endpoint.
    Gemini,
    /// Azure OpenAI: `api-key` header, deployment in the path,
    /// `api-version` query parameter; the base URL is the resource's.
    Azure,
    /// A self-hosted vLLM server.
    Vllm,
    /// A local Ollama.
    Ollama,
    /// A llama.cpp server.
    LlamaCpp,
    /// Any other OpenAI-compatible server: base URL required.
    Custom,
}

/// One OpenAI-compatible provider, as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// Which preset this is.
    pub name: PresetName,
    /// The default base URL; `None` when the user must give one.
    pub base_url: Option<&'static str>,
    /// The path of the chat endpoint; `{deployment}` is replaced by the
    /// deployment (Azure) or the model.
    pub path: &'static str,
    /// How the key is sent.
    pub auth: AuthStyle,
    /// The environment variable (Worker secret) holding the key by default.
    pub key_env: Option<&'static str>,
    /// Whether a key must be configured.
    pub key_required: bool,
    /// Body and URL differences.
    pub quirks: Quirks,
}

const PLAIN: Quirks = Quirks {
    max_tokens_field: MaxTokensField::MaxTokens,
    stream_usage: true,
    stream_options: true,
    api_version: None,
};

const fn hosted(
    name: PresetName,
    base_url: &'static str,
    path: &'static str,
    key_env: &'static str,
    quirks: Quirks,
) -> Preset {
    Preset {
        name,
        base_url: Some(base_url),
        path,
        auth: AuthStyle::Bearer,
        key_env: Some(key_env),
        key_required: true,
        quirks,
    }
}

const fn self_hosted(name: PresetName, base_url: Option<&'static str>, quirks: Quirks) -> Preset {
    Preset {
        name,
        base_url,
        path: "/v1/chat/completions",
        auth: AuthStyle::Bearer,
        key_env: None,
        key_required: false,
        quirks,
    }
}

const NO_STREAM_USAGE: Quirks = Quirks {
    stream_usage: false,
    ..PLAIN
};

const NO_STREAM_OPTIONS: Quirks = Quirks {
    stream_usage: false,
    stream_options: false,
    ..PLAIN
};

/// Every preset, in the order of [`PresetName`].
pub(crate) const PRESETS: [Preset; 13] = [
    hosted(
        PresetName::OpenAi,
        "https://api.openai.com",
        "/v1/chat/completions",
        "OPENAI_API_KEY",
        Quirks {
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            ..PLAIN
        },
    ),
    hosted(
        PresetName::DeepSeek,
        "https://api.deepseek.com",
        "/chat/completions",
        "DEEPSEEK_API_KEY",
        PLAIN,
    ),
    hosted(
        PresetName::Groq,
        "https://api.groq.com",
        "/openai/v1/chat/completions",
        "GROQ_API_KEY",
        PLAIN,
    ),
    hosted(
        PresetName::Mistral,
        "https://api.mistral.ai",
        "/v1/chat/completions",
        "MISTRAL_API_KEY",
        NO_STREAM_OPTIONS,
    ),
    hosted(
        PresetName::Together,
        "https://api.together.xyz",
        "/v1/chat/completions",
        "TOGETHER_API_KEY",
        PLAIN,
    ),
    hosted(
        PresetName::Fireworks,
        "https://api.fireworks.ai",
        "/inference/v1/chat/completions",
        "FIREWORKS_API_KEY",
        PLAIN,
    ),
    hosted(
        PresetName::OpenRouter,
        "https://openrouter.ai",
        "/api/v1/chat/completions",
        "OPENROUTER_API_KEY",
        PLAIN,
    ),
    hosted(
        PresetName::Gemini,
        "https://generativelanguage.googleapis.com",
        "/v1beta/openai/chat/completions",
        "GEMINI_API_KEY",
        NO_STREAM_USAGE,
    ),
    Preset {
        name: PresetName::Azure,
        base_url: None,
        path: "/openai/deployments/{deployment}/chat/completions",
        auth: AuthStyle::ApiKeyHeader("api-key"),
        key_env: Some("AZURE_OPENAI_API_KEY"),
        key_required: true,
        quirks: Quirks {
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            stream_usage: true,
            stream_options: true,
            api_version: Some("2024-10-21"),
        },
    },
    self_hosted(PresetName::Vllm, Some("http://localhost:8000"), PLAIN),
    self_hosted(
        PresetName::Ollama,
        Some("http://localhost:11434"),
        NO_STREAM_USAGE,
    ),
    self_hosted(
        PresetName::LlamaCpp,
        Some("http://localhost:8080"),
        NO_STREAM_USAGE,
    ),
    self_hosted(PresetName::Custom, None, NO_STREAM_USAGE),
];

impl PresetName {
    /// The provider's `gen_ai.provider.name` in the OpenTelemetry GenAI
    /// conventions: theirs where they name it, else the preset's name.
    pub fn genai_name(self) -> &'static str {
        match self {
            PresetName::OpenAi => "openai",
            PresetName::DeepSeek => "deepseek",
            PresetName::Groq => "groq",
            PresetName::Mistral => "mistral_ai",
            PresetName::Gemini => "gcp.gemini",
            PresetName::Azure => "azure.ai.openai",
            PresetName::Together => "together",
            PresetName::Fireworks => "fireworks",
            PresetName::OpenRouter => "openrouter",
            PresetName::Vllm => "vllm",
            PresetName::Ollama => "ollama",
            PresetName::LlamaCpp => "llama_cpp",
            PresetName::Custom => "openai_compatible",
        }
    }

    /// The preset's data.
    pub fn preset(self) -> &'static Preset {
        let i = match self {
            PresetName::OpenAi => 0,
            PresetName::DeepSeek => 1,
            PresetName::Groq => 2,
            PresetName::Mistral => 3,
            PresetName::Together => 4,
            PresetName::Fireworks => 5,
            PresetName::OpenRouter => 6,
            PresetName::Gemini => 7,
            PresetName::Azure => 8,
            PresetName::Vllm => 9,
            PresetName::Ollama => 10,
            PresetName::LlamaCpp => 11,
            PresetName::Custom => 12,
        };
        &PRESETS[i]
    }

    /// The name as written in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            PresetName::OpenAi => "openai",
            PresetName::DeepSeek => "deepseek",
            PresetName::Groq => "groq",
            PresetName::Mistral => "mistral",
            PresetName::Together => "together",
            PresetName::Fireworks => "fireworks",
            PresetName::OpenRouter => "openrouter",
            PresetName::Gemini => "gemini",
            PresetName::Azure => "azure",
            PresetName::Vllm => "vllm",
            PresetName::Ollama => "ollama",
            PresetName::LlamaCpp => "llamacpp",
            PresetName::Custom => "custom",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_npm_types_name_every_preset() {
        let types = include_str!("../js/types.d.ts");
        let start = types.find("export type PresetName =").expect("the union");
        let union = &types[start..start + types[start..].find(';').expect("its end")];
        let typed: Vec<&str> = union.split('"').skip(1).step_by(2).collect();
        let names: Vec<&str> = PRESETS.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(typed, names);
    }

    #[test]
    fn each_name_finds_its_own_preset() {
        for p in &PRESETS {
            assert_eq!(p.name.preset(), p);
            let parsed: PresetName =
                serde_json::from_value(serde_json::json!(p.name.as_str())).unwrap();
            assert_eq!(parsed, p.name);
        }
    }
}
