//! A committed stream's rest handed to the host (see [`crate::Splice`]):
//! the provider's bytes then reach the client without crossing into the
//! gateway read by read, while the stream reads a copy of them only every
//! half idle period and at the end, to keep its books (finish, usage,
//! the text a continuation extends) and to decide the end as before.

use std::ops::Deref;

use super::ChatStream;
use crate::engine::client::Client;
use crate::engine::pace::Pace;
use crate::engine::store::BreakerStore;
use crate::platform::{Platform, Spliced};

impl<C, P, S> ChatStream<C, P, S>
where
    C: Deref<Target = Client<P, S>> + Clone,
    P: Platform,
    S: BreakerStore,
{
    /// Hands the rest of the attempt's body to the host, when everything
    /// from here on would reach the client as it came: past the commit
    /// point, the attempt's events passing through, nothing read and not
    /// yet handed out, the idle deadline kept by the stream's timer (whose
    /// firing lets the spliced body read, `engine/idle.rs`) and no pace
    /// being judged. The
    /// bytes are those the caller must write first: the part of an event
    /// read but not yet handed out.
    ///
    /// From then on the attempt's raw events are for bookkeeping only.
    /// What the copy shows too late to hold back (a malformed chunk, a
    /// provider's error event) has reached the client before the gateway
    /// sees it: the attempt fails then as it would have, and the
    /// continuation or error event follows it.
    pub(crate) fn splice(&mut self) -> Option<(Vec<u8>, Spliced)> {
        if !self.sent.committed || !self.sent.out.is_empty() || self.done {
            return None;
        }
        self.timers.as_ref()?;
        let conn = self.conn.as_mut()?;
        let paced = conn.pace.as_ref().and_then(Pace::due).is_some();
        if !conn.raw
            || paced
            || conn.first_content.is_none()
            || !conn.pending.is_empty()
            || !conn.held.is_empty()
        {
            return None;
        }
        let head = conn.decoder.unsent()?.to_vec();
        let rest = conn.body.as_ref()?.splice()?;
        Some((head, rest))
    }
}
