//! A sans-IO Server-Sent Events decoder: bytes in, events out.
//!
//! Follows the WHATWG event-stream grammar: lines end in CR, LF or CRLF (a
//! CRLF split across two chunks is still one line end), `:` starts a
//! comment, `data` lines of one event are joined with `\n`, one space after
//! the colon is dropped, and a blank line dispatches the event. A stream that
//! ends without the final blank line still yields its last event through
//! [`SseDecoder::finish`], since providers do end streams that way.
//!
//! Every input is bounded: a line and an event's data to the decoder's
//! limit ([`MAX_LINE_BYTES`] by default), the whole stream to
//! [`MAX_STREAM_BYTES`]. Past one, [`SseDecoder::feed`] fails with
//! [`SseLimit`], so an upstream that never ends a line, never ends an event
//! or never ends its stream cannot make the decoder hold more.

use std::fmt;

/// The longest line, and the largest event's data, a default decoder takes
/// (1 MiB): a provider's largest event (a whole answer in one
/// `message_start`, a long tool call's arguments) is far smaller.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;

/// The most bytes a default decoder reads from one stream (64 MiB): about
/// four times what a 128k-token answer takes as OpenAI or Anthropic events.
/// Past it the stream fails rather than keep growing what its answer holds.
pub const MAX_STREAM_BYTES: u64 = 64 << 20;

/// One event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any (Anthropic names its events).
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
    /// The `retry:` field, if any.
    pub retry: Option<u64>,
}

/// The stream broke one of the decoder's limits: it is not SSE, or hostile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SseLimit {
    /// A line longer than the limit.
    Line {
        /// The limit in bytes.
        limit: usize,
    },
    /// An event whose data lines add up to more than the limit.
    Event {
        /// The limit in bytes.
        limit: usize,
    },
    /// A stream longer than its limit.
    Stream {
        /// The limit in bytes.
        limit: u64,
    },
}

impl fmt::Display for SseLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseLimit::Line { limit } => {
                write!(f, "an event-stream line is longer than {limit} bytes")
            }
            SseLimit::Event { limit } => {
                write!(f, "an event-stream event is longer than {limit} bytes")
            }
            SseLimit::Stream { limit } => {
                write!(f, "the event stream is longer than {limit} bytes")
            }
        }
    }
}

impl std::error::Error for SseLimit {}

/// The decoder's state between chunks.
#[derive(Debug, Clone)]
pub struct SseDecoder {
    line: Vec<u8>,
    after_cr: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
    retry: Option<u64>,
    limit: usize,
    /// With [`SseDecoder::feed_raw`]: the bytes read since the last event
    /// was dispatched (lines of the event being read, comments before it).
    raw: Vec<u8>,
    /// Some of those bytes were dropped (past the limit).
    raw_lost: bool,
    read: u64,
    max_stream: u64,
}

impl Default for SseDecoder {
    /// A decoder with the limits `MAX_LINE_BYTES` and [`MAX_STREAM_BYTES`].
    fn default() -> Self {
        Self::new(MAX_LINE_BYTES)
    }
}

