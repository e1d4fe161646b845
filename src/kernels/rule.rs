//! What the backends share: the pick rule, the uniform as the kernels take it and the value
//! they write when no token can be chosen.

/// How [`TokenPicker::pick`](super::TokenPicker::pick) chooses among the allowed tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PickRule {
    /// [`masked_argmax`](super::masked_argmax): the best allowed token, lowest id on ties.
    Argmax,
    /// [`masked_sample`](super::masked_sample): a softmax draw at `temperature` with the
    /// host's uniform `u`.
    Sample {
        /// Softmax temperature; not > 0 means argmax.
        temperature: f32,
        /// A uniform draw in `[0, 1)` from the caller's seeded generator.
        u: f32,
    },
}

/// `u` as the kernels take it: clamped into `[0, 1]`, NaN as 0 (the reference does
/// the same, so both see one value).
#[cfg_attr(not(any(feature = "cuda", feature = "metal")), allow(dead_code))]
pub(super) fn kernel_uniform(u: f32) -> f32 {
    if u.is_nan() {
        0.0
    } else {
        u.clamp(0.0, 1.0)
    }
}

/// Value the kernels write when no token can be chosen.
#[cfg_attr(not(any(feature = "cuda", feature = "metal")), allow(dead_code))]
pub(super) const NO_TOKEN: u32 = u32::MAX;
