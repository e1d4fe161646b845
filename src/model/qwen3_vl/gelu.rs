//! The vision tower's activation, `gelu_pytorch_tanh`, vectorized on the CPU: candle's
//! `gelu` calls libm's `tanhf` per element, 480 million times for a 1280-token
//! screenshot on the 2B model (7% of the encode). Same formula, with `tanh` written
//! through one polynomial `exp`.

use std::sync::Mutex;

use candle_core::Tensor;

use super::attention_inputs::CpuF32;
use crate::cpu::math::{exp_nonpositive, fmadd};
use crate::cpu::{self, dispatch_fn, CpuPath};
use crate::error::Result;

/// Elements per task on candle's thread pool.
const CHUNK: usize = 1 << 16;

/// `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`. With `e = exp(-2|u|)`,
/// `1 + tanh(u)` is `2 / (1 + e)` for `u ≥ 0` and `2e / (1 + e)` below: no cancellation,
/// and the exponential's argument is never positive.
#[inline(always)]
fn gelu_tanh_one<const FMA: bool>(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let u = SQRT_2_OVER_PI * x * fmadd::<FMA>(0.044_715 * x, x, 1.0);
    let e = exp_nonpositive::<FMA>(-2.0 * u.abs());
    let d = 1.0 / (1.0 + e);
    if u >= 0.0 {
        x * d
    } else {
        x * e * d
    }
}

#[inline(always)]
fn gelu_slice<const FMA: bool>(src: &[f32], dst: &mut [f32]) {
    for (o, &x) in dst.iter_mut().zip(src) {
        *o = gelu_tanh_one::<FMA>(x);
    }
}

dispatch_fn!(
    /// [`gelu_slice`] compiled for `path`.
    fn gelu_slice_on(src: &[f32], dst: &mut [f32]) => gelu_slice
);

/// `gelu_pytorch_tanh` of `xs`: the vectorized loop for contiguous CPU f32 tensors,
/// candle's `gelu` (the same function) for anything else.
pub(super) fn gelu_tanh(xs: &Tensor) -> Result<Tensor> {
    gelu_tanh_on(cpu::path(), xs)
}

/// [`gelu_tanh`] on a given kernel path (one [`CpuPath::supported`] here).
fn gelu_tanh_on(path: CpuPath, xs: &Tensor) -> Result<Tensor> {
    let values = CpuF32::of(xs).and_then(|view| {
        let src = view.contiguous()?;
        let mut out = vec![0f32; src.len()];
        let parts: Vec<Mutex<&mut [f32]>> = out.chunks_mut(CHUNK).map(Mutex::new).collect();
        candle_core::utils::barrier_pool().execute_chunked(parts.len(), |range| {
            for i in range {
                let Ok(mut part) = parts[i].lock() else {
                    continue;
                };
                gelu_slice_on(path, &src[i * CHUNK..], &mut part);
            }
        });
        drop(parts);
        Some(out)
    });
    match values {
        Some(values) => Ok(Tensor::from_vec(values, xs.shape(), xs.device())?),
        None => Ok(xs.gelu()?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// Against candle's `gelu` (libm `tanhf`): the polynomial exponential's relative
    /// error (< 2e-7) and float rounding of the shared formula.
    const GELU_ATOL: f32 = 2e-6;

    #[test]
    fn every_path_matches_candle_gelu() -> Result<()> {
        let xs: Vec<f32> = (-200_000..=200_000).map(|i| i as f32 * 1e-4).collect();
        let mut with_edges = xs.clone();
        with_edges.extend([-1e4, 1e4, -50.0, 50.0, 1e-30, -1e-30, 0.0]);
        let t = Tensor::from_vec(with_edges.clone(), with_edges.len(), &Device::Cpu)?;
        let reference = t.gelu()?.to_vec1::<f32>()?;
        for path in CpuPath::available() {
            let ours = gelu_tanh_on(path, &t)?.to_vec1::<f32>()?;
            for ((x, a), b) in with_edges.iter().zip(&ours).zip(&reference) {
                let tol = GELU_ATOL * x.abs().max(1.0);
                assert!((a - b).abs() <= tol, "{path:?}: gelu({x}): {a} vs {b}");
            }
            let nan = Tensor::new(&[f32::NAN], &Device::Cpu)?;
            assert!(
                gelu_tanh_on(path, &nan)?.to_vec1::<f32>()?[0].is_nan(),
                "{path:?}"
            );
        }
        Ok(())
    }

    /// Every kernel path side by side, in CPU time of this thread (run with
    /// `CANDLE_NUM_THREADS=1`, `--ignored --nocapture`, optimized): one vision MLP activation of a 1280-token screenshot on the 2B model
    /// (4,888 patches × 4,304).
    #[test]
    #[ignore = "measurement"]
    fn gelu_paths_timing() -> Result<()> {
        let n = 4888 * 4304;
        let xs: Vec<f32> = (0..n)
            .map(|i| ((i % 2001) as f32 - 1000.0) * 4e-3)
            .collect();
        let t = Tensor::from_vec(xs, n, &Device::Cpu)?;
        let timings =
            crate::cpu::math::best_seconds_per_path(3, |path| gelu_tanh_on(path, &t).map(drop))?;
        for (path, secs, speedup) in timings {
            println!(
                "gelu 4888x4304: {:>8} best of 3 {:.1} ms ({speedup:.2}x portable)",
                path.name(),
                secs * 1e3,
            );
        }
        Ok(())
    }
}
