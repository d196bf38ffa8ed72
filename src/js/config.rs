//! The package's configuration: the one JSON shape of the
//! configuration (docs/design.md, "Configuration"), the same the Worker reads, plus the JS providers passed in
//! `options.providers`.

use crate::config::{Config, ConfigError, ConfigIssue, EntryConfig};
use crate::engine::client::Client;
use crate::event::Observer;
use crate::js::validate::JsCheck;
use crate::provider::Upstream;
use crate::web::WebPlatform;

/// The client for `json`, with the JS providers `customs` as
/// `(name, model, upstream)`: routes may name them, and when the
/// configuration has no routes they form the `default` route in the order
/// given. Every problem is reported at once, each with its path.
pub(crate) fn build_client(
    json: &str,
    customs: Vec<(String, String, Upstream)>,
    checks: Vec<(String, JsCheck)>,
    observer: Option<Observer>,
) -> Result<Client<WebPlatform>, ConfigError> {
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
    let extra = customs
        .into_iter()
        .map(|(name, _, upstream)| (name, upstream))
        .collect();
    let mut builder = cfg.client_builder(WebPlatform::new(), extra, &env_secret)?;
    if let Some(o) = observer {
        builder = builder.observer(o);
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
    Ok(builder.build())
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
