//! Gateway auth: the client keys accepted, compared in constant time, and
//! the client each belongs to.

use crate::config::Secret;
use crate::platform::Headers;

/// Gateway auth: the client keys accepted, or the explicit opt-out.
#[derive(Clone)]
pub struct Auth {
    /// Each key, and the index of its client in the gateway's clients.
    keys: Vec<(Secret, usize)>,
    /// Every key, in the order of `keys`.
    secrets: Vec<Secret>,
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
    /// Accepts any of `keys`, all of one client.
    pub fn keys(keys: Vec<Secret>) -> Self {
        Self::clients(keys.into_iter().map(|k| (k, 0)).collect())
    }

    /// Accepts any of `keys`, each of the client at its index.
    pub(crate) fn clients(keys: Vec<(Secret, usize)>) -> Self {
        Auth {
            secrets: keys.iter().map(|(k, _)| k.clone()).collect(),
            keys,
            open: false,
        }
    }

    /// Accepts every request. For local demos only.
    pub fn open() -> Self {
        Auth {
            keys: Vec::new(),
            secrets: Vec::new(),
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
        self.open || self.find(candidate).is_some()
    }

    /// The index of the client a request's key belongs to (the bearer's,
    /// else `x-api-key`'s), compared in constant time like
    /// [`Auth::check`]; `None` without an accepted key, and always when
    /// auth is switched off.
    pub(crate) fn client_of(&self, headers: &Headers) -> Option<usize> {
        let [bearer, header] = offered(headers).map(|c| c.and_then(|c| self.position(c)));
        bearer.or(header).map(|i| self.keys[i].1)
    }

    /// The accepted key a request was let in with (the bearer's, else
    /// `x-api-key`'s), compared in constant time like [`Auth::check`].
    pub(super) fn matched(&self, headers: &Headers) -> Option<&Secret> {
        let [bearer, header] = offered(headers).map(|c| c.and_then(|c| self.find(c)));
        bearer.or(header)
    }

    /// The keys accepted.
    pub(super) fn secrets(&self) -> &[Secret] {
        &self.secrets
    }

    /// The accepted key `candidate` is, compared in constant time with
    /// every key.
    pub(super) fn find(&self, candidate: &str) -> Option<&Secret> {
        self.position(candidate).map(|i| &self.secrets[i])
    }

    /// Where `candidate` is among the keys, compared in constant time with
    /// every one.
    fn position(&self, candidate: &str) -> Option<usize> {
        let mut found = None;
        for (i, key) in self.secrets.iter().enumerate() {
            if ct_eq(candidate.as_bytes(), key.expose().as_bytes()) {
                found = Some(i);
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

    #[test]
    fn a_key_names_its_client_and_the_bearer_comes_first() {
        let auth = Auth::clients(vec![
            (Secret::new("a1"), 0),
            (Secret::new("b1"), 1),
            (Secret::new("a2"), 0),
        ]);
        let h = |pairs: &[(&str, &str)]| pairs.iter().copied().collect::<Headers>();
        assert_eq!(
            auth.client_of(&h(&[("authorization", "Bearer a2")])),
            Some(0)
        );
        assert_eq!(auth.client_of(&h(&[("x-api-key", "b1")])), Some(1));
        let both = h(&[("authorization", "Bearer b1"), ("x-api-key", "a1")]);
        assert_eq!(auth.client_of(&both), Some(1));
        assert_eq!(auth.client_of(&h(&[("x-api-key", "c1")])), None);
        assert_eq!(Auth::open().client_of(&h(&[("x-api-key", "a1")])), None);
    }
}
