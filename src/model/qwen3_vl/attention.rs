//! Scaled dot-product attention. On the CPU in f32: for the few query rows of a decode
//! step a direct loop over the KV cache ([`few_rows_cpu`]), for more a fused attention
//! that never materializes the scores ([`flash_cpu`]). Elsewhere (GPU, half precision)
//! matmuls in query chunks, so the score matrix of a long prefill or a large image
//! stays within [`SCORES_BUDGET_BYTES`].

use std::sync::Mutex;

use candle_core::{DType, Tensor};
use candle_nn::ops::softmax_last_dim;

use super::attention_inputs::{run_kernel, AttentionSlices};
use super::flash_cpu::flash_cpu;
use crate::cpu::math::{axpy, dot, exp_sub_sum, max_of};
use crate::cpu::{self, dispatch_fn, CpuPath};
use crate::error::Result;

/// Most query rows (heads × tokens per KV group) [`few_rows_cpu`] takes: a decode step
/// has 2 (Qwen3-VL's 16 heads over 8 groups). Measured on the 2B shape at 512 and 1,500
/// positions (28 layers, 2 threads): 2 rows 6.7 vs 12.8 ms and 17 vs 41 ms for the
/// matmuls; even at 8 rows; the matmuls ahead from 64.
const FEW_ROWS: usize = 8;

/// Upper bound on the f32 score matrix of one chunk. A 1280-token screenshot has 5,120
/// patches: unchunked, its 16-head vision attention would need 1.6 GB of scores.
pub const SCORES_BUDGET_BYTES: usize = 64 << 20;

/// Attention for `q` `(groups, rep, n, hd)` against `k`, `v` `(groups, len, hd)`: the
/// `rep` query heads of a group share its keys and values (GQA without copying K/V).
/// `mask` is an additive `(n, len)` f32 mask. Returns `(groups, rep, n, hd)` in `v`'s
/// dtype; softmax runs in f32.
pub(crate) fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
) -> Result<Tensor> {
    attention_within(q, k, v, mask, scale, SCORES_BUDGET_BYTES)
}

fn attention_within(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
    budget_bytes: usize,
) -> Result<Tensor> {
    let (_, rep, n, _) = q.dims4()?;
    if rep * n <= FEW_ROWS {
        if let Some(out) = few_rows_cpu(cpu::path(), q, k, v, mask, scale)? {
            return Ok(out);
        }
    } else if let Some(out) = flash_cpu(cpu::path(), q, k, v, mask, scale)? {
        return Ok(out);
    }
    matmul_route(q, k, v, mask, scale, budget_bytes)
}

/// Attention through matmuls, in query chunks of at most `budget_bytes` of scores.
pub(super) fn matmul_route(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
    budget_bytes: usize,
) -> Result<Tensor> {
    let (groups, rep, n, hd) = q.dims4()?;
    let len = k.dim(1)?;
    let per_row = groups * rep * len * std::mem::size_of::<f32>();
    let chunk = (budget_bytes / per_row.max(1)).clamp(1, n.max(1));
    let kt = k.t()?;
    let mut outs = Vec::with_capacity(n.div_ceil(chunk));
    let mut start = 0;
    while start < n {
        let c = chunk.min(n - start);
        let qc = if c == n {
            q.clone()
        } else {
            q.narrow(2, start, c)?
        };
        let qc = qc.contiguous()?.reshape((groups, rep * c, hd))?;
        let scores = (qc.matmul(&kt)? * scale)?.to_dtype(DType::F32)?;
        let scores = match mask {
            Some(mask) => scores
                .reshape((groups, rep, c, len))?
                .broadcast_add(&mask.narrow(0, start, c)?)?
                .reshape((groups, rep * c, len))?,
            None => scores,
        };
        let probs = softmax_last_dim(&scores)?.to_dtype(v.dtype())?;
        outs.push(probs.matmul(v)?.reshape((groups, rep, c, hd))?);
        start += c;
    }
    if outs.len() == 1 {
        Ok(outs.remove(0))
    } else {
        Ok(Tensor::cat(&outs, 2)?)
    }
}

