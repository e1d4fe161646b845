//! The inputs of the CPU attention kernels, read-locked and checked once.

use candle_core::{CpuStorage, Layout, Storage, StorageRef, Tensor};

/// A CPU f32 tensor's storage, held read-locked with its layout: one struct where the
/// kernels used to nest a closure per input.
pub(super) struct CpuF32<'a> {
    storage: StorageRef<'a>,
    layout: &'a Layout,
}

impl<'a> CpuF32<'a> {
    /// `None` unless `t` lives on the CPU in f32.
    pub(super) fn of(t: &'a Tensor) -> Option<Self> {
        let (storage, layout) = t.storage_and_layout();
        matches!(&*storage, Storage::Cpu(CpuStorage::F32(_))).then_some(CpuF32 { storage, layout })
    }

    /// The whole buffer (index it with [`layout`](Self::layout)).
    pub(super) fn data(&self) -> &[f32] {
        match &*self.storage {
            Storage::Cpu(CpuStorage::F32(d)) => d,
            // `of` admits CPU f32 only.
            _ => &[],
        }
    }

    pub(super) fn layout(&self) -> &Layout {
        self.layout
    }

    /// The tensor's values when they are contiguous in the buffer.
    pub(super) fn contiguous(&self) -> Option<&[f32]> {
        let (a, b) = self.layout.contiguous_offsets()?;
        self.data().get(a..b)
    }
}

/// The inputs of one CPU attention call, read-locked and checked once: `q (groups, rep, n, hd)`
/// contiguous, `k`/`v` `(groups, len, hd)` with a unit inner stride (possibly views into a
/// larger KV-cache buffer), an optional contiguous `(n, len)` mask. Shared by the decode loop
/// (`attention.rs`) and the fused kernel (`flash_cpu.rs`), which read them through
/// [`slices`](Self::slices).
pub(super) struct AttentionInputs<'a> {
    q: CpuF32<'a>,
    k: CpuF32<'a>,
    v: CpuF32<'a>,
    mask: Option<CpuF32<'a>>,
    /// `[groups, rep, n, len, hd]`.
    dims: [usize; 5],
    ks: [usize; 2],
    vs: [usize; 2],
}

/// What the kernels index: the values and the dimensions of one [`AttentionInputs`].
#[derive(Clone, Copy)]
pub(super) struct AttentionSlices<'a> {
    /// Contiguous `(groups, rep, n, hd)`.
    pub q: &'a [f32],
    /// From the first key on; row `j` of group `g` at `g * ks[0] + j * ks[1]`.
    pub k: &'a [f32],
    /// From the first value on; indexed like `k` with `vs`.
    pub v: &'a [f32],
    /// Contiguous `(n, len)` additive mask.
    pub mask: Option<&'a [f32]>,
    /// Query groups (batch × KV heads).
    pub groups: usize,
    /// Query heads per group (GQA).
    pub rep: usize,
    /// Query rows per group (`rep * n`).
    pub rows: usize,
    /// Query positions per head.
    pub n: usize,
    /// Key positions.
    pub len: usize,
    /// Head dimension.
    pub hd: usize,
    /// Key strides (group, position).
    pub ks: [usize; 2],
    /// Value strides (group, position).
    pub vs: [usize; 2],
}

/// Runs `kernel` on the inputs of one attention call and returns its output, `(groups, rep,
/// n, hd)` values, as a tensor on `q`'s device; `None` when [`AttentionInputs::of`] declines
/// them (the caller then takes another route). The inputs stay read-locked while the kernel
/// runs and no longer.
pub(super) fn run_kernel(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    kernel: impl FnOnce(&AttentionSlices<'_>) -> Vec<f32>,
) -> crate::error::Result<Option<Tensor>> {
    let Some(inputs) = AttentionInputs::of(q, k, v, mask)? else {
        return Ok(None);
    };
    let Some(x) = inputs.slices() else {
        return Ok(None);
    };
    let out = kernel(&x);
    let shape = (x.groups, x.rep, x.n, x.hd);
    drop(inputs);
    Ok(Some(Tensor::from_vec(out, shape, q.device())?))
}

impl<'a> AttentionInputs<'a> {
    /// `None` when an input is not CPU f32, a dimension is empty, a layout is not one the
    /// kernels index directly, or a row they would index does not exist: the caller then
    /// takes the generic tensor route.
    pub(super) fn of(
        q: &'a Tensor,
        k: &'a Tensor,
        v: &'a Tensor,
        mask: Option<&'a Tensor>,
    ) -> candle_core::Result<Option<Self>> {
        let (groups, rep, n, hd) = q.dims4()?;
        let len = k.dim(1)?;
        if groups == 0 || rep * n == 0 || len == 0 || hd == 0 {
            return Ok(None);
        }
        let (Some(q), Some(k), Some(v)) = (CpuF32::of(q), CpuF32::of(k), CpuF32::of(v)) else {
            return Ok(None);
        };
        let mask = match mask {
            Some(m) => match CpuF32::of(m) {
                Some(view) => Some(view),
                None => return Ok(None),
            },
            None => None,
        };
        let (&[ks0, ks1, 1], &[vs0, vs1, 1]) = (k.layout().stride(), v.layout().stride()) else {
            return Ok(None);
        };
        let inputs = AttentionInputs {
            q,
            k,
            v,
            mask,
            dims: [groups, rep, n, len, hd],
            ks: [ks0, ks1],
            vs: [vs0, vs1],
        };
        let Some(x) = inputs.slices() else {
            return Ok(None);
        };
        // Every row the kernels index must exist (a view into a larger cache buffer).
        let last_row = |[s0, s1]: [usize; 2]| (groups - 1) * s0 + (len - 1) * s1 + hd;
        let fits = x.k.len() >= last_row(x.ks)
            && x.v.len() >= last_row(x.vs)
            && x.q.len() >= groups * x.rows * hd
            && x.mask.is_none_or(|m| m.len() == n * len);
        Ok(fits.then_some(inputs))
    }

    /// The values and dimensions. `None` only when a layout is not contiguous where it must
    /// be, which [`of`](Self::of) has ruled out.
    pub(super) fn slices(&self) -> Option<AttentionSlices<'_>> {
        let [groups, rep, n, len, hd] = self.dims;
        let k = self.k.data().get(self.k.layout().start_offset()..)?;
        Some(AttentionSlices {
            q: self.q.contiguous()?,
            k,
            v: self.v.data().get(self.v.layout().start_offset()..)?,
            mask: match &self.mask {
                Some(m) => Some(m.contiguous()?),
                None => None,
            },
            groups,
            rep,
            rows: rep * n,
            n,
            len,
            hd,
            ks: self.ks,
            vs: self.vs,
        })
    }
}
