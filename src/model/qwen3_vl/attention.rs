//! Scaled dot-product attention in query chunks, so the score matrix of a long prefill
//! or a large image stays within [`SCORES_BUDGET_BYTES`].

use candle_core::{DType, Tensor};
use candle_nn::ops::softmax_last_dim;

use crate::error::Result;

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

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use rand::{Rng, SeedableRng};

    /// Chunked and one-shot attention sum the same terms per row.
    const CHUNK_ATOL: f32 = 1e-6;

    fn random(rng: &mut rand::rngs::StdRng, shape: &[usize]) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        Ok(Tensor::from_vec(data, shape, &Device::Cpu)?)
    }

    #[test]
    fn query_chunks_give_the_same_result_as_one_pass() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let (groups, rep, n, len, hd) = (2, 3, 7, 11, 8);
        let q = random(&mut rng, &[groups, rep, n, hd])?;
        let k = random(&mut rng, &[groups, len, hd])?;
        let v = random(&mut rng, &[groups, len, hd])?;
        let offset = len - n;
        let mask: Vec<f32> = (0..n)
            .flat_map(|i| {
                (0..len).map(move |j| {
                    if j > offset + i {
                        f32::NEG_INFINITY
                    } else {
                        0.0
                    }
                })
            })
            .collect();
        let mask = Tensor::from_vec(mask, (n, len), &Device::Cpu)?;
        let whole = attention_within(&q, &k, &v, Some(&mask), 0.3, usize::MAX)?;
        // One row of scores per chunk.
        let chunked = attention_within(&q, &k, &v, Some(&mask), 0.3, 1)?;
        let diff = (whole - chunked)?
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_scalar::<f32>()?;
        assert!(diff <= CHUNK_ATOL, "{diff}");
        Ok(())
    }
}
