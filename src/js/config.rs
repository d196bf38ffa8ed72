//! The package's configuration: the one JSON shape of the
//! configuration (docs/design.md, "Configuration"), the same the Worker reads, plus the JS providers passed in
//! `options.providers`.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::cache::{CacheBounds, CachePolicy};
use crate::config::{Config, ConfigError, ConfigIssue, EntryConfig};
use crate::engine::client::Client;
use crate::engine::span_hook::LiveSpans;
use crate::event::Observer;
use crate::js::validate::JsCheck;
use crate::provider::Upstream;
use crate::web::WebPlatform;

/// What a package's configuration builds: the client, and the response
/// cache of its `client.fetch` (the routes that cache, and the bounds of
/// the in-memory store).
pub(crate) struct Built {
    pub(crate) client: Client<WebPlatform>,
    pub(crate) cache: BTreeMap<String, CachePolicy>,
    pub(crate) cache_bounds: CacheBounds,
}

/// The client for `json`, with the JS providers `customs` as
/// `(name, model, upstream)`: routes may name them, and when the
/// configuration has no routes they form the `default` route in the order
/// given. Every problem is reported at once, each with its path.
pub(crate) fn build_client(
    json: &str,
    customs: Vec<(String, String, Upstream)>,
    checks: Vec<(String, JsCheck)>,
    observer: Option<Observer>,
    tracer: Option<Rc<dyn LiveSpans>>,
) -> Result<Built, ConfigError> {
    let mut cfg = Config::parse(json)?;
    if cfg.routes.is_empty() && !customs.is_empty() {
        let entries = customs
            .iter()
            .map(|(name, model, _)| EntryConfig {
                provider: name.clone(),
                model: model.clone(),
                ..EntryConfig::default()
            })
            .collect();
        cfg.routes.insert("default".into(), entries);
    }
    if cfg.routes.is_empty() && cfg.providers.is_empty() {
        return Err(ConfigError {
            issues: vec![ConfigIssue::new(
                "routes",
                "no routes and no providers: pass options.providers or config.routes",
            )],
        });
    }
    let extra: Vec<(String, Upstream)> = customs
        .into_iter()
        .map(|(name, _, upstream)| (name, upstream))
        .collect();
    let names: Vec<&str> = extra.iter().map(|(n, _)| n.as_str()).collect();
    let mut validated = cfg.validate(&env_secret, &names)?;
    let cache = std::mem::take(&mut validated.cache);
    let cache_bounds = validated.cache_bounds;
    let mut builder = validated.into_builder(WebPlatform::new(), extra);
    if let Some(o) = observer {
        builder = builder.observer(o);
    }
    if let Some(t) = tracer {
        builder = builder.live_spans(t);
    }
    let mut issues = Vec::new();
    for (route, check) in checks {
        if !builder.routes.contains_key(&route) {
            issues.push(ConfigIssue::new(
                format!("options.validators.{route}"),
                format!("unknown route \"{route}\""),
            ));
            continue;
        }
        let quality = builder.quality.entry(route).or_default();
        quality.functions.push(Box::new(check));
    }
    if !issues.is_empty() {
        return Err(ConfigError { issues });
    }
    Ok(Built {
        client: builder.build(),
        cache,
        cache_bounds,
    })
}

/// A provider key named by `apiKeyEnv`: `process.env[name]` where the
/// runtime has one (Node), nothing elsewhere (browsers pass `apiKey`).
fn env_secret(name: &str) -> Option<String> {
    let global = js_sys::global();
    let process = js_sys::Reflect::get(&global, &"process".into()).ok()?;
    let env = js_sys::Reflect::get(&process, &"env".into()).ok()?;
    if env.is_undefined() || env.is_null() {
        return None;
    }
    js_sys::Reflect::get(&env, &name.into()).ok()?.as_string()
}
