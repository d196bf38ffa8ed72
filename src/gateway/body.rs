//! A request's body: read within the size limit and the body deadline, and
//! read into what the endpoint takes, or refused in the client's format.

use std::time::Duration;

use super::http::{Format, Outbound};
use super::log::LogLine;
use super::proxy::Gateway;
use super::render::{error_response, too_large};
use crate::engine::store::BreakerStore;
use crate::engine::timeout::timeout;
use crate::format::{FormatError, FormatErrorKind};
use crate::platform::{Body, Headers, Platform};

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// The request's body, read within the size limit (a `Content-Length`
    /// over it is refused before the body is kept) and within
    /// [`BODY_DEADLINE`] (a 408), then by `parse` (a 400), or the answer
    /// that refuses it, in `format`.
    pub(super) async fn read_request<T>(
        &self,
        format: Format,
        headers: &Headers,
        body: Body,
        log: &mut LogLine<'_>,
        parse: impl FnOnce(&[u8]) -> Result<T, FormatError>,
    ) -> Result<T, Outbound> {
        let limit = self.client.policy().max_request_bytes;
        let declared = headers
            .get("content-length")
            .and_then(|v| v.trim().parse::<u64>().ok());
        let over = declared.is_some_and(|n| n > limit as u64);
        let Some(read) = self.read_in_time(body, limit, over).await else {
            log.error = Some("body_timeout");
            return Err(error_response(
                format,
                408,
                &format!(
                    "the request body did not arrive within {} s",
                    BODY_DEADLINE.as_secs()
                ),
                None,
            ));
        };
        let bytes = match read {
            Ok(b) => b,
            Err(BodyError::TooLarge) => {
                log.error = Some("request_too_large");
                return Err(too_large(format, limit));
            }
            Err(BodyError::Unreadable) => {
                log.error = Some("bad_body");
                return Err(error_response(
                    format,
                    400,
                    "the request body could not be read",
                    None,
                ));
            }
        };
        parse(&bytes).map_err(|e| {
            log.error = Some(match e.kind {
                FormatErrorKind::Malformed => "malformed_request",
                FormatErrorKind::Unsupported => "unsupported_request",
            });
            error_response(format, 400, &e.to_string(), Some("invalid_request"))
        })
    }
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// [`read_body`] within [`BODY_DEADLINE`]; `None` when it passed first.
    pub(super) async fn read_in_time(
        &self,
        body: Body,
        limit: usize,
        over: bool,
    ) -> Option<Result<Vec<u8>, BodyError>> {
        let read = read_body(body, limit, over);
        timeout(self.client.platform().sleep(BODY_DEADLINE), read)
            .await
            .ok()
    }
}

/// The most of an oversized body read (and thrown away) before answering
/// 413: a client still sending when the answer comes may see a reset
/// instead of the 413.
const DRAIN_CAP: usize = 16 << 20;

/// The longest a request body may take to arrive, all of it: a client
/// sending a byte every few seconds holds a connection and its buffer no
/// longer than this. At the default `maxRequestBytes` (1 MiB) it asks for
/// 17 KiB/s, which a slow mobile uplink still gives.
const BODY_DEADLINE: Duration = Duration::from_secs(60);

pub(super) enum BodyError {
    TooLarge,
    Unreadable,
}

/// Reads the body up to `limit` bytes. Over it (or when `over` already),
/// keeps nothing but reads on to the end (up to [`DRAIN_CAP`]) and fails
/// with `TooLarge`.
async fn read_body(mut body: Body, limit: usize, mut over: bool) -> Result<Vec<u8>, BodyError> {
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = body.chunk().await {
        let Ok(chunk) = chunk else {
            return Err(if over {
                BodyError::TooLarge
            } else {
                BodyError::Unreadable
            });
        };
        seen = seen.saturating_add(chunk.len());
        if !over {
            buf.extend_from_slice(&chunk);
            if buf.len() > limit {
                over = true;
                buf = Vec::new();
            }
        }
        if seen > DRAIN_CAP {
            break;
        }
    }
    if over {
        Err(BodyError::TooLarge)
    } else {
        Ok(buf)
    }
}
