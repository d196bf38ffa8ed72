//! Embeddings routes. Vectors of different models are not interchangeable
//! (a search index built with one cannot be queried with another), so a
//! route fails over only among entries that declare the same model family
//! and dimensions:
//!
//! ```json
//! "routes": { "embed": [
//!   { "provider": "openai", "model": "text-embedding-3-small",
//!     "embeddings": { "family": "text-embedding-3-small", "dimensions": 1536 } },
//!   { "provider": "azure", "model": "embed-small",
//!     "embeddings": { "family": "text-embedding-3-small", "dimensions": 1536 } } ] }
//! ```
//!
//! A route is an embeddings route when any of its entries declares
//! `embeddings`; then every entry must, alike, and at a provider that
//! serves embeddings (the OpenAI-compatible kinds).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{EntryConfig, Issues};
use crate::engine::endpoint::EmbeddingModel;
use crate::provider::{Endpoint, Provider};

/// An entry's embedding model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct EmbeddingsConfig {
    /// The model family whose vectors the entry returns (the same for
    /// every entry of the route: the upstream model's name, whatever a
    /// provider calls its deployment).
    pub(crate) family: String,
    /// The vectors' length.
    pub(crate) dimensions: u32,
}

impl EmbeddingsConfig {
    /// As the engine keeps it.
    pub(crate) fn model(&self) -> EmbeddingModel {
        EmbeddingModel {
            family: self.family.trim().to_string(),
            dimensions: self.dimensions,
        }
    }
}

/// Whether `upstream` is one of the keys `provider`'s `apiKeyEnvs` made.
fn is_key_of(upstream: &str, provider: &str) -> bool {
    upstream
        .strip_prefix(provider)
        .and_then(|rest| rest.strip_prefix('#'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Reports every embeddings route whose entries differ in family or
/// dimensions, leave one out, or sit at a provider that does not serve
/// embeddings. `providers` are the built adapters; `extra` the providers
/// written in code, which serve chat only.
pub(crate) fn check(
    routes: &BTreeMap<String, Vec<EntryConfig>>,
    providers: &[(String, Box<dyn Provider>)],
    extra: &[&str],
    issues: &mut Issues,
) {
    for (name, entries) in routes {
        let Some((first_at, first)) = entries
            .iter()
            .enumerate()
            .find_map(|(i, e)| Some((i, e.embeddings.as_ref()?.model())))
        else {
            continue;
        };
        for (i, e) in entries.iter().enumerate() {
            let path = format!("routes.{name}[{i}]");
            match &e.embeddings {
                None => issues.add(
                    format!("{path}.embeddings"),
                    "missing: every entry of an embeddings route declares its model's \
                     family and dimensions",
                ),
                Some(m) => {
                    let m = m.model();
                    if m.family.is_empty() {
                        issues.add(format!("{path}.embeddings.family"), "must not be empty");
                    }
                    if m.dimensions == 0 {
                        issues.add(
                            format!("{path}.embeddings.dimensions"),
                            "must be greater than 0",
                        );
                    }
                    if i != first_at && m != first {
                        issues.add(
                            format!("{path}.embeddings"),
                            format!(
                                "\"{}\" with {} dimensions differs from routes.{name}[{first_at}]'s \
                                 \"{}\" with {}: vectors of different models are not \
                                 interchangeable, so they cannot fail over to each other",
                                m.family, m.dimensions, first.family, first.dimensions
                            ),
                        );
                    }
                }
            }
            let built = providers
                .iter()
                .find(|(id, _)| *id == e.provider)
                .or_else(|| providers.iter().find(|(id, _)| is_key_of(id, &e.provider)));
            let serves = match built {
                Some((_, p)) => p.serves(Endpoint::Embeddings),
                // A provider that did not build has its own issue already.
                None => !extra.contains(&e.provider.as_str()),
            };
            if !serves {
                issues.add(
                    format!("{path}.provider"),
                    format!(
                        "provider \"{}\" does not serve embeddings (the OpenAI-compatible \
                         kinds do, at the path beside their chat completions)",
                        e.provider
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn issues(routes: &str) -> Vec<String> {
        let json = format!(
            r#"{{"providers": {{
                "a": {{"kind": "openai", "apiKeyEnv": "K"}},
                "b": {{"kind": "openai-compatible", "preset": "ollama", "baseUrl": "http://127.0.0.1:1"}},
                "c": {{"kind": "anthropic", "apiKeyEnv": "K"}}
            }}, "routes": {routes}}}"#
        );
        let cfg = Config::parse(&json).unwrap();
        match cfg.validate(&|_| Some("k".into()), &[]) {
            Ok(_) => Vec::new(),
            Err(e) => e.issues.iter().map(|i| i.to_string()).collect(),
        }
    }

    const SMALL: &str = r#"{"family": "text-embedding-3-small", "dimensions": 1536}"#;

    #[test]
    fn entries_of_one_family_and_size_validate() {
        let routes = format!(
            r#"{{"embed": [{{"provider": "a", "model": "text-embedding-3-small", "embeddings": {SMALL}}},
                          {{"provider": "b", "model": "local-small", "embeddings": {SMALL}}}]}}"#
        );
        assert_eq!(issues(&routes), Vec::<String>::new());
    }

    #[test]
    fn every_mismatch_is_reported_with_its_path() {
        let routes = format!(
            r#"{{"embed": [{{"provider": "a", "model": "m", "embeddings": {SMALL}}},
                          {{"provider": "b", "model": "m", "embeddings": {{"family": "text-embedding-3-small", "dimensions": 512}}}},
                          {{"provider": "b", "model": "m"}},
                          {{"provider": "c", "model": "m", "embeddings": {SMALL}}},
                          {{"provider": "b", "model": "m", "embeddings": {{"family": " ", "dimensions": 0}}}}]}}"#
        );
        let got = issues(&routes);
        let has = |path: &str, words: &str| {
            got.iter()
                .any(|i| i.starts_with(&format!("{path}:")) && i.contains(words))
        };
        assert!(
            has("routes.embed[1].embeddings", "not interchangeable"),
            "{got:?}"
        );
        assert!(has("routes.embed[2].embeddings", "missing"), "{got:?}");
        assert!(
            has("routes.embed[3].provider", "does not serve embeddings"),
            "{got:?}"
        );
        assert!(
            has("routes.embed[4].embeddings.family", "must not be empty"),
            "{got:?}"
        );
        assert!(
            has("routes.embed[4].embeddings.dimensions", "greater than 0"),
            "{got:?}"
        );
        assert!(
            !got.iter().any(|i| i.starts_with("routes.embed[0]")),
            "{got:?}"
        );
        assert_eq!(got.len(), 6, "{got:?}");
    }

    #[test]
    fn chat_routes_and_unknown_fields() {
        assert_eq!(
            issues(r#"{"chat": [{"provider": "c", "model": "m"}]}"#),
            Vec::<String>::new()
        );
        let json = r#"{"providers": {"a": {"kind": "openai", "apiKeyEnv": "K"}},
            "routes": {"e": [{"provider": "a", "model": "m", "embeddings": {"family": "f", "dims": 3}}]}}"#;
        let err = Config::parse(json).unwrap_err().to_string();
        assert!(err.contains("routes.e[0].embeddings"), "{err}");
    }
}
