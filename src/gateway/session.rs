//! The status page's sign-in session: what its cookie holds, and what
//! guards the form that sets it.
//!
//! The cookie never holds a key: it holds `<expiry>.<tag>`, the expiry in
//! Unix milliseconds and the tag its HMAC-SHA256 (base64url) under a key
//! derived from the gateway key that signed in (an HMAC of a fixed label
//! under that key). A session ends at its expiry, or when its key leaves
//! the configuration; the cookie gives away nothing of the key.
//!
//! The form takes a POST from the status page's own origin only (`Origin`,
//! `Sec-Fetch-Site`), and at most [`MAX_FAILURES`] refused keys per
//! [`WINDOW_MS`] per isolate: past that every sign-in is answered 429 until
//! the window ends (the state is two numbers, whatever clients send).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::auth::Auth;
use crate::config::Secret;
use crate::platform::{Headers, UnixMillis};

/// How long a sign-in lasts.
pub(super) const LIFETIME_MS: UnixMillis = 12 * 3_600_000;

/// Refused keys allowed per window.
pub(super) const MAX_FAILURES: u32 = 10;

/// The throttle's window.
pub(super) const WINDOW_MS: UnixMillis = 60_000;

/// What the session key is derived with, from a gateway key.
const LABEL: &[u8] = b"resilient-llm status session v1";

fn mac(key: &Secret) -> Hmac<Sha256> {
    // An HMAC takes a key of any length.
    let mut derive = <Hmac<Sha256> as Mac>::new_from_slice(key.expose().as_bytes())
        .unwrap_or_else(|_| unreachable!());
    derive.update(LABEL);
    let session_key = derive.finalize().into_bytes();
    <Hmac<Sha256> as Mac>::new_from_slice(&session_key).unwrap_or_else(|_| unreachable!())
}

/// The cookie value of a session signed in with `key` at `now`.
pub(super) fn issue(key: &Secret, now: UnixMillis) -> String {
    let expiry = now.saturating_add(LIFETIME_MS).to_string();
    let mut m = mac(key);
    m.update(expiry.as_bytes());
    format!(
        "{expiry}.{}",
        URL_SAFE_NO_PAD.encode(m.finalize().into_bytes())
    )
}

/// Whether `value` is a session one of `keys` signed that has not
/// expired at `now`. Every key is tried, each tag compared in constant time.
pub(super) fn verify(keys: &[Secret], value: &str, now: UnixMillis) -> bool {
    let Some((expiry, tag)) = value.split_once('.') else {
        return false;
    };
    let Ok(until) = expiry.parse::<UnixMillis>() else {
        return false;
    };
    if until <= now || until > now.saturating_add(LIFETIME_MS) {
        return false;
    }
    let Ok(tag) = URL_SAFE_NO_PAD.decode(tag) else {
        return false;
    };
    let mut ok = false;
    for key in keys {
        let mut m = mac(key);
        m.update(expiry.as_bytes());
        ok |= m.verify_slice(&tag).is_ok();
    }
    ok
}

/// Whether the request carries a key in a header, or the cookie `name`
/// with a live session.
pub(super) fn check(auth: &Auth, headers: &Headers, name: &str, now: UnixMillis) -> bool {
    if auth.check(headers) {
        return true;
    }
    let Some(cookies) = headers.get("cookie") else {
        return false;
    };
    let mut ok = false;
    for c in cookie::Cookie::split_parse_encoded(cookies).flatten() {
        if c.name() == name {
            ok |= verify(auth.secrets(), c.value(), now);
        }
    }
    ok
}

/// Whether a sign-in POST comes from the page's own origin: a browser says
/// where a POST comes from (`Sec-Fetch-Site`, `Origin`); one that says
/// another site, or an `Origin` other than this host's, is refused. A
/// client that says neither (not a browser) cannot be led by another site.
pub(super) fn same_origin(headers: &Headers) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        if !site.trim().eq_ignore_ascii_case("same-origin") {
            return false;
        }
    }
    let Some(origin) = headers.get("origin") else {
        return true;
    };
    let Some(host) = headers.get("host").map(str::trim) else {
        return false;
    };
    ["https://", "http://"].iter().any(|scheme| {
        origin
            .trim()
            .strip_prefix(scheme)
            .is_some_and(|o| o.eq_ignore_ascii_case(host))
    })
}

/// Refused sign-ins in the current fixed window.
#[derive(Debug, Default)]
pub(super) struct Throttle {
    since: UnixMillis,
    failures: u32,
}

impl Throttle {
    /// When sign-ins are taken again, while the window is full.
    pub(super) fn blocked(&self, now: UnixMillis) -> Option<UnixMillis> {
        let end = self.since.saturating_add(WINDOW_MS);
        (self.failures >= MAX_FAILURES && now < end).then_some(end)
    }

    /// Counts a refused key.
    pub(super) fn fail(&mut self, now: UnixMillis) {
        if self.failures == 0 || now >= self.since.saturating_add(WINDOW_MS) {
            (self.since, self.failures) = (now, 0);
        }
        self.failures = self.failures.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_signed_expires_and_holds_no_key() {
        let k = Secret::new("gateway-key-1");
        let other = Secret::new("gateway-key-2");
        let v = issue(&k, 1_000);
        assert!(!v.contains("gateway-key"));
        assert!(verify(std::slice::from_ref(&k), &v, 1_000));
        assert!(verify(
            &[other.clone(), k.clone()],
            &v,
            1_000 + LIFETIME_MS - 1
        ));
        assert!(!verify(std::slice::from_ref(&k), &v, 1_000 + LIFETIME_MS));
        assert!(
            !verify(&[other], &v, 1_000),
            "a key removed ends its sessions"
        );
        // Another expiry under the same tag.
        let (_, tag) = v.split_once('.').unwrap();
        let forged = format!("{}.{tag}", 1_000 + LIFETIME_MS - 5);
        assert!(!verify(std::slice::from_ref(&k), &forged, 1_000));
        for bad in [
            "",
            ".",
            "1.",
            ".x",
            "x.y",
            "99999999999999999999999.AAAA",
            "5.!!",
        ] {
            assert!(!verify(std::slice::from_ref(&k), bad, 0), "{bad:?}");
        }
    }

    #[test]
    fn only_the_page_own_origin_may_post() {
        let h = |pairs: &[(&str, &str)]| pairs.iter().copied().collect::<Headers>();
        assert!(same_origin(&h(&[])), "not a browser");
        assert!(same_origin(&h(&[
            ("origin", "https://gw.example"),
            ("host", "gw.example"),
            ("sec-fetch-site", "same-origin")
        ])));
        assert!(!same_origin(&h(&[("sec-fetch-site", "cross-site")])));
        assert!(!same_origin(&h(&[("sec-fetch-site", "same-site")])));
        assert!(!same_origin(&h(&[
            ("origin", "https://evil.example"),
            ("host", "gw.example")
        ])));
        assert!(!same_origin(&h(&[
            ("origin", "null"),
            ("host", "gw.example")
        ])));
        assert!(!same_origin(&h(&[("origin", "https://gw.example")])));
    }

    #[test]
    fn the_throttle_holds_two_numbers_and_a_fixed_window() {
        let mut t = Throttle::default();
        for i in 0..MAX_FAILURES {
            assert_eq!(t.blocked(10), None, "{i}");
            t.fail(10);
        }
        assert_eq!(t.blocked(10), Some(10 + WINDOW_MS));
        assert_eq!(t.blocked(10 + WINDOW_MS), None);
        t.fail(10 + WINDOW_MS);
        assert_eq!(t.blocked(10 + WINDOW_MS), None, "a new window");
    }
}
