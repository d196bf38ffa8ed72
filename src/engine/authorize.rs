//! A provider's access token made fresh before its request is encoded:
//! fetched when none is held or it is about to expire, by one request at a
//! time (the others wait for it and reuse its token).

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
