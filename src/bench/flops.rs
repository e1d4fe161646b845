//! The arithmetic a stage does, counted from the model's dimensions, so that `bench` can
//! state a rate in operations per second and a fraction of the measured peak
//! ([`crate::cpu::peak`]).
//!
//! Only the matrix products and attention are counted (a multiply-add is two operations);
//! norms, activations, rotary embeddings and softmax are a few operations per element and
//! are left out, which makes the stated fraction slightly low rather than high.

use serde::Serialize;

use crate::cpu::peak::Peak;
use crate::model::qwen3_vl::{TextConfig, VisionConfig};

/// Operations of one image of `patches` patches (one frame) through the vision tower: the
/// patch embedding, every block (QKV, output projection, the two MLP matrices, and full
/// attention within the frame, as the reference's `cu_seqlens` makes it), the 2×2 merger
/// and each DeepStack merger.
pub fn vision_ops(cfg: &VisionConfig, patches: usize) -> f64 {
    let n = patches as f64;
    let h = cfg.hidden_size as f64;
    let patch_in =
        (cfg.in_channels * cfg.temporal_patch_size * cfg.patch_size * cfg.patch_size) as f64;
    let embed = 2.0 * n * patch_in * h;
    let linears = 2.0 * n * (4.0 * h * h + 2.0 * h * cfg.intermediate_size as f64);
    let attention = 4.0 * n * n * h;
    let blocks = cfg.depth as f64 * (linears + attention);
    let merge = (cfg.spatial_merge_size * cfg.spatial_merge_size) as f64;
    let merged = n / merge;
    let wide = h * merge;
    let merger = 2.0 * merged * wide * (wide + cfg.out_hidden_size as f64);
    let mergers = (1 + cfg.deepstack_visual_indexes.len()) as f64 * merger;
    embed + blocks + mergers
}

/// Operations of prefilling `tokens` tokens after `context` cached ones: the projections
/// and MLP of every layer, causal attention over the cache and the new tokens, and the
/// output head for the last position (the only logits a prefill returns).
pub fn prefill_ops(cfg: &TextConfig, tokens: usize, context: usize) -> f64 {
    let t = tokens as f64;
    let h = cfg.hidden_size as f64;
    let q = (cfg.num_attention_heads * cfg.head_dim) as f64;
    let kv = (cfg.num_key_value_heads * cfg.head_dim) as f64;
    let projections = 2.0 * t * (h * (q + 2.0 * kv) + q * h);
    let mlp = 2.0 * t * 3.0 * h * cfg.intermediate_size as f64;
    // Token j attends to context + j + 1 positions: QKᵀ and AV, per head.
    let attended = t * context as f64 + t * (t + 1.0) / 2.0;
    let attention = 4.0 * q * attended;
    let layers = cfg.num_hidden_layers as f64 * (projections + mlp + attention);
    layers + 2.0 * h * cfg.vocab_size as f64
}

/// Which measured peak a stage is held against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakKind {
    /// f32 multiply-adds: the vision tower, float text weights.
    F32,
    /// int8 dot products: quantized text weights.
    Int8,
}

/// A stage's work, its rate and its share of the machine's peak.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Throughput {
    /// Operations counted ([`vision_ops`], [`prefill_ops`]), in billions.
    pub gop: f64,
    /// Billions of operations per second.
    pub gops: f64,
    /// The peak it is held against.
    pub peak: PeakKind,
    /// `gops` over that peak; `None` when it was not measured (a GPU, or no int8 probe).
    pub fraction_of_peak: Option<f64>,
}

impl Throughput {
    /// `ops` done in `ms`, against `peak` of kind `kind`.
    pub fn new(ops: f64, ms: f64, kind: PeakKind, peak: Option<&Peak>) -> Self {
        let mut t = Throughput {
            gop: ops / 1e9,
            gops: ops / (ms.max(1e-9) * 1e6),
            peak: kind,
            fraction_of_peak: None,
        };
        t.held_against(peak);
        t
    }

    /// Its share of `peak` (a peak measured again, see [`Peak::best_of`]).
    pub fn held_against(&mut self, peak: Option<&Peak>) {
        let limit = peak.and_then(|p| match self.peak {
            PeakKind::F32 => Some(p.f32_gflops),
            PeakKind::Int8 => p.int8_gops,
        });
        self.fraction_of_peak = limit.filter(|l| *l > 0.0).map(|l| self.gops / l);
    }

    /// "123.4 GOP/s, 41% of the f32 peak" for the table.
    pub fn describe(&self) -> String {
        let kind = match self.peak {
            PeakKind::F32 => "f32",
            PeakKind::Int8 => "int8",
        };
        match self.fraction_of_peak {
            Some(f) => format!(
                "{:.1} GOP/s, {:.0}% of the {kind} peak",
                self.gops,
                f * 100.0
            ),
            None => format!("{:.1} GOP/s", self.gops),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::ModelShape;

    #[test]
    fn the_2b_towers_work_on_a_1080p_screenshot_is_about_five_teraops() {
        // 1,222 visual tokens = 4,888 patches: ≈3.0 T in the linears, ≈2.3 T in attention.
        let cfg = ModelShape::B2.config();
        let ops = vision_ops(&cfg.vision, 1222 * 4);
        assert!((5.0e12..5.6e12).contains(&ops), "{ops:e}");
        // Attention is quadratic: twice the patches is more than twice the work.
        assert!(vision_ops(&cfg.vision, 2 * 1222 * 4) > 2.0 * ops);
    }

    #[test]
    fn prefill_is_two_operations_per_weight_per_token_plus_attention() {
        let cfg = ModelShape::B2.config().text;
        let one = prefill_ops(&cfg, 1, 0);
        let many = prefill_ops(&cfg, 512, 0);
        let head = 2.0 * (cfg.hidden_size * cfg.vocab_size) as f64;
        // Without attention, prefill grows linearly in tokens (the head counts once).
        assert!(many - head > 500.0 * (one - head));
        // The 2B text model has ≈1.4 G weights besides the embedding: ≈2.8 GOP per token.
        let per_token = (one - head) / 1e9;
        assert!((2.2..3.4).contains(&per_token), "{per_token}");
        // A cached context adds only attention.
        assert!(prefill_ops(&cfg, 16, 1000) > prefill_ops(&cfg, 16, 0));
    }

    #[test]
    fn a_fraction_needs_a_measured_peak_of_its_kind() {
        let peak = Peak {
            threads: 2,
            f32_path: "avx2".into(),
            f32_gflops: 100.0,
            int8_path: None,
            int8_gops: None,
        };
        let t = Throughput::new(50e9, 1000.0, PeakKind::F32, Some(&peak));
        assert_eq!(t.fraction_of_peak, Some(0.5));
        assert!(
            t.describe().contains("50% of the f32 peak"),
            "{}",
            t.describe()
        );
        let mut t = Throughput::new(50e9, 1000.0, PeakKind::Int8, Some(&peak));
        assert_eq!(t.fraction_of_peak, None);
        // Measured again, better: the share follows the better measure.
        let again = Peak {
            f32_gflops: 80.0,
            int8_gops: Some(200.0),
            int8_path: Some("vnni".into()),
            ..peak.clone()
        };
        let best = peak.clone().best_of(again);
        assert_eq!((best.f32_gflops, best.int8_gops), (100.0, Some(200.0)));
        t.held_against(Some(&best));
        assert_eq!(t.fraction_of_peak, Some(0.25));
        assert_eq!(
            Throughput::new(1.0, 1.0, PeakKind::F32, None).fraction_of_peak,
            None
        );
    }
}