impl SseDecoder {
    /// A decoder refusing lines, and events' data, longer than `limit`
    /// bytes, and streams longer than [`MAX_STREAM_BYTES`].
    pub fn new(limit: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            after_cr: false,
            event: None,
            data: String::new(),
            has_data: false,
            id: None,
            retry: None,
            limit,
            raw: Vec::new(),
            raw_lost: false,
            read: 0,
            max_stream: MAX_STREAM_BYTES,
        }
    }

    /// The same decoder refusing streams longer than `max` bytes.
    pub fn max_stream(mut self, max: u64) -> Self {
        self.max_stream = max;
        self
    }

    /// Feeds a chunk; complete events are appended to `out`. Past a limit
    /// the stream is not to be read on: the decoder's state is unspecified.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseLimit> {
        self.feed_inner(chunk, out, None)
    }

    /// As [`Self::feed`], and each event's bytes as they came (its lines,
    /// their line ends and the blank line that ended it, after any comment
    /// or stray line end before it) are appended to `raw`, one entry per
    /// event in `out`: what passes a stream through byte for byte. An
    /// entry is `None` for an event longer than twice the line limit, whose
    /// bytes were not all kept.
    pub(crate) fn feed_raw(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<SseEvent>,
        raw: &mut Vec<Option<Vec<u8>>>,
    ) -> Result<(), SseLimit> {
        self.feed_inner(chunk, out, Some(raw))
    }

    fn feed_inner(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<SseEvent>,
        mut raw: Option<&mut Vec<Option<Vec<u8>>>>,
    ) -> Result<(), SseLimit> {
        self.read = self.read.saturating_add(chunk.len() as u64);
        if self.read > self.max_stream {
            return Err(SseLimit::Stream {
                limit: self.max_stream,
            });
        }
        // Where the bytes not yet given to an event start in `chunk`, and
        // how many events `out` held that are not this call's.
        let mut start = 0;
        let before = out.len() - raw.as_deref().map_or(0, Vec::len).min(out.len());
        let mut rest = chunk;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(pos) = rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.push(&rest[..pos])?;
            let line = std::mem::take(&mut self.line);
            let done = self.line_done(&line, out);
            self.line = line;
            self.line.clear();
            done?;
            if rest[pos] == b'\r' {
                match rest.get(pos + 1) {
                    Some(b'\n') => rest = &rest[pos + 2..],
                    Some(_) => rest = &rest[pos + 1..],
                    None => {
                        self.after_cr = true;
                        rest = &[];
                    }
                }
            } else {
                rest = &rest[pos + 1..];
            }
            if let Some(raw) = raw.as_deref_mut() {
                if before + raw.len() < out.len() {
                    let end = chunk.len() - rest.len();
                    let mut bytes = std::mem::take(&mut self.raw);
                    bytes.extend_from_slice(&chunk[start..end]);
                    let lost = std::mem::take(&mut self.raw_lost);
                    raw.push((!lost).then_some(bytes));
                    start = end;
                }
            }
        }
        if raw.is_some() {
            // Bounded like a line: comments piling up before an event are
            // dropped past the limit rather than kept without end.
            if self.raw.len() + (chunk.len() - start) > self.limit.saturating_mul(2) {
                self.raw.clear();
                self.raw_lost = true;
            }
            self.raw.extend_from_slice(&chunk[start..]);
        }
        self.push(rest)
    }

    /// With [`SseDecoder::feed_raw`]: the bytes read since the last event
    /// was dispatched, when none was dropped; what a stream passed through
    /// owes its client before bytes read from elsewhere.
    pub(crate) fn unsent(&self) -> Option<&[u8]> {
        (!self.raw_lost).then_some(self.raw.as_slice())
    }

    /// Ends the stream: the last event, if the stream ended without the
    /// blank line that would have dispatched it.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            // An event past the limit is dropped, as `feed` would have refused it.
            if self.line_done(&line, &mut out).is_err() {
                return None;
            }
        }
        self.dispatch(&mut out);
        out.pop()
    }

    fn push(&mut self, bytes: &[u8]) -> Result<(), SseLimit> {
        if self.line.len() + bytes.len() > self.limit {
            self.line.clear();
            return Err(SseLimit::Line { limit: self.limit });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseLimit> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(()); // comment
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"event" => self.event = Some(value.into_owned()),
            b"data" => {
                let joined = self.data.len() + usize::from(self.has_data) + value.len();
                if joined > self.limit {
                    self.data.clear();
                    self.has_data = false;
                    self.event = None;
                    return Err(SseLimit::Event { limit: self.limit });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"id" if !value.bytes().any(|b| b == 0) => self.id = Some(value.into_owned()),
            b"retry" => self.retry = value.parse().ok().or(self.retry),
            _ => {} // unknown fields are ignored, as the grammar says
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if !self.has_data && self.event.is_none() {
            return;
        }
        out.push(SseEvent {
            event: self.event.take(),
            data: std::mem::take(&mut self.data),
            id: self.id.clone(),
            retry: self.retry,
        });
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out).unwrap();
        }
        out.extend(d.finish());
        out
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn openai_style_stream() {
        let ev = decode(&[b"data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n"]);
        assert_eq!(data(&ev), ["{\"a\":1}", "{\"a\":2}", "[DONE]"]);
    }

    #[test]
    fn anthropic_style_named_events_and_pings() {
        let ev = decode(&[
            b"event: message_start\ndata: {}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
        ]);
        assert_eq!(ev[0].event.as_deref(), Some("message_start"));
        assert_eq!(ev[1].event.as_deref(), Some("ping"));
    }

    #[test]
    fn chunks_split_anywhere_including_inside_crlf_and_utf8() {
        let whole = "event: x\r\ndata: héllo\r\ndata: wörld\r\n\r\ndata: 2\r\n\r\n".as_bytes();
        let expected = decode(&[whole]);
        assert_eq!(data(&expected), ["héllo\nwörld", "2"]);
        for i in 0..whole.len() {
            for j in i..whole.len() {
                assert_eq!(
                    decode(&[&whole[..i], &whole[i..j], &whole[j..]]),
                    expected,
                    "split at {i},{j}"
                );
            }
        }
    }

    #[test]
    fn comments_blank_prefix_and_bare_cr() {
        let ev = decode(&[b": keep-alive\r\rdata:no-space\rdata:  two spaces\r\r"]);
        assert_eq!(data(&ev), ["no-space\n two spaces"]);
    }

    #[test]
    fn a_stream_without_the_final_blank_line_still_yields_its_event() {
        assert_eq!(
            data(&decode(&[b"data: a\n\ndata: [DONE]"])),
            ["a", "[DONE]"]
        );
        assert_eq!(data(&decode(&[b"data: a\n\ndata: last\n"])), ["a", "last"]);
        assert!(decode(&[b": only a comment"]).is_empty());
    }

    #[test]
    fn id_and_retry_fields() {
        let ev = decode(&[b"id: 7\nretry: 1500\ndata: x\n\n"]);
        assert_eq!((ev[0].id.as_deref(), ev[0].retry), (Some("7"), Some(1500)));
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut d = SseDecoder::new(16);
        let mut out = Vec::new();
        assert!(d.feed(&[b'x'; 10], &mut out).is_ok());
        assert_eq!(
            d.feed(&[b'x'; 10], &mut out),
            Err(SseLimit::Line { limit: 16 })
        );
    }

    #[test]
    fn an_endless_event_is_refused() {
        // Every line is short; the event they make never ends.
        let mut d = SseDecoder::new(16);
        let mut out = Vec::new();
        assert!(d.feed(b"data: 1234567\ndata: 1234567\n", &mut out).is_ok());
        assert_eq!(
            d.feed(b"data: 1\n", &mut out),
            Err(SseLimit::Event { limit: 16 })
        );
        assert!(out.is_empty());
        // Data of exactly the limit (two lines and the newline joining them) is taken.
        let mut d = SseDecoder::new(16);
        d.feed(b"data: 1234567\ndata: 12345678\n\n", &mut out)
            .unwrap();
        assert_eq!(out[0].data.len(), 16);
    }

    #[test]
    fn an_endless_stream_is_refused() {
        let mut d = SseDecoder::new(16).max_stream(100);
        let mut out = Vec::new();
        for _ in 0..10 {
            d.feed(b": ping...\n", &mut out).unwrap();
        }
        assert_eq!(
            d.feed(b"\n", &mut out),
            Err(SseLimit::Stream { limit: 100 })
        );
        assert_eq!(
            SseDecoder::default().max_stream,
            MAX_STREAM_BYTES,
            "the decoder a stream uses has the stream limit"
        );
    }

    proptest! {
        #[test]
        fn any_bytes_in_any_split_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), cut in 0usize..300) {
            let cut = cut.min(bytes.len());
            let mut d = SseDecoder::new(64);
            let mut out = Vec::new();
            let _ = d.feed(&bytes[..cut], &mut out);
            let _ = d.feed(&bytes[cut..], &mut out);
            let _ = d.finish();
        }

        /// Fed in any three pieces, the events' bytes put back together are
        /// the stream, and each decodes to its event alone.
        #[test]
        fn raw_bytes_are_the_stream_in_any_split(a in 0usize..200, b in 0usize..200) {
            let stream: &[u8] = b": hi\r\n\r\nevent:x\r\ndata:1\r\ndata: 2\r\n\r\nid: 7\ndata: {\"a\":3}\n\n\n\r\rdata:4\r\r";
            let (a, b) = (a.min(stream.len()), b.min(stream.len()));
            let (a, b) = (a.min(b), a.max(b));
            let mut d = SseDecoder::default();
            let (mut out, mut raw) = (Vec::new(), Vec::new());
            for piece in [&stream[..a], &stream[a..b], &stream[b..]] {
                d.feed_raw(piece, &mut out, &mut raw).unwrap();
            }
            prop_assert_eq!(data(&out), ["1\n2", "{\"a\":3}", "4"]);
            let raw: Vec<Vec<u8>> = raw.into_iter().map(|r| r.unwrap()).collect();
            prop_assert_eq!(raw.len(), out.len());
            for (r, ev) in raw.iter().zip(&out) {
                let alone = decode(&[r]);
                prop_assert_eq!(alone.len(), 1);
                prop_assert_eq!((&alone[0].event, &alone[0].data), (&ev.event, &ev.data));
            }
            // The last event's final CR stays with the decoder until a line
            // end after it could be told from the start of a CRLF.
            let joined = raw.concat();
            prop_assert!(stream.starts_with(&joined), "{:?}", String::from_utf8_lossy(&joined));
            prop_assert!(stream.len() - joined.len() <= 1);
        }
    }

    #[test]
    fn raw_bytes_past_the_limit_are_not_kept() {
        let mut d = SseDecoder::new(16);
        let (mut out, mut raw) = (Vec::new(), Vec::new());
        for _ in 0..4 {
            d.feed_raw(b": comment\n", &mut out, &mut raw).unwrap();
        }
        d.feed_raw(b"data: 1\n\ndata: 2\n\n", &mut out, &mut raw)
            .unwrap();
        assert_eq!(data(&out), ["1", "2"]);
        assert_eq!(raw, [None, Some(b"data: 2\n\n".to_vec())]);
    }

    #[test]
    fn unsent_holds_the_bytes_of_the_event_being_read() {
        let mut d = SseDecoder::default();
        let (mut out, mut raw) = (Vec::new(), Vec::new());
        d.feed_raw(b"data: a\n\n: c\ndata: b", &mut out, &mut raw)
            .unwrap();
        assert_eq!(data(&out), ["a"]);
        assert_eq!(d.unsent(), Some(&b": c\ndata: b"[..]));
        d.feed_raw(b"\n\n", &mut out, &mut raw).unwrap();
        assert_eq!(raw[1].as_deref(), Some(&b": c\ndata: b\n\n"[..]));
        assert_eq!(d.unsent(), Some(&b""[..]));
    }
}
