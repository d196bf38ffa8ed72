//! `client.stream()` on a route that validates its answers: the answer is
//! asked for whole, judged and escalated as `client.chat()` does, and only
//! the accepted answer is handed out, as the events a stream of it would
//! have carried. The first `next()` waits for the whole answer; a caller
//! never sees text a validator then refused.

use std::collections::VecDeque;
use std::rc::Rc;

use crate::chat::{ChatRequest, Delta};
use crate::engine::client::{CallOptions, Client};
use crate::error::Error;
use crate::gateway::buffered::deltas;
use crate::web::WebPlatform;

/// A validated answer, asked for on the first `next()`, then its events.
pub(crate) struct Judged {
    client: Rc<Client<WebPlatform>>,
    /// The call still to make: `None` once made.
    call: Option<(ChatRequest, CallOptions)>,
    events: VecDeque<Delta>,
}

impl Judged {
    pub(crate) fn new(
        client: Rc<Client<WebPlatform>>,
        req: ChatRequest,
        opts: CallOptions,
    ) -> Self {
        Judged {
            client,
            // Asked of the providers whole: a whole answer is what is judged.
            call: Some((
                ChatRequest {
                    stream: false,
                    ..req
                },
                opts,
            )),
            events: VecDeque::new(),
        }
    }

    /// The next event of the accepted answer; the call's error when no
    /// answer could be given. `None` after the last.
    pub(crate) async fn next(&mut self) -> Option<Result<Delta, Error>> {
        if let Some((req, opts)) = self.call.take() {
            match self.client.chat_with(req, opts).await {
                Ok(reply) => {
                    let mut answer = reply.response;
                    if answer.model.trim().is_empty() {
                        answer.model = reply.served_by.model;
                    }
                    self.events = deltas(&answer).into();
                }
                Err(e) => return Some(Err(e)),
            }
        }
        self.events.pop_front().map(Ok)
    }
}
