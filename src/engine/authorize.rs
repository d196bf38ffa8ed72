//! A provider's access token made fresh before its request is encoded:
//! fetched when none is held or it is about to expire, by one request at a
//! time (the others wait for it and reuse its token); and a token the
//! provider refused (a 401 before it expired: revoked) dropped and
//! fetched again once ([`renewing`]).

use std::future::Future;
use std::time::Duration;

use crate::error::{ErrorKind, ProviderError};
use crate::platform::{BufferedResponse, Platform};
use crate::provider::Provider;

/// The most of a token endpoint's answer that is read.
const MAX_TOKEN_RESPONSE: usize = 64 << 10;

/// Makes sure `provider` holds a fresh token, if it needs one, within
/// `limit`. Any failure to get one is an [`ErrorKind::Auth`] failure of
/// the provider: the chain fails over and its breaker counts it.
pub(crate) async fn authorize<P: Platform>(
    platform: &P,
    provider: &dyn Provider,
    limit: Duration,
) -> Result<(), ProviderError> {
    let Some(credential) = provider.credential() else {
        return Ok(());
    };
    if credential.is_fresh(platform.now()) {
        return Ok(());
    }
    let _held = credential.refresh_lock().lock().await;
    // Another request may have refreshed it while this one waited.
    let now = platform.now();
    if credential.is_fresh(now) {
        return Ok(());
    }
    let mut http = credential.token_request(now)?;
    http.timeout = Some(limit);
    let fail = |what: String| {
        ProviderError::new(
            ErrorKind::Auth,
            format!("access token request failed: {what}"),
        )
    };
    let resp = platform
        .fetch(http)
        .await
        .map_err(|t| fail(format!("{}: {}", t.kind, t.message)))?;
    let body = resp
        .body
        .read_to_end(MAX_TOKEN_RESPONSE)
        .await
        .map_err(|t| fail(format!("{}: {}", t.kind, t.message)))?;
    let buffered = BufferedResponse {
        status: resp.status,
        headers: resp.headers,
        body,
    };
    credential.accept(&buffered, platform.now())
}

/// Runs `attempt` (which calls `provider`) within `limit`, once a fresh
/// token is held ([`authorize`]; its failure is `fail`'s). When the call
/// ends in a 401 from a provider that holds a token, that token is
/// dropped, unless another request has fetched a new one meanwhile, and
/// `attempt` runs once more in the time left, after a new token is fetched
/// under the single-refresh lock. Only a second 401 is the provider's auth
/// failure. `refused` tells a 401 in `attempt`'s result.
pub(crate) async fn renewing<P, T, F, Fut>(
    platform: &P,
    provider: Option<&dyn Provider>,
    limit: Duration,
    refused: impl Fn(&T) -> bool,
    fail: impl Fn(ProviderError) -> T,
    attempt: F,
) -> T
where
    P: Platform,
    F: Fn(Duration) -> Fut,
    Fut: Future<Output = T>,
{
    let Some(provider) = provider else {
        return attempt(limit).await;
    };
    let started = platform.now();
    let left = |platform: &P| {
        limit.saturating_sub(Duration::from_millis(
            platform.now().saturating_sub(started),
        ))
    };
    if let Err(e) = authorize(platform, provider, limit).await {
        return fail(e);
    }
    let Some(credential) = provider.credential() else {
        return attempt(limit).await;
    };
    let sent = credential.generation();
    let first = attempt(left(platform)).await;
    if !refused(&first) {
        return first;
    }
    credential.forget(sent);
    if let Err(e) = authorize(platform, provider, left(platform)).await {
        return fail(e);
    }
    attempt(left(platform)).await
}

/// Whether `error` is the provider refusing the credentials sent (401).
pub(crate) fn is_refused(error: &ProviderError) -> bool {
    error.status == Some(401)
}
