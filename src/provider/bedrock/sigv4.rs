//! AWS Signature Version 4, sans-IO: a request's canonical form, the
//! string to sign and the `Authorization` header, over RustCrypto's
//! `sha2` and `hmac`. The time is an argument (the platform's clock), so
//! the same request signed at the same instant gives the same signature,
//! which is what AWS's published test vectors check.
//!
//! Paths are encoded the way every AWS service but S3 expects: the path as
//! sent (already percent-encoded, a model id's `:` as `%3A`) is encoded
//! once more in the canonical request.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::platform::UnixMillis;
use crate::secret::Secret;

/// The algorithm named in the string to sign and the header.
const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// An access key, with the session token of temporary credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `AKIA…` / `ASIA…`: not secret by AWS's rules, but kept out of logs
    /// all the same.
    pub access_key_id: Secret,
    /// The key that signs.
    pub secret_access_key: Secret,
    /// Sent as `x-amz-security-token` when set.
    pub session_token: Option<Secret>,
}

/// What is signed: the request as it will be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningRequest<'a> {
    /// `GET`, `POST`.
    pub method: &'a str,
    /// The path as sent, `/` when empty.
    pub path: &'a str,
    /// The query without `?`, as sent (may be empty).
    pub query: &'a str,
    /// Every signed header, names in any case (`host` among them).
    pub headers: &'a [(&'a str, &'a str)],
    /// The body.
    pub payload: &'a [u8],
}

/// Where and when: the credential scope and the request's time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope<'a> {
    /// `us-east-1`.
    pub region: &'a str,
    /// `bedrock` (the signing name, not the host's `bedrock-runtime`).
    pub service: &'a str,
    /// `20150830T123600Z`.
    pub amz_date: String,
}

impl Scope<'_> {
    /// `20150830`.
    fn date(&self) -> &str {
        self.amz_date.get(..8).unwrap_or_default()
    }

    /// `20150830/us-east-1/service/aws4_request`.
    fn credential_scope(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            self.date(),
            self.region,
            self.service
        )
    }
}

/// The request's time as SigV4 writes it: `YYYYMMDD'T'HHMMSS'Z'` in UTC.
pub fn amz_date(now: UnixMillis) -> String {
    let secs = now / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    // In range by construction: 1..=12 and 1..=31.
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

/// Lower-case hex of a SHA-256 digest.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length: `new_from_slice` cannot fail here.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => return Vec::new(),
    };
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// RFC 3986 percent-encoding of everything but the unreserved characters
/// (and `/` where `keep_slash`), upper-case hex, as SigV4 asks.
fn uri_encode(s: &str, keep_slash: bool) -> String {
    encode_bytes(s.as_bytes(), keep_slash)
}

fn encode_bytes(bytes: &[u8], keep_slash: bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        let unreserved = b.is_ascii_alphanumeric() || b"-._~".contains(&b);
        if unreserved || (keep_slash && b == b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `%XX` escapes as the bytes they stand for (anything else as it is), so
/// a query written encoded or not is encoded exactly once.
fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (other, _) => {
                out.push(other);
                i += 1;
            }
        }
    }
    out
}

/// The canonical query: each name and value encoded once, sorted by name
/// then value, joined by `&`.
fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                encode_bytes(&percent_decode(k), false),
                encode_bytes(&percent_decode(v), false),
            )
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// The canonical headers block and the signed-headers list: names lower
/// case and sorted, values trimmed with inner runs of spaces collapsed,
/// repeated names joined with `,`.
fn canonical_headers(headers: &[(&str, &str)]) -> (String, String) {
    let mut sorted: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| {
            let value = v.split_whitespace().collect::<Vec<_>>().join(" ");
            (n.to_ascii_lowercase(), value)
        })
        .collect();
    // Stable: repeated names keep their order.
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut block = String::new();
    let mut names: Vec<&str> = Vec::new();
    for (name, value) in &sorted {
        if names.last() == Some(&name.as_str()) {
            block.pop(); // the previous line's '\n'
            block.push(',');
        } else {
            names.push(name);
            block.push_str(name);
            block.push(':');
        }
        block.push_str(value);
        block.push('\n');
    }
    (block, names.join(";"))
}

/// The canonical request.
pub fn canonical_request(req: &SigningRequest<'_>) -> String {
    let path = if req.path.is_empty() { "/" } else { req.path };
    let (headers, signed) = canonical_headers(req.headers);
    format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        req.method,
        uri_encode(path, true),
        canonical_query(req.query),
        headers,
        signed,
        sha256_hex(req.payload)
    )
}

/// The string to sign for a canonical request.
pub fn string_to_sign(scope: &Scope<'_>, canonical_request: &str) -> String {
    format!(
        "{ALGORITHM}\n{}\n{}\n{}",
        scope.amz_date,
        scope.credential_scope(),
        sha256_hex(canonical_request.as_bytes())
    )
}

/// The signature of a string to sign: HMACs chained from the secret key
/// through date, region, service and `aws4_request`.
pub fn signature(secret_access_key: &str, scope: &Scope<'_>, string_to_sign: &str) -> String {
    let k_date = hmac(
        format!("AWS4{secret_access_key}").as_bytes(),
        scope.date().as_bytes(),
    );
    let k_region = hmac(&k_date, scope.region.as_bytes());
    let k_service = hmac(&k_region, scope.service.as_bytes());
    let k_signing = hmac(&k_service, b"aws4_request");
    hex(&hmac(&k_signing, string_to_sign.as_bytes()))
}

/// The `Authorization` header's value for `req`.
pub fn authorization(creds: &Credentials, scope: &Scope<'_>, req: &SigningRequest<'_>) -> String {
    let canonical = canonical_request(req);
    let sts = string_to_sign(scope, &canonical);
    let sig = signature(creds.secret_access_key.expose(), scope, &sts);
    let (_, signed) = canonical_headers(req.headers);
    format!(
        "{ALGORITHM} Credential={}/{}, SignedHeaders={signed}, Signature={sig}",
        creds.access_key_id.expose(),
        scope.credential_scope()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(amz_date(1_440_938_160_000), "20150830T123600Z");
        assert_eq!(amz_date(0), "19700101T000000Z");
        assert_eq!(amz_date(951_782_400_000), "20000229T000000Z");
        assert_eq!(amz_date(4_102_444_799_999), "20991231T235959Z");
    }

    #[test]
    fn a_sent_path_is_encoded_again_and_repeated_headers_join() {
        assert_eq!(
            uri_encode("/model/anthropic.claude-v2%3A1/invoke", true),
            "/model/anthropic.claude-v2%253A1/invoke"
        );
        let (block, signed) = canonical_headers(&[("X-B", " a  b "), ("x-a", "1"), ("x-b", "c")]);
        assert_eq!(block, "x-a:1\nx-b:a b,c\n");
        assert_eq!(signed, "x-a;x-b");
    }
}
