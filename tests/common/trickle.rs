//! A request body that arrives a byte at a time on the fake clock: the
//! slow-body tests' one way to send one.

use std::time::Duration;

use resilient_llm::testing::FakePlatform;
use resilient_llm::{Body, Platform, TransportError};

/// The first `n` of `bytes`, one every `every`.
pub fn trickle(p: &FakePlatform, n: usize, every: Duration, bytes: Vec<u8>) -> Body {
    let p = p.clone();
    let chunks = futures_util::stream::unfold(0usize, move |i| {
        let p = p.clone();
        let byte = bytes.get(i).copied();
        async move {
            let byte = byte.filter(|_| i < n)?;
            p.sleep(every).await;
            Some((Ok::<_, TransportError>(vec![byte]), i + 1))
        }
    });
    Body::stream(chunks)
}
