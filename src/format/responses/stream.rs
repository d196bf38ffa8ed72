//! Outbound to a client: neutral deltas as the Responses API's typed
//! stream events.

use serde_json::{json, Value};

use super::response::{
    call_item, message_item, reasoning_item, response_object, text_part, ResponseHead,
};
use super::{status_of, Echo, OutUsage};
use crate::chat::{Delta, FinishReason, Thinking, ToolCall, Usage};
use crate::error::ProviderError;
use crate::format::merge_usage;
use crate::format::openai::stream::{default_code, error_type};

/// Writes a Responses stream, one delta at a time.
///
/// - The first delta writes `response.created` and `response.in_progress`.
/// - Output comes as items, one open at a time, each opened with
///   `response.output_item.added` (and `response.content_part.added` for
///   text and reasoning), extended by `response.output_text.delta`,
///   `response.reasoning_text.delta` or
///   `response.function_call_arguments.delta`, and closed with its `…done`
///   events when the next item opens or the stream ends.
/// - [`finish`](Self::finish) writes `response.completed` (or
///   `response.incomplete` after a token limit or content filter) holding
///   the whole Response; [`error`](Self::error) writes `response.failed`
///   and an `error` event, never a completion. The `error` event carries
///   an `error` object too, which the official SDKs raise as an API error
///   while iterating.
/// - Every event carries its `sequence_number`, from 0.
#[derive(Debug, Clone)]
pub(crate) struct ResponsesStreamEncoder {
    id: String,
    created: u64,
    model: String,
    echo: Echo,
    seq: u64,
    started: bool,
    items: Vec<Item>,
    /// `items` up to here are closed.
    closed_items: usize,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    closed: bool,
    /// The output index of `items[0]`: after the items a provider's own
    /// events already announced, when this encoder continues them.
    base: usize,
    /// Those items, done, as the provider wrote them.
    prior: Vec<Value>,
    /// The provider's Response object (from its `response.created`), the
    /// base of the Responses this encoder writes when it continues one.
    head: Option<Value>,
    /// The id of `items[0]` when it is the provider's message, continued.
    first_id: Option<String>,
}

/// What a provider's own Responses events said, for an encoder that
/// continues them ([`ResponsesStreamEncoder::following`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Followed {
    /// The Response object of its `response.created`.
    pub(crate) head: Option<Value>,
    /// The next sequence number.
    pub(crate) seq: u64,
    /// The next output index.
    pub(crate) next_output: usize,
    /// The output items done so far.
    pub(crate) done: Vec<Value>,
    /// The item added and not done when the provider's events stopped.
    pub(crate) open: Option<OpenItem>,
}

/// A provider's output item left open by a cut.
#[derive(Debug, Clone, Default)]
pub(crate) struct OpenItem {
    pub(crate) index: usize,
    /// The item as `response.output_item.added` gave it.
    pub(crate) item: Value,
    /// Its `response.content_part.added` went out.
    pub(crate) part_added: bool,
    /// The text its deltas gave so far (a message's).
    pub(crate) text: String,
}

#[derive(Debug, Clone)]
enum Item {
    Message(String),
    Reasoning(Thinking),
    /// A call and the provider's index of it.
    Call(u32, ToolCall),
}

impl ResponsesStreamEncoder {
    /// An encoder for response `id` created at `created` (Unix seconds),
    /// answered by `model` until a [`Delta::Start`] names another.
    pub(crate) fn new(id: String, created: u64, model: String, echo: Echo) -> Self {
        ResponsesStreamEncoder {
            id,
            created,
            model,
            echo,
            seq: 0,
            started: false,
            items: Vec::new(),
            closed_items: 0,
            finish: None,
            usage: None,
            closed: false,
            base: 0,
            prior: Vec::new(),
            head: None,
            first_id: None,
        }
    }

