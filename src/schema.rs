//! Portable JSON Schemas: the tools' inputs and outputs in `tools/list`, and the parameters of
//! explore's functions declared to Gemini.
//!
//! schemars emits `$schema`, `["string","null"]` type arrays, `anyOf` with null for `Option`s of
//! enums, and formats such as `uint32`. Several clients reject or mangle those (Claude Code
//! refuses top-level `anyOf`; the Gemini CLI forwards everything to the Gemini API). This module
//! generates with inlined subschemas and rewrites the result into the portable subset.

use std::sync::Arc;

/// A JSON object (what a schema is).
type JsonObject = serde_json::Map<String, Value>;
use schemars::{JsonSchema, generate::SchemaSettings};
use serde_json::{Map, Value};

/// The input schema of a parameters struct, portable.
pub fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let settings = SchemaSettings::draft2020_12()
        .for_deserialize()
        .with(|s| s.inline_subschemas = true);
    portable(
        settings
            .into_generator()
            .into_root_schema_for::<T>()
            .to_value(),
    )
}

/// The output schema of a serialised result type: portable and compact. Every client pays for
/// `tools/list` in its context window, so only the top level is described (property types and
/// enums); nested objects are `{"type": "object"}`. `except` names properties to leave out.
pub fn output_schema<T: JsonSchema>(except: &[&str]) -> Arc<JsonObject> {
    let settings = SchemaSettings::draft2020_12()
        .for_serialize()
        .with(|s| s.inline_subschemas = true);
    let full = portable(
        settings
            .into_generator()
            .into_root_schema_for::<T>()
            .to_value(),
    );
    let mut out = JsonObject::new();
    out.insert("type".into(), Value::String("object".into()));
    let mut props = Map::new();
    if let Some(Value::Object(p)) = full.get("properties") {
        for (name, schema) in p {
            if except.contains(&name.as_str()) {
                continue;
            }
            let mut slim = Map::new();
            for k in ["type", "enum"] {
                if let Some(v) = schema.get(k) {
                    slim.insert(k.into(), v.clone());
                }
            }
            props.insert(name.clone(), Value::Object(slim));
        }
    }
    out.insert("properties".into(), Value::Object(props));
    if let Some(Value::Array(req)) = full.get("required") {
        let req: Vec<Value> = req
            .iter()
            .filter(|r| r.as_str().is_some_and(|r| !except.contains(&r)))
            .cloned()
            .collect();
        out.insert("required".into(), Value::Array(req));
    }
    Arc::new(out)
}

fn portable(mut v: Value) -> Arc<JsonObject> {
    clean(&mut v);
    let Value::Object(mut root) = v else {
        return Arc::new(JsonObject::new());
    };
    for k in ["$schema", "title", "description", "$defs", "definitions"] {
        root.remove(k);
    }
    root.insert("type".into(), Value::String("object".into()));
    Arc::new(root)
}

fn clean(v: &mut Value) {
    match v {
        Value::Object(map) => {
            collapse_nullable(map);
            map.remove("format");
            map.remove("title");
            map.remove("minimum");
            for (_, child) in map.iter_mut() {
                clean(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(clean),
        _ => {}
    }
}

/// `type: [T, "null"]` → `type: T`; `anyOf: [X, {type: null}]` → X; `const`-only enums merged.
fn collapse_nullable(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get("type") {
        let non_null: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        if non_null.len() == 1 {
            map.insert("type".into(), non_null[0].clone());
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = map.get(key) {
            let non_null: Vec<Value> = options
                .iter()
                .filter(|o| o.get("type").and_then(Value::as_str) != Some("null"))
                .cloned()
                .collect();
            if non_null.len() == 1
                && let Value::Object(inner) = &non_null[0]
            {
                let inner = inner.clone();
                map.remove(key);
                for (k, val) in inner {
                    map.entry(k).or_insert(val);
                }
            }
        }
    }
    // Enum of strings written as `oneOf` of `const`s (documented variants) → plain `enum`.
    if let Some(Value::Array(options)) = map.get("oneOf")
        && options
            .iter()
            .all(|o| o.get("const").is_some_and(Value::is_string))
    {
        let values: Vec<Value> = options
            .iter()
            .filter_map(|o| o.get("const").cloned())
            .collect();
        map.remove("oneOf");
        map.insert("type".into(), Value::String("string".into()));
        map.insert("enum".into(), Value::Array(values));
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|x| !x.is_null());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Mode {
        Low,
        High,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct P {
        /// Text.
        text: String,
        /// Optional count.
        count: Option<u32>,
        /// Mode.
        mode: Option<Mode>,
        /// Temperature.
        temperature: Option<f32>,
        /// Paths.
        files: Option<Vec<String>>,
    }

    #[test]
    fn schemas_are_portable() {
        let s = Value::Object((*input_schema::<P>()).clone());
        let text = s.to_string();
        for banned in [
            "$schema", "\"null\"", "anyOf", "oneOf", "allOf", "format", "$ref", "$defs",
        ] {
            assert!(!text.contains(banned), "{banned} in {text}");
        }
        assert_eq!(
            s["properties"]["mode"]["enum"],
            serde_json::json!(["low", "high"])
        );
        assert_eq!(s["properties"]["mode"]["description"], "Mode.");
        assert_eq!(s["properties"]["count"]["type"], "integer");
        assert_eq!(s["required"], serde_json::json!(["text"]));
    }
}
