//! A Google service account's key exchanged for an OAuth2 access token:
//! a JWT signed RS256 with the key, posted to the key's `token_uri`
//! (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`), and the
//! token it gives kept until shortly before it expires.
//!
//! The key is read once, when the configuration is; the token is held per
//! isolate (one [`ServiceAccount`] per configured provider). Neither
//! appears in a `Debug` output or an error message.

use std::cell::{Cell, RefCell};
use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use futures_util::lock::Mutex;
use rsa::pkcs1v15::SigningKey;
use rsa::pkcs8::DecodePrivateKey;
use rsa::sha2::Sha256;
use rsa::signature::{SignatureEncoding, Signer};
use rsa::RsaPrivateKey;
use serde::{Deserialize, Serialize};

use crate::error::{ErrorKind, ProviderError};
use crate::platform::{BufferedResponse, Headers, HttpRequest, UnixMillis};
use crate::provider::classify::truncate;
use crate::provider::credential::Credential;
use crate::secret::Secret;

/// The scope asked for: every Google Cloud API, Vertex AI's included.
pub(crate) const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// How long an assertion is valid: Google takes at most one hour.
const ASSERTION_LIFETIME_SECS: u64 = 3600;

/// A token is renewed this long before it expires (or at half its
/// lifetime, if that is shorter), so that no request leaves with one that
/// expires on the way.
const RENEW_BEFORE_MS: u64 = 5 * 60 * 1000;

/// The fields of a service-account key file that are used.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_email: String,
    private_key: Secret,
    private_key_id: Option<String>,
    token_uri: String,
}

/// The JWT header, in the order written.
#[derive(Serialize)]
struct Header<'a> {
    alg: &'static str,
    typ: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kid: Option<&'a str>,
}

/// The JWT claims, in the order written.
#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

/// The token endpoint's answer.
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: Option<String>,
    expires_in: Option<u64>,
    token_type: Option<String>,
}

/// The token endpoint's error (RFC 6749 §5.2).
#[derive(Deserialize)]
struct TokenError {
    error: Option<String>,
    error_description: Option<String>,
}

/// A token and when it expires.
struct Held {
    token: Secret,
    renew_at: UnixMillis,
}

/// A service account: its key, and the access token last obtained with it.
pub struct ServiceAccount {
    email: String,
    key_id: Option<String>,
    token_uri: String,
    key: SigningKey<Sha256>,
    held: RefCell<Option<Held>>,
    /// Bumped by every token accepted (see [`Credential::generation`]).
    generation: Cell<u64>,
    refresh: Mutex<()>,
}

impl fmt::Debug for ServiceAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceAccount")
            .field("email", &self.email)
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

impl ServiceAccount {
    /// Reads a service-account key file (the JSON Google Cloud gives). The
    /// error names what is wrong, never a value from the file.
    pub fn from_json(json: &str) -> Result<Self, String> {
        let file: KeyFile = serde_json::from_str(json).map_err(|e| {
            // serde_json's message may quote a value: only its category
            // and place are kept.
            format!(
                "is not a service-account key file ({:?} error at line {}, column {}; \
                 client_email, private_key and token_uri are required)",
                e.classify(),
                e.line(),
                e.column()
            )
        })?;
        if file.kind.as_deref().is_some_and(|k| k != "service_account") {
            return Err(
                "is not a service-account key (\"type\" is not \"service_account\")".into(),
            );
        }
        if file.client_email.trim().is_empty() {
            return Err("has an empty client_email".into());
        }
        let uri = &file.token_uri;
        if !(uri.starts_with("https://") || uri.starts_with("http://")) {
            return Err("has a token_uri that is not an http(s) URL".into());
        }
        let key = RsaPrivateKey::from_pkcs8_pem(file.private_key.expose())
            .map_err(|_| "has a private_key that is not an RSA key in PKCS#8 PEM".to_string())?;
        Ok(ServiceAccount {
            email: file.client_email,
            key_id: file.private_key_id.filter(|k| !k.is_empty()),
            token_uri: file.token_uri,
            key: SigningKey::new(key),
            held: RefCell::new(None),
            generation: Cell::new(0),
            refresh: Mutex::new(()),
        })
    }

    /// The service account's email.
    pub fn email(&self) -> &str {
        &self.email
    }

