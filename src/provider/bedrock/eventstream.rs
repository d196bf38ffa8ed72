//! A sans-IO decoder of the AWS event-stream framing (`application/
//! vnd.amazon.eventstream`): bytes in, frames out.
//!
//! A frame is a 12-byte prelude (total length, headers length, both
//! big-endian `u32`, and the CRC32 of those eight bytes), the headers (a
//! one-byte name length, the name, a type byte and a typed value), the
//! payload, and the CRC32 of everything before it. Both CRCs are checked;
//! a frame longer than the decoder's limit is refused before it is
//! buffered. Any failure is an [`EventStreamError`], never a panic, and
//! the decoder stays failed: after a bad frame nothing later can be
//! trusted to start on a frame boundary.

use std::fmt;

/// The smallest frame: prelude and message CRC, no headers, no payload.
const MIN_FRAME: usize = 16;

/// The largest frame AWS sends (16 MiB), the default limit.
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;

/// One header value, by its wire type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValue {
    /// Types 0 and 1.
    Bool(bool),
    /// Type 2.
    Byte(i8),
    /// Type 3.
    Short(i16),
    /// Type 4.
    Int(i32),
    /// Type 5.
    Long(i64),
    /// Type 6.
    Bytes(Vec<u8>),
    /// Type 7 (UTF-8).
    String(String),
    /// Type 8: milliseconds since the epoch.
    Timestamp(i64),
    /// Type 9.
    Uuid([u8; 16]),
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frame {
    /// The headers in wire order.
    pub headers: Vec<(String, HeaderValue)>,
    /// The payload (JSON, for Bedrock).
    pub payload: Vec<u8>,
}

impl Frame {
    /// The string header `name` (`:event-type`, `:message-type`, …).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|(n, v)| match v {
            HeaderValue::String(s) if n == name => Some(s.as_str()),
            _ => None,
        })
    }
}

/// Why the bytes are not an event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventStreamError {
    /// The prelude's CRC does not match its lengths.
    PreludeCrc,
    /// The message CRC does not match the frame.
    MessageCrc,
    /// The lengths cannot describe a frame.
    BadLength(String),
    /// A frame longer than the limit.
    TooLong {
        /// The frame's declared length.
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// A header that does not parse.
    BadHeader(String),
    /// The stream ended inside a frame.
    Truncated,
}

impl fmt::Display for EventStreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventStreamError::PreludeCrc => f.write_str("event-stream prelude CRC mismatch"),
            EventStreamError::MessageCrc => f.write_str("event-stream message CRC mismatch"),
            EventStreamError::BadLength(why) => write!(f, "event-stream frame length: {why}"),
            EventStreamError::TooLong { length, limit } => write!(
                f,
                "event-stream frame of {length} bytes is longer than the {limit}-byte limit"
            ),
            EventStreamError::BadHeader(why) => write!(f, "event-stream header: {why}"),
            EventStreamError::Truncated => f.write_str("the event stream ended inside a frame"),
        }
    }
}

impl std::error::Error for EventStreamError {}

/// The decoder's state between chunks.
#[derive(Debug, Clone)]
pub struct EventStreamDecoder {
    buf: Vec<u8>,
    limit: usize,
    failed: Option<EventStreamError>,
}

impl Default for EventStreamDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME)
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    let mut n = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        n.copy_from_slice(s);
    }
    u32::from_be_bytes(n)
}

impl EventStreamDecoder {
    /// A decoder refusing frames longer than `limit` bytes (at least the
    /// 16 bytes of an empty frame).
    pub fn new(limit: usize) -> Self {
        EventStreamDecoder {
            buf: Vec::new(),
            limit: limit.max(MIN_FRAME),
            failed: None,
        }
    }

    /// Feeds a chunk; complete frames are appended to `out`. The first
    /// error is returned again by every later call.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Frame>) -> Result<(), EventStreamError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.buf.extend_from_slice(chunk);
        let mut at = 0;
        let result = loop {
            match self.next_frame(at) {
                Ok(Some((frame, len))) => {
                    out.push(frame);
                    at += len;
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        self.buf.drain(..at);
        if let Err(e) = &result {
            self.failed = Some(e.clone());
            self.buf = Vec::new();
        }
        result
    }

    /// The end of the stream: an error when it ended inside a frame.
    pub fn finish(&mut self) -> Result<(), EventStreamError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.buf.is_empty() {
            Ok(())
        } else {
            self.buf = Vec::new();
            self.failed = Some(EventStreamError::Truncated);
            Err(EventStreamError::Truncated)
        }
    }

    /// The frame starting at `at`, with its length, once all its bytes are
    /// in.
    fn next_frame(&self, at: usize) -> Result<Option<(Frame, usize)>, EventStreamError> {
        let rest = self.buf.get(at..).unwrap_or_default();
        if rest.len() < 12 {
            return Ok(None);
        }
        let total = be32(rest, 0) as usize;
        let headers_len = be32(rest, 4) as usize;
        if crc32fast::hash(&rest[..8]) != be32(rest, 8) {
            return Err(EventStreamError::PreludeCrc);
        }
        if total < MIN_FRAME {
            return Err(EventStreamError::BadLength(format!(
                "{total} bytes is shorter than a frame"
            )));
        }
        if total > self.limit {
            return Err(EventStreamError::TooLong {
                length: total,
                limit: self.limit,
            });
        }
        if headers_len > total - MIN_FRAME {
            return Err(EventStreamError::BadLength(format!(
                "{headers_len} bytes of headers in a {total}-byte frame"
            )));
        }
        let Some(frame) = rest.get(..total) else {
            return Ok(None);
        };
        if crc32fast::hash(&frame[..total - 4]) != be32(frame, total - 4) {
            return Err(EventStreamError::MessageCrc);
        }
        let headers = parse_headers(&frame[12..12 + headers_len])?;
        let payload = frame[12 + headers_len..total - 4].to_vec();
        Ok(Some((Frame { headers, payload }, total)))
    }
}

/// Takes `n` bytes off the front of `b`.
fn take<'a>(b: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], EventStreamError> {
    if b.len() < n {
        return Err(EventStreamError::BadHeader(format!(
            "{what} runs past the headers"
        )));
    }
    let (head, tail) = b.split_at(n);
    *b = tail;
    Ok(head)
}

