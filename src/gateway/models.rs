//! `GET /v1/models` and `GET /v1/models/{id}`: every configured route, in
//! the client's format. OpenAI's list object (`{object: "list", data:
//! [{id, object: "model", created, owned_by}]}`) by default, Anthropic's
//! (`{data: [{type: "model", id, display_name, created_at}], has_more,
//! first_id, last_id}`) for a client that sends `anthropic-version`. Each
//! model also names the entries behind it (`provider/model`, and the
//! embedding model of an embeddings route): ids from the configuration,
//! never a key or an upstream URL. A route has no creation time; `created`
//! is the epoch, which both SDKs read as a plain number or date.

use std::collections::BTreeMap;

use percent_encoding::percent_decode_str;
use serde_json::{json, Value};

use super::http::{Format, Outbound};
use super::proxy::Gateway;
use super::render::{error_response, json_response};
use super::request::clip;
use crate::engine::client::Entry;
use crate::engine::store::BreakerStore;
use crate::platform::Platform;

impl<P: Platform + 'static, S: BreakerStore + 'static> Gateway<P, S> {
    /// `GET /v1/models/{id}`.
    pub(super) fn model(&self, format: Format, path: &str) -> Outbound {
        let id = path.trim_end_matches('/').trim_start_matches("/v1/models/");
        match one(self.client.routes(), format, id) {
            Some(m) => json_response(200, &m),
            None => error_response(
                format,
                404,
                &format!(
                    "no route or model \"{}\" (GET /v1/models lists them)",
                    clip(id, 200)
                ),
                Some("model_not_found"),
            ),
        }
    }
}

/// The list of every route.
pub(super) fn list(routes: &BTreeMap<String, Vec<Entry>>, format: Format) -> Value {
    let data: Vec<Value> = routes
        .iter()
        .map(|(name, entries)| model(name, entries, format))
        .collect();
    match format {
        Format::OpenAi | Format::Responses => json!({ "object": "list", "data": data }),
        Format::Anthropic => json!({
            "data": data,
            "has_more": false,
            "first_id": routes.keys().next(),
            "last_id": routes.keys().next_back(),
        }),
    }
}

/// The route `id` names (the path segment after `/v1/models/`,
/// percent-decoded), or `None`.
pub(super) fn one(
    routes: &BTreeMap<String, Vec<Entry>>,
    format: Format,
    id: &str,
) -> Option<Value> {
    let id = percent_decode_str(id).decode_utf8().ok()?;
    let (name, entries) = routes.get_key_value(id.as_ref())?;
    Some(model(name, entries, format))
}

/// One route as a model object.
fn model(name: &str, entries: &[Entry], format: Format) -> Value {
    let behind: Vec<String> = entries
        .iter()
        .map(|e| format!("{}/{}", e.provider, e.model))
        .collect();
    let mut m = match format {
        Format::OpenAi | Format::Responses => json!({
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "resilient-llm",
            "entries": behind,
        }),
        Format::Anthropic => json!({
            "type": "model",
            "id": name,
            "display_name": name,
            "created_at": "1970-01-01T00:00:00Z",
            "entries": behind,
        }),
    };
    if let Some(e) = entries.first().and_then(|e| e.embeddings.as_ref()) {
        m["embeddings"] = json!({ "family": e.family, "dimensions": e.dimensions });
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::endpoint::EmbeddingModel;

    fn routes() -> BTreeMap<String, Vec<Entry>> {
        let small = EmbeddingModel {
            family: "text-embedding-3-small".into(),
            dimensions: 1536,
        };
        BTreeMap::from([
            (
                "chat".to_string(),
                vec![Entry::new("a", "claude"), Entry::new("b", "gpt")],
            ),
            (
                "embed/small".to_string(),
                vec![Entry::new("b", "text-embedding-3-small").embeddings(small)],
            ),
        ])
    }

    #[test]
    fn both_shapes_list_every_route_and_what_is_behind_it() {
        let o = list(&routes(), Format::OpenAi);
        assert_eq!(o["object"], "list");
        assert_eq!(o["data"][0]["id"], "chat");
        assert_eq!(o["data"][0]["object"], "model");
        assert_eq!(o["data"][0]["entries"], json!(["a/claude", "b/gpt"]));
        assert_eq!(o["data"][1]["embeddings"]["dimensions"], 1536);
        let a = list(&routes(), Format::Anthropic);
        assert_eq!(a["data"][1]["type"], "model");
        assert_eq!(a["data"][1]["display_name"], "embed/small");
        assert_eq!(
            (a["first_id"].clone(), a["last_id"].clone()),
            (json!("chat"), json!("embed/small"))
        );
        assert_eq!(a["has_more"], false);
    }

    #[test]
    fn one_model_by_id_decoded() {
        let m = one(&routes(), Format::OpenAi, "embed%2Fsmall").expect("found");
        assert_eq!(m["id"], "embed/small");
        assert!(one(&routes(), Format::Anthropic, "embed/small").is_some());
        assert!(one(&routes(), Format::OpenAi, "nope").is_none());
        assert!(one(&routes(), Format::OpenAi, "%FF").is_none());
    }
}