    /// An encoder whose events follow a provider's own: no second
    /// `response.created`, sequence numbers and output indices after the
    /// provider's, and the Response it ends with the provider's, its output
    /// the provider's done items then this encoder's.
    ///
    /// An item the provider left open is finished first (every item added
    /// is done before the end, which the SDKs check): a message goes on
    /// under its own id, with the continuation's text; any other item is
    /// done as it was added, `incomplete`. The bytes returned are those
    /// events, to go out before the encoder's.
    pub(crate) fn following(seen: Followed, echo: Echo) -> (Self, Vec<u8>) {
        let head = seen.head.unwrap_or_default();
        let text = |k: &str| head.get(k).and_then(Value::as_str).unwrap_or_default();
        let (id, model) = (text("id").to_string(), text("model").to_string());
        let created = head.get("created_at").and_then(Value::as_u64).unwrap_or(0);
        let mut enc = ResponsesStreamEncoder::new(id, created, model, echo);
        enc.started = true;
        enc.seq = seen.seq;
        enc.base = seen.next_output;
        enc.prior = seen.done;
        enc.head = head.is_object().then_some(head);
        let mut out = Vec::new();
        let Some(open) = seen.open else {
            return (enc, out);
        };
        let item_id = open
            .item
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string);
        let is_message = open.item.get("type").and_then(Value::as_str) == Some("message");
        match item_id {
            Some(item_id) if is_message => {
                enc.base = open.index;
                enc.items.push(Item::Message(open.text));
                enc.first_id = Some(item_id.clone());
                if !open.part_added {
                    enc.event(
                        &mut out,
                        "response.content_part.added",
                        json!({"item_id": item_id, "output_index": open.index,
                               "content_index": 0, "part": text_part("")}),
                    );
                }
            }
            _ => {
                let mut item = open.item;
                if let Value::Object(m) = &mut item {
                    m.insert("status".into(), json!("incomplete"));
                }
                enc.event(
                    &mut out,
                    "response.output_item.done",
                    json!({"output_index": open.index, "item": item.clone()}),
                );
                enc.prior.push(item);
            }
        }
        (enc, out)
    }

    /// The bytes for one delta (often none).
    pub(crate) fn delta(&mut self, d: &Delta) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        let mut out = Vec::new();
        match d {
            Delta::Start { model } => {
                if let Some(m) = model.as_deref().filter(|m| !m.is_empty()) {
                    self.model = m.to_string();
                }
            }
            Delta::Text { text } if !text.is_empty() => {
                self.start(&mut out);
                if !matches!(self.open(), Some(Item::Message(_))) {
                    self.open_item(&mut out, Item::Message(String::new()));
                }
                let at = self.items.len() - 1;
                if let Some(Item::Message(t)) = self.items.last_mut() {
                    t.push_str(text);
                }
                let item_id = self.item_id(at);
                self.event(
                    &mut out,
                    "response.output_text.delta",
                    json!({"item_id": item_id, "output_index": self.base + at, "content_index": 0,
                           "delta": text, "logprobs": []}),
                );
            }
            Delta::Text { .. } => {}
            Delta::Thinking(t) => {
                if t.text.is_empty() {
                    // A signature ends the block; a redacted block has no
                    // text to show.
                    if t.signature.is_some() && matches!(self.open(), Some(Item::Reasoning(_))) {
                        self.close_open(&mut out);
                    }
                    return out;
                }
                self.start(&mut out);
                if !matches!(self.open(), Some(Item::Reasoning(_))) {
                    self.open_item(&mut out, Item::Reasoning(Thinking::default()));
                }
                let at = self.items.len() - 1;
                if let Some(Item::Reasoning(r)) = self.items.last_mut() {
                    r.text.push_str(&t.text);
                }
                let item_id = self.item_id(at);
                self.event(
                    &mut out,
                    "response.reasoning_text.delta",
                    json!({"item_id": item_id, "output_index": self.base + at, "content_index": 0,
                           "delta": t.text}),
                );
                if t.signature.is_some() {
                    self.close_open(&mut out);
                }
            }
            Delta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                self.start(&mut out);
                let at = match self
                    .items
                    .iter()
                    .position(|i| matches!(i, Item::Call(n, _) if n == index))
                {
                    Some(at) => at,
                    None => {
                        let call = ToolCall {
                            id: id.clone().unwrap_or_default(),
                            name: name.clone().unwrap_or_default(),
                            arguments: String::new(),
                        };
                        self.open_item(&mut out, Item::Call(*index, call));
                        self.items.len() - 1
                    }
                };
                if arguments.is_empty() {
                    return out;
                }
                if let Some(Item::Call(_, c)) = self.items.get_mut(at) {
                    c.arguments.push_str(arguments);
                }
                let item_id = self.item_id(at);
                self.event(
                    &mut out,
                    "response.function_call_arguments.delta",
                    json!({"item_id": item_id, "output_index": self.base + at, "delta": arguments}),
                );
            }
            Delta::Finish { reason } => self.finish = Some(reason.clone()),
            Delta::Usage { usage } => merge_usage(&mut self.usage, *usage),
            Delta::Done => {}
        }
        out
    }

    /// Ends the stream: the open item's `…done` events, then
    /// `response.completed` (or `response.incomplete`) with the whole
    /// Response.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.start(&mut out);
        self.close_open(&mut out);
        let (status, incomplete) = status_of(self.finish.as_ref());
        let response = self.response(status, incomplete, None);
        let kind = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        self.event(&mut out, kind, json!({ "response": response }));
        self.closed = true;
        out
    }

    /// Ends the stream with `response.failed` (the Response so far, its
    /// `error` set) and an `error` event: never a completion, so a client
    /// cannot take the answer so far for a whole one.
    pub(crate) fn error(&mut self, e: &ProviderError) -> Vec<u8> {
        if self.closed {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.start(&mut out);
        let message = e.message_or_kind();
        let code = e
            .code
            .as_deref()
            .or_else(|| default_code(e.kind))
            .unwrap_or(error_type(e));
        let error = json!({ "code": code, "message": message });
        let response = self.response("failed", None, Some(error));
        self.event(&mut out, "response.failed", json!({ "response": response }));
        self.event(
            &mut out,
            "error",
            json!({"code": code, "message": message, "param": null,
                   "error": {"type": error_type(e), "code": code, "message": message, "param": null}}),
        );
        self.closed = true;
        out
    }

    fn open(&self) -> Option<&Item> {
        self.items[self.closed_items..].last()
    }

    fn item_id(&self, at: usize) -> String {
        if let (0, Some(id)) = (at, &self.first_id) {
            return id.clone();
        }
        let n = self.base + at;
        match self.items.get(at) {
            Some(Item::Message(_)) => format!("msg_{}_{n}", self.id),
            Some(Item::Reasoning(_)) => format!("rs_{}_{n}", self.id),
            Some(Item::Call(..)) | None => format!("fc_{}_{n}", self.id),
        }
    }

    /// `response.created` and `response.in_progress`, once.
    fn start(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let response = self.response("in_progress", None, None);
        self.event(
            out,
            "response.created",
            json!({ "response": response.clone() }),
        );
        self.event(out, "response.in_progress", json!({ "response": response }));
    }

    /// Closes the open item and opens `item`.
    fn open_item(&mut self, out: &mut Vec<u8>, item: Item) {
        self.close_open(out);
        self.items.push(item);
        let at = self.items.len() - 1;
        let id = self.item_id(at);
        // A message's and a reasoning item's part is announced by its own
        // event, so the item opens with no content.
        let (shown, part) = match &self.items[at] {
            Item::Message(_) => (
                json!({"type": "message", "id": id, "status": "in_progress",
                       "role": "assistant", "content": []}),
                Some(text_part("")),
            ),
            Item::Reasoning(_) => (
                json!({"type": "reasoning", "id": id, "summary": [], "content": []}),
                Some(json!({"type": "reasoning_text", "text": ""})),
            ),
            Item::Call(_, c) => (call_item(&id, c, "in_progress"), None),
        };
        self.event(
            out,
            "response.output_item.added",
            json!({"output_index": self.base + at, "item": shown}),
        );
        if let Some(part) = part {
            self.event(
                out,
                "response.content_part.added",
                json!({"item_id": id, "output_index": self.base + at, "content_index": 0, "part": part}),
            );
        }
    }

    /// The open item's `…done` events.
    fn close_open(&mut self, out: &mut Vec<u8>) {
        if self.closed_items >= self.items.len() {
            return;
        }
        let at = self.items.len() - 1;
        self.closed_items = self.items.len();
        let id = self.item_id(at);
        let done = self.done_item(at);
        match &self.items[at] {
            Item::Message(text) => {
                let text = text.clone();
                self.event(
                    out,
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": self.base + at, "content_index": 0,
                           "text": text, "logprobs": []}),
                );
                self.event(
                    out,
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": self.base + at, "content_index": 0,
                           "part": text_part(&text)}),
                );
            }
            Item::Reasoning(t) => {
                let text = t.text.clone();
                self.event(
                    out,
                    "response.reasoning_text.done",
                    json!({"item_id": id, "output_index": self.base + at, "content_index": 0, "text": text}),
                );
                self.event(
                    out,
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": self.base + at, "content_index": 0,
                           "part": {"type": "reasoning_text", "text": text}}),
                );
            }
            Item::Call(_, c) => {
                let (name, arguments) = (c.name.clone(), c.arguments.clone());
                self.event(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": self.base + at, "name": name,
                           "arguments": arguments}),
                );
            }
        }
        self.event(
            out,
            "response.output_item.done",
            json!({"output_index": self.base + at, "item": done}),
        );
    }

    fn done_item(&self, at: usize) -> Value {
        let id = self.item_id(at);
        match &self.items[at] {
            Item::Message(text) => message_item(&id, text, "completed"),
            Item::Reasoning(t) => reasoning_item(&id, t),
            Item::Call(_, c) => call_item(&id, c, "completed"),
        }
    }

    /// The Response so far: the closed items, and usage once known.
    fn response(&self, status: &str, incomplete: Option<&str>, error: Option<Value>) -> Value {
        let output: Vec<Value> = (self.prior.iter().cloned())
            .chain((0..self.closed_items).map(|at| self.done_item(at)))
            .collect();
        if let Some(Value::Object(head)) = &self.head {
            let mut r = head.clone();
            r.insert("status".into(), json!(status));
            r.insert("output".into(), Value::Array(output));
            r.insert("error".into(), error.unwrap_or(Value::Null));
            let incomplete = incomplete.map(|reason| json!({ "reason": reason }));
            r.insert(
                "incomplete_details".into(),
                incomplete.unwrap_or(Value::Null),
            );
            if let Some(u) = self.usage {
                r.insert(
                    "usage".into(),
                    serde_json::to_value(OutUsage::from(u)).unwrap_or(Value::Null),
                );
            }
            return Value::Object(r);
        }
        response_object(ResponseHead {
            id: &self.id,
            created: self.created,
            model: &self.model,
            status,
            incomplete,
            error,
            echo: &self.echo,
            output,
            usage: self.usage.map(OutUsage::from),
        })
    }

    /// One event: `event: <kind>` and its data, with `type` and
    /// `sequence_number` set.
    fn event(&mut self, out: &mut Vec<u8>, kind: &str, mut data: Value) {
        if let Value::Object(m) = &mut data {
            m.insert("type".into(), json!(kind));
            m.insert("sequence_number".into(), json!(self.seq));
        }
        self.seq += 1;
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        // Serializing a Value into a Vec cannot fail: no I/O, string keys.
        let _ = serde_json::to_writer(&mut *out, &data);
        out.extend_from_slice(b"\n\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn events(bytes: &[u8]) -> Vec<Value> {
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        text.split("\n\n")
            .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    fn enc() -> ResponsesStreamEncoder {
        ResponsesStreamEncoder::new("r1".into(), 9, "m".into(), Echo::default())
    }

    #[test]
    fn text_then_a_call_then_completed() {
        let mut e = enc();
        let mut out = e.delta(&Delta::Start {
            model: Some("m-2".into()),
        });
        out.extend(e.delta(&Delta::Text { text: "Hi".into() }));
        out.extend(e.delta(&Delta::ToolCall {
            index: 1,
            id: Some("c1".into()),
            name: Some("get".into()),
            arguments: String::new(),
        }));
        out.extend(e.delta(&Delta::ToolCall {
            index: 1,
            id: None,
            name: None,
            arguments: "{}".into(),
        }));
        out.extend(e.delta(&Delta::Finish {
            reason: FinishReason::ToolCalls,
        }));
        out.extend(e.delta(&Delta::Usage {
            usage: Usage {
                input_tokens: 2,
                output_tokens: 1,
                ..Usage::default()
            },
        }));
        out.extend(e.finish());
        let ev = events(&out);
        let kinds: Vec<_> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        for (i, e) in ev.iter().enumerate() {
            assert_eq!(e["sequence_number"], i);
        }
        let done = &ev[12]["response"];
        assert_eq!(done["model"], "m-2");
        assert_eq!(done["output"][0]["content"][0]["text"], "Hi");
        assert_eq!(done["output"][1]["arguments"], "{}");
        assert_eq!(done["usage"]["total_tokens"], 3);
        assert!(e.finish().is_empty());
    }

    #[test]
    fn an_error_fails_the_response_and_never_completes() {
        let mut e = enc();
        let mut out = e.delta(&Delta::Text { text: "par".into() });
        out.extend(e.error(&ProviderError::new(ErrorKind::Server, "cut")));
        out.extend(e.finish());
        let ev = events(&out);
        let kinds: Vec<_> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(kinds.last(), Some(&"error"));
        assert!(!kinds.contains(&"response.completed"));
        let failed = ev.iter().find(|e| e["type"] == "response.failed").unwrap();
        assert_eq!(failed["response"]["status"], "failed");
        assert_eq!(failed["response"]["error"]["message"], "cut");
        assert!(failed["response"]["usage"].is_null());
    }
}