fn fixed<const N: usize>(b: &mut &[u8], what: &str) -> Result<[u8; N], EventStreamError> {
    let mut out = [0u8; N];
    out.copy_from_slice(take(b, N, what)?);
    Ok(out)
}

fn parse_headers(mut b: &[u8]) -> Result<Vec<(String, HeaderValue)>, EventStreamError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let [name_len] = fixed::<1>(&mut b, "a header name length")?;
        let name = take(&mut b, usize::from(name_len), "a header name")?;
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| EventStreamError::BadHeader("a name that is not UTF-8".into()))?;
        let [kind] = fixed::<1>(&mut b, "a header type")?;
        let value = match kind {
            0 => HeaderValue::Bool(true),
            1 => HeaderValue::Bool(false),
            2 => HeaderValue::Byte(i8::from_be_bytes(fixed(&mut b, "a byte")?)),
            3 => HeaderValue::Short(i16::from_be_bytes(fixed(&mut b, "a short")?)),
            4 => HeaderValue::Int(i32::from_be_bytes(fixed(&mut b, "an int")?)),
            5 => HeaderValue::Long(i64::from_be_bytes(fixed(&mut b, "a long")?)),
            6 | 7 => {
                let len = u16::from_be_bytes(fixed(&mut b, "a value length")?);
                let bytes = take(&mut b, usize::from(len), "a value")?.to_vec();
                if kind == 6 {
                    HeaderValue::Bytes(bytes)
                } else {
                    HeaderValue::String(String::from_utf8(bytes).map_err(|_| {
                        EventStreamError::BadHeader(format!("{name}: a string that is not UTF-8"))
                    })?)
                }
            }
            8 => HeaderValue::Timestamp(i64::from_be_bytes(fixed(&mut b, "a timestamp")?)),
            9 => HeaderValue::Uuid(fixed(&mut b, "a uuid")?),
            other => {
                return Err(EventStreamError::BadHeader(format!(
                    "{name}: unknown type {other}"
                )))
            }
        };
        out.push((name, value));
    }
    Ok(out)
}

/// Writes one frame with string headers: the encoder the tests and the
/// fake provider use to make streams.
pub fn encode_frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    for (name, value) in headers {
        let name = &name.as_bytes()[..name.len().min(255)];
        let value = &value.as_bytes()[..value.len().min(usize::from(u16::MAX))];
        h.push(name.len() as u8);
        h.extend_from_slice(name);
        h.push(7);
        h.extend_from_slice(&(value.len() as u16).to_be_bytes());
        h.extend_from_slice(value);
    }
    let total = (MIN_FRAME + h.len() + payload.len()) as u32;
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    let prelude_crc = crc32fast::hash(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_anywhere_decode_the_same() {
        let mut bytes = encode_frame(&[(":event-type", "chunk")], br#"{"a":1}"#);
        bytes.extend(encode_frame(&[], b""));
        for cut in 0..=bytes.len() {
            let mut d = EventStreamDecoder::default();
            let mut out = Vec::new();
            d.feed(&bytes[..cut], &mut out).unwrap();
            d.feed(&bytes[cut..], &mut out).unwrap();
            d.finish().unwrap();
            assert_eq!(out.len(), 2, "cut at {cut}");
            assert_eq!(out[0].header(":event-type"), Some("chunk"));
            assert_eq!(out[0].payload, br#"{"a":1}"#);
            assert!(out[1].headers.is_empty() && out[1].payload.is_empty());
        }
    }

    #[test]
    fn bad_crcs_lengths_and_truncation_are_errors_that_stay() {
        let good = encode_frame(&[(":message-type", "event")], b"{}");
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let mut d = EventStreamDecoder::default();
        assert_eq!(
            d.feed(&bad, &mut Vec::new()),
            Err(EventStreamError::MessageCrc)
        );
        assert_eq!(
            d.feed(&good, &mut Vec::new()),
            Err(EventStreamError::MessageCrc)
        );
        let mut bad = good.clone();
        bad[1] ^= 1;
        let mut d = EventStreamDecoder::default();
        assert_eq!(
            d.feed(&bad, &mut Vec::new()),
            Err(EventStreamError::PreludeCrc)
        );
        let mut d = EventStreamDecoder::new(20);
        assert!(matches!(
            d.feed(&good, &mut Vec::new()),
            Err(EventStreamError::TooLong { limit: 20, .. })
        ));
        let mut d = EventStreamDecoder::default();
        d.feed(&good[..5], &mut Vec::new()).unwrap();
        assert_eq!(d.finish(), Err(EventStreamError::Truncated));
    }
}
