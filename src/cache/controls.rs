//! What a client asks of the cache: `cache-control: no-cache` (do not
//! serve a stored answer, fresh or stale), `no-store` (do not store this
//! one), and `x-cache-ttl` (keep it fresh for at most this many seconds).

use std::time::Duration;

use headers::{CacheControl, HeaderMapExt};

use crate::platform::Headers;

/// The client's cache controls on one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Controls {
    /// Skip the lookup (the answer is still stored, unless `no_store`).
    pub no_cache: bool,
    /// Skip the write.
    pub no_store: bool,
    /// The longest TTL the client wants for this answer.
    pub ttl: Option<Duration>,
}

impl Controls {
    /// The controls in `headers`. A `cache-control` the HTTP crates cannot
    /// read is taken as `no-cache, no-store`: a client that tried to say
    /// something is not served or stored against its intent. An
    /// `x-cache-ttl` that is not a whole number of seconds is ignored.
    pub fn of(headers: &Headers) -> Controls {
        let ttl = headers
            .get("x-cache-ttl")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let Some(value) = headers.get("cache-control") else {
            return Controls {
                ttl,
                ..Controls::default()
            };
        };
        // Directives are case-insensitive (RFC 9111 §5.2); the crate
        // compares them as written.
        let mut map = http::HeaderMap::new();
        let parsed = http::HeaderValue::from_str(&value.to_ascii_lowercase())
            .ok()
            .and_then(|v| {
                map.insert(http::header::CACHE_CONTROL, v);
                map.typed_get::<CacheControl>()
            });
        match parsed {
            Some(cc) => Controls {
                no_cache: cc.no_cache(),
                no_store: cc.no_store(),
                ttl,
            },
            None => Controls {
                no_cache: true,
                no_store: true,
                ttl,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pairs: &[(&str, &str)]) -> Controls {
        Controls::of(&pairs.iter().copied().collect())
    }

    #[test]
    fn directives_and_ttl() {
        assert_eq!(of(&[]), Controls::default());
        let c = of(&[("cache-control", "no-cache")]);
        assert!(c.no_cache && !c.no_store);
        let c = of(&[("cache-control", "No-Store, max-age=0")]);
        assert!(!c.no_cache && c.no_store);
        let c = of(&[
            ("cache-control", "no-cache, no-store"),
            ("x-cache-ttl", " 30 "),
        ]);
        assert!(c.no_cache && c.no_store);
        assert_eq!(c.ttl, Some(Duration::from_secs(30)));
        assert_eq!(of(&[("x-cache-ttl", "soon")]).ttl, None);
        assert_eq!(of(&[("x-cache-ttl", "-5")]).ttl, None);
    }

    #[test]
    fn unreadable_cache_control_serves_and_stores_nothing() {
        let c = of(&[("cache-control", "no-cache\u{7f}")]);
        assert!(c.no_cache && c.no_store);
    }
}