dispatch_fn!(
    /// [`few_rows_group`] compiled for `path`.
    fn few_rows_group_on(x: &AttentionSlices, scale: f32, scores: &mut [f32], g: usize, dst: &mut [f32]) => few_rows_group
);

/// The `rows` query rows of group `g` into `dst` (`rows × hd`); `scores` is `rows × len`
/// scratch.
#[inline(always)]
fn few_rows_group<const FMA: bool>(
    x: &AttentionSlices,
    scale: f32,
    scores: &mut [f32],
    g: usize,
    dst: &mut [f32],
) {
    let (hd, len, n) = (x.hd, x.len, x.n);
    let qg = &x.q[g * x.rows * hd..][..x.rows * hd];
    // Scores: one pass over the keys for all rows of the group.
    for j in 0..len {
        let kj = &x.k[g * x.ks[0] + j * x.ks[1]..][..hd];
        for (r, qr) in qg.chunks_exact(hd).enumerate() {
            let m = x.mask.map_or(0.0, |m| m[(r % n) * len + j]);
            scores[r * len + j] = dot::<FMA>(qr, kj) * scale + m;
        }
    }
    for row in scores.chunks_exact_mut(len) {
        let max = max_of(row);
        let inv = 1.0 / exp_sub_sum::<FMA>(row, max);
        row.iter_mut().for_each(|p| *p *= inv);
    }
    // Weighted values: one pass over the values.
    dst.fill(0.0);
    for j in 0..len {
        let vj = &x.v[g * x.vs[0] + j * x.vs[1]..][..hd];
        for (r, o) in dst.chunks_exact_mut(hd).enumerate() {
            axpy::<FMA>(scores[r * len + j], vj, o);
        }
    }
}

