//! A streamed request on a route with validators: the answer is buffered
//! whole, judged (and escalated) like any whole answer, and only then sent
//! as the client's server-sent events, at once. A client that asked for a
//! stream still reads one; what it cannot get is its first token before the
//! answer is complete, since an answer cannot be judged before it is.

use super::cache::Lookup;
use super::call::answer;
use super::http::{Format, Outbound};
use super::log::LogLine;
use super::proxy::Gateway;
use crate::chat::{ChatRequest, ChatResponse, Delta};
use crate::engine::client::CallOptions;
use crate::engine::store::BreakerStore;
use crate::format::anthropic::stream::AnthropicStreamEncoder;
use crate::format::openai::stream::OpenAiStreamEncoder;
use crate::format::responses::{Echo, ResponsesStreamEncoder};
use crate::platform::{Headers, Platform};

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// Whether a stream for `request` must be buffered first: its route
    /// judges answers.
    pub(super) fn buffers_stream(&self, request: &ChatRequest, opts: &CallOptions) -> bool {
        self.client.quality_for(request, opts).is_some()
    }

    /// The whole answer, after validation, as the client's stream events.
    pub(super) async fn chat_buffered(
        &self,
        format: Format,
        mut request: ChatRequest,
        opts: CallOptions,
        echo: Option<Echo>,
        lookup: Option<&Lookup>,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        let created = self.client.platform().now() / 1000;
        let include_usage = request.wants_usage();
        log.stream = true;
        // Asked of the providers whole: a whole answer is what is judged.
        // The stream's options go too (Chat Completions refuses them on a
        // whole request).
        request.stream = false;
        if let Some(native) = request.native.as_mut() {
            native.body.remove("stream_options");
        }
        let result = self.client.chat_with(request, opts).await;
        answer(format, self.caller_holds_keys, result, log, |reply, log| {
            if let Some(lookup) = lookup {
                self.cache_put(lookup, &reply, log);
            }
            let mut response = reply.response;
            if response.model.trim().is_empty() {
                response.model = reply.served_by.model;
            }
            let body = events(
                format,
                &response,
                log.request_id,
                created,
                include_usage,
                echo,
            );
            let mut headers = Headers::new();
            headers.insert("content-type", "text/event-stream; charset=utf-8");
            headers.insert("cache-control", "no-cache");
            Outbound {
                status: 200,
                headers,
                body,
                stream: None,
                log: String::new(),
            }
        })
    }
}

/// `answer` as the deltas a stream of it would have carried.
pub(crate) fn deltas(answer: &ChatResponse) -> Vec<Delta> {
    let mut out = vec![Delta::Start {
        model: Some(answer.model.clone()),
    }];
    if let Some(usage) = answer.usage {
        out.push(Delta::Usage { usage });
    }
    out.extend(answer.thinking.iter().cloned().map(Delta::Thinking));
    if !answer.text.is_empty() {
        out.push(Delta::Text {
            text: answer.text.clone(),
        });
    }
    for (i, call) in answer.tool_calls.iter().enumerate() {
        out.push(Delta::ToolCall {
            index: u32::try_from(i).unwrap_or(u32::MAX),
            id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            arguments: call.arguments.clone(),
        });
    }
    if let Some(reason) = &answer.finish_reason {
        out.push(Delta::Finish {
            reason: reason.clone(),
        });
    }
    out.push(Delta::Done);
    out
}

/// The whole stream of `answer` in the client's format, its end included.
pub(super) fn events(
    format: Format,
    answer: &ChatResponse,
    request_id: &str,
    created: u64,
    include_usage: bool,
    echo: Option<Echo>,
) -> Vec<u8> {
    let mut out = Vec::new();
    match format {
        Format::OpenAi => {
            let mut enc = OpenAiStreamEncoder::new(
                format!("chatcmpl-{request_id}"),
                created,
                answer.model.clone(),
                include_usage,
            );
            for d in deltas(answer) {
                out.extend(enc.delta(&d));
            }
            out.extend(enc.finish());
        }
        Format::Anthropic => {
            let mut enc =
                AnthropicStreamEncoder::new(format!("msg_{request_id}"), answer.model.clone());
            for d in deltas(answer) {
                out.extend(enc.delta(&d));
            }
            out.extend(enc.finish());
        }
        Format::Responses => {
            let mut enc = ResponsesStreamEncoder::new(
                request_id.to_string(),
                created,
                answer.model.clone(),
                echo.unwrap_or_default(),
            );
            for d in deltas(answer) {
                out.extend(enc.delta(&d));
            }
            out.extend(enc.finish());
        }
    }
    out
}
