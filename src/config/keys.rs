//! Several API keys of one provider as a tier: `apiKeyEnvs` names a secret
//! per key, and validation makes one upstream per key out of the one
//! provider entry, so the provider's settings are written once.
//!
//! ```json
//! { "providers": { "openai": { "kind": "openai",
//!       "apiKeyEnvs": ["OPENAI_KEY_A", { "env": "OPENAI_KEY_B", "weight": 3 }] } },
//!   "routes": { "default": [ { "provider": "openai", "model": "gpt-4.1" },
//!                            { "provider": "backup", "model": "m" } ] } }
//! ```
//!
//! The upstreams are `openai#1`, `openai#2` (by position: an id never holds
//! the key, and `#` keeps them apart from ids people write, a clash being
//! reported). Each has its own breaker, health row and `x-served-by`. A
//! route entry naming `openai` becomes a tier of them at the entry's
//! priority, each weighted `entry weight × key weight`; in a route without
//! priorities every entry gets its position as its priority, so the other
//! entries keep their order around the tier (`engine/order.rs` puts
//! entries without one after every tier). `openai/<model>` names the tier
//! too ([`Client::resolve`](crate::Client)).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;

use super::providers::{build_provider, ProviderConfig};
use super::tier::MAX_WEIGHT;
use super::Issues;
use crate::engine::client::Entry;
use crate::provider::Provider;

/// One secret of `apiKeyEnvs`: its name, or its name and its share of the
/// provider's load.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(
    untagged,
    expecting = "a secret name, or { \"env\": name, \"weight\": 1 to 10000 }"
)]
pub(crate) enum KeyEnv {
    /// The secret's name; weight 1.
    Name(String),
    /// The secret's name and its weight.
    Weighted(WeightedKeyEnv),
}

/// `{ "env": "OPENAI_KEY_B", "weight": 3 }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WeightedKeyEnv {
    /// The secret's name.
    pub(crate) env: String,
    /// Its share of the provider's load (default 1).
    #[serde(default)]
    pub(crate) weight: Option<u32>,
}

impl KeyEnv {
    fn name(&self) -> &str {
        match self {
            KeyEnv::Name(n) => n,
            KeyEnv::Weighted(w) => &w.env,
        }
    }

    fn weight(&self) -> u32 {
        match self {
            KeyEnv::Name(_) => 1,
            KeyEnv::Weighted(w) => w.weight.unwrap_or(1),
        }
    }
}

/// One upstream a provider entry makes.
struct KeyUpstream<'c> {
    /// Its id.
    id: String,
    /// Its configuration: the entry's, with one key.
    config: Cow<'c, ProviderConfig>,
    /// Its position in `apiKeyEnvs`, for issue paths.
    index: Option<usize>,
}

/// Each keyed provider's upstreams with their weights, by provider id.
#[derive(Debug, Clone, Default)]
pub(super) struct KeyTiers(pub(crate) BTreeMap<String, Vec<(String, u32)>>);

/// `(apiKey, apiKeyEnv, apiKeyEnvs)` of the kinds with one key.
fn fields(cfg: &ProviderConfig) -> Option<(bool, bool, &Option<Vec<KeyEnv>>)> {
    match cfg {
        ProviderConfig::Anthropic(c) => Some((
            c.api_key.is_some(),
            c.api_key_env.is_some(),
            &c.api_key_envs,
        )),
        ProviderConfig::OpenAi(c) => Some((
            c.api_key.is_some(),
            c.api_key_env.is_some(),
            &c.api_key_envs,
        )),
        ProviderConfig::Compatible(c) => Some((
            c.api_key.is_some(),
            c.api_key_env.is_some(),
            &c.api_key_envs,
        )),
        ProviderConfig::Bedrock(_) | ProviderConfig::Vertex(_) => None,
    }
}

/// `cfg` with the one key `env` in place of its list.
fn with_key(cfg: &ProviderConfig, env: &str) -> ProviderConfig {
    let mut out = cfg.clone();
    match &mut out {
        ProviderConfig::Anthropic(c) => {
            c.api_key_env = Some(env.to_owned());
            c.api_key_envs = None;
        }
        ProviderConfig::OpenAi(c) => {
            c.api_key_env = Some(env.to_owned());
            c.api_key_envs = None;
        }
        ProviderConfig::Compatible(c) => {
            c.api_key_env = Some(env.to_owned());
            c.api_key_envs = None;
        }
        ProviderConfig::Bedrock(_) | ProviderConfig::Vertex(_) => {}
    }
    out
}

