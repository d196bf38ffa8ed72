//! What a stream does with the events of its attempt in flight: decoded
//! into deltas (a malformed chunk or an error event fails the attempt),
//! taken as the attempt's mode says (forwarded, or swallowed until a
//! restart has repeated the delivered text), handed to the caller, and
//! the commit point (docs/design.md, "Streaming").

use super::*;

impl<C, P, S> ChatStream<C, P, S>
where
    C: Deref<Target = Client<P, S>> + Clone,
    P: Platform,
    S: BreakerStore,
{
    /// Decodes events into the attempt's pending deltas. A malformed chunk
    /// (reported) or an error event fails the attempt: a retry or the next
    /// entry continues the answer from what was delivered. `raw` holds the
    /// events' bytes as they came, when they pass through.
    pub(super) fn decode(
        &self,
        conn: &mut Conn,
        events: Vec<SseEvent>,
        raw: Vec<Option<Vec<u8>>>,
    ) -> Result<(), ProviderError> {
        let entry = self.walk.entry();
        let Some(Upstream::Http(provider)) = self.client.core.upstreams.get(&entry.provider) else {
            return Ok(());
        };
        let mut raw = raw.into_iter();
        for ev in events {
            let bytes = raw.next().flatten();
            match provider.decode_event(&ev) {
                Ok(deltas) => {
                    // The provider's end event goes out only after a finish
                    // reason: without one the attempt was cut, and a
                    // continuation or an error event must follow what went
                    // out, not a clean end.
                    let passes = !deltas.contains(&Delta::Done) || finished(conn, &deltas);
                    if conn.raw && passes {
                        let usage_only = !deltas.is_empty()
                            && deltas.iter().all(|d| matches!(d, Delta::Usage { .. }));
                        conn.pending.push_back(StreamItem::Raw(RawEvent {
                            event: ev,
                            bytes,
                            usage_only,
                        }));
                    }
                    let passed = conn.raw;
                    conn.pending.extend(
                        deltas
                            .into_iter()
                            .map(|delta| StreamItem::Delta { delta, passed }),
                    );
                }
                Err(e) => {
                    if e.kind == ErrorKind::Decode {
                        // It may have held part of the answer: skipped, the
                        // answer could end looking complete without it.
                        conn.malformed += 1;
                        self.client.core.emit(|| Event::MalformedChunk {
                            provider: &entry.provider,
                            error: &e,
                        });
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Applies one delta of the attempt in flight.
    pub(super) fn take(&mut self, conn: &mut Conn, delta: Delta) -> Read {
        let Some(delta) = conn.answer.map(delta) else {
            return Read::More;
        };
        match delta {
            Delta::Start { model } => conn.model = model.or(conn.model.take()),
            Delta::Text { text } if text.is_empty() => {}
            Delta::Text { text } => {
                conn.first_content
                    .get_or_insert_with(|| self.client.core.platform.now());
                let fresh = match &mut conn.mode {
                    Mode::Forward => text,
                    Mode::Match { skip, seen } => {
                        seen.push_str(&text);
                        if seen.len() < skip.len() {
                            if !skip.starts_with(seen.as_str()) {
                                return Read::Failed(diverged());
                            }
                            return Read::More;
                        }
                        if !seen.starts_with(skip.as_str()) {
                            return Read::Failed(diverged());
                        }
                        let rest = seen.get(skip.len()..).unwrap_or_default().to_string();
                        conn.mode = Mode::Forward;
                        rest
                    }
                };
                if !fresh.is_empty() {
                    return self.forward(conn, Delta::Text { text: fresh });
                }
            }
            Delta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                conn.first_content
                    .get_or_insert_with(|| self.client.core.platform.now());
                if conn.mode != Mode::Forward {
                    return Read::Failed(diverged());
                }
                return self.forward(
                    conn,
                    Delta::ToolCall {
                        index,
                        id,
                        name,
                        arguments,
                    },
                );
            }
            // Reasoning commits like content; a continuation's new
            // reasoning is not the delivered answer's, and is not repeated.
            Delta::Thinking(t) => {
                conn.first_content
                    .get_or_insert_with(|| self.client.core.platform.now());
                if conn.mode == Mode::Forward {
                    return self.forward(conn, Delta::Thinking(t));
                }
            }
            Delta::Finish { reason } => {
                if conn.mode != Mode::Forward {
                    return Read::Failed(diverged());
                }
                conn.finish = Some(reason);
            }
            Delta::Usage { usage } => crate::format::merge_usage(&mut conn.usage, usage),
            // An end with no finish reason before it is a cut, whatever
            // the provider's end event says: never a made-up reason.
            Delta::Done => {
                conn.done = true;
                conn.body = None;
                conn.pending.clear();
                return match (&conn.mode, &conn.finish) {
                    (Mode::Forward, Some(_)) => Read::Complete,
                    (Mode::Forward, None) => Read::Failed(unfinished()),
                    (Mode::Match { .. }, _) => Read::Failed(diverged()),
                };
            }
        }
        Read::More
    }

    /// Hands content to the caller, the commit point first; before it, held
    /// while the attempt's pace is judged ([`Pace`]).
    pub(super) fn forward(&mut self, conn: &mut Conn, delta: Delta) -> Read {
        let ready = match conn.pace.as_mut() {
            None => vec![delta],
            Some(pace) => match pace.hold(self.client.core.platform.now(), delta) {
                Gate::Hold => return Read::More,
                Gate::TooSlow => return Read::Failed(pace.too_slow()),
                Gate::Release(held) => held,
            },
        };
        conn.pace = None;
        self.hand_over(conn, ready);
        Read::More
    }

    /// Commits and delivers content, noting what a continuation needs.
    pub(super) fn hand_over(&mut self, conn: &mut Conn, deltas: Vec<Delta>) {
        for delta in deltas {
            self.commit(conn);
            if let Delta::Text { text } = &delta {
                self.sent.text.push_str(text);
            }
            self.sent.tool_calls |= matches!(delta, Delta::ToolCall { .. });
            self.deliver(conn, delta);
        }
    }

    /// Hands `delta` of the attempt in flight to the caller.
    pub(super) fn deliver(&mut self, conn: &Conn, delta: Delta) {
        self.sent.out.push_back(StreamItem::Delta {
            delta,
            passed: conn.raw,
        });
    }

    /// The commit point: the first content goes to the caller, after the
    /// raw events held until now and a `Start` that names the answering
    /// model.
    pub(super) fn commit(&mut self, conn: &mut Conn) {
        if self.sent.committed {
            return;
        }
        self.sent.committed = true;
        let entry = self.walk.entry();
        self.sent.served_by = Some(self.walk.served_by());
        let model = conn.model.clone().unwrap_or_else(|| entry.model.clone());
        self.sent
            .out
            .extend(conn.held.drain(..).map(StreamItem::Raw));
        self.deliver(conn, Delta::Start { model: Some(model) });
    }
}

/// Whether a finish reason came before the end in `deltas`: taken
/// already, waiting in the attempt's pending items, or among `deltas`.
fn finished(conn: &Conn, deltas: &[Delta]) -> bool {
    let is_finish = |d: &Delta| matches!(d, Delta::Finish { .. });
    conn.finish.is_some()
        || conn.pending.iter().any(|i| match i {
            StreamItem::Delta { delta, .. } => is_finish(delta),
            StreamItem::Raw(_) => false,
        })
        || deltas.iter().any(is_finish)
}
