//! Gateway auth: the client keys accepted, compared in constant time.

use crate::config::Secret;
use crate::platform::Headers;

/// Gateway auth: the client keys accepted, or the explicit opt-out.
#[derive(Clone)]
pub struct Auth {
    keys: Vec<Secret>,
    open: bool,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("keys", &self.keys.len())
            .field("open", &self.open)
            .finish()
    }
}

impl Auth {
    /// Accepts any of `keys`.
    pub fn keys(keys: Vec<Secret>) -> Self {
        Auth { keys, open: false }
    }

    /// Accepts every request. For local demos only.
    pub fn open() -> Self {
        Auth {
            keys: Vec::new(),
            open: true,
        }
    }

    /// Whether auth is switched off.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Whether the request carries an accepted key, as
    /// `Authorization: Bearer <key>` or `x-api-key: <key>`. Every key is
    /// compared in constant time, all of them every time.
    pub fn check(&self, headers: &Headers) -> bool {
        if self.open {
            return true;
        }
        let mut ok = false;
        for candidate in offered(headers).into_iter().flatten() {
            ok |= self.accepts(candidate);
        }
        ok
    }

    /// Whether `candidate` is an accepted key, compared in constant time
    /// with every key.
    pub fn accepts(&self, candidate: &str) -> bool {
        let mut ok = self.open;
        for key in &self.keys {
            ok |= ct_eq(candidate.as_bytes(), key.expose().as_bytes());
        }
        ok
    }

    /// The accepted key a request was let in with (the bearer's, else
    /// `x-api-key`'s), compared in constant time like [`Auth::check`].
    pub(super) fn matched(&self, headers: &Headers) -> Option<&Secret> {
        let [bearer, header] = offered(headers).map(|c| c.and_then(|c| self.find(c)));
        bearer.or(header)
    }

    /// The keys accepted.
    pub(super) fn secrets(&self) -> &[Secret] {
        &self.keys
    }

    /// The accepted key `candidate` is, compared in constant time with
    /// every key.
    pub(super) fn find(&self, candidate: &str) -> Option<&Secret> {
        let mut found = None;
        for key in &self.keys {
            if ct_eq(candidate.as_bytes(), key.expose().as_bytes()) {
                found = Some(key);
            }
        }
        found
    }
}

/// The keys a request offers: its `Authorization: Bearer` and its
/// `x-api-key`.
fn offered(headers: &Headers) -> [Option<&str>; 2] {
    let bearer = headers
        .get("authorization")
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    [bearer, headers.get("x-api-key").map(str::trim)]
}

/// Compares two byte strings in time that depends only on their lengths.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_comparison_is_still_a_comparison() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"abcd"));
        assert!(!ct_eq(b"", b"a"));
        assert!(ct_eq(b"", b""));
    }

    #[test]
    fn keys_in_either_header() {
        let auth = Auth::keys(vec![Secret::new("k1"), Secret::new("k2")]);
        let h = |n: &str, v: &str| [(n, v)].into_iter().collect::<Headers>();
        assert!(auth.check(&h("authorization", "Bearer k2")));
        assert!(auth.check(&h("x-api-key", "k1")));
        assert!(!auth.check(&h("authorization", "k1")));
        assert!(!auth.check(&h("x-api-key", "k3")));
        assert!(!Auth::keys(vec![]).check(&h("x-api-key", "")));
    }
}
