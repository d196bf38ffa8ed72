//! The Responses client format's part of the gateway (`POST /v1/responses`):
//! what its answers echo of the request, and the answer rendered as a
//! Response object.
//!
//! An entry that speaks Responses is sent the client's body and its whole
//! answer comes back as it came; the others are reached by translation (to
//! Chat Completions or Messages), with the failover, breaker and
//! commit-point rules of the other formats. The gateway keeps no
//! responses: a request that needs stored state (`previous_response_id`,
//! `conversation`, `store: true`, `item_reference` items) is refused by
//! every translating entry, so it goes only to the Responses-speaking
//! entries, and is a 400 naming the field when its route has none.

use super::http::{Format, Outbound};
use super::render::json_response;
use crate::chat::{ChatRequest, ChatResponse};
use crate::format::responses::{render_response, Echo};

/// What a Response to `request` repeats of it; `None` for a client of
/// another format.
pub(super) fn echo(format: Format, request: &ChatRequest) -> Option<Echo> {
    (format == Format::Responses).then(|| {
        request
            .native
            .as_deref()
            .map(|n| Echo::of(&n.body))
            .unwrap_or_default()
    })
}

/// A whole answer as a Response object, its id from the request's.
pub(super) fn render(
    response: &ChatResponse,
    request_id: &str,
    created: u64,
    echo: Option<&Echo>,
) -> Outbound {
    let fallback = Echo::default();
    json_response(
        200,
        &render_response(response, request_id, created, echo.unwrap_or(&fallback)),
    )
}
