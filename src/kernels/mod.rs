//! Device kernels for the decode loop's hot path: choose the next token where the
//! logits live.
//!
//! On a GPU a decode step takes a few milliseconds, and copying the 151,936-float
//! logits row to the host to mask and argmax it is pure overhead. [`TokenPicker`]
//! instead uploads the grammar mask (4,748 `u32` words, ~19 KB, into a buffer kept
//! across steps), runs one kernel over the row on the device, and reads back 4 bytes:
//! the token id.
//!
//! | device | kernel | built with |
//! |---|---|---|
//! | CPU | [`masked_argmax`], [`masked_sample`] (the reference) | always |
//! | CUDA | `kernels/masked_argmax.cu`, compiled to PTX by `build.rs` (nvcc) | `--features cuda` |
//! | Metal | `kernels/masked_argmax.metal`, compiled from source at first use | `--features metal` |
//!
//! Every kernel implements the semantics the CPU reference defines (ties to the
//! lowest id, NaN never chosen, inverse-CDF sampling in id order with a uniform the
//! host drew) and is tested against it on random rows. Top-p stays on the host: it
//! needs a sort of the candidates, and the grammar-constrained decode uses greedy or
//! plain temperature sampling on the device.
//!
//! ```
//! # fn main() -> sightline::Result<()> {
//! use candle_core::{Device, Tensor};
//! use sightline::kernels::{PickRule, TokenPicker};
//!
//! let logits = Tensor::new(&[0.5f32, 3.0, 2.0, 1.0], &Device::Cpu)?;
//! let mask = [0b1101u32]; // tokens 0, 2, 3 allowed
//! let mut picker = TokenPicker::default();
//! assert_eq!(picker.pick(&logits, &mask, PickRule::Argmax)?, Some(2));
//! # Ok(()) }
//! ```

#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "metal")]
mod metal;
mod reference;
mod rule;

pub use reference::{greedy_order, masked_argmax, masked_sample, MASK_WORD_BITS};
pub use rule::PickRule;

use candle_core::{DType, Device, Tensor};

use crate::error::{Error, Result};

/// Runs the masked pick on the device of the logits.
///
/// Keeps per-device state (the compiled kernel, a mask buffer reused across steps,
/// a 4-byte result buffer) and rebuilds it when the logits move to another device.
/// One per decode loop; not shared between threads.
#[derive(Default)]
pub struct TokenPicker {
    backend: Option<Backend>,
}

impl std::fmt::Debug for TokenPicker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match &self.backend {
            None => "unset",
            Some(Backend::Cpu) => "cpu",
            #[cfg(feature = "cuda")]
            Some(Backend::Cuda(_)) => "cuda",
            #[cfg(feature = "metal")]
            Some(Backend::Metal(_)) => "metal",
        };
        f.debug_struct("TokenPicker")
            .field("backend", &backend)
            .finish()
    }
}

enum Backend {
    Cpu,
    #[cfg(feature = "cuda")]
    Cuda(cuda::CudaPicker),
    #[cfg(feature = "metal")]
    Metal(metal::MetalPicker),
}

impl Backend {
    fn for_device(device: &Device) -> Result<Self> {
        match device {
            Device::Cpu => Ok(Backend::Cpu),
            #[cfg(feature = "cuda")]
            Device::Cuda(dev) => Ok(Backend::Cuda(cuda::CudaPicker::new(dev)?)),
            #[cfg(feature = "metal")]
            Device::Metal(dev) => Ok(Backend::Metal(metal::MetalPicker::new(dev)?)),
            // Without the feature candle cannot create such a device, so no tensor
            // can live there; say so rather than panic.
            #[allow(unreachable_patterns)]
            other => Err(Error::device(
                format!("{:?}", other.location()),
                "this build has no kernel for the device (enable the `cuda` or `metal` feature)",
            )),
        }
    }

