//! Opening one streaming attempt: the body of a 2xx response, the
//! classified error of any other, or a custom provider's whole answer as
//! the items of a stream.

use std::collections::VecDeque;
use std::time::Duration;

use super::item::StreamItem;
use crate::chat::{ChatRequest, ChatResponse, Delta, FinishReason};
use crate::engine::authorize::{authorize, is_refused, renewing};
use crate::engine::core::Core;
use crate::engine::route::Keyed;
use crate::engine::store::BreakerStore;
use crate::engine::timeout::timeout;
use crate::error::{ErrorKind, ProviderError};
use crate::platform::{Body, BufferedResponse, Platform};
use crate::provider::Upstream;
use crate::trace::AttemptTrace;

/// The result of opening an attempt: the body, the deltas and the hints
/// left out; or the error and whether the request reached the provider.
type Opened = Result<(Option<Body>, VecDeque<StreamItem>, Vec<String>), (ProviderError, bool)>;

/// Opens one streaming attempt at `entry` within `limit`: the body of a
/// 2xx response, or (for a custom provider) its whole answer as deltas. A
/// token the provider refused is renewed once ([`renewing`]). What the
/// response's headers say of the pool is noted under the entry's key.
pub(crate) async fn open<P: Platform, S: BreakerStore>(
    client: &Core<P, S>,
    upstream: &Upstream,
    req: &ChatRequest,
    entry: Keyed<'_>,
    limit: Duration,
    at: Option<AttemptTrace<'_>>,
) -> Opened {
    let http = match upstream {
        Upstream::Http(provider) => Some(provider.as_ref()),
        Upstream::Custom(_) => None,
    };
    let refused = |o: &Opened| o.as_ref().is_err_and(|(e, _)| is_refused(e));
    let fail = |e| Err((e, false));
    renewing(&client.platform, http, limit, refused, fail, |limit| {
        open_once(client, upstream, req, entry, limit, at)
    })
    .await
}

/// [`open`], once.
async fn open_once<P: Platform, S: BreakerStore>(
    client: &Core<P, S>,
    upstream: &Upstream,
    req: &ChatRequest,
    entry: Keyed<'_>,
    limit: Duration,
    at: Option<AttemptTrace<'_>>,
) -> Opened {
    let model = entry.model.as_str();
    let now = client.platform.now();
    match upstream {
        Upstream::Http(provider) => {
            authorize(&client.platform, provider.as_ref(), limit)
                .await
                .map_err(|e| (e, false))?;
            // A token fetched first spends part of the attempt's time.
            let spent = Duration::from_millis(client.platform.now().saturating_sub(now));
            let limit = limit.saturating_sub(spent);
            let now = client.platform.now();
            let mut http = provider.encode(req, model).map_err(|e| (e, false))?;
            client.stamp_trace(&mut http, at);
            provider.sign(&mut http, now).map_err(|e| (e, false))?;
            let omitted = std::mem::take(&mut http.omitted);
            let sending = client.sending(entry.key);
            let fetched = timeout(client.platform.sleep(limit), client.platform.fetch(http)).await;
            drop(sending);
            let resp = match fetched {
                Err(_) => return Err((ProviderError::timeout(limit), true)),
                Ok(Err(t)) => {
                    let reached = t.reached();
                    return Err((t.into(), reached));
                }
                Ok(Ok(resp)) => resp,
            };
            client.note_pool(provider.as_ref(), entry.key, &resp.headers);
            if (200..300).contains(&resp.status) {
                return Ok((Some(resp.body), VecDeque::new(), omitted));
            }
            // An error status: read its (short) body for the classifier.
            let spent = Duration::from_millis(client.platform.now().saturating_sub(now));
            let status = resp.status;
            let headers = resp.headers;
            let read = resp.body.read_to_end(64 << 10);
            let body = match timeout(client.platform.sleep(limit.saturating_sub(spent)), read).await
            {
                Ok(Ok(b)) => b,
                Ok(Err(_)) | Err(_) => Vec::new(),
            };
            let error = match provider.decode(
                &BufferedResponse {
                    status,
                    headers,
                    body,
                },
                client.platform.now(),
            ) {
                Err(e) => e,
                Ok(_) => {
                    ProviderError::new(ErrorKind::Decode, format!("HTTP {status} on a stream"))
                        .with_status(status)
                }
            };
            Err((error, true))
        }
        Upstream::Custom(custom) => {
            match timeout(client.platform.sleep(limit), custom.chat(req, model)).await {
                Err(_) => Err((ProviderError::timeout(limit), true)),
                Ok(Err(e)) => Err((e, true)),
                Ok(Ok(resp)) => Ok((None, whole_answer(resp), Vec::new())),
            }
        }
    }
}

/// A complete answer as the deltas of a stream.
fn whole_answer(resp: ChatResponse) -> VecDeque<StreamItem> {
    let mut d = VecDeque::new();
    d.push_back(Delta::Start {
        model: Some(resp.model),
    });
    d.extend(resp.thinking.into_iter().map(Delta::Thinking));
    if !resp.text.is_empty() {
        d.push_back(Delta::Text { text: resp.text });
    }
    for (i, call) in resp.tool_calls.into_iter().enumerate() {
        d.push_back(Delta::ToolCall {
            index: u32::try_from(i).unwrap_or(u32::MAX),
            id: Some(call.id),
            name: Some(call.name),
            arguments: call.arguments,
        });
    }
    d.push_back(Delta::Finish {
        reason: resp.finish_reason.unwrap_or(FinishReason::Stop),
    });
    if let Some(usage) = resp.usage {
        d.push_back(Delta::Usage { usage });
    }
    d.push_back(Delta::Done);
    d.into_iter()
        .map(|delta| StreamItem::Delta {
            delta,
            passed: false,
        })
        .collect()
}