/// The upstreams of provider `id`: itself, or one per key of its
/// `apiKeyEnvs`, noted in `tiers`. `taken` tells an id already in use (a
/// configured or custom provider). Problems go to `issues` at `path`.
fn upstreams<'c>(
    id: &str,
    cfg: &'c ProviderConfig,
    path: &str,
    taken: &dyn Fn(&str) -> bool,
    tiers: &mut KeyTiers,
    issues: &mut Issues,
) -> Vec<KeyUpstream<'c>> {
    let single = || {
        vec![KeyUpstream {
            id: id.to_owned(),
            config: Cow::Borrowed(cfg),
            index: None,
        }]
    };
    let Some((api_key, api_key_env, Some(envs))) = fields(cfg) else {
        return single();
    };
    let at = format!("{path}.apiKeyEnvs");
    let before = issues.0.len();
    if envs.is_empty() {
        issues.add(&at, "must name at least one secret");
    }
    if api_key_env {
        issues.add(&at, "give apiKeyEnv or apiKeyEnvs, not both");
    }
    if api_key {
        issues.add(&at, "give apiKey or apiKeyEnvs, not both");
    }
    let mut out = Vec::new();
    let mut tier = Vec::new();
    for (i, env) in envs.iter().enumerate() {
        let name = env.name();
        if name.trim().is_empty() {
            issues.add(format!("{at}[{i}]"), "secret names must not be empty");
        }
        if envs[..i].iter().any(|e| e.name() == name) {
            issues.add(
                format!("{at}[{i}]"),
                format!("secret \"{name}\" is named twice"),
            );
        }
        let weight = env.weight();
        if weight == 0 || weight > MAX_WEIGHT {
            issues.add(
                format!("{at}[{i}].weight"),
                format!("must be 1 to {MAX_WEIGHT}"),
            );
        }
        let upstream = format!("{id}#{}", i + 1);
        if taken(&upstream) {
            issues.add(
                &at,
                format!(
                    "key {} would be upstream \"{upstream}\", which is another provider's id",
                    i + 1
                ),
            );
        }
        tier.push((upstream.clone(), weight));
        out.push(KeyUpstream {
            id: upstream,
            config: Cow::Owned(with_key(cfg, name)),
            index: Some(i),
        });
    }
    if issues.0.len() > before {
        return Vec::new();
    }
    tiers.0.insert(id.to_owned(), tier);
    out
}

/// The adapters of provider `id` at `path`: one, or one per key
/// ([`upstreams`]). The keys of one entry share its other mistakes, each
/// reported once, at the entry.
pub(super) fn build(
    id: &str,
    cfg: &ProviderConfig,
    path: &str,
    secret: &dyn Fn(&str) -> Option<String>,
    taken: &dyn Fn(&str) -> bool,
    tiers: &mut KeyTiers,
    issues: &mut Issues,
) -> Vec<(String, Box<dyn Provider>)> {
    let mut out = Vec::new();
    for u in upstreams(id, cfg, path, taken, tiers, issues) {
        let mut found = Vec::new();
        if let Some(p) = build_provider(&u.id, &u.config, secret, path, &mut found) {
            out.push((u.id, p));
        }
        for mut issue in found {
            issue.path = issue_path(&issue.path, path, u.index);
            if !issues.0.contains(&issue) {
                issues.0.push(issue);
            }
        }
    }
    out
}

/// `issue_path` of an upstream's issue as the configuration reads: its key
/// is `apiKeyEnvs[index]`, written `apiKeyEnv` in its own entry.
fn issue_path(issue_path: &str, provider_path: &str, index: Option<usize>) -> String {
    match index {
        Some(i) if issue_path == format!("{provider_path}.apiKeyEnv") => {
            format!("{provider_path}.apiKeyEnvs[{i}]")
        }
        _ => issue_path.to_owned(),
    }
}

impl KeyTiers {
    /// `chain` with each entry naming a keyed provider replaced by its tier.
    pub(super) fn expand(&self, chain: Vec<Entry>) -> Vec<Entry> {
        if !chain.iter().any(|e| self.0.contains_key(&e.provider)) {
            return chain;
        }
        let implicit = chain.iter().all(|e| e.priority.is_none());
        let mut out = Vec::with_capacity(chain.len());
        for (i, e) in chain.into_iter().enumerate() {
            let priority = if implicit {
                Some(u32::try_from(i).unwrap_or(u32::MAX))
            } else {
                e.priority
            };
            match self.0.get(&e.provider) {
                Some(keys) => {
                    for (id, weight) in keys {
                        out.push(Entry {
                            provider: id.clone(),
                            priority,
                            weight: e.weight.saturating_mul(*weight),
                            ..e.clone()
                        });
                    }
                }
                None => out.push(Entry { priority, ..e }),
            }
        }
        out
    }

    /// Each keyed provider's tier as route entries without a model, for
    /// `provider/model` requests.
    pub(super) fn templates(&self) -> BTreeMap<String, Vec<Entry>> {
        self.0
            .iter()
            .map(|(base, keys)| {
                let tier = keys
                    .iter()
                    .map(|(id, weight)| Entry {
                        priority: Some(0),
                        weight: *weight,
                        ..Entry::new(id.clone(), String::new())
                    })
                    .collect();
                (base.clone(), tier)
            })
            .collect()
    }
}
