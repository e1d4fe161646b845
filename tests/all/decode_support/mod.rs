//! Shared helpers of the decode tests: the real token environment (built once per
//! test binary), views with chosen elements and capabilities, the scripted model.

pub mod corpus;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::Result;
use cel_contracts::{
    CapabilityRef, PlanningElement, PlanningElementState, PlanningScreen, PlanningView,
};
use sightline::decode::TokenEnv;
use sightline::model::scripted::{Script, ScriptedModel};
use sightline::moves::MoveLimits;
use sightline::tokenizer::load_tokenizer;

/// Qwen's logits width (wider than its 151,669-token tokenizer).
pub const QWEN_LOGITS: usize = 151_936;

struct Shared {
    env: TokenEnv,
    token_bytes: Arc<Vec<Vec<u8>>>,
}

#[allow(
    clippy::expect_used,
    reason = "a once-initialized fixture has no caller to return an error to; a broken one \
              fails every test that uses it, and the panic names it"
)]
fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tokenizer.json.gz");
        let tokenizer = load_tokenizer(&path).expect("tokenizer fixture");
        let env = TokenEnv::from_tokenizer(&tokenizer, QWEN_LOGITS).expect("token environment");
        let token_bytes = Arc::new(env.token_bytes());
        Shared { env, token_bytes }
    })
}

/// The token environment of the real Qwen vocabulary.
pub fn env() -> &'static TokenEnv {
    &shared().env
}

/// A scripted model over the real vocabulary.
pub fn scripted(script: Script) -> Result<ScriptedModel> {
    Ok(ScriptedModel::new(
        shared().token_bytes.clone(),
        env().eos(),
        script,
    )?)
}

/// A scripted model steering toward `target`, with a short prompt already fed;
/// returns it and the prompt's last logits.
pub fn steered(target: &str) -> Result<(ScriptedModel, candle_core::Tensor)> {
    let prompt = env().tokenize("<|im_start|>assistant\n");
    let mut model = scripted(Script::Steer {
        target: target.as_bytes().to_vec(),
        prompt_len: prompt.len(),
    })?;
    let logits = sightline::VisionLanguageModel::feed(&mut model, &prompt, &[])?;
    Ok((model, logits))
}

/// Tight string bounds that keep many decoding runs short; everything else is the
/// default grammar's (`decode_rules` pins the default bounds).
pub fn short_limits() -> MoveLimits {
    MoveLimits {
        sentence_tokens: 6,
        text_tokens: 8,
        data_string_tokens: 4,
        data_entries: 3,
        ..MoveLimits::default()
    }
}

/// A planning view with these element ids and capability ids.
pub fn view(ids: &[String], capabilities: &[&str]) -> PlanningView {
    let screen = PlanningScreen {
        active_app: "App".into(),
        window: "Main".into(),
        summary: None,
        url: None,
    };
    let elements = ids
        .iter()
        .map(|id| PlanningElement {
            id: id.clone(),
            element_type: "button".into(),
            label: Some(format!("label of {id}")),
            value: None,
            state: PlanningElementState::default(),
            clickable: true,
            settable: false,
            select_options: None,
        })
        .collect();
    PlanningView {
        capabilities: capabilities
            .iter()
            .map(|c| CapabilityRef {
                id: c.to_string(),
                detail: None,
            })
            .collect(),
        ..sightline::view::view_of("test", screen, elements)
    }
}

/// Ids that are hard to escape: quotes, backslashes, unicode, control characters,
/// ids that look like coordinates or JSON.
pub fn odd_ids() -> Vec<String> {
    [
        "dom:button:\"Submit\"",
        "path\\to\\file",
        "ünïcödé-按钮-🙂",
        "tab\tand\nnewline",
        "del\u{7f}char",
        "",
        " ",
        "xy:5,5",
        "{\"kind\":\"done\"}",
        "a11y:42",
        "quote\"",
        "\\",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `n` plain ids `el-0` … plus, when `odd`, the odd ones.
pub fn ids(n: usize, odd: bool) -> Vec<String> {
    let mut out: Vec<String> = (0..n).map(|i| format!("el-{i}")).collect();
    if odd {
        let odd = odd_ids();
        for (i, id) in odd.into_iter().enumerate() {
            if i < n {
                out[i] = id;
            }
        }
    }
    out
}
