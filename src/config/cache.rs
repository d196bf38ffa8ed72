//! Configuration of the response cache: `cache`, by route name, and the
//! in-memory store's bounds in `limits`.
//!
//! ```json
//! "cache": { "default": { "ttlSeconds": 300, "staleIfErrorSeconds": 86400, "scope": "client" } },
//! "limits": { "cacheMaxEntries": 1000, "cacheMaxBytes": 16777216 }
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::shape::LimitsConfig;
use super::Issues;
use crate::cache::{CacheBounds, CachePolicy, Scope};

/// One route's caching.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CacheConfig {
    /// How long an answer is served fresh, in seconds.
    pub(crate) ttl_seconds: u64,
    /// How long after that it may be served when every entry has failed
    /// (default 0: never).
    #[serde(default)]
    pub(crate) stale_if_error_seconds: Option<u64>,
    /// `client` (default): answers only to the client key that asked;
    /// `shared`: to any client.
    #[serde(default)]
    pub(crate) scope: Option<ScopeConfig>,
}

/// `scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ScopeConfig {
    /// One client's answers.
    Client,
    /// Every client's.
    Shared,
}

/// The longest TTL and stale window: thirty days.
const MAX_SECONDS: u64 = 30 * 24 * 3600;

/// The in-memory store's default bounds.
const DEFAULT_ENTRIES: usize = 1000;
const DEFAULT_BYTES: usize = 16 << 20;

/// Validates `cache` against the routes it names.
pub(crate) fn policies(
    cfg: &BTreeMap<String, CacheConfig>,
    is_route: &dyn Fn(&str) -> bool,
    issues: &mut Issues,
) -> BTreeMap<String, CachePolicy> {
    let mut out = BTreeMap::new();
    for (route, c) in cfg {
        let path = format!("cache.{route}");
        if !is_route(route) {
            issues.add(&path, format!("unknown route \"{route}\""));
        }
        let mut seconds = |field: &str, v: u64, zero_ok: bool| {
            if (v == 0 && !zero_ok) || v > MAX_SECONDS {
                let low = if zero_ok { 0 } else { 1 };
                issues.add(
                    format!("{path}.{field}"),
                    format!("must be between {low} and {MAX_SECONDS} (thirty days)"),
                );
            }
            Duration::from_secs(v)
        };
        let ttl = seconds("ttlSeconds", c.ttl_seconds, false);
        let stale_if_error = seconds(
            "staleIfErrorSeconds",
            c.stale_if_error_seconds.unwrap_or(0),
            true,
        );
        let scope = match c.scope {
            None | Some(ScopeConfig::Client) => Scope::Client,
            Some(ScopeConfig::Shared) => Scope::Shared,
        };
        out.insert(
            route.clone(),
            CachePolicy {
                ttl,
                stale_if_error,
                scope,
            },
        );
    }
    out
}

/// The in-memory store's bounds from `limits`.
pub(crate) fn bounds(limits: &LimitsConfig, issues: &mut Issues) -> CacheBounds {
    let max_bytes = match limits.cache_max_bytes {
        Some(n) if n < 1024 => {
            issues.add("limits.cacheMaxBytes", "must be at least 1024");
            DEFAULT_BYTES
        }
        v => v.unwrap_or(DEFAULT_BYTES),
    };
    CacheBounds {
        max_entries: limits.cache_max_entries.unwrap_or(DEFAULT_ENTRIES),
        max_bytes,
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn issues(cache: &str, limits: &str) -> Vec<String> {
        let json = format!(
            r#"{{"providers":{{"p":{{"kind":"openai","apiKeyEnv":"K"}}}},
               "routes":{{"default":[{{"provider":"p","model":"m"}}]}},
               "cache":{cache},"limits":{limits}}}"#
        );
        match Config::parse(&json)
            .unwrap()
            .validate(&|_| Some("k".into()), &[])
        {
            Ok(_) => vec![],
            Err(e) => e.issues.iter().map(|i| i.to_string()).collect(),
        }
    }

    #[test]
    fn a_valid_cache() {
        let json = r#"{"providers":{"p":{"kind":"openai","apiKeyEnv":"K"}},
            "routes":{"default":[{"provider":"p","model":"m"}]},
            "cache":{"default":{"ttlSeconds":60,"staleIfErrorSeconds":3600,"scope":"shared"}},
            "limits":{"cacheMaxEntries":5,"cacheMaxBytes":4096}}"#;
        let v = Config::parse(json)
            .unwrap()
            .validate(&|_| Some("k".into()), &[])
            .unwrap();
        let p = v.cache["default"];
        assert_eq!(p.ttl.as_secs(), 60);
        assert_eq!(p.stale_if_error.as_secs(), 3600);
        assert_eq!(p.scope, crate::cache::Scope::Shared);
        assert_eq!(v.cache_bounds.max_entries, 5);
        assert_eq!(v.cache_bounds.max_bytes, 4096);
    }

    #[test]
    fn every_mistake_with_its_path() {
        let got = issues(
            r#"{"nope":{"ttlSeconds":60},"default":{"ttlSeconds":0,"staleIfErrorSeconds":99999999}}"#,
            r#"{"cacheMaxBytes":10}"#,
        );
        let text = got.join("\n");
        for want in [
            "cache.nope: unknown route \"nope\"",
            "cache.default.ttlSeconds: must be between 1 and",
            "cache.default.staleIfErrorSeconds: must be between 0 and",
            "limits.cacheMaxBytes: must be at least 1024",
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
        let parse = Config::parse(r#"{"cache":{"default":{"ttlSeconds":1,"scope":"everyone"}}}"#);
        assert!(parse
            .unwrap_err()
            .to_string()
            .contains("cache.default.scope"));
        let parse = Config::parse(r#"{"cache":{"default":{"ttl":1}}}"#);
        assert!(parse.is_err());
    }
}