    fn serves(&self, device: &Device) -> bool {
        match (self, device) {
            (Backend::Cpu, Device::Cpu) => true,
            #[cfg(feature = "cuda")]
            (Backend::Cuda(p), Device::Cuda(dev)) => p.serves(dev),
            #[cfg(feature = "metal")]
            (Backend::Metal(p), Device::Metal(dev)) => p.serves(dev),
            _ => false,
        }
    }
}

impl TokenPicker {
    /// Choose a token from the 1-D `logits` row (on any device) among those `mask`
    /// allows (packed like toktrie's `SimpleVob`: bit `i % 32` of word `i / 32`).
    ///
    /// Returns `None` when no allowed token has a non-NaN logit. Logits that are
    /// not f32 are converted on their device first (the model returns f32, so this
    /// is a fallback, not the hot path).
    ///
    /// Cost on a GPU: one upload of `mask` (4 bytes per 32 tokens), one kernel launch
    /// of a single thread block over the row, one 4-byte read back that waits for
    /// the device. On the CPU: a copy of the row to a host vector and the reference.
    ///
    /// Errors: [`Error::InvalidInput`] when `logits` is not 1-D or has more than
    /// `u32::MAX` entries; [`Error::Device`] when the kernel cannot be loaded;
    /// tensor errors as is.
    pub fn pick(&mut self, logits: &Tensor, mask: &[u32], rule: PickRule) -> Result<Option<u32>> {
        let n = match logits.dims() {
            [n] if u32::try_from(*n).is_ok() => *n,
            dims => {
                return Err(Error::invalid_input(format!(
                "masked pick: logits have shape {dims:?}, expected one row of at most {} entries",
                u32::MAX
            )))
            }
        };
        if n == 0 {
            return Ok(None);
        }
        let logits = if logits.dtype() == DType::F32 {
            logits.contiguous()?
        } else {
            logits.to_dtype(DType::F32)?.contiguous()?
        };
        let device = logits.device();
        let backend = match &mut self.backend {
            Some(b) if b.serves(device) => b,
            slot => slot.insert(Backend::for_device(device)?),
        };
        match backend {
            Backend::Cpu => {
                let row = logits.to_vec1::<f32>()?;
                Ok(match rule {
                    PickRule::Argmax => masked_argmax(&row, mask),
                    PickRule::Sample { temperature, u } => {
                        masked_sample(&row, mask, temperature, u)
                    }
                })
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(p) => p.pick(&logits, mask, rule),
            #[cfg(feature = "metal")]
            Backend::Metal(p) => p.pick(&logits, mask, rule),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picker_on_cpu_matches_the_reference_and_converts_half_logits() -> anyhow::Result<()> {
        let row = [0.25f32, -1.0, 4.0, 4.0, 2.0];
        let mask = [0b11110u32];
        let mut picker = TokenPicker::default();
        let f32_row = Tensor::new(&row, &Device::Cpu)?;
        assert_eq!(picker.pick(&f32_row, &mask, PickRule::Argmax)?, Some(2));
        let bf16_row = f32_row.to_dtype(DType::BF16)?;
        assert_eq!(picker.pick(&bf16_row, &mask, PickRule::Argmax)?, Some(2));
        let rule = PickRule::Sample {
            temperature: 1.0,
            u: 0.9,
        };
        assert_eq!(
            picker.pick(&f32_row, &mask, rule)?,
            masked_sample(&row, &mask, 1.0, 0.9)
        );
        Ok(())
    }

    #[test]
    fn picker_rejects_logits_that_are_not_one_row() -> anyhow::Result<()> {
        let two_rows = Tensor::zeros((2, 4), DType::F32, &Device::Cpu)?;
        let err = TokenPicker::default().pick(&two_rows, &[u32::MAX], PickRule::Argmax);
        assert!(matches!(err, Err(Error::InvalidInput { .. })), "{err:?}");
        Ok(())
    }
}
