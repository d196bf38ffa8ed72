//! A Responses stream passed through: what a continuation needs of the
//! provider's own events, read from the few that carry it (the
//! `response.created` head, items added and done); every event is counted
//! for its sequence number and not parsed otherwise.

use serde::Deserialize;
use serde_json::Value;

use crate::format::responses::{Echo, Followed, ResponsesStreamEncoder};

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
            Some("response.output_item.done") => self.seen.done.extend(ev.item),
            _ => {}
        }
    }

    /// An encoder for a continuation's deltas, or its error end, after
    /// the events seen.
    pub(super) fn encoder(&self) -> ResponsesStreamEncoder {
        ResponsesStreamEncoder::following(self.seen.clone(), Echo::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{Delta, FinishReason};

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
    fn a_continuation_follows_the_providers_events() {
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
            Some("response.output_text.delta"),
            r#"{"sequence_number":3}"#,
        );
        let mut enc = seen.encoder();
        let mut out = enc.delta(&Delta::Text {
            text: "rest".into(),
        });
        out.extend(enc.delta(&Delta::Finish {
            reason: FinishReason::Stop,
        }));
        out.extend(enc.finish());
        let evs = events(&out);
        assert!(evs.iter().all(|(n, _)| n != "response.created"));
        for (i, (_, v)) in evs.iter().enumerate() {
            assert_eq!(v["sequence_number"], 4 + i as u64);
        }
        let (first, added) = &evs[0];
        assert_eq!(first, "response.output_item.added");
        assert_eq!(added["output_index"], 1);
        let (last, done) = evs.last().unwrap();
        assert_eq!(last, "response.completed");
        let r = &done["response"];
        assert_eq!(r["id"], "resp_up1");
        assert_eq!(r["model"], "gpt-x");
        assert_eq!(r["instructions"], "be brief");
        assert_eq!(r["status"], "completed");
        assert_eq!(r["output"][0]["content"][0]["text"], "rest");
    }

    #[test]
    fn a_broken_continuation_fails_the_providers_response() {
        let mut seen = ResponsesSeen::default();
        seen.event(
            Some("response.created"),
            r#"{"sequence_number":0,"response":{"id":"resp_up2","object":"response","created_at":7,"model":"m","status":"in_progress","output":[]}}"#,
        );
        let e = crate::error::ProviderError::new(crate::error::ErrorKind::Timeout, "idle");
        let evs = events(&seen.encoder().error(&e));
        let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["response.failed", "error"]);
        assert_eq!(evs[0].1["sequence_number"], 1);
        assert_eq!(evs[0].1["response"]["id"], "resp_up2");
        assert_eq!(evs[0].1["response"]["status"], "failed");
    }
}
