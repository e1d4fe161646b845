//! One list of key names: every key name the move grammar allows is a key the desktop runner
//! can press, alone and in a chord.
#![cfg(feature = "desktop")]

use anyhow::{ensure, Context, Result};
use serde_json::Value;
use sightline::decode::{GrammarOptions, MoveSpec};
use sightline::moves::CAPABILITY_NATIVE_INPUT;
use sightline::runner::input::parse_key_combo;
use sightline::runner::parse_key;

use crate::decode_support::view;

/// Every `enum` in the schema that lists key names (the `key` and `key_combo` actions').
fn key_enums(schema: &Value, out: &mut Vec<Vec<String>>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Array(items)) = map.get("enum") {
                if items.iter().any(|v| v == "enter") {
                    out.push(
                        items
                            .iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect(),
                    );
                }
            }
            map.values().for_each(|v| key_enums(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| key_enums(v, out)),
        _ => {}
    }
}

#[test]
fn every_key_name_the_grammar_allows_parses_as_a_runner_key() -> Result<()> {
    let spec = MoveSpec::new(
        &view(&[], &[CAPABILITY_NATIVE_INPUT]),
        &GrammarOptions::default(),
    )?;
    let mut enums = Vec::new();
    key_enums(&spec.json_schema(), &mut enums);
    let names = enums.first().context("the schema allows no key names")?;
    ensure!(
        names.len() >= sightline::moves::keys::KEY_NAMES.len(),
        "{names:?}"
    );
    for name in names {
        // enigo has no Insert key on macOS.
        if cfg!(target_os = "macos") && name == "insert" {
            continue;
        }
        parse_key(name).with_context(|| format!("grammar key {name:?}"))?;
        // As the runner reads a `key_combo` action's keys.
        parse_key_combo(&["ctrl".to_string(), name.clone()])
            .with_context(|| format!("grammar key {name:?} after ctrl"))?;
    }
    Ok(())
}
