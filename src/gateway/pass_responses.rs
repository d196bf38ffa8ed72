//! A Responses stream passed through: what a continuation needs of the
//! provider's own events, read from the few that carry it (the
//! `response.created` head, items added and done); every event is counted
//! for its sequence number and not parsed otherwise.

use serde::Deserialize;
use serde_json::Value;

use crate::chat::Delta;
use crate::format::responses::{Echo, Followed, OpenItem, ResponsesStreamEncoder};

/// What the provider's Responses events said so far.
#[derive(Debug, Default)]
pub(super) struct ResponsesSeen {
    seen: Followed,
}

/// What is read of an item event.
#[derive(Deserialize)]
struct ItemEvent {
    #[serde(default)]
    sequence_number: Option<u64>,
    #[serde(default)]
    output_index: Option<usize>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    response: Option<Value>,
}

impl ResponsesSeen {
    /// Notes one event passed through, named `name` with `data`.
    pub(super) fn event(&mut self, name: Option<&str>, data: &str) {
        // OpenAI numbers every event from 0; the count stands in for the
        // events not read, an event read corrects it.
        self.seen.seq = self.seen.seq.saturating_add(1);
        if name == Some("response.content_part.added") {
            if let Some(open) = &mut self.seen.open {
                open.part_added = true;
            }
            return;
        }
        let read = matches!(
            name,
            Some("response.created" | "response.output_item.added" | "response.output_item.done")
        );
        if !read {
            return;
        }
        let Ok(ev) = serde_json::from_str::<ItemEvent>(data) else {
            return;
        };
        if let Some(n) = ev.sequence_number {
            self.seen.seq = self.seen.seq.max(n.saturating_add(1));
        }
        if let Some(at) = ev.output_index {
            self.seen.next_output = self.seen.next_output.max(at.saturating_add(1));
        }
        match name {
            Some("response.created") => self.seen.head = ev.response,
            Some("response.output_item.added") => {
                self.seen.open = ev.item.map(|item| OpenItem {
                    index: ev.output_index.unwrap_or(0),
                    item,
                    ..OpenItem::default()
                });
            }
            Some("response.output_item.done") => {
                self.seen.open = None;
                self.seen.done.extend(ev.item);
            }
            _ => {}
        }
    }

    /// Notes a delta read from an event passed through: the open
    /// message's text, which a continuation goes on from.
    pub(super) fn passed(&mut self, d: &Delta) {
        if let (Delta::Text { text }, Some(open)) = (d, &mut self.seen.open) {
            open.text.push_str(text);
        }
    }

    /// An encoder for a continuation's deltas, or its error end, after
    /// the events seen, and the events that must go out first (the
    /// provider's open item finished or taken up).
    pub(super) fn encoder(&self) -> (ResponsesStreamEncoder, Vec<u8>) {
        ResponsesStreamEncoder::following(self.seen.clone(), Echo::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::FinishReason;

    fn events(bytes: &[u8]) -> Vec<(String, Value)> {
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        text.split("\n\n")
            .filter(|e| !e.trim().is_empty())
            .map(|e| {
                let name = e.lines().find_map(|l| l.strip_prefix("event: ")).unwrap();
                let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                (name.to_string(), serde_json::from_str(data).unwrap())
            })
            .collect()
    }

    #[test]
    fn a_continuation_goes_on_in_the_providers_open_message() {
        let mut seen = ResponsesSeen::default();
        seen.event(
            Some("response.created"),
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_up1","object":"response","created_at":7,"model":"gpt-x","status":"in_progress","output":[],"instructions":"be brief"}}"#,
        );
        seen.event(Some("response.in_progress"), r#"{"sequence_number":1}"#);
        seen.event(
            Some("response.output_item.added"),
            r#"{"sequence_number":2,"output_index":0,"item":{"type":"message","id":"msg_up1"}}"#,
        );
        seen.event(
            Some("response.content_part.added"),
            r#"{"sequence_number":3}"#,
        );
        seen.event(
            Some("response.output_text.delta"),
            r#"{"sequence_number":4}"#,
        );
        seen.passed(&Delta::Text {
            text: "the ".into(),
        });
        let (mut enc, mut out) = seen.encoder();
        assert!(out.is_empty(), "the message's part was already added");
        out.extend(enc.delta(&Delta::Text {
            text: "rest".into(),
        }));
        out.extend(enc.delta(&Delta::Finish {
            reason: FinishReason::Stop,
        }));
        out.extend(enc.finish());
        let evs = events(&out);
        assert!(evs.iter().all(|(n, _)| n != "response.created"));
        for (i, (_, v)) in evs.iter().enumerate() {
            assert_eq!(v["sequence_number"], 5 + i as u64);
        }
        // The provider's message goes on: its id, its index, the whole text.
        let (first, delta) = &evs[0];
        assert_eq!(first, "response.output_text.delta");
        assert_eq!(delta["item_id"], "msg_up1");
        assert_eq!(delta["output_index"], 0);
        let done: Vec<_> = evs
            .iter()
            .filter(|(n, _)| n == "response.output_item.done")
            .collect();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].1["item"]["id"], "msg_up1");
        let (last, end) = evs.last().unwrap();
        assert_eq!(last, "response.completed");
        let r = &end["response"];
        assert_eq!(r["id"], "resp_up1");
        assert_eq!(r["model"], "gpt-x");
        assert_eq!(r["instructions"], "be brief");
        assert_eq!(r["status"], "completed");
        assert_eq!(r["output"][0]["content"][0]["text"], "the rest");
    }

    #[test]
    fn a_broken_stream_finishes_the_open_item_then_fails_the_providers_response() {
        let mut seen = ResponsesSeen::default();
        seen.event(
            Some("response.created"),
            r#"{"sequence_number":0,"response":{"id":"resp_up2","object":"response","created_at":7,"model":"m","status":"in_progress","output":[]}}"#,
        );
        seen.event(
            Some("response.output_item.added"),
            r#"{"sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_up2","name":"f","arguments":""}}"#,
        );
        let e = crate::error::ProviderError::new(crate::error::ErrorKind::Timeout, "idle");
        let (mut enc, mut out) = seen.encoder();
        out.extend(enc.error(&e));
        let evs = events(&out);
        let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["response.output_item.done", "response.failed", "error"]
        );
        assert_eq!(
            evs[0].1["item"]["status"], "incomplete",
            "the cut call is done"
        );
        assert_eq!(evs[0].1["sequence_number"], 2);
        assert_eq!(evs[1].1["response"]["id"], "resp_up2");
        assert_eq!(evs[1].1["response"]["status"], "failed");
        assert_eq!(evs[1].1["response"]["output"][0]["id"], "fc_up2");
    }
}
