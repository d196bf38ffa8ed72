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
