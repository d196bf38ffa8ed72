//! Credentials fetched over HTTP before a request: a key exchanged for a
//! short-lived access token (a Vertex AI service account's).
//!
//! Sans-IO like the adapters: a [`Credential`] builds the token request and
//! reads its answer into its own cache; the engine (`engine/authorize.rs`)
//! does the fetch, only when no fresh token is held, and one at a time, so
//! that the requests of an isolate share one token and one refresh.

use futures_util::lock::Mutex;

use crate::error::ProviderError;
use crate::platform::{BufferedResponse, HttpRequest, UnixMillis};

/// A token a provider needs before [`crate::Provider::encode`] can write
/// its request.
pub trait Credential {
    /// Whether a token good at `now` is held (one that expires shortly
    /// after `now` is not).
    fn is_fresh(&self, now: UnixMillis) -> bool;

    /// The request that asks for a new token at `now`. Its failure is the
    /// provider's [`crate::ErrorKind::Auth`] failure.
    fn token_request(&self, now: UnixMillis) -> Result<HttpRequest, ProviderError>;

    /// Reads the token endpoint's answer into the cache. Anything but a
    /// token is an [`crate::ErrorKind::Auth`] failure whose message holds
    /// neither the key nor a token.
    fn accept(&self, resp: &BufferedResponse, now: UnixMillis) -> Result<(), ProviderError>;

    /// Which token is held: a number that changes with every token
    /// accepted (0 before the first).
    fn generation(&self) -> u64;

    /// Drops the token held if it is still the one of `generation`: the
    /// provider refused it (a 401), so it was revoked before it expired.
    /// A token another request fetched since is kept.
    fn forget(&self, generation: u64);

    /// Held while a token is fetched: a request that finds it taken waits,
    /// then finds the token the holder fetched.
    fn refresh_lock(&self) -> &Mutex<()>;
}
