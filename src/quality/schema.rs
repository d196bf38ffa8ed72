//! A JSON Schema (draft 2020-12) compiled once from the configuration, by
//! the boon crate, and the first place an answer breaks it.

use std::error::Error;

use serde_json::Value;

/// A compiled schema.
pub struct Schema {
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

/// Where a schema's own `$ref`s may lead: nowhere outside it. A
/// configuration names no files or URLs to fetch at validation time.
struct NoLoader;

impl boon::UrlLoader for NoLoader {
    fn load(&self, url: &str) -> Result<Value, Box<dyn Error>> {
        Err(format!("{url}: a schema may refer only to itself").into())
    }
}

/// The location the configured schema goes by (its `$ref`s resolve
/// against it).
const LOCATION: &str = "urn:resilient-llm:validator-schema";

/// The deepest first cause of a validation error: where it is, and what.
fn first_cause(mut e: &boon::ValidationError<'_, '_>) -> (String, String) {
    while let Some(cause) = e.causes.first() {
        e = cause;
    }
    (e.instance_location.to_string(), e.kind.to_string())
}

/// The JSON pointer part of a location inside the configured schema.
fn pointer_in(loc: &str) -> &str {
    let rest = loc.strip_prefix(LOCATION).unwrap_or(loc);
    rest.strip_prefix('#').unwrap_or(rest)
}

impl Schema {
    /// `schema` compiled as draft 2020-12 (unless it names another with
    /// `$schema`); its mistake as `(JSON pointer into it, message)`.
    pub fn compile(schema: &Value) -> Result<Schema, (String, String)> {
        let mut compiler = boon::Compiler::new();
        compiler.set_default_draft(boon::Draft::V2020_12);
        compiler.use_loader(Box::new(NoLoader));
        let mut schemas = boon::Schemas::new();
        let compiled = match compiler.add_resource(LOCATION, schema.clone()) {
            Ok(()) => compiler.compile(LOCATION, &mut schemas),
            Err(e) => Err(e),
        };
        match compiled {
            Ok(index) => Ok(Schema { schemas, index }),
            Err(boon::CompileError::ValidationError { src, .. }) => Err(first_cause(&src)),
            // boon says only where.
            Err(boon::CompileError::ParseIdError { loc }) => {
                Err((format!("{}/$id", pointer_in(&loc)), "not a URL".into()))
            }
            Err(e) => Err((String::new(), e.to_string())),
        }
    }

    /// Whether `value` satisfies the schema; else `(JSON pointer into the
    /// value, what is wrong)`.
    pub fn check(&self, value: &Value) -> Result<(), (String, String)> {
        self.schemas
            .validate(value, self.index)
            .map_err(|e| first_cause(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_mistake_names_its_place() {
        let err = Schema::compile(&json!({"properties": {"age": {"type": "whole"}}}))
            .err()
            .unwrap();
        assert_eq!(err.0, "/properties/age/type", "{err:?}");
    }

    #[test]
    fn a_remote_ref_is_refused_at_compile_time() {
        let err = Schema::compile(&json!({"$ref": "https://example.com/s.json"}))
            .err()
            .unwrap();
        assert!(err.1.contains("https://example.com/s.json"), "{err:?}");
    }

    #[test]
    fn an_id_must_be_a_uri_reference() {
        // A URI reference is ASCII (RFC 3986): a non-ASCII host is written as punycode.
        let err = Schema::compile(&json!({"$id": "https://bücher.example/s", "type": "object"}))
            .err()
            .unwrap();
        assert_eq!(err.0, "/$id", "{err:?}");
        assert!(err.1.contains("uri-reference"), "{err:?}");
        let s =
            Schema::compile(&json!({"$id": "https://xn--bcher-kva.example/s", "type": "object"}))
                .unwrap();
        assert_eq!(s.check(&json!({})), Ok(()));
        assert!(s.check(&json!([])).is_err());
        let err = Schema::compile(&json!({"$defs": {"a": {"$id": "https://[::1/a"}}}))
            .err()
            .unwrap();
        assert_eq!(err.0, "/$defs/a/$id", "{err:?}");
    }

    #[test]
    fn patterns_are_ecma_262_with_unicode_classes() {
        // `\d` and `\w` are ASCII in ECMA-262 (boon writes them as ASCII classes).
        let s = Schema::compile(&json!({"type": "string", "pattern": "^\\w+-\\d{2}$"})).unwrap();
        assert_eq!(s.check(&json!("sku-42")), Ok(()));
        assert!(s.check(&json!("skü-42")).is_err());
        // Unicode classes work (the `u` flag's `\p{…}`).
        let s = Schema::compile(&json!({"type": "string", "pattern": "^\\p{L}+$"})).unwrap();
        assert_eq!(s.check(&json!("Bücher")), Ok(()));
        assert_eq!(s.check(&json!("книги")), Ok(()));
        assert!(s.check(&json!("b1")).is_err());
        let err = Schema::compile(&json!({"type": "string", "pattern": "(x"}))
            .err()
            .unwrap();
        assert_eq!(err.0, "/pattern", "{err:?}");
    }

    #[test]
    fn draft_2020_12_keywords_apply() {
        let s = Schema::compile(&json!({
            "type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}
        }))
        .unwrap();
        assert_eq!(s.check(&json!([1, "a", "b"])), Ok(()));
        let (at, what) = s.check(&json!(["a"])).unwrap_err();
        assert_eq!(
            (at.as_str(), what.as_str()),
            ("/0", "want integer, but got string")
        );
        assert!(s.check(&json!([1, 2])).is_err());
    }
}
