//! A fetched stream's body read so that one read takes one HTTP chunk
//! whole (the Worker with `STREAM_GATHER=on`, [`enable_gather`]; off by
//! default).
//!
//! workerd hands a chunked body to a default reader in the pieces its HTTP
//! parser happens to hold: an event of ~280 bytes often comes as two reads
//! (the 25 bytes read along with the chunk's size line, then the rest), and
//! each read is a promise and a wake of the gateway, most of what a stream
//! costs. Read with a BYOB reader's `readAtLeast` (workerd's own), a read
//! resolves once [`AT_LEAST`] bytes are in: the rest of a chunk that is
//! already on the socket joins its first piece, and a hundred-event answer
//! takes a hundred reads instead of two hundred.
//!
//! What a minimum holds back: a chunk shorter than it waits for the next
//! chunk or the end (measured in workerd: a 14-byte comment sent 600 ms
//! before the next event arrived with it). Every event of the providers'
//! answers is longer (the shortest, `data: [DONE]`, comes last, released by
//! the end; Anthropic's `ping` is 37 bytes); SSE comments such as a
//! keep-alive's may not be. So a body that has shown a comment (a line
//! starting with `:`) is read as it comes from then on. The first short
//! comment after the answer began is still seen only with the bytes after
//! it: a provider that keeps a paused answer alive with short comments
//! alone, more than a third of the idle deadline apart, is found stalled
//! where it is not. That is why it is off by default.

use std::cell::Cell;

use web_sys::ReadableStream;

use super::splice::{byob, Reader};

pub(super) use crate::sse::shows_comment;

/// The fewest bytes a gathered read waits for (unless the body ends).
pub(super) const AT_LEAST: u32 = 32;

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(false) };
}

/// Has every streamed body fetched from now on gathered; for workerd,
/// whose BYOB readers have `readAtLeast` (elsewhere, bodies are read as
/// they come).
pub fn enable_gather() {
    ENABLED.with(|e| e.set(true));
}

/// How a fetched `stream` is read: gathered when enabled and it is a byte
/// stream, else `None` (nothing taken from `stream`).
pub(super) fn gathered(stream: &ReadableStream) -> Option<Reader> {
    if !ENABLED.with(Cell::get) {
        return None;
    }
    let reader = byob(stream)?;
    Some(Reader::Gathered(reader, stream.clone()))
}