    /// The signed JWT asserting this account at `now` (seconds of the
    /// platform's clock): `header.claims.signature`, each base64url.
    pub fn assertion(&self, now: UnixMillis) -> String {
        let iat = now / 1000;
        let header = Header {
            alg: "RS256",
            typ: "JWT",
            kid: self.key_id.as_deref(),
        };
        let claims = Claims {
            iss: &self.email,
            scope: SCOPE,
            aud: &self.token_uri,
            iat,
            exp: iat + ASSERTION_LIFETIME_SECS,
        };
        let mut jwt = segment(&header);
        jwt.push('.');
        jwt.push_str(&segment(&claims));
        let signature = self.key.sign(jwt.as_bytes());
        jwt.push('.');
        jwt.push_str(&URL_SAFE_NO_PAD.encode(signature.to_bytes()));
        jwt
    }

    /// The token held, if it is good at `now`.
    pub fn token(&self, now: UnixMillis) -> Option<Secret> {
        let held = self.held.borrow();
        held.as_ref()
            .filter(|h| now < h.renew_at)
            .map(|h| h.token.clone())
    }

    /// The token held, however near its renewal: the one to send right
    /// after [`Credential::is_fresh`] said it was good.
    pub fn current(&self) -> Option<Secret> {
        self.held.borrow().as_ref().map(|h| h.token.clone())
    }

    fn auth_error(&self, what: impl fmt::Display) -> ProviderError {
        ProviderError::new(
            ErrorKind::Auth,
            format!("no access token for service account {}: {what}", self.email),
        )
    }
}

/// One JWT segment: compact JSON, base64url without padding.
fn segment(value: &impl Serialize) -> String {
    // Serializing these plain structs of strings and numbers cannot fail.
    let json = serde_json::to_vec(value).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

impl Credential for ServiceAccount {
    fn is_fresh(&self, now: UnixMillis) -> bool {
        self.held
            .borrow()
            .as_ref()
            .is_some_and(|h| now < h.renew_at)
    }

    fn token_request(&self, now: UnixMillis) -> Result<HttpRequest, ProviderError> {
        // A JWT is base64url segments joined by dots: nothing in it needs
        // escaping in a form body, and the grant type is written escaped.
        let body = format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={}",
            self.assertion(now)
        );
        let mut headers = Headers::new();
        headers.insert("content-type", "application/x-www-form-urlencoded");
        Ok(HttpRequest {
            method: "POST".into(),
            url: self.token_uri.clone(),
            headers,
            body: body.into_bytes(),
            timeout: None,
            omitted: Vec::new(),
        })
    }

    fn accept(&self, resp: &BufferedResponse, now: UnixMillis) -> Result<(), ProviderError> {
        if !(200..=299).contains(&resp.status) {
            let detail = match serde_json::from_slice::<TokenError>(&resp.body) {
                Ok(TokenError {
                    error: Some(code),
                    error_description,
                }) => match error_description {
                    Some(d) => format!("{code}: {d}"),
                    None => code,
                },
                Ok(_) | Err(_) => "no error code".into(),
            };
            let e = self.auth_error(format!(
                "the token endpoint answered HTTP {} ({})",
                resp.status,
                truncate(&detail)
            ));
            return Err(e.with_status(resp.status));
        }
        let answer: TokenAnswer = serde_json::from_slice(&resp.body)
            .map_err(|_| self.auth_error("the token endpoint's answer is not a token"))?;
        if answer
            .token_type
            .as_deref()
            .is_some_and(|t| !t.eq_ignore_ascii_case("bearer"))
        {
            return Err(
                self.auth_error("the token endpoint gave a token that is not a bearer token")
            );
        }
        let (Some(token), Some(expires_in)) = (answer.access_token, answer.expires_in) else {
            return Err(
                self.auth_error("the token endpoint's answer lacks access_token or expires_in")
            );
        };
        if token.is_empty() || token.contains(|c: char| c.is_control() || c == ' ') {
            return Err(self.auth_error("the token endpoint gave an unusable token"));
        }
        let lifetime = expires_in.saturating_mul(1000);
        let renew_at = now.saturating_add(lifetime - RENEW_BEFORE_MS.min(lifetime / 2));
        *self.held.borrow_mut() = Some(Held {
            token: Secret::new(token),
            renew_at,
        });
        self.generation.set(self.generation.get().wrapping_add(1));
        Ok(())
    }

    fn generation(&self) -> u64 {
        self.generation.get()
    }

    fn forget(&self, generation: u64) {
        if self.generation.get() == generation {
            *self.held.borrow_mut() = None;
        }
    }

    fn refresh_lock(&self) -> &Mutex<()> {
        &self.refresh
    }
}
