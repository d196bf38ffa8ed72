//! `POST /v1/chat/completions`, `/v1/messages` and `/v1/responses`: a chat
//! request in the client's format, answered whole or streamed.

use std::rc::Rc;

use super::cache::{cache_header, Lookup, Replay, Served};
use super::call::{answer, asked_deadline};
use super::http::{Format, Outbound};
use super::keepalive;
use super::log::LogLine;
use super::proxy::Gateway;
use super::render::{error_response, json_response};
use super::request::read_chat;
use super::responses;
use super::sse;
use super::tenants::{tokens_of, Tenant, Ticket};
use crate::chat::ChatRequest;
use crate::engine::client::{CallOptions, Reply};
use crate::engine::store::BreakerStore;
use crate::engine::stream::ChatStream;
use crate::error::Error;
use crate::format::responses::Echo;
use crate::format::{anthropic, openai};
use crate::platform::{Body, Headers, Platform};
use crate::policy::cheapest::expected_usage;
use crate::policy::price::Cost;

/// What an answer keeps with it while it is asked: the cache entry it
/// may be stored under, the Responses request it echoes, and the client's
/// ticket, which a stream takes with it to settle at its end.
struct Keep<'a> {
    lookup: Option<&'a Lookup>,
    echo: Option<Echo>,
    ticket: &'a mut Option<Ticket>,
}

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// A chat request, its attempts traced ([`Gateway::trace_of`]).
    pub(super) async fn chat(
        &self,
        format: Format,
        headers: &Headers,
        body: Body,
        client: Option<&Rc<Tenant>>,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        let trace = self.trace_of("chat", headers, log);
        let read = |bytes: &[u8]| read_chat(format, bytes, headers);
        let mut request = match self.read_request(format, headers, body, log, read).await {
            Ok(r) => r,
            Err(out) => return out,
        };
        request.trace = Some(trace);
        self.trace_input(&request, log);
        let route_name = request.model.clone();
        log.route = route_name.clone();
        let mut opts = CallOptions {
            route: None,
            deadline: asked_deadline(headers),
            // A request that must not run twice says so.
            no_hedge: headers
                .get("x-hedge")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("off")),
            ..CallOptions::default()
        };
        let tokens = client
            .filter(|t| t.limits.tokens_per_minute.is_some())
            .map_or(0, |_| tokens_of(Some(&expected_usage(&request))));
        let route = self.client.route_name(&request, &opts);
        let mut ticket = match self.admit(client, route, tokens, headers, format, log) {
            Ok((priority, ticket)) => {
                opts.priority = priority;
                opts.share = client.map(|t| t.share);
                ticket
            }
            Err(out) => return out,
        };
        let echo = responses::echo(format, &request);
        let mut lookup = self.cache_lookup(format, &request, &opts, headers, log);
        let include_usage = request.stream.then(|| request.wants_usage());
        if let Some(lookup) = lookup.as_mut() {
            if let Some(hit) = self.cache_find(lookup).await {
                let mut out = self.serve_stored(format, hit, Served::Hit, include_usage, echo, log);
                self.settle(client, ticket, log, &mut out);
                return out;
            }
        }
        let mut out = self
            .chat_asked(
                format,
                request,
                opts,
                Keep {
                    lookup: lookup.as_ref(),
                    echo: echo.clone(),
                    ticket: &mut ticket,
                },
                log,
            )
            .await;
        let stale = lookup.and_then(|l| l.stale);
        if let Some(stored) = stale.filter(|_| log.error == Some(Error::ALL_FAILED)) {
            // Every entry failed: the answer past its TTL is better than
            // the error. The log line keeps the failures in its trail.
            log.error = None;
            log.message = Some("served stale: every entry of the route failed");
            let stored = Rc::unwrap_or_clone(stored);
            out = self.serve_stored(format, stored, Served::Stale, include_usage, echo, log);
        }
        cache_header(log, &mut out);
        self.settle(client, ticket, log, &mut out);
        out
    }

    /// `request` asked of the route's providers: whole, streamed, or
    /// buffered whole for a stream. A whole answer is stored under
    /// `keep.lookup`, when there is one.
    async fn chat_asked(
        &self,
        format: Format,
        request: ChatRequest,
        opts: CallOptions,
        keep: Keep<'_>,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        let buffered = request.stream && self.buffers_stream(&request, &opts);
        if request.stream && !buffered {
            return self.chat_stream(format, request, opts, keep, log).await;
        }
        let Keep { lookup, echo, .. } = keep;
        if buffered {
            return self
                .chat_buffered(format, request, opts, echo, lookup, log)
                .await;
        }
        let result = self.client.chat_with(request, opts).await;
        answer(format, self.caller_holds_keys, result, log, |reply, log| {
            if let Some(lookup) = lookup {
                self.cache_put(lookup, &reply, log);
            }
            self.render_reply(format, reply, echo.as_ref(), log)
        })
    }

    /// A streamed answer: the first item is awaited before answering, so a
    /// failure before the commit point is an ordinary error with its status.
    /// A complete answer is stored under `lookup`, when there is one.
    async fn chat_stream(
        &self,
        format: Format,
        request: ChatRequest,
        opts: CallOptions,
        keep: Keep<'_>,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        let Keep {
            lookup,
            echo,
            ticket,
        } = keep;
        let started = self.client.platform().now();
        let include_usage = request.wants_usage();
        let mut outlets = sse::Outlets {
            log: self.log.clone(),
            record: self.stream_recorder(format, lookup),
            stale: None,
            trace: None,
            ticket: None,
        };
        log.stream = true;
        let mut stream = match ChatStream::open(Rc::clone(&self.client), request, opts) {
            Ok(s) => s,
            Err(e) => {
                log.error = Some(e.code());
                return self.render_error(format, &e);
            }
        };
        stream.pass_through(format.dialect());
        stream.idle_timers(sse::idle_timers(&self.client));
        let keepalive = self.client.policy().keepalive;
        let (stream, first) = match keepalive::first_item(&self.client, stream, keepalive).await {
            Ok(first) => first,
            Err(pending) => {
                // The answer goes out now: a stale one, if every entry
                // fails, must come in the stream, and the cache's count
                // waits for the stream to know.
                outlets.stale = lookup.and_then(|l| l.stale.as_deref()).map(|stored| {
                    let replay = Replay {
                        format,
                        request_id: log.request_id,
                        now: started,
                        include_usage,
                        echo: echo.clone(),
                    };
                    sse::StaleAnswer {
                        events: replay.events(stored, Served::Stale),
                        saves: stored.cost_pico.map(|p| Cost::from_picodollars(p).usd()),
                        tally: self.metrics.stale_tally(),
                    }
                });
                log.cache_deferred = outlets.stale.is_some();
                outlets.trace = self.trace_end(log);
                outlets.ticket = ticket.take();
                let then = keepalive::answer(
                    format,
                    log.request_id.to_string(),
                    started,
                    include_usage,
                    echo,
                    outlets,
                );
                let body =
                    keepalive::body(Rc::clone(&self.client), pending, format, keepalive, then);
                // No x-attempts or x-served-by: not known yet (the
                // stream's end log line has them).
                return Outbound {
                    status: 200,
                    headers: sse_headers(),
                    body: Vec::new(),
                    stream: Some(body),
                    log: String::new(),
                };
            }
        };
        let mut out = match first {
            Some(Ok(first)) => {
                log.record_attempts(stream.attempts());
                // The attempt answering is still open: it counts too.
                log.attempts += usize::from(stream.in_flight());
                log.omitted = stream.omitted().to_vec();
                let served = stream.served_by().cloned();
                log.served_by = served
                    .as_ref()
                    .map(|s| format!("{}/{}", s.provider, s.model));
                let encoder = sse::Encoder::for_first(
                    format,
                    Some(&first),
                    served.map(|s| s.model),
                    log.request_id,
                    started / 1000,
                    include_usage,
                    echo,
                );
                let headers = sse_headers();
                outlets.trace = self.trace_end(log);
                outlets.ticket = ticket.take();
                let body = sse::body(
                    stream,
                    encoder,
                    Ok(first),
                    log.request_id.to_string(),
                    started,
                    log.attempts,
                    outlets,
                );
                Outbound {
                    status: 200,
                    headers,
                    body: Vec::new(),
                    stream: Some(body),
                    log: String::new(),
                }
            }
            Some(Err(e)) => {
                log.record_attempts(e.attempts());
                log.error = Some(e.code());
                self.render_error(format, &e)
            }
            None => error_response(format, 502, "the stream ended before it began", None),
        };
        log.answer_headers(&mut out);
        out
    }

    /// A whole answer: the provider's body as it came when it is in the
    /// client's dialect (every field: several choices, logprobs, token
    /// details, `model` as the provider named it), else the neutral answer
    /// rendered in the client's format.
    pub(super) fn render_reply(
        &self,
        format: Format,
        reply: Reply,
        echo: Option<&Echo>,
        log: &mut LogLine<'_>,
    ) -> Outbound {
        if let (Some(dialect), Some(raw)) = (reply.response.dialect, &reply.response.raw) {
            if dialect == format.dialect() {
                let mut headers = Headers::new();
                headers.insert("content-type", "application/json");
                return Outbound {
                    status: 200,
                    headers,
                    body: raw.get().as_bytes().to_vec(),
                    stream: None,
                    log: String::new(),
                };
            }
        }
        let mut response = reply.response;
        if response.model.trim().is_empty() {
            response.model = reply.served_by.model.clone();
        }
        let id = log.request_id;
        match format {
            Format::OpenAi => {
                let created = self.client.platform().now() / 1000;
                json_response(
                    200,
                    &openai::render_response(&response, &format!("chatcmpl-{id}"), created),
                )
            }
            Format::Responses => {
                let created = self.client.platform().now() / 1000;
                responses::render(&response, id, created, echo)
            }
            Format::Anthropic => {
                match anthropic::render_response(&response, &format!("msg_{id}")) {
                    Ok(v) => json_response(200, &v),
                    Err(e) => {
                        log.error = Some("untranslatable_response");
                        error_response(
                            format,
                            502,
                            &format!("the answer cannot be given in this format: {e}"),
                            None,
                        )
                    }
                }
            }
        }
    }
}

/// The headers of a streamed answer.
fn sse_headers() -> Headers {
    let mut headers = Headers::new();
    headers.insert("content-type", "text/event-stream; charset=utf-8");
    headers.insert("cache-control", "no-cache");
    headers
}
