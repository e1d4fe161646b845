//! Which files make a model: choosing the text GGUF and its mmproj among names, and the
//! shards a safetensors index lists.

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::hub::paths::check_file_name;
use crate::input_file::{self, InputKind};

/// GGUF quants tried for a Hub GGUF repo without a manifest, in order of preference.
const GGUF_QUANT_PREFERENCE: &[&str] = &["q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16", "bf16"];
/// mmproj precisions tried, in order of preference.
pub(super) const MMPROJ_PREFERENCE: &[&str] = &["q8_0", "f16", "bf16", "f32"];

/// The shard file names of a `model.safetensors.index.json`, in order, without duplicates.
pub(super) fn read_index_shards(index: &Path) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Index {
        weight_map: std::collections::BTreeMap<String, String>,
    }
    let text = input_file::read_string(index, InputKind::Config)?;
    let parsed: Index = serde_json::from_str(&text)
        .map_err(|e| Error::model_file_caused(index, "not a safetensors index", e))?;
    let mut shards: Vec<String> = parsed.weight_map.into_values().collect();
    shards.sort();
    shards.dedup();
    if shards.is_empty() {
        return Err(Error::model_file(index, "weight_map is empty"));
    }
    if let Some(bad) = shards.iter().find(|s| check_file_name(s).is_err()) {
        return Err(Error::model_file(
            index,
            format!("shard name {bad:?} is not a safe file name inside the repo"),
        ));
    }
    Ok(shards)
}

pub(super) fn is_mmproj(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name).to_lowercase();
    base.starts_with("mmproj") || base.contains("-mmproj") || base.contains(".mmproj")
}

/// Whether file name `name` carries quant `quant` (case-insensitively, `-` as `_`).
fn has_quant(name: &str, quant: &str) -> bool {
    name.to_lowercase()
        .contains(&quant.to_lowercase().replace('-', "_"))
}

/// The name with the first quant of `preference` any name carries, else the only name.
fn preferred<'a>(names: &[&'a str], preference: &[&str]) -> Option<&'a str> {
    preference
        .iter()
        .find_map(|q| names.iter().find(|n| has_quant(n, q)).copied())
        .or(match names {
            [only] => Some(*only),
            _ => None,
        })
}

/// Picks the text GGUF and the mmproj among file names: the named quant (matched in the file
/// name, case-insensitively), else the first of [`GGUF_QUANT_PREFERENCE`] present, else the
/// only text GGUF; the mmproj by [`MMPROJ_PREFERENCE`], else the only one.
pub(super) fn pick_gguf_pair(
    names: &[&str],
    quant: Option<&str>,
) -> std::result::Result<(String, String), String> {
    let (mmprojs, texts): (Vec<&str>, Vec<&str>) =
        names.iter().copied().partition(|n| is_mmproj(n));
    let text = match quant {
        Some(q) => texts
            .iter()
            .find(|n| has_quant(n, q))
            .copied()
            .ok_or_else(|| {
                format!(
                    "no text GGUF for quant {q:?}; GGUF files: {}",
                    texts.join(", ")
                )
            })?,
        None => preferred(&texts, GGUF_QUANT_PREFERENCE).ok_or_else(|| {
            format!(
                "cannot choose among the text GGUF files {}; name a quant (repo:Q4_K_M)",
                texts.join(", ")
            )
        })?,
    };
    let mmproj = preferred(&mmprojs, MMPROJ_PREFERENCE).ok_or_else(|| {
        if mmprojs.is_empty() {
            "no mmproj*.gguf (vision tower) next to the text GGUF".to_string()
        } else {
            format!(
                "cannot choose among the mmproj files {}",
                mmprojs.join(", ")
            )
        }
    })?;
    Ok((text.to_string(), mmproj.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gguf_pair_prefers_q4_k_m_and_q8_0_mmproj() {
        let names = [
            "Qwen3VL-2B-Instruct-Q8_0.gguf",
            "Qwen3VL-2B-Instruct-Q4_K_M.gguf",
            "mmproj-Qwen3VL-2B-Instruct-F16.gguf",
            "mmproj-Qwen3VL-2B-Instruct-Q8_0.gguf",
        ];
        assert_eq!(
            pick_gguf_pair(&names, None),
            Ok((
                "Qwen3VL-2B-Instruct-Q4_K_M.gguf".to_string(),
                "mmproj-Qwen3VL-2B-Instruct-Q8_0.gguf".to_string()
            ))
        );
        assert_eq!(
            pick_gguf_pair(&names, Some("Q8_0")).map(|p| p.0),
            Ok("Qwen3VL-2B-Instruct-Q8_0.gguf".to_string())
        );
        assert!(pick_gguf_pair(&names, Some("q2_k")).is_err());
        assert!(pick_gguf_pair(&["a-Q4_K_M.gguf"], None).is_err());
    }
}
