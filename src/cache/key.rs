//! The key an answer is stored under: a SHA-256 digest of everything that
//! decides the answer and nothing that does not.
//!
//! In order, each part length-prefixed so that no two different lists of
//! parts write the same bytes: the key's version, the route, the client's
//! format, the tenant (a digest of the client's key when the scope is
//! `client`; never the key itself), the provider-facing headers the client
//! sent ([`crate::gateway::FORWARDED_HEADERS`]), and the request body in
//! RFC 8785 canonical form (keys sorted, numbers written one way: `1`,
//! `1.0` and `10e-1` are one number) without `stream`, `stream_options`,
//! `user` and `metadata`, which change how an answer is delivered or
//! attributed, not what it says.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Top-level body fields left out of the key.
pub const EXCLUDED: &[&str] = &["stream", "stream_options", "user", "metadata"];

/// The largest integer JSON numbers keep exactly as canonical JSON writes
/// them (IEEE doubles): a body with a larger one (a `seed`) is not cached,
/// since two different integers would write the same key.
const EXACT: u64 = 1 << 53;

/// Whose answers a request may be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// Only answers to the same client key (the default).
    #[default]
    Client,
    /// Answers to any client of the gateway.
    Shared,
}

/// What a key is made of besides the body.
#[derive(Debug, Clone, Copy)]
pub struct KeyParts<'a> {
    /// The route the request names.
    pub route: &'a str,
    /// The client's wire format (`openai`, `anthropic`, `responses`).
    pub format: &'a str,
    /// The tenant: a digest naming the client (scope `client`), or `None`
    /// (scope `shared`).
    pub tenant: Option<&'a [u8]>,
    /// Headers forwarded to providers, as `(name, value)`.
    pub headers: &'a [(String, String)],
}

/// The key of a request with `body` (the client's JSON object), as 64
/// lower-case hex digits; `None` when the body cannot be canonicalised (an
/// integer beyond 2⁵³, which canonical JSON would round).
pub fn cache_key(parts: KeyParts<'_>, body: &Map<String, Value>) -> Option<String> {
    let kept = Kept(body);
    if kept.entries().any(|(_, v)| !exact(v)) {
        return None;
    }
    let canonical = serde_json_canonicalizer::to_vec(&kept).ok()?;
    let mut h = Sha256::new();
    part(&mut h, b"resilient-llm cache v1");
    part(&mut h, parts.route.as_bytes());
    part(&mut h, parts.format.as_bytes());
    match parts.tenant {
        Some(t) => {
            part(&mut h, b"client");
            part(&mut h, t);
        }
        None => part(&mut h, b"shared"),
    }
    let mut headers: Vec<&(String, String)> = parts.headers.iter().collect();
    headers.sort();
    part(&mut h, &(headers.len() as u64).to_be_bytes());
    for (name, value) in headers {
        part(&mut h, name.to_ascii_lowercase().as_bytes());
        part(&mut h, value.as_bytes());
    }
    part(&mut h, &canonical);
    Some(hex(&h.finalize()))
}

/// The body less [`EXCLUDED`], serialized as a view (nothing copied).
struct Kept<'a>(&'a Map<String, Value>);

impl Kept<'_> {
    fn entries(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0
            .iter()
            .filter(|(k, _)| !EXCLUDED.contains(&k.as_str()))
    }
}

impl Serialize for Kept<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for (k, v) in self.entries() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// The tenant digest of a client key: what the key names, never the key.
pub fn tenant_of(client_key: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    part(&mut h, b"resilient-llm cache tenant");
    part(&mut h, client_key);
    h.finalize().into()
}

fn part(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_be_bytes());
    h.update(bytes);
}

/// Whether every number in `v` survives canonical JSON exactly.
fn exact(v: &Value) -> bool {
    match v {
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u <= EXACT,
            (None, Some(i)) => i.unsigned_abs() <= EXACT,
            (None, None) => n.as_f64().is_some_and(f64::is_finite),
        },
        Value::Array(items) => items.iter().all(exact),
        Value::Object(map) => map.values().all(exact),
        _ => true,
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}"); // a String takes every write
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(json: &str) -> Map<String, Value> {
        match serde_json::from_str(json).unwrap() {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn parts<'a>(route: &'a str, tenant: Option<&'a [u8]>) -> KeyParts<'a> {
        KeyParts {
            route,
            format: "openai",
            tenant,
            headers: &[],
        }
    }

    fn key(json: &str) -> String {
        cache_key(parts("default", None), &body(json)).unwrap()
    }

    #[test]
    fn the_same_meaning_is_the_same_key() {
        let a = key(r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":1}"#);
        let b = key(
            r#"{ "temperature" : 1.0, "messages":[{"content":"hi","role":"user"}], "model":"m"}"#,
        );
        let c = key(
            r#"{"model":"m","temperature":10e-1,"messages":[{"role":"user","content":"h\u0069"}],
            "stream":true,"stream_options":{"include_usage":true},"user":"u-1","metadata":{"a":"b"}}"#,
        );
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_eq!(a.len(), 64);
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }

    #[test]
    fn every_answer_changing_part_is_another_key() {
        let base = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let k = key(base);
        for other in [
            r#"{"model":"n","messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi "}]}"#,
            r#"{"model":"m","messages":[{"role":"system","content":"hi"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":1}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"n":2}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata2":{}}"#,
        ] {
            assert_ne!(key(other), k, "{other}");
        }
        let b = body(base);
        let with = |p: KeyParts<'_>| cache_key(p, &b).unwrap();
        assert_ne!(with(parts("other", None)), k);
        assert_ne!(
            with(KeyParts {
                format: "anthropic",
                ..parts("default", None)
            }),
            k
        );
        let t1 = tenant_of(b"key-1");
        let t2 = tenant_of(b"key-2");
        assert_ne!(with(parts("default", Some(&t1))), k);
        assert_ne!(
            with(parts("default", Some(&t1))),
            with(parts("default", Some(&t2)))
        );
        let beta = [("anthropic-beta".to_string(), "x".to_string())];
        assert_ne!(
            with(KeyParts {
                headers: &beta,
                ..parts("default", None)
            }),
            k
        );
    }

    #[test]
    fn parts_do_not_run_into_each_other() {
        let b = body(r#"{"model":"m"}"#);
        let a = cache_key(parts("ab", None), &b);
        let c = cache_key(
            KeyParts {
                format: "bopenai",
                ..parts("a", None)
            },
            &b,
        );
        assert_ne!(a, c);
    }

    #[test]
    fn integers_canonical_json_would_round_are_not_cached() {
        let p = parts("default", None);
        assert!(cache_key(p, &body(r#"{"seed":9007199254740992}"#)).is_some());
        assert!(cache_key(p, &body(r#"{"seed":9007199254740993}"#)).is_none());
        assert!(cache_key(p, &body(r#"{"x":[{"y":-9007199254740993}]}"#)).is_none());
        assert!(cache_key(p, &body(r#"{"x":0.1}"#)).is_some());
    }

    #[test]
    fn the_tenant_digest_is_not_the_key() {
        let t = tenant_of(b"sk-secret");
        assert!(!t.windows(9).any(|w| w == b"sk-secret"));
        assert_eq!(t, tenant_of(b"sk-secret"));
    }
}
