//! The response cache on the status page (`GET /status`, `/status/data`):
//! the routes that cache and how, the store and what it holds, and what
//! the cache did since this gateway started.

use std::fmt::Write as _;

use html_escape::encode_text as esc;
use serde::Serialize;

use super::proxy::Gateway;
use crate::cache::Scope;
use crate::engine::store::BreakerStore;
use crate::platform::Platform;

/// The cache's section of the status data.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CacheStatus {
    /// `memory`, `edge` (the data centre's HTTP cache) or `custom`.
    store: &'static str,
    /// What the store holds, where it counts it.
    entries: Option<usize>,
    bytes: Option<usize>,
    routes: Vec<RouteCache>,
    /// Requests by what the cache did: `hit`, `miss`, `stale`, `bypass`.
    requests: Requests,
    stored_bytes: u64,
    saved_usd: f64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RouteCache {
    route: String,
    ttl_seconds: u64,
    stale_if_error_seconds: u64,
    scope: &'static str,
}

#[derive(Debug, Default, Serialize)]
struct Requests {
    hit: u64,
    miss: u64,
    stale: u64,
    bypass: u64,
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// The cache's section, when a route caches.
    pub(super) fn cache_status(&self) -> Option<CacheStatus> {
        if self.answers.policies.is_empty() {
            return None;
        }
        let info = self.answers.store.describe();
        let (counts, stored_bytes, saved_usd) = self.metrics.cache_counts();
        let mut requests = Requests::default();
        for (result, n) in counts {
            match result {
                "hit" => requests.hit = n,
                "miss" => requests.miss = n,
                "stale" => requests.stale = n,
                _ => requests.bypass = n,
            }
        }
        let routes = self
            .answers
            .policies
            .iter()
            .map(|(route, p)| RouteCache {
                route: route.clone(),
                ttl_seconds: p.ttl.as_secs(),
                stale_if_error_seconds: p.stale_if_error.as_secs(),
                scope: match p.scope {
                    Scope::Client => "client",
                    Scope::Shared => "shared",
                },
            })
            .collect();
        Some(CacheStatus {
            store: info.kind,
            entries: info.entries,
            bytes: info.bytes,
            routes,
            requests,
            stored_bytes,
            saved_usd,
        })
    }
}

/// The cache's section of the page.
pub(super) fn section(out: &mut String, c: &CacheStatus) {
    let held = match (c.entries, c.bytes) {
        (Some(n), Some(b)) => format!(", {n} entries, {b} bytes"),
        _ => String::new(),
    };
    let r = &c.requests;
    let _ = write!(
        out,
        "<section id=\"cache\"><h2>Response cache</h2><p>Store: {}{held}. Since start: \
         {} hits, {} misses, {} served stale, {} bypassed; {} bytes stored; ${} saved.</p>\
         <table><thead><tr><th scope=\"col\">Route</th><th scope=\"col\">TTL</th>\
         <th scope=\"col\">Stale if error</th><th scope=\"col\">Scope</th></tr></thead><tbody>",
        esc(c.store),
        r.hit,
        r.miss,
        r.stale,
        r.bypass,
        c.stored_bytes,
        c.saved_usd,
    );
    for route in &c.routes {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{} s</td><td>{} s</td><td>{}</td></tr>",
            esc(&route.route),
            route.ttl_seconds,
            route.stale_if_error_seconds,
            route.scope
        );
    }
    out.push_str("</tbody></table></section>");
}
