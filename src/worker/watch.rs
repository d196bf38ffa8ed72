//! The owner's side of the relays' watches: `POST http://do/watch` folds
//! the relay's gathered batch like `/report`, answers the view at once and
//! keeps the response open, writing the view again, one JSON line each,
//! whenever the breaker's generation moves. The relay ends the call after
//! about a [`HEARTBEAT`] and watches again; relays therefore hear of a
//! transition one trip after it happens, and the owner's load is one call
//! per relay per heartbeat.
//!
//! The owner sets no timer of its own (workerd runs none for a response
//! whose handler has returned): a watch the relay left is dropped when a
//! write to it fails, and one older than [`WATCH_LIMIT`] at the owner's
//! next call.

use std::cell::RefCell;
use std::time::Duration;

use futures_channel::mpsc::{unbounded, UnboundedSender};
use futures_util::StreamExt;
use worker::{Headers, Response, Result};

use crate::fleet::{CALL_TIMEOUT, HEARTBEAT};
use crate::platform::{millis, UnixMillis};

/// The watch answer's header saying how many relays watch the owner.
pub(super) const WATCHERS: &str = "x-watchers";

/// A watch open longer than this was left by its relay (which ends its
/// own after a heartbeat, or gives up after a call's time limit more).
pub(super) const WATCH_LIMIT: Duration = HEARTBEAT.saturating_add(CALL_TIMEOUT);

/// The watches held open on one owner: each one's writer and when it
/// opened.
#[derive(Default)]
pub(super) struct Watchers(RefCell<Vec<(UnboundedSender<Vec<u8>>, UnixMillis)>>);

impl Watchers {
    /// A watch's response: `first` (a view's JSON) now, then the views
    /// [`Watchers::tell`] writes, until the relay ends it; its
    /// [`WATCHERS`] header counts the watches open, this one among them.
    pub(super) fn open(&self, first: String, now: UnixMillis) -> Result<Response> {
        let (sender, receiver) = unbounded();
        let mut watchers = self.0.borrow_mut();
        prune(&mut watchers, now);
        let _ = sender.unbounded_send(line(first));
        watchers.push((sender, now));
        let body = receiver.map(Ok::<Vec<u8>, worker::Error>);
        let headers = Headers::new();
        headers.set("content-type", "application/x-ndjson")?;
        // How many relays watch: each spreads its probe question after a
        // cooldown over a window that grows with them (`Relay::stagger`).
        headers.set(WATCHERS, &watchers.len().to_string())?;
        Ok(Response::from_stream(body)?.with_headers(headers))
    }

    /// Writes `view` (a view's JSON) on every watch held open.
    pub(super) fn tell(&self, view: String, now: UnixMillis) {
        let line = line(view);
        let mut watchers = self.0.borrow_mut();
        prune(&mut watchers, now);
        watchers.retain(|(w, _)| w.unbounded_send(line.clone()).is_ok());
    }
}

/// Drops the watches their relays left: closed, or past [`WATCH_LIMIT`]
/// (dropping the writer ends the response). The list stays as long as the
/// relays watching.
fn prune(watchers: &mut Vec<(UnboundedSender<Vec<u8>>, UnixMillis)>, now: UnixMillis) {
    watchers
        .retain(|(w, opened)| !w.is_closed() && now < opened.saturating_add(millis(WATCH_LIMIT)));
}

fn line(json: String) -> Vec<u8> {
    let mut bytes = json.into_bytes();
    bytes.push(b'\n');
    bytes
}