/// Attention for a few query rows per KV group, on the CPU in f32 on kernel path `path`,
/// read straight from the cache's strided buffers: each key and value row is read once per
/// layer. The matmul route packs (copies) the whole cache twice per layer and token and
/// pays a thread-pool round trip per matmul: over a 512-token context, 12.8 ms of a 2B
/// decode step against 6.7 ms here. `None` when the tensors are not CPU f32 with
/// contiguous rows; the caller then takes the matmul route.
fn few_rows_cpu(
    path: CpuPath,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
) -> Result<Option<Tensor>> {
    run_kernel(q, k, v, mask, |x| {
        let (rows, hd, len) = (x.rows, x.hd, x.len);
        let mut out = vec![0f32; x.groups * rows * hd];
        let per_group: Vec<Mutex<&mut [f32]>> = out.chunks_mut(rows * hd).map(Mutex::new).collect();
        candle_core::utils::barrier_pool().execute_chunked(x.groups, |range| {
            let mut scores = vec![0f32; rows * len];
            for g in range {
                let Ok(mut dst) = per_group[g].lock() else {
                    continue;
                };
                few_rows_group_on(path, x, scale as f32, &mut scores, g, &mut dst);
            }
        });
        drop(per_group);
        out
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::error::Error;
    use crate::model::qwen3_vl::text::causal_mask;
    use candle_core::Device;
    use rand::{Rng, SeedableRng};

    /// Chunked and one-shot attention sum the same terms per row.
    const CHUNK_ATOL: f32 = 1e-6;
    /// The direct loop and the matmuls sum the same terms in different orders.
    const FEW_ROWS_ATOL: f32 = 1e-5;

    /// A CPU f32 tensor of `shape` with values drawn uniformly from `-amp..amp` (also
    /// used by the fused route's tests).
    pub(in crate::model::qwen3_vl) fn random(
        rng: &mut rand::rngs::StdRng,
        shape: &[usize],
        amp: f32,
    ) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|_| rng.random_range(-amp..amp)).collect();
        Ok(Tensor::from_vec(data, shape, &Device::Cpu)?)
    }

    #[test]
    fn query_chunks_give_the_same_result_as_one_pass() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let (groups, rep, n, len, hd) = (2, 3, 7, 11, 8);
        let q = random(&mut rng, &[groups, rep, n, hd], 1.0)?;
        let k = random(&mut rng, &[groups, len, hd], 1.0)?;
        let v = random(&mut rng, &[groups, len, hd], 1.0)?;
        let mask = causal_mask(n, len - n, &Device::Cpu)?;
        let whole = matmul_route(&q, &k, &v, Some(&mask), 0.3, usize::MAX)?;
        // One row of scores per chunk.
        let chunked = matmul_route(&q, &k, &v, Some(&mask), 0.3, 1)?;
        let diff = (whole - chunked)?
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_scalar::<f32>()?;
        assert!(diff <= CHUNK_ATOL, "{diff}");
        Ok(())
    }

    /// The direct loop on every kernel path this CPU runs against the matmul route, on
    /// keys and values viewed from a larger
    /// cache buffer (as the KV cache hands them out), with and without a causal mask.
    #[test]
    fn few_rows_match_the_matmul_route_on_cache_views() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let (groups, rep, hd, capacity) = (3, 2, 16, 40);
        let kb = random(&mut rng, &[groups, capacity, hd], 1.0)?;
        let vb = random(&mut rng, &[groups, capacity, hd], 1.0)?;
        for (n, len) in [(1, 1), (1, 29), (4, 29)] {
            let q = random(&mut rng, &[groups, rep, n, hd], 1.0)?;
            let (k, v) = (kb.narrow(1, 0, len)?, vb.narrow(1, 0, len)?);
            assert!(!k.is_contiguous());
            let causal = causal_mask(n, len - n, &Device::Cpu)?;
            for mask in [None, Some(&causal)] {
                let reference = matmul_route(&q, &k, &v, mask, 0.25, usize::MAX)?;
                for path in CpuPath::available() {
                    let direct = few_rows_cpu(path, &q, &k, &v, mask, 0.25)?
                        .ok_or_else(|| Error::internal("CPU f32 inputs took another route"))?;
                    let diff = (direct - &reference)?
                        .abs()?
                        .flatten_all()?
                        .max(0)?
                        .to_scalar::<f32>()?;
                    assert!(diff <= FEW_ROWS_ATOL, "{path:?}: n {n}, len {len}: {diff}");
                }
            }
        }
        // Not CPU f32: the caller takes the matmul route.
        let q16 = random(&mut rng, &[groups, rep, 1, hd], 1.0)?.to_dtype(DType::F16)?;
        let k16 = kb.to_dtype(DType::F16)?;
        assert!(few_rows_cpu(cpu::path(), &q16, &k16, &k16, None, 0.25)?.is_none());
        Ok(())
    }

    /// Every kernel path of the decode-step attention side by side, in CPU time of this
    /// thread (run with `CANDLE_NUM_THREADS=1`, `--ignored --nocapture`, optimized): the 2B model's decode shape, 8 KV
    /// groups × 2 query heads of 128 over 512 cached positions, 28 calls (one per layer).
    #[test]
    #[ignore = "measurement"]
    fn few_rows_paths_timing() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let (groups, rep, hd, len) = (8, 2, 128, 512);
        let q = random(&mut rng, &[groups, rep, 1, hd], 1.0)?;
        let k = random(&mut rng, &[groups, len, hd], 1.0)?;
        let v = random(&mut rng, &[groups, len, hd], 1.0)?;
        let timings = crate::cpu::math::best_seconds_per_path(5, |path| -> Result<()> {
            for _layer in 0..28 {
                few_rows_cpu(path, &q, &k, &v, None, 0.088)?;
            }
            Ok(())
        })?;
        for (path, secs, speedup) in timings {
            println!(
                "decode attention 8x2 heads of 128 @ 512, 28 layers: {:>8} best of 5 {:.2} ms ({speedup:.2}x portable)",
                path.name(),
                secs * 1e3,
            );
        }
        Ok(())
    }
}
