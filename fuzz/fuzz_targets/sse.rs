//! The SSE decoder: any bytes, split into chunks anywhere, decode to the
//! same events as the whole, within the decoder's limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resilient_llm::{SseDecoder, SseEvent, SseLimit};

const LIMIT: usize = 64;

fn decode<'a>(chunks: impl Iterator<Item = &'a [u8]>) -> Result<Vec<SseEvent>, SseLimit> {
    let mut d = SseDecoder::new(LIMIT).max_stream(4096);
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c, &mut out)?;
    }
    out.extend(d.finish());
    Ok(out)
}

fuzz_target!(|input: &[u8]| {
    // The first byte chooses the chunk size; the rest is the stream.
    let Some((&size, bytes)) = input.split_first() else {
        return;
    };
    let whole = decode(std::iter::once(bytes));
    let split = decode(bytes.chunks(usize::from(size.max(1))));
    assert_eq!(whole, split, "a split changed what the stream decodes to");
    if let Ok(events) = whole {
        for ev in events {
            assert!(
                ev.data.len() <= LIMIT,
                "an event past the limit: {}",
                ev.data.len()
            );
        }
    }
});
