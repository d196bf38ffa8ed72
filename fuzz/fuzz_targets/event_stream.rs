//! The AWS event-stream decoder (Bedrock's streams): any bytes, split into
//! chunks anywhere, decode to the same frames and the same error as the
//! whole; every frame read as the event it carries, and that event read by
//! the Bedrock adapter, without a panic and without the key in an error.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use resilient_llm::bedrock::eventstream::{EventStreamDecoder, EventStreamError, Frame};
use resilient_llm::bedrock::frame_event;
use resilient_llm::bedrock::sigv4::Credentials;
use resilient_llm::{Bedrock, Provider, Secret};

const LIMIT: usize = 4096;

fn decode<'a>(
    chunks: impl Iterator<Item = &'a [u8]>,
) -> (Vec<Frame>, Result<(), EventStreamError>) {
    let mut d = EventStreamDecoder::new(LIMIT);
    let mut out = Vec::new();
    for c in chunks {
        if let Err(e) = d.feed(c, &mut out) {
            return (out, Err(e));
        }
    }
    let end = d.finish();
    (out, end)
}

fuzz_target!(|input: &[u8]| {
    // The first byte chooses the chunk size; the rest is the stream.
    let Some((&size, bytes)) = input.split_first() else {
        return;
    };
    let whole = decode(std::iter::once(bytes));
    let split = decode(bytes.chunks(usize::from(size.max(1))));
    assert_eq!(whole, split, "a split changed what the stream decodes to");
    let (frames, _) = whole;
    let bedrock = Bedrock::new("bedrock", "us-east-1").credentials(Credentials {
        access_key_id: Secret::new("AKIDFUZZEXAMPLE"),
        secret_access_key: Secret::new(common::KEY),
        session_token: None,
    });
    for frame in &frames {
        assert!(frame.payload.len() <= LIMIT, "a frame past the limit");
        match frame_event(frame) {
            Ok(Some(ev)) => {
                if let Err(e) = bedrock.decode_event(&ev) {
                    common::assert_no_key(&e.message);
                }
            }
            Ok(None) => {}
            Err(e) => common::assert_no_key(&e.message),
        }
    }
});
